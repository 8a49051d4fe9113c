/* Sliding window counter (Cloudflare's): two fixed-window counts and a weighted estimate,
 *   estimate = prev x (W - elapsed) / W + curr,   allow iff estimate + cost <= N,
 * compared as prev x (W - elapsed) + (curr + cost) x W <= N x W in 128-bit integers, so no
 * rounding ever enters.  It admits at most N per fixed window, so at most 2N in any span of
 * W; against the exact log it over-admits only when the previous window's traffic was not
 * spread evenly (the bound is N + prev x elapsed / W in the span ending at `now`). */
#include "internal.h"

typedef __int128 i128;

typedef struct sw_state {
    int64_t win;  /* index k of the current window */
    int64_t prev; /* accepted cost in window k-1 */
    int64_t curr; /* accepted cost in window k */
} sw_state;

/* The state as of `now` and the elapsed part of its window (0 if the clock stepped back). */
static sw_state current(const rlt_policy *p, const void *st, rlt_ns now, int64_t *elapsed)
{
    sw_state s;
    memcpy(&s, st, sizeof s);
    int64_t k = rlt__floor_div(now, p->period);
    if (s.prev == 0 && s.curr == 0) s.win = k;
    if ((i128)k == (i128)s.win + 1) {
        s.prev = s.curr;
        s.curr = 0;
        s.win = k;
    } else if ((i128)k > (i128)s.win + 1) {
        s.prev = s.curr = 0;
        s.win = k;
    }
    /* now - k*W without forming k*W, which can pass INT64_MIN; k < win: as if at its start */
    int64_t r = now % p->period;
    *elapsed = k == s.win ? (r < 0 ? r + p->period : r) : 0;
    return s;
}

/* Start of window win + step, saturated to the int64 range. */
static int64_t window_start(const rlt_policy *p, int64_t win, int step)
{
    i128 t = rlt__mul_wide((i128)win + step, p->period);
    return t > INT64_MAX ? INT64_MAX : t < INT64_MIN ? INT64_MIN : (int64_t)t;
}

/* Earliest ns at which cost `need` fits, trying this window, the next, and the one after
 * (where both counts have left the estimate). */
static rlt_ns earliest(const rlt_policy *p, const sw_state *s, int64_t elapsed, int64_t need)
{
    const i128 W = p->period;
    for (int step = 0; step < 3; step++) {
        int64_t P = step == 0 ? s->prev : step == 1 ? s->curr : 0;
        int64_t C = step == 0 ? s->curr : 0;
        i128 e0 = step == 0 ? elapsed : 0;
        i128 slack = rlt__mul_wide((i128)p->limit - C - need, p->period);
        if (slack < 0) continue;
        i128 emin = P == 0 ? 0 : W - rlt__div_wide(slack, P); /* P x (W - e) <= slack */
        if (emin < e0) emin = e0;
        if (emin < W) return rlt__sat_add(window_start(p, s->win, step), (int64_t)emin);
    }
    return INT64_MAX; /* unreachable for need <= N */
}

int rlt__sliding_window_decide(const rlt_policy *p, void *st, rlt_ns now, int64_t cost,
                               rlt_decision *d, int commit)
{
    int64_t e;
    sw_state s = current(p, st, now, &e);
    const i128 NW = rlt__mul_wide(p->limit, p->period);
    int64_t need = cost > 0 ? cost : 1;
    i128 weighted = rlt__mul_wide(s.prev, p->period - e);
    rlt__decision_clear(d, p->limit);
    if (need > p->limit) {
        d->retry_after = -1;
    } else {
        d->allowed = weighted + rlt__mul_wide((i128)s.curr + need, p->period) <= NW;
        if (!d->allowed) d->retry_after = rlt__sat_sub(earliest(p, &s, e, need), now);
    }
    int64_t curr_after = s.curr + (d->allowed && cost > 0 ? cost : 0);
    i128 left = NW - weighted - rlt__mul_wide(curr_after, p->period);
    d->remaining = left <= 0 ? 0 : (int64_t)rlt__div_wide(left, p->period);
    if (curr_after > 0)
        d->reset_after = rlt__sat_sub(window_start(p, s.win, 2), now);
    else if (s.prev > 0)
        d->reset_after = rlt__sat_sub(window_start(p, s.win, 1), now);
    if (commit && d->allowed && cost > 0) {
        s.curr = curr_after;
        memcpy(st, &s, sizeof s);
    }
    return RLT_OK;
}

bool rlt__sliding_window_fresh(const rlt_policy *p, const void *st, rlt_ns now)
{
    int64_t e;
    sw_state s = current(p, st, now, &e);
    return s.prev == 0 && s.curr == 0;
}

int rlt__sliding_window_shift(const rlt_policy *p, void *st, rlt_ns delta)
{
    sw_state s;
    memcpy(&s, st, sizeof s);
    if (s.prev == 0 && s.curr == 0) return RLT_OK;
    /* Move by whole windows, rounding up, so counts never leave early. */
    int64_t k = delta >= 0 ? delta / p->period + (delta % p->period != 0)
                           : -(rlt__sat_sub(0, delta) / p->period); /* ceil toward +inf */
    s.win = rlt__sat_add(s.win, k);
    memcpy(st, &s, sizeof s);
    return RLT_OK;
}

int rlt__sliding_window_counts(const rlt_policy *p, void *st, rlt_ns now, int64_t counts[2],
                               int set)
{
    int64_t e;
    sw_state s = current(p, st, now, &e);
    if (set) {
        s.prev = counts[0];
        s.curr = counts[1];
        memcpy(st, &s, sizeof s);
    } else {
        counts[0] = s.prev;
        counts[1] = s.curr;
    }
    return RLT_OK;
}

/* Settles a reservation (settle.c): an extra charge counts in the current window (weight 1,
 * at least the weight the reserved window has now); a refund comes off the count of the
 * window the reservation was charged to while that count is still in the estimate (it is the
 * current or the previous window), never more than that count holds. */
int rlt__sliding_window_settle(const rlt_policy *p, void *st, rlt_ns now, rlt_ns reserved_at,
                               int64_t estimate, int64_t real)
{
    int64_t e;
    sw_state s = current(p, st, now, &e);
    if (real > estimate) {
        s.curr = rlt__sat_add(s.curr, real - estimate); /* debt saturates: still denied */
    } else {
        int64_t k = estimate - real, kr = rlt__floor_div(reserved_at, p->period);
        int64_t *c = s.win == kr ? &s.curr : (i128)s.win == (i128)kr + 1 ? &s.prev : NULL;
        if (c) *c -= k < *c ? k : *c;
    }
    memcpy(st, &s, sizeof s);
    return RLT_OK;
}
