/* Internal helpers of the core: checked integer arithmetic and the per-algorithm entry points
 * that rlt_decide and friends dispatch to.  Not installed. */
#ifndef RLT_CORE_INTERNAL_H
#define RLT_CORE_INTERNAL_H

#include "ratelimit/ratelimit.h"

#include <assert.h>
#include <string.h>

/* Floor division for b > 0 (C truncates toward zero). */
static inline int64_t rlt__floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

/* Ceiling division of a >= 0 by b > 0. */
static inline int64_t rlt__ceil_div(int64_t a, int64_t b)
{
    assert(a >= 0 && b > 0);
    return a / b + (a % b != 0);
}

/* a + b, saturating at the int64 limits. */
static inline int64_t rlt__sat_add(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r)) return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

/* a - b, saturating. */
static inline int64_t rlt__sat_sub(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_sub_overflow(a, b, &r)) return b < 0 ? INT64_MAX : INT64_MIN;
    return r;
}

/* Exact products and quotients that may need 128 bits.  x86-64 and arm64 form a 64 x 64 ->
 * 128-bit product in one instruction, but wasm32 has none: there clang calls compiler-rt's
 * __multi3 for every __int128 product and every __builtin_mul_overflow on int64, each a call
 * through linear memory costing tens of instructions.  Decisions see small operands (ns since
 * an origin, rates reduced by their gcd), so under __wasm__ the products first try 64 bits
 * where that is provably exact, with the same result bit for bit; elsewhere they are the
 * plain forms, already one instruction.  No target divides 128 bits in hardware (x86-64 and
 * wasm32 both call __divti3), so the quotient tries 64 bits everywhere: 10% fewer
 * instructions for a native sliding-window decision.  tests/core/test_wide.c defines
 * RLT__NARROW_FIRST to check the wasm paths natively, every helper against the 128-bit forms. */
#if defined(__wasm__) && !defined(RLT__NARROW_FIRST)
#define RLT__NARROW_FIRST 1
#endif

/* Whether a x b fits in int64, from the operands' magnitudes: |a| < 2^(64 - clz|a|), so when
 * the two clz add up to 65 or more, |a x b| < 2^63.  Sufficient, not necessary (the slow path
 * takes the rest). */
static inline bool rlt__product_small(int64_t a, int64_t b)
{
    uint64_t ua = a < 0 ? -(uint64_t)a : (uint64_t)a, ub = b < 0 ? -(uint64_t)b : (uint64_t)b;
    if (ua == 0 || ub == 0) return true;
    return __builtin_clzll(ua) + __builtin_clzll(ub) >= 65;
}

/* __builtin_mul_overflow(a, b, r) on int64: true on overflow, *r the product modulo 2^64. */
static inline bool rlt__mul_overflow(int64_t a, int64_t b, int64_t *r)
{
#ifdef RLT__NARROW_FIRST
    if (rlt__product_small(a, b)) {
        *r = a * b;
        return false;
    }
#endif
    return __builtin_mul_overflow(a, b, r);
}

/* a x b exactly, for |a| < 2^126 (so the product of an int64 fits). */
static inline __int128 rlt__mul_wide(__int128 a, int64_t b)
{
#ifdef RLT__NARROW_FIRST
    int64_t a64 = (int64_t)a;
    if (a64 == a && rlt__product_small(a64, b)) return a64 * b;
#endif
    return a * b;
}

/* x / b truncated toward zero, for b > 0. */
static inline __int128 rlt__div_wide(__int128 x, int64_t b)
{
    assert(b > 0);
    int64_t x64 = (int64_t)x;
    if (x64 == x) return x64 / b; /* b > 0: never INT64_MIN / -1 */
    return x / b;
}

/* Fills the fields every decision shares before an algorithm sets the rest. */
static inline void rlt__decision_clear(rlt_decision *d, int64_t limit)
{
    memset(d, 0, sizeof *d);
    d->limit = limit;
}

/* Per-algorithm entry points, reached through the table in algo.h.  `commit` false means:
 * compute the decision only (peek, when).  A shift moves a state by delta ns: RLT_OK, or
 * RLT_ERANGE (state unchanged) where moving it toward the future would overflow. */
int rlt__fixed_window_decide(const rlt_policy *p, void *st, rlt_ns now, int64_t cost,
                             rlt_decision *d, int commit);
int rlt__sliding_log_decide(const rlt_policy *p, void *st, rlt_ns now, int64_t cost,
                            rlt_decision *d, int commit);
int rlt__sliding_window_decide(const rlt_policy *p, void *st, rlt_ns now, int64_t cost,
                               rlt_decision *d, int commit);
