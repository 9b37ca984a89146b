/* rt_wheel.h - the timing wheel (timer.c): a leaf, under the kernel,
 * which keeps one in each scheduler (its deadlines and the program's
 * timers).
 */
#ifndef ACO_RT_WHEEL_H
#define ACO_RT_WHEEL_H

#include "aco_rt.h"
#include "rt_base.h"

#pragma GCC visibility push(hidden)     /* (see rt_base.h) */

/* The timing wheel: 9 levels of 64 slots, 2^14 ns ticks (timer.c). */
#define RT_TICK_SHIFT 14
#define RT_WHEEL_LEVELS 9
_Static_assert(6 * RT_WHEEL_LEVELS + RT_TICK_SHIFT > 63, "every int64_t deadline has a level");
typedef struct rt_wheel {
    int64_t         now;        /* current tick: every armed timer is later */
    uint64_t        armed;
    uint64_t        bits[RT_WHEEL_LEVELS];
    aco_rt_timer_t  slot[RT_WHEEL_LEVELS][64];  /* list heads */
} rt_wheel_t;

void    rt_wheel_init(rt_wheel_t* w, int64_t now_ns);
void    rt_wheel_add(rt_wheel_t* w, aco_rt_timer_t* t, int64_t deadline_ns);
int     rt_wheel_del(rt_wheel_t* w, aco_rt_timer_t* t);
/* Disarm every timer (the program's may outlive the scheduler). */
void    rt_wheel_clear(rt_wheel_t* w);
/* ns until the first timer can fire (from now_ns), -1 if none armed. */
int64_t rt_wheel_timeout(const rt_wheel_t* w, int64_t now_ns);
/* Fire every timer due at now_ns. */
void    rt_wheel_advance(rt_wheel_t* w, int64_t now_ns);
static inline int rt_timer_armed(const aco_rt_timer_t* t) { return t->next_ != NULL; }

#pragma GCC visibility pop

#endif /* ACO_RT_WHEEL_H */
