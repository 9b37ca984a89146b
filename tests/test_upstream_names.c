/*
 * test_upstream_names.c - every name a libaco 1.2.4 program may use exists
 * here and means what it meant there: the version macros (1.2.4),
 * aco_runtime_test, aco_yield1/aco_exit1 on the running co, aco_co,
 * aco_gtls_co, the assert and branch-hint macros, aco_attr_no_asan,
 * aco_save_fpucw_mxcsr (checked against the CPU's own control registers),
 * the protector and acosw symbols, the ACO_REG_IDX_* slots of a suspended
 * co, and the type names.  Failing assert macros abort (forked children).
 */
#include "aco_test.h"

#include <fenv.h>
#include <sys/resource.h>

static aco_t* main_co;
static aco_share_stack_t* sstk;
static int step;                    /* how far co_upstream got */
static uintptr_t sp_at_yield;       /* co_upstream's sp right before yield1 */
static const int the_arg = 42;

/* A function carrying upstream's attribute macro. */
aco_attr_no_asan static unsigned sum_bytes(const unsigned char* p, size_t n) {
    unsigned s = 0;
    for (size_t i = 0; i < n; i++) s += p[i];
    return s;
}

/* Uses every accessor from inside a co, yields with aco_yield1 and
 * aco_yield, ends with aco_exit1. */
static void co_upstream(void) {
    aco_t* me = aco_get_co();
    CHECK(me != NULL);
    ASSERT_PTR_EQ(aco_co(), me);
    ASSERT_PTR_EQ(aco_gtls_co, me);
    CHECK(!aco_is_main_co(me));
    ASSERT_PTR_EQ(aco_get_arg(), &the_arg);
    ASSERT_EQ(*(const int*)aco_get_arg(), 42);
    step = 1;
    sp_at_yield = aco_test_sp();
    aco_yield1(me);                 /* back to main, like aco_yield() */
    ASSERT_PTR_EQ(aco_get_co(), me);
    step = 2;
    aco_yield();
    ASSERT_PTR_EQ(aco_co(), me);
    step = 3;
    aco_exit1(me);                  /* like aco_exit(): is_end = 1 */
    step = -1;                      /* never reached */
}

static void co_plain_exit(void) {
    step = 10;
    aco_exit();
}

/* ---- aco_save_fpucw_mxcsr against the CPU ------------------------------ */
static void check_fpu_save(void) {
    unsigned char buf[16];
    memset(buf, 0xa5, sizeof(buf));
    aco_save_fpucw_mxcsr(buf);
#if defined(__x86_64__) || defined(__i386__)
    uint16_t cw, saved_cw;
    uint32_t mxcsr, saved_mxcsr;
    __asm__ volatile("fnstcw %0" : "=m"(cw));
    __asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
    memcpy(&saved_cw, buf, 2);
    memcpy(&saved_mxcsr, buf + 4, 4);
    ASSERT_EQ(saved_cw, cw);
    ASSERT_EQ(saved_mxcsr, mxcsr);
#elif defined(__aarch64__)
    uint64_t fpcr, saved;
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    memcpy(&saved, buf, 8);
    ASSERT_EQ(saved, fpcr);
#else
    /* riscv64: the width of the stored frm is not fixed; it must run. */
    (void)buf;
#endif
}

static void test_fpu_save(void) {
    check_fpu_save();
#if defined(__x86_64__) || defined(__i386__) || defined(__aarch64__)
    /* Another rounding mode: the saved words must follow the CPU. */
    int old = fegetround();
    CHECK(fesetround(FE_TOWARDZERO) == 0);
    check_fpu_save();
    CHECK(fesetround(old) == 0);
#else
    printf("test_upstream_names: aco_save_fpucw_mxcsr only run on riscv64 "
           "(the layout of its saved frm is not specified)\n");
#endif
}

/* ---- the symbols: taken by address, never called ----------------------- */
static void test_symbols(void) {
    void (*volatile prot_asm)(void) = aco_funcp_protector_asm;
    void (*volatile prot)(void) = aco_funcp_protector;
    __typeof__(&acosw) volatile sw = &acosw;
    __typeof__(&aco_save_fpucw_mxcsr) volatile sv = &aco_save_fpucw_mxcsr;
    CHECK(prot_asm != NULL);
    CHECK(prot != NULL);
    CHECK(sw != NULL);
    CHECK(sv != NULL);
}

/* ---- the macros -------------------------------------------------------- */
static void test_macros(void) {
    volatile int one = 1, zero = 0;
    int hits = 0;
    if (aco_likely(one)) hits++;
    if (aco_unlikely(zero)) hits += 100;
    if (aco_unlikely(one)) hits++;
    if (aco_likely(zero)) hits += 100;
    ASSERT_EQ(hits, 2);
    aco_assert(one == 1);
    aco_assertptr(main_co);
    aco_assertalloc_bool(one);
    void* p = malloc(16);
    aco_assertalloc_ptr(p);
    memset(p, 1, 16);
    ASSERT_EQ(sum_bytes(p, 16), 16);
    free(p);
}