int rlt__bucket_decide(const rlt_policy *p, void *st, rlt_ns now, int64_t cost, rlt_decision *d,
                       int commit); /* token bucket and GCRA */
int rlt__leaky_decide(const rlt_policy *p, void *st, rlt_ns now, int64_t cost, rlt_decision *d,
                      int commit);
int rlt__concurrency_decide(const rlt_policy *p, void *st, rlt_ns now, int64_t cost,
                            rlt_decision *d, int commit);
int rlt__concurrency_release(const rlt_policy *p, void *st, rlt_ns now, int64_t lease);
/* rlt__concurrency_release that also teaches an adaptive limit (latency_ns < 0: no report). */
int rlt__concurrency_release_report(const rlt_policy *p, void *st, rlt_ns now, int64_t lease,
                                    rlt_ns latency_ns, int outcome);
/* As rlt__concurrency_decide with only `top` (0..limit) of the limit's slots usable: a class's
 * ceiling (priority.c); d->limit is top. */
int rlt__concurrency_decide_under(const rlt_policy *p, void *st, rlt_ns now, int64_t cost,
                                  int64_t top, rlt_decision *d, int commit);

bool rlt__fixed_window_fresh(const rlt_policy *p, const void *st, rlt_ns now);
bool rlt__sliding_log_fresh(const rlt_policy *p, const void *st, rlt_ns now);
bool rlt__sliding_window_fresh(const rlt_policy *p, const void *st, rlt_ns now);
bool rlt__bucket_fresh(const rlt_policy *p, const void *st, rlt_ns now);
bool rlt__leaky_fresh(const rlt_policy *p, const void *st, rlt_ns now);
/* Adaptive concurrency (adaptive_policy.c): the policy text's options adaptive=, min=, init=,
 * slow= (rlt__adapt_option: 1 consumed, 0 not one of them, < 0 an error written to err),
 * applied after init (rlt__adapt_apply: RLT_OK or RLT_EPARSE with a message), and written back
 * after the other options (rlt__adapt_format: the new length or RLT_ENOSPC). */
typedef struct rlt__adapt_opts {
    int32_t algo;
    int64_t min, init;
    rlt_ns slow;
    unsigned seen; /* 1 adaptive, 2 min, 4 init, 8 slow */
} rlt__adapt_opts;
int rlt__adapt_option(const char *o, size_t olen, rlt__adapt_opts *a, char *err, size_t errlen);
int rlt__adapt_apply(rlt_policy *p, const rlt__adapt_opts *a, const char *text, size_t len,
                     char *err, size_t errlen);
int rlt__adapt_format(const rlt_policy *p, char *buf, size_t cap, size_t n);
/* The limit a concurrency policy's state holds in force now: p->limit for a static one, the
 * learned limit (adapt_min..limit) for an adaptive one. */
int64_t rlt__concurrency_cap(const rlt_policy *p, const void *st);
/* Whether an adaptive concurrency state's learned part is within the policy's bounds (true
 * for a static policy). */
bool rlt__concurrency_adapt_valid(const rlt_policy *p, const void *st);
bool rlt__concurrency_fresh(const rlt_policy *p, const void *st, rlt_ns now);

int rlt__fixed_window_shift(const rlt_policy *p, void *st, rlt_ns delta);
int rlt__sliding_log_shift(const rlt_policy *p, void *st, rlt_ns delta);
int rlt__sliding_window_shift(const rlt_policy *p, void *st, rlt_ns delta);
int rlt__bucket_shift(const rlt_policy *p, void *st, rlt_ns delta);
int rlt__leaky_shift(const rlt_policy *p, void *st, rlt_ns delta);
int rlt__concurrency_shift(const rlt_policy *p, void *st, rlt_ns delta);

/* Used allowance in and out of a state, for rlt_state_convert (decide.c). */
int rlt__bucket_used(const rlt_policy *p, const void *st, rlt_ns now, int64_t *used);
int rlt__bucket_set_used(const rlt_policy *p, void *st, rlt_ns now, int64_t used);
int rlt__leaky_backlog(const rlt_policy *p, const void *st, rlt_ns now, int64_t *backlog);
int rlt__leaky_set_backlog(const rlt_policy *p, void *st, rlt_ns now, int64_t backlog);
int rlt__fixed_window_counts(const rlt_policy *p, void *st, rlt_ns now, int64_t *count, int set);
int rlt__sliding_window_counts(const rlt_policy *p, void *st, rlt_ns now, int64_t counts[2],
                               int set);

/* Settling a reservation (settle.c): each algorithm's state at `now` after a request of
 * `estimate` charged at `reserved_at` turns out to cost `real`.  RLT_OK or RLT_ERANGE (state
 * unchanged). */
int rlt__bucket_settle(const rlt_policy *p, void *st, rlt_ns now, rlt_ns reserved_at,
                       int64_t estimate, int64_t real);
