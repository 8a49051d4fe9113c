/* Fixed window: windows [kW, (k+1)W) from the clock's origin; allow while count + cost <= N.
 * Worst case 2N in a span of W (N at the end of one window, N at the start of the next).
 * A clock stepping back into an earlier window keeps counting in the latest window seen.
 * Calendar windows (months > 0) are months or years of a time zone (calendar.c): the state
 * then keeps the calendar window's index, and the window ends at the real month boundary. */
#include "internal.h"

typedef struct fw_state {
    int64_t win;   /* index k of the window `count` belongs to */
    int64_t count; /* accepted cost in that window */
} fw_state;

/* The window index of `now`; for calendar windows also that window's end (when `end`). */
static int64_t window_of(const rlt_policy *p, rlt_ns now, rlt_ns *end)
{
    if (p->months == 0) return rlt__floor_div(now, p->period);
    int64_t k;
    rlt__calendar_window(p, now, &k, end);
    return k;
}

/* The state as of `now`: rolls to a later window, never to an earlier one.  *k: now's window;
 * *end (calendar windows, when not NULL): that window's end. */
static fw_state current(const rlt_policy *p, const void *st, rlt_ns now, int64_t *k, rlt_ns *end)
{
    fw_state s;
    memcpy(&s, st, sizeof s);
    *k = window_of(p, now, end);
    if (s.count == 0 || *k > s.win) {
        s.win = *k;
        s.count = 0;
    }
    return s;
}

/* Until the end of window `win`; `k` and `k_end` are now's window and its end (calendar). */
static rlt_ns until_end(const rlt_policy *p, int64_t win, rlt_ns now, int64_t k, rlt_ns k_end)
{
    __int128 end;
    if (p->months == 0)
        end = rlt__mul_wide((__int128)win + 1, p->period); /* may pass INT64_MAX: saturate */
    else
        end = win == k ? k_end : rlt__calendar_end(p, win); /* kept after a step back */
    __int128 left = end - now;
    return left > INT64_MAX ? INT64_MAX : (int64_t)left;
}

int rlt__fixed_window_decide(const rlt_policy *p, void *st, rlt_ns now, int64_t cost,
                             rlt_decision *d, int commit)
{
    int64_t k;
    rlt_ns k_end = 0;
    fw_state s = current(p, st, now, &k, &k_end);
    int64_t need = cost > 0 ? cost : 1;
    rlt__decision_clear(d, p->limit);
    if (need > p->limit) {
        d->retry_after = -1;
    } else {
        d->allowed = s.count <= p->limit - need;
        if (!d->allowed) d->retry_after = until_end(p, s.win, now, k, k_end);
    }
    int64_t after = s.count + (d->allowed && cost > 0 ? cost : 0);
    d->remaining = p->limit - after > 0 ? p->limit - after : 0;
    d->reset_after = after > 0 ? until_end(p, s.win, now, k, k_end) : 0;
    if (commit && d->allowed && cost > 0) {
        s.count = after;
        memcpy(st, &s, sizeof s);
    }
    return RLT_OK;
}

bool rlt__fixed_window_fresh(const rlt_policy *p, const void *st, rlt_ns now)
{
    int64_t k;
    return current(p, st, now, &k, NULL).count == 0;
}

/* Windows stay aligned to the origin: the count moves to the window that holds the moved end
 * of its window, so it lives at least as long as it would have (never mints).  A calendar
 * window's index names a month of the zone whatever the clock's origin: nothing moves. */
int rlt__fixed_window_shift(const rlt_policy *p, void *st, rlt_ns delta)
{
    fw_state s;
    memcpy(&s, st, sizeof s);
    if (s.count == 0 || p->months != 0) return RLT_OK;
    __int128 e = rlt__mul_wide((__int128)s.win + 1, p->period);
    int64_t end = rlt__sat_add(e > INT64_MAX ? INT64_MAX : (int64_t)e, delta);
    s.win = rlt__floor_div(rlt__sat_sub(end, 1), p->period);
    memcpy(st, &s, sizeof s);
    return RLT_OK;
}

int rlt__fixed_window_counts(const rlt_policy *p, void *st, rlt_ns now, int64_t *count, int set)
{
    int64_t k;
    fw_state s = current(p, st, now, &k, NULL);
    if (set) {
        s.count = *count;
        memcpy(st, &s, sizeof s);
    } else {
        *count = s.count;
    }
    return RLT_OK;
}

/* Settles a reservation (settle.c): an extra charge counts in the window `now` falls in, past
 * N if need be (debt until that window ends); a refund is taken back only while `now` is still
 * in the window the reservation was charged to, and never more than that window counts. */
int rlt__fixed_window_settle(const rlt_policy *p, void *st, rlt_ns now, rlt_ns reserved_at,
                             int64_t estimate, int64_t real)
{
    int64_t k;
    fw_state s = current(p, st, now, &k, NULL);
    if (real > estimate) {
        s.count = rlt__sat_add(s.count, real - estimate);  /* debt saturates: still denied */
    } else if (s.win == window_of(p, reserved_at, NULL)) { /* calendar windows too */
        int64_t back = estimate - real;
        s.count -= back < s.count ? back : s.count;
    }
    memcpy(st, &s, sizeof s);
    return RLT_OK;
}