static void no_core(void) {
    struct rlimit rl = {0, 0};
    setrlimit(RLIMIT_CORE, &rl);
}
static void child_assert(void* arg) {
    no_core();
    aco_assert(*(volatile int*)arg == 1);
}
static void child_assertptr(void* arg) {
    no_core();
    void* volatile p = arg;
    aco_assertptr(p);
}
static void child_assertalloc_bool(void* arg) {
    no_core();
    aco_assertalloc_bool(*(volatile int*)arg == 1);
}
static void child_assertalloc_ptr(void* arg) {
    no_core();
    void* volatile p = arg;
    aco_assertalloc_ptr(p);
}

/* ---- the register slots of a suspended co ------------------------------ */
static void check_reg_slots(aco_t* co) {
#if defined(__x86_64__) || defined(__i386__) ||                               \
    (defined(ACO_REG_IDX_RETADDR) && defined(ACO_REG_IDX_SP) &&               \
     defined(ACO_REG_IDX_BP) && defined(ACO_REG_IDX_FPU))
    const int idx[4] = {ACO_REG_IDX_RETADDR, ACO_REG_IDX_SP, ACO_REG_IDX_BP,
                        ACO_REG_IDX_FPU};
    for (int i = 0; i < 4; i++) CHECK(idx[i] >= 0);
    CHECK(idx[0] != idx[1] && idx[1] != idx[2] && idx[0] != idx[2]);
    const int nreg = (int)(sizeof(co->reg) / sizeof(co->reg[0]));
    CHECK(idx[0] < nreg && idx[1] < nreg && idx[2] < nreg);
    uintptr_t sp = (uintptr_t)co->reg[ACO_REG_IDX_SP];
    uintptr_t lo = (uintptr_t)co->share_stack->ptr;
    uintptr_t hi = lo + co->share_stack->sz;
    CHECK(sp >= lo && sp < hi);                 /* on its share stack ... */
    CHECK(sp <= sp_at_yield && sp_at_yield - sp < 4096);  /* ... where it was */
    CHECK(co->reg[ACO_REG_IDX_RETADDR] != NULL);
#else
    (void)co;
    printf("test_upstream_names: ACO_REG_IDX_* not checked: libaco 1.2.4 "
           "defines them for x86-64 and i386 only\n");
#endif
}

int main(void) {
    ASSERT_EQ(ACO_VERSION_MAJOR, 1);
    ASSERT_EQ(ACO_VERSION_MINOR, 2);
    ASSERT_EQ(ACO_VERSION_PATCH, 4);

    aco_runtime_test();             /* returns normally */
    aco_thread_init(NULL);
    main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    CHECK(aco_is_main_co(main_co));
    ASSERT_PTR_EQ(aco_get_co(), main_co);
    ASSERT_PTR_EQ(aco_co(), main_co);
    ASSERT_PTR_EQ(aco_gtls_co, main_co);

    sstk = aco_share_stack_new(0);
    aco_share_stack_t* sstk2 = aco_share_stack_new2(64 * 1024, 0);
    CHECK(sstk->sz >= 4096 && sstk2->sz >= 64 * 1024);
    CHECK(sstk->align_validsz == 0);    /* (upstream's, write-only there) */

    aco_cofuncp_t fp = co_upstream;
    aco_t* co = aco_create(main_co, sstk, 0, fp, (void*)&the_arg);
    CHECK(!aco_is_main_co(co));
    ASSERT_PTR_EQ(co->main_co, main_co);
    aco_resume(co);
    ASSERT_EQ(step, 1);
    ASSERT_EQ(co->is_end, 0);
    ASSERT_PTR_EQ(aco_get_co(), main_co);
    check_reg_slots(co);
    aco_resume(co);
    ASSERT_EQ(step, 2);
    aco_resume(co);
    ASSERT_EQ(step, 3);
    ASSERT_EQ(co->is_end, 1);
    ASSERT_PTR_EQ(aco_gtls_co, main_co);

    /* A second co on the other stack, ending with aco_exit(). */
    aco_t* co2 = aco_create(main_co, sstk2, 0, co_plain_exit, NULL);
    aco_resume(co2);
    ASSERT_EQ(step, 10);
    ASSERT_EQ(co2->is_end, 1);
    aco_save_stack_t* ss = &co2->save_stack;
    ASSERT_EQ(ss->ct_save, 0);

    test_fpu_save();
    test_symbols();
    test_macros();

    int fails = 0;
    int zero = 0;
    fails += aco_test_expect_signal("aco_assert(false)", child_assert, &zero,
                                    SIGABRT, NULL);
    fails += aco_test_expect_signal("aco_assertptr(NULL)", child_assertptr, NULL,
                                    SIGABRT, NULL);
    fails += aco_test_expect_signal("aco_assertalloc_bool(false)",
                                    child_assertalloc_bool, &zero, SIGABRT, NULL);
    fails += aco_test_expect_signal("aco_assertalloc_ptr(NULL)",
                                    child_assertalloc_ptr, NULL, SIGABRT, NULL);
    ASSERT_EQ(fails, 0);

    aco_destroy(co);
    aco_destroy(co2);
    aco_share_stack_destroy(sstk);
    aco_share_stack_destroy(sstk2);
    aco_destroy(main_co);
    printf("test_upstream_names: OK\n");
    return 0;
}
