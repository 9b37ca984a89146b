/*
 * test_stack_sizes.c - a share stack is as big as aco_share_stack_new2()
 * promises, with an inaccessible guard page when asked for one, and a co can
 * use nearly all of it and have it copied out and back intact.
 *
 * aco_share_stack_new2(sz, guard) promises (aco.h): 0 means 2 MiB; the
 * usable size is >= 4096, >= sz, a multiple of the page size with a guard
 * page, and as close to sz as that allows; with a guard, the page right
 * below ptr is inaccessible.  Checked for many sizes, guard on and off,
 * without crashing anything: ptr/sz are written and read back whole, the
 * guard page's protection is read from /proc/self/maps (and, natively, by
 * letting the kernel copy from it: EFAULT).
 *
 * aco_share_stack_try_new2 says ENOMEM for sizes nothing can give.
 *
 * Then a co really gets what it asked for: for several sizes it recurses,
 * or alloca()s, until its stack pointer is at least sz - 1 KiB below the
 * top, yields from there, is evicted by a second co doing the same on the
 * same stack (a copy of nearly the whole stack each way), and unwinds with
 * every byte intact.
 */
#include "aco_test.h"

#include <alloca.h>

static size_t pagesize;

/* The stack pointer of the caller (aco_test.h). */
#define current_sp() aco_test_sp()

/* ------------------------------------------------------------------------ */
/* Size rules                                                               */
/* ------------------------------------------------------------------------ */

/* The permissions ("rw-p", "---p", ...) of the mapping holding addr, and
 * its end; 0 if no mapping holds it. */
static int mapping_of(uintptr_t addr, char perms[5], uintptr_t* end) {
    FILE* f = fopen("/proc/self/maps", "r");
    CHECK(f != NULL);
    char line[512];
    int found = 0;
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        unsigned long lo, hi;
        char p[5];
        if (sscanf(line, "%lx-%lx %4s", &lo, &hi, p) != 3) continue;
        if (addr >= lo && addr < hi) {
            memcpy(perms, p, 5);
            *end = hi;
            found = 1;
        }
    }
    fclose(f);
    return found;
}

/* 1 if the kernel can read the byte at addr (write() it to a pipe). */
static int kernel_can_read(const void* addr) {
    int pfd[2];
    CHECK(pipe(pfd) == 0);
    ssize_t r = write(pfd[1], addr, 1);
    int err = errno;
    close(pfd[0]);
    close(pfd[1]);
    CHECK(r == 1 || (r < 0 && err == EFAULT));
    return r == 1;
}

static void check_guard_page(const aco_share_stack_t* s) {
    uintptr_t p = (uintptr_t)s->ptr, end;
    char perms[5];

    CHECK(p % pagesize == 0);         /* a whole page can sit below it */
    CHECK(mapping_of(p, perms, &end));
    CHECK(perms[0] == 'r' && perms[1] == 'w');
    CHECK(end >= p + s->sz);          /* the stack is one writable mapping */
    /* The page right below: first and last byte. */
    CHECK(mapping_of(p - pagesize, perms, &end));
    CHECK(memcmp(perms, "---", 3) == 0);
    CHECK(end >= p);
    CHECK(mapping_of(p - 1, perms, &end));
    CHECK(memcmp(perms, "---", 3) == 0);
    /* Memcheck would rightly report the read below; natively the kernel
     * reports it as EFAULT instead of delivering SIGSEGV. */
    if (!aco_test_on_valgrind()) {
        CHECK(!kernel_can_read((const char*)s->ptr - pagesize));
        CHECK(!kernel_can_read((const char*)s->ptr - 1));
        CHECK(kernel_can_read(s->ptr));
    }
}

/* Every byte of [ptr, ptr + sz) holds what was written to it. */
static void check_writable(const aco_share_stack_t* s) {
    volatile unsigned char* p = s->ptr;
    for (size_t i = 0; i < s->sz; i++) p[i] = (unsigned char)(i * 7 + (i >> 12));
    for (size_t i = 0; i < s->sz; i++) CHECK(p[i] == (unsigned char)(i * 7 + (i >> 12)));
}

static size_t round_up(size_t n, size_t to) {
    return (n + to - 1) / to * to;
}