int rlt__fixed_window_settle(const rlt_policy *p, void *st, rlt_ns now, rlt_ns reserved_at,
                             int64_t estimate, int64_t real);
int rlt__sliding_window_settle(const rlt_policy *p, void *st, rlt_ns now, rlt_ns reserved_at,
                               int64_t estimate, int64_t real);
int rlt__sliding_log_settle(const rlt_policy *p, void *st, rlt_ns now, rlt_ns reserved_at,
                            int64_t estimate, int64_t real);
/* The penalty box (block.c), wrapped around the algorithm's own decision.  The algorithm's
 * state comes first: rlt__algo_state_size(p) bytes (algo.h), then rlt__block_size(p). */
size_t rlt__block_size(const rlt_policy *p);
int rlt__block_decide(const rlt_policy *p, void *st, rlt_ns now, int64_t cost, rlt_decision *d,
                      int commit);
bool rlt__block_fresh(const rlt_policy *p, const void *st, rlt_ns now);
bool rlt__block_valid(const rlt_policy *p, const void *st);
void rlt__block_shift(const rlt_policy *p, void *st, rlt_ns delta);

/* GCRA and leaky bucket keep one word: the theoretical arrival time in scaled units
 * (ns x scale_), stored with its sign bit flipped so that an all-zero word is INT64_MIN,
 * "long ago", i.e. fresh. */
static inline int64_t rlt__tat_load(const void *st)
{
    uint64_t w;
    memcpy(&w, st, sizeof w);
    return (int64_t)(w ^ (UINT64_C(1) << 63));
}
static inline void rlt__tat_store(void *st, int64_t tat)
{
    uint64_t w = (uint64_t)tat ^ (UINT64_C(1) << 63);
    memcpy(st, &w, sizeof w);
}

/* Moves a stored tat by delta ns (GCRA, leaky bucket).  Fresh stays fresh; toward the past
 * it saturates (harmless), toward the future an overflow is RLT_ERANGE, state unchanged. */
static inline int rlt__tat_shift(const rlt_policy *p, void *st, rlt_ns delta)
{
    int64_t tat = rlt__tat_load(st), ds, moved;
    if (tat == INT64_MIN) return RLT_OK;
    if (rlt__mul_overflow(delta, p->scale_, &ds) || __builtin_add_overflow(tat, ds, &moved)) {
        if (delta > 0) return RLT_ERANGE;
        moved = INT64_MIN + 1;
    }
    rlt__tat_store(st, moved);
    return RLT_OK;
}

/* How far the stored tat is ahead of `now`, in scaled units (the used part of a GCRA bucket,
 * the backlog of a leaky bucket; 0 when it is behind), and now x scale_ in *now_s.
 * RLT_ERANGE when now x scale_ leaves int64. */
static inline int rlt__tat_ahead(const rlt_policy *p, const void *st, rlt_ns now, int64_t *ahead,
                                 int64_t *now_s)
{
    if (rlt__mul_overflow(now, p->scale_, now_s)) return RLT_ERANGE;
    int64_t tat = rlt__tat_load(st);
    *ahead = tat > *now_s ? rlt__sat_sub(tat, *now_s) : 0;
    return RLT_OK;
}

/* Stores the tat `ahead` scaled units after `now` (0: the fresh word), for
 * rlt_state_convert.  RLT_ERANGE (state unchanged) when it leaves int64. */
static inline int rlt__tat_set_ahead(const rlt_policy *p, void *st, rlt_ns now, int64_t ahead)
{
    int64_t now_s, tat;
    if (rlt__mul_overflow(now, p->scale_, &now_s) || __builtin_add_overflow(now_s, ahead, &tat))
        return RLT_ERANGE;
    rlt__tat_store(st, ahead ? tat : INT64_MIN);
    return RLT_OK;
}

/* Calendar windows (calendar.c).  The window index of `now` under calendar policy `p` and the
 * window's end in p's now (saturated); whether a policy's calendar fields are usable; a
 * calendar period "Nmo"/"Ny" (0: not one; 1: months and the nominal period set; RLT_EPARSE,
 * RLT_ERANGE); its text with the tz= option. */
void rlt__calendar_window(const rlt_policy *p, rlt_ns now, int64_t *win, rlt_ns *end);
rlt_ns rlt__calendar_end(const rlt_policy *p, int64_t win);
bool rlt__calendar_valid(const rlt_policy *p);
bool rlt__zone_valid(const rlt_zone *z);
int rlt__calendar_period(const char *s, size_t len, int32_t *months, rlt_ns *nominal);
int rlt__calendar_format(const rlt_policy *p, char *buf, size_t cap);

#endif
