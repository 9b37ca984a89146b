/* timer.c - a hierarchical timing wheel: O(1) insert and cancel.
 *
 * Time is counted in ticks of 2^14 ns (16.4 us).  Level L has 64 slots of
 * 64^L ticks each; 9 levels reach 2^54 ticks, beyond any int64_t deadline
 * (2^49 ticks): every deadline has a place, none is clamped.  A timer due at
 * tick e sits on the level of the highest 6-bit group in which e differs
 * from the wheel's current tick `now`, in the slot that group of e selects.
 * So level 0 holds the timers of the current 64-tick block, each in the
 * slot of its own tick, and a level-L slot holds timers that share every
 * group above L with now.
 *
 * Invariant: every armed timer is due after `now`.  Hence on level L only
 * slots after now's own index there can be occupied, and the earliest
 * occupied slot of the lowest non-empty level starts the next thing to do:
 * on level 0, firing its timers; above, cascading the slot's timers down
 * (placing them again relative to the new now).  Advancing jumps from one
 * such start to the next: idle time costs nothing.
 *
 * A timer never fires early: it is due at the first tick whose start is at
 * or after its deadline.
 */
#include "rt_wheel.h"

#include <string.h>

#define GROUP 6
#define SLOTS 64

static int64_t to_tick_ceil(int64_t ns) {
    if (ns < 0) return 0;
    return (int64_t)(((uint64_t)ns + ((1u << RT_TICK_SHIFT) - 1)) >> RT_TICK_SHIFT);
}

void rt_wheel_init(rt_wheel_t* w, int64_t now_ns) {
    memset(w, 0, sizeof(*w));
    w->now = now_ns >> RT_TICK_SHIFT;
    for (int l = 0; l < RT_WHEEL_LEVELS; l++)
        for (int i = 0; i < SLOTS; i++) {
            aco_rt_timer_t* h = &w->slot[l][i];
            h->next_ = h->prev_ = h;
        }
}

/* Is h one of the wheel's slot heads?  Which one, through *lvl, *idx. */
static int slot_of(const rt_wheel_t* w, const aco_rt_timer_t* h, int* lvl, int* idx) {
    const aco_rt_timer_t* first = &w->slot[0][0];
    if (h < first || h >= first + RT_WHEEL_LEVELS * SLOTS) return 0;
    size_t k = (size_t)(h - first);
    *lvl = (int)(k / SLOTS);
    *idx = (int)(k % SLOTS);
    return 1;
}

static void link_timer(rt_wheel_t* w, aco_rt_timer_t* t) {
    uint64_t diff = (uint64_t)(t->expiry_ ^ w->now);   /* != 0: due after now */
    int lvl = (63 - __builtin_clzll(diff)) / GROUP;
    int idx = (int)((t->expiry_ >> (GROUP * lvl)) & (SLOTS - 1));
    aco_rt_timer_t* h = &w->slot[lvl][idx];
    t->next_ = h;
    t->prev_ = h->prev_;
    h->prev_->next_ = t;
    h->prev_ = t;
    w->bits[lvl] |= 1ull << idx;
}

static void unlink_timer(rt_wheel_t* w, aco_rt_timer_t* t) {
    aco_rt_timer_t* n = t->next_;
    aco_rt_timer_t* p = t->prev_;
    int lvl, idx;
    p->next_ = n;
    n->prev_ = p;
    t->next_ = t->prev_ = NULL;
    if (n == p && slot_of(w, n, &lvl, &idx)) w->bits[lvl] &= ~(1ull << idx);
}

void rt_wheel_add(rt_wheel_t* w, aco_rt_timer_t* t, int64_t deadline_ns) {
    int64_t e = to_tick_ceil(deadline_ns);
    if (e <= w->now) e = w->now + 1;            /* due: the next tick */
    t->expiry_ = e;
    link_timer(w, t);
    w->armed++;
}

void rt_wheel_clear(rt_wheel_t* w) {
    for (int l = 0; l < RT_WHEEL_LEVELS; l++)
        for (int i = 0; i < SLOTS; i++) {
            aco_rt_timer_t* h = &w->slot[l][i];
            while (h->next_ != h) {
                aco_rt_timer_t* t = h->next_;
                h->next_ = t->next_;
                t->next_ = t->prev_ = NULL;
            }
            h->prev_ = h;
        }
    memset(w->bits, 0, sizeof(w->bits));
    w->armed = 0;
}

int rt_wheel_del(rt_wheel_t* w, aco_rt_timer_t* t) {
    if (t->next_ == NULL) return 0;
    unlink_timer(w, t);
    w->armed--;
    return 1;
}

/* The start tick of the next slot to handle, and its level (-1: none). */
static int64_t next_event(const rt_wheel_t* w, int* lvl_out) {
    for (int l = 0; l < RT_WHEEL_LEVELS; l++) {
        if (w->bits[l] == 0) continue;
        int idx = __builtin_ctzll(w->bits[l]);
        int64_t above = w->now & ~(((int64_t)1 << (GROUP * (l + 1))) - 1);
        *lvl_out = l;
        return above | ((int64_t)idx << (GROUP * l));
    }
    *lvl_out = -1;
    return 0;
}

int64_t rt_wheel_timeout(const rt_wheel_t* w, int64_t now_ns) {
    int lvl;
    if (w->armed == 0) return -1;
    int64_t t = next_event(w, &lvl);
    if (lvl < 0) return -1;
    /* (a slot of the top level may start past what ns can say: a wait
     * without limit) */
    if (t > INT64_MAX >> RT_TICK_SHIFT) t = INT64_MAX >> RT_TICK_SHIFT;
    int64_t ns = (t << RT_TICK_SHIFT) - now_ns;
    return ns > 0 ? ns : 0;
}

void rt_wheel_advance(rt_wheel_t* w, int64_t now_ns) {
    int64_t target = now_ns >> RT_TICK_SHIFT;
    while (w->armed) {
        int lvl;
        int64_t t = next_event(w, &lvl);
        if (lvl < 0 || t > target) break;
        w->now = t;
        /* Take the slot's list out, then fire or re-place each timer: a
         * callback may add timers (due after now) or stop any timer,
         * those still on this local list included. */
        int idx = (int)((t >> (GROUP * lvl)) & (SLOTS - 1));
        aco_rt_timer_t* h = &w->slot[lvl][idx];
        aco_rt_timer_t local;
        local.next_ = h->next_;
        local.prev_ = h->prev_;
        local.next_->prev_ = &local;
        local.prev_->next_ = &local;
        h->next_ = h->prev_ = h;
        w->bits[lvl] &= ~(1ull << idx);
        while (local.next_ != &local) {
            aco_rt_timer_t* x = local.next_;
            local.next_ = x->next_;
            x->next_->prev_ = &local;
            if (x->expiry_ <= w->now) {
                x->next_ = x->prev_ = NULL;
                w->armed--;
                x->fn_(x);
            } else {
                link_timer(w, x);
            }
        }
    }
    if (target > w->now) w->now = target;
}