static void check_size_rules(size_t req, int guard) {
    aco_share_stack_t* s = aco_share_stack_new2(req, (char)guard);
    size_t want = req == 0 ? (size_t)2 << 20 : req;   /* 0 means 2 MiB */
    size_t least = want < 4096 ? 4096 : want;

    CHECK(s != NULL);
    CHECK(s->ptr != NULL);
    CHECK(s->sz >= 4096);
    CHECK(s->sz >= want);
    ASSERT_EQ(!!s->guard_page_enabled, !!guard);
    ASSERT_PTR_EQ(s->owner, NULL);
    if (guard) {
        ASSERT_EQ(s->sz % pagesize, 0);
        /* As close as allowed: the next page multiple. */
        ASSERT_EQ(s->sz, round_up(least, pagesize));
        check_guard_page(s);
    } else {
        /* Nothing forces a page multiple: at most alignment slack. */
        CHECK(s->sz - least < 64);
    }
    check_writable(s);
    aco_share_stack_destroy(s);
}

static void test_size_rules(void) {
    /* The default: 2 MiB usable, with a guard page (aco_share_stack_new). */
    aco_share_stack_t* s = aco_share_stack_new(0);
    ASSERT_EQ(s->sz, (size_t)2 << 20);
    ASSERT_EQ(s->guard_page_enabled, 1);
    check_guard_page(s);
    check_writable(s);
    aco_share_stack_destroy(s);

    const size_t pg = pagesize;
    const size_t reqs[] = {0,       1,           100,        4095,
                           4096,    4097,        pg - 1,     pg,
                           pg + 1,  2 * pg,      3 * pg + 1, 12345,
                           65535,   65536,       65537,      (1u << 20) + 3,
                           (size_t)3 << 20};
    for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
        check_size_rules(reqs[i], 1);
        check_size_rules(reqs[i], 0);
    }
    /* aco_share_stack_new(sz) is aco_share_stack_new2(sz, 1). */
    s = aco_share_stack_new(4097);
    ASSERT_EQ(s->guard_page_enabled, 1);
    ASSERT_EQ(s->sz, round_up(4097, pg));
    aco_share_stack_destroy(s);
}

/* ------------------------------------------------------------------------ */
/* Using (nearly) the whole stack                                           */
/* ------------------------------------------------------------------------ */

/* Bytes a co leaves unused at the bottom.  Sanitizer builds call the
 * sanitizer's runtime at every switch, on the co's stack: more room. */
#if aco__san_switch
#define HEADROOM 4096
#else
#define HEADROOM 1024
#endif

struct filler {
    uintptr_t top;        /* ptr + sz of its share stack */
    size_t target;        /* bytes of stack to use: sz - HEADROOM */
    int use_alloca;       /* one alloca instead of recursion */
    uint32_t seed;
    uintptr_t min_sp;     /* lowest stack pointer seen */
    long frames;
    int bad;
};

static unsigned char pat(uint32_t seed, size_t i) {
    return (unsigned char)(seed + i * 13 + (i >> 9));
}

static void note_sp(struct filler* f) {
    uintptr_t sp = current_sp();
    if (sp < f->min_sp) f->min_sp = sp;
}

/* One frame of ~100 bytes of pattern per level until the target depth. */
__attribute__((noinline)) static void fill_down(struct filler* f, long level) {
    volatile unsigned char buf[96];
    for (size_t i = 0; i < sizeof(buf); i++) buf[i] = pat(f->seed + (uint32_t)level, i);
    note_sp(f);
    f->frames++;
    if (f->top - current_sp() < f->target) {
        fill_down(f, level + 1);
    } else {
        aco_yield();
        note_sp(f);
    }
    for (size_t i = 0; i < sizeof(buf); i++)
        if (buf[i] != pat(f->seed + (uint32_t)level, i)) f->bad++;
}

/* One alloca() reaching the target depth, written from its top down. */
__attribute__((noinline)) static void fill_alloca(struct filler* f) {
    /* Leave room below the block for the calls made from here. */
    size_t used = f->top - current_sp();
    CHECK(used + 256 < f->target);
    size_t n = f->target - used;
    volatile unsigned char* block = alloca(n);
    for (size_t i = n; i-- > 0;) block[i] = pat(f->seed, i);
    note_sp(f);
    aco_yield();
    note_sp(f);
    for (size_t i = 0; i < n; i++)
        if (block[i] != pat(f->seed, i)) f->bad++;
}

static void co_filler(void) {
    struct filler* f = aco_get_arg();
    f->min_sp = UINTPTR_MAX;
    if (f->use_alloca)
        fill_alloca(f);
    else
        fill_down(f, 0);
    aco_exit();
}

