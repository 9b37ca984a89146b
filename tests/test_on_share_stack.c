/*
 * test_on_share_stack.c - aco_on_share_stack(co, p, n): non-zero if any of
 * the n bytes at p lie on co's stack (n == 0: the byte at p), in normal and
 * checked mode alike: a range that ends past the top of the address space
 * (p + n wraps) still meets the stack it covers; 0 for the main co, for
 * co NULL, for p NULL, for bytes elsewhere.
 */
#include "aco_test.h"

#include <stdint.h>

static char outside_byte;

static void co_fn(void) {
    aco_t* self = aco_get_co();
    const char* sp = (const char*)aco_test_sp();
    CHECK(aco_on_share_stack(self, sp, 1));
    CHECK(aco_on_share_stack(self, sp, 0));
    CHECK(aco_on_share_stack(self, sp - 10, SIZE_MAX));     /* wraps past the top */
    CHECK(aco_on_share_stack(self, &outside_byte, SIZE_MAX));
    CHECK(aco_on_share_stack(self, &outside_byte, (size_t)(sp - &outside_byte) + 1));
    CHECK(!aco_on_share_stack(self, &outside_byte, 1));
    CHECK(!aco_on_share_stack(self, &outside_byte, (size_t)(sp - &outside_byte) / 2));
    /* from the top of the address space around to the bottom: no stack */
    CHECK(!aco_on_share_stack(self, (const void*)(UINTPTR_MAX - 5), 100));
    CHECK(!aco_on_share_stack(aco_get_co()->main_co, sp, 1));
    CHECK(!aco_on_share_stack(NULL, sp, 1));
    CHECK(!aco_on_share_stack(self, NULL, 16));
    aco_exit();
}

int main(void) {
    aco_thread_init(NULL);
    aco_t* main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_share_stack_t* s = aco_share_stack_new(0);
    aco_t* co = aco_create(main_co, s, 0, co_fn, NULL);
    aco_resume(co);
    CHECK(co->is_end);
    aco_destroy(co);
    aco_share_stack_destroy(s);
    aco_destroy(main_co);
    printf("test_on_share_stack: ok\n");
    return 0;
}
