/*
 * test_copy_widths.c - a co's frames come back byte for byte from its save
 * stack whatever the size of the copy (every size class aco.c has) and
 * whatever move width it uses (every one this CPU and build have), and no
 * copy writes outside its save stack.
 *
 * When a share stack changes hands, the holder's live bytes go to its save
 * stack and the newcomer's come back.  aco.c copies them by size class
 * (two fixed-size blocks, one from each end, for 4 B to 255 B; memcpy from
 * 256 B) and, on x86-64, with the widest moves the CPU has: 16 (SSE2), 32
 * (AVX) or 64 bytes (AVX-512).  For every width this machine and build
 * have, three cos on one share stack keep a local array live across each
 * yield while main resumes them in turn, so every resume saves one co and
 * restores another.  The array sweeps every slot multiple from 0 to 600
 * bytes and, from round to round, alternates between two lengths 24 bytes
 * apart (the save stack grows, then holds less than it can).  Tiny frames
 * come from co functions with no locals or a few words.  Each co checks every
 * word of its array after each resume and rewrites it with new contents;
 * the three save stacks are neighbours in one pool, so a copy that wrote
 * outside one would show in another's words.  Beyond the values: main
 * snapshots the frames of the co about to be evicted (from its saved stack
 * pointer to align_retptr) and compares its save stack with them byte for
 * byte, and its valid_sz with their size.  The live sizes seen must cover
 * every size class of the copy.
 */
#include "aco_test.h"

#ifdef ACO_USE_VALGRIND
#include <valgrind/memcheck.h>
#endif

/* acosw.S's layout of aco_t.reg: where a suspended co's stack pointer is. */
#define ACO_ASM_LAYOUT_ONLY
#include "acosw.S"
#define SAVED_SP(co) ((uintptr_t)(co)->reg[ACO_OFF_SP / sizeof(void*)])

#define COS 3
#define ROUNDS 5
#define MAX_BYTES 600

static size_t g_words;          /* base array length of the cos being made */
static unsigned long g_bad;     /* words found wrong after a resume */

static uintptr_t word(uintptr_t id, unsigned round, size_t i) {
    return (id * (uintptr_t)2654435761u) ^ ((uintptr_t)round << 16) ^ i;
}

/* Keep `words` words live across one yield; check them after it. */
__attribute__((noinline))
static void hold(uintptr_t id, unsigned round, size_t words) {
    uintptr_t a[aco_test_vla(words + 1)];
    for (size_t i = 0; i <= words; i++) a[i] = word(id, round, i);
    __asm__ volatile("" : : "r"(a) : "memory");
    aco_yield();
    for (size_t i = 0; i <= words; i++)
        if (a[i] != word(id, round, i)) g_bad++;
}

static void co_array(void) {
    uintptr_t id = (uintptr_t)aco_get_arg();
    size_t base = g_words;
    for (unsigned r = 0; r < ROUNDS; r++)
        hold(id, r, base + (r % 2 ? 3 : 0));
    aco_exit();
}

/* Frames of a few words: the smallest copies. */
#define CO_TINY(k)                                                            \
    static void co_tiny##k(void) {                                            \
        uintptr_t id = (uintptr_t)aco_get_arg();                              \
        for (unsigned r = 0; r < ROUNDS; r++) {                               \
            volatile uintptr_t v[k + 1];                                      \
            for (int i = 0; i < (k) + 1; i++) v[i] = word(id, r, (size_t)i);  \
            aco_yield();                                                      \
            for (int i = 0; i < (k) + 1; i++)                                 \
                if (v[i] != word(id, r, (size_t)i)) g_bad++;                  \
        }                                                                     \
        aco_exit();                                                           \
    }
CO_TINY(0)
CO_TINY(1)
CO_TINY(2)
CO_TINY(3)

/* Nothing of its own lives across a yield (main says when to stop): the
 * smallest frame a C co function has. */
static volatile int g_stop;

static void co_bare(void) {
    for (;;) {
        aco_yield();
        if (g_stop) aco_exit();
    }
}

/* The same with k words of its own, distinct per co (the running co is in
 * aco_gtls_co: read inline, no call that would grow the frame). */
#define CO_WORDS(k)                                                           \
    static void co_words##k(void) {                                           \
        volatile uintptr_t v[k];                                              \
        for (int i = 0; i < (k); i++) v[i] = (uintptr_t)aco_gtls_co + (unsigned)i; \
        for (;;) {                                                            \
            aco_yield();                                                      \
            for (int i = 0; i < (k); i++)                                     \
                if (v[i] != (uintptr_t)aco_gtls_co + (unsigned)i) g_bad++;    \
            if (g_stop) aco_exit();                                           \
        }                                                                     \
    }
CO_WORDS(1)
CO_WORDS(2)
CO_WORDS(3)
CO_WORDS(4)

/* The copy's size classes (aco__copy), by the live size n. */
static const struct {
    size_t lo, hi;      /* lo <= n <= hi */
} classes[] = {
    {1, 16}, {17, 32}, {33, 64}, {65, 128}, {129, 255}, {256, (size_t)-1},
};
#define N_CLASSES (sizeof(classes) / sizeof(classes[0]))
static unsigned long class_seen[N_CLASSES];
static size_t g_min_n = (size_t)-1;

/* A copy of a suspended co's frames, read from main: uninstrumented, as ASan
 * poisons the red zones between them. */
#if defined(__clang__) || defined(__SANITIZE_ADDRESS__)
__attribute__((no_sanitize_address))
#endif
static void snapshot(unsigned char* dst, const volatile unsigned char* src,
                     size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = src[i];
}