static void test_use_whole_stack(aco_t* main_co, size_t sz, int guard,
                                 int use_alloca) {
    aco_share_stack_t* s = aco_share_stack_new2(sz, (char)guard);
    struct filler f[2];
    aco_t* co[2];
    for (int i = 0; i < 2; i++) {
        f[i] = (struct filler){
            .top = (uintptr_t)s->ptr + s->sz,
            .target = s->sz - HEADROOM,
            .use_alloca = use_alloca,
            .seed = 17u * (uint32_t)(i + 1),
        };
        co[i] = aco_create(main_co, s, 0, co_filler, &f[i]);
    }
    /* Both fill the stack and yield at the bottom; the second resume copies
     * the first co's nearly-full stack out, the third copies it back. */
    aco_resume(co[0]);
    aco_resume(co[1]);
    aco_resume(co[0]);
    aco_resume(co[1]);
    for (int i = 0; i < 2; i++) {
        ASSERT_EQ(co[i]->is_end, 1);
        ASSERT_EQ(f[i].bad, 0);
        size_t used = f[i].top - f[i].min_sp;
        CHECK(used >= s->sz - HEADROOM);     /* used nearly everything ... */
        CHECK(f[i].min_sp >= (uintptr_t)s->ptr);   /* ... and no more */
        /* The eviction copied (nearly) the whole stack. */
        CHECK(co[i]->save_stack.max_cpsz >= s->sz - HEADROOM - 256);
        CHECK(co[i]->save_stack.max_cpsz <= s->sz);
        ASSERT_EQ(co[i]->save_stack.ct_save, 1);
        ASSERT_EQ(co[i]->save_stack.ct_restore, 1);
    }
    printf("stack of %zu bytes (guard %d, %s): the cos used %zu and %zu bytes\n",
           s->sz, guard, use_alloca ? "alloca" : "recursion",
           (size_t)(f[0].top - f[0].min_sp), (size_t)(f[1].top - f[1].min_sp));
    for (int i = 0; i < 2; i++) aco_destroy(co[i]);
    aco_share_stack_destroy(s);
}

/* aco_share_stack_try_new2: NULL with ENOMEM where _new2 would abort
 * (sizes no mapping or allocator can give: mmap's own errno, valgrind's
 * EINVAL included, once came through; an allocator was once asked for
 * more than PTRDIFF_MAX), and a stack where it would not. */
static void test_try_new(void) {
    for (int guard = 0; guard <= 1; guard++) {
        /* (unguarded: past what any allocator has, never asked, where an
         * ASan build's malloc would abort instead of saying NULL; with a
         * guard: a mapping no 64-bit address space holds, and on i386 none
         * past the room, since 2 GiB may well map there) */
        size_t huge[] = {SIZE_MAX - 4 * pagesize, SIZE_MAX,
                         !guard                ? (size_t)PTRDIFF_MAX + 1
                         : sizeof(size_t) == 8 ? (size_t)1 << (sizeof(size_t) * 8 - 2)
                                               : SIZE_MAX};
        for (size_t i = 0; i < sizeof(huge) / sizeof(huge[0]); i++) {
            errno = 0;
            aco_share_stack_t* s = aco_share_stack_try_new2(huge[i], (char)guard);
            if (s != NULL || errno != ENOMEM) {
                fprintf(stderr, "try_new2(%#zx, %d): %p, errno %d\n", huge[i], guard, (void*)s,
                        errno);
                CHECK(0);
            }
        }
        aco_share_stack_t* s = aco_share_stack_try_new2(64 * 1024, (char)guard);
        CHECK(s != NULL && s->sz >= 64 * 1024);
        aco_share_stack_destroy(s);
    }
}

int main(void) {
    long pg = sysconf(_SC_PAGESIZE);
    CHECK(pg > 0);
    pagesize = (size_t)pg;

    test_size_rules();
    test_try_new();

    aco_thread_init(NULL);
    aco_t* main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    const size_t sizes[] = {16 * 1024, 64 * 1024, 100003, 1 << 20};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        for (int guard = 0; guard <= 1; guard++) {
            test_use_whole_stack(main_co, sizes[k], guard, 0);
            test_use_whole_stack(main_co, sizes[k], guard, 1);
        }
    }
    aco_destroy(main_co);
    printf("test_stack_sizes: OK\n");
    return 0;
}