/* a[0..n) == b[0..n).  Frames hold padding nobody wrote: memcheck would
 * call comparing it a use of uninitialised bytes, so compare copies that
 * it is told are defined. */
static int same(const void* a, const void* b, size_t n) {
#ifdef ACO_USE_VALGRIND
    static unsigned char ca[MAX_BYTES + 1024], cb[MAX_BYTES + 1024];
    CHECK(n <= sizeof(ca));
    memcpy(ca, a, n);
    memcpy(cb, b, n);
    VALGRIND_MAKE_MEM_DEFINED(ca, n);
    VALGRIND_MAKE_MEM_DEFINED(cb, n);
    a = ca;
    b = cb;
#endif
    return memcmp(a, b, n) == 0;
}

/* Three cos running fp on one share stack, resumed in turn until they end;
 * the bytes each eviction saves are compared with the frames they came
 * from: [saved stack pointer, align_retptr). */
static void run_three(aco_t* main_co, aco_share_stack_t* sstk,
                      aco_cofuncp_t fp, uintptr_t id0) {
    static unsigned char snap[MAX_BYTES + 1024];
    aco_t* co[COS];
    for (int i = 0; i < COS; i++)
        co[i] = aco_create(main_co, sstk, 0, fp, (void*)(id0 + (uintptr_t)i));
    aco_t* prev = NULL;
    for (unsigned r = 0; r <= ROUNDS; r++) {
        g_stop = r == ROUNDS;
        for (int i = 0; i < COS; i++) {
            CHECK(!co[i]->is_end);
            size_t n = 0;
            if (prev != NULL && !prev->is_end) {
                uintptr_t top = (uintptr_t)sstk->align_retptr;
                n = top - SAVED_SP(prev);
                CHECK(n <= sizeof(snap));
                snapshot(snap, (const unsigned char*)(top - n), n);
            }
            aco_resume(co[i]);
            CHECK(co[i]->is_end == (r == ROUNDS));
            if (n != 0) {   /* prev was evicted: its save is those bytes */
                ASSERT_EQ(prev->save_stack.valid_sz, n);
                CHECK(same(prev->save_stack.ptr, snap, n));
                if (n < g_min_n) g_min_n = n;
                for (size_t c = 0; c < N_CLASSES; c++)
                    if (n >= classes[c].lo && n <= classes[c].hi)
                        class_seen[c]++;
            }
            prev = co[i];
        }
    }
    for (int i = 0; i < COS; i++) {
        size_t n = co[i]->save_stack.max_cpsz;
        /* Evicted in every round but the last: saved if it had frames. */
        if (n > 0) CHECK(co[i]->save_stack.ct_save >= ROUNDS);
        aco_destroy(co[i]);
    }
}

static void sweep(aco_t* main_co, aco_share_stack_t* sstk) {
    static const aco_cofuncp_t tiny[] = {
        co_bare, co_words1, co_words2, co_words3, co_words4,
        co_tiny0, co_tiny1, co_tiny2, co_tiny3};
    uintptr_t id = 1000;
    for (size_t t = 0; t < sizeof(tiny) / sizeof(tiny[0]); t++, id += COS)
        run_three(main_co, sstk, tiny[t], id);
    for (size_t b = 0; b <= MAX_BYTES; b += sizeof(uintptr_t), id += COS) {
        g_words = b / sizeof(uintptr_t);
        run_three(main_co, sstk, co_array, id);
    }
}

int main(void) {
    aco_thread_init(NULL);
    aco_t* main_co = aco_create(NULL, NULL, 0, NULL, NULL);
    aco_share_stack_t* sstk = aco_share_stack_new(0);

    int dflt = aco__copy_width(0);
    static const int widths[] = {16, 32, 64};
    int ran = 0;
    if (dflt == 0) {
        printf("test_copy_widths: this build has one kind of copy\n");
        sweep(main_co, sstk);
        ran++;
    } else {
        for (size_t i = 0; i < sizeof(widths) / sizeof(widths[0]); i++) {
            if (aco__copy_width(widths[i]) != widths[i]) {
                printf("test_copy_widths: %d-byte moves: not on this CPU, "
                       "not run\n", widths[i]);
                continue;
            }
            sweep(main_co, sstk);
            printf("test_copy_widths: %d-byte moves: swept\n", widths[i]);
            ran++;
        }
        ASSERT_EQ(aco__copy_width(dflt), dflt);
    }
    CHECK(ran > 0);
    ASSERT_EQ(g_bad, 0);
    /* Every class from that of the smallest frame a C co function has in
     * this build up: 8 bytes on x86-64 at -O2, 16 to 48 elsewhere (-O0
     * makes frames larger).  ASan and TSan builds copy word by word, with
     * no classes. */
    printf("test_copy_widths: smallest frame copied: %zu bytes\n", g_min_n);
#if defined(__OPTIMIZE__)
    CHECK(aco__san_switch || g_min_n <= 48);
#endif
    for (size_t c = 0; c < N_CLASSES && !aco__san_switch; c++) {
        if (classes[c].hi < g_min_n) continue;
        if (class_seen[c] == 0)
            fprintf(stderr, "test_copy_widths: no copy of %zu..%zu bytes\n",
                    classes[c].lo, classes[c].hi);
        CHECK(class_seen[c] > 0);
    }
    aco_share_stack_destroy(sstk);
    aco_destroy(main_co);
    printf("test_copy_widths: ok (%d width(s))\n", ran);
    return 0;
}
