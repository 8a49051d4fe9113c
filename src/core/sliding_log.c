/* Sliding log: the exact rolling window.  Every accepted unit of cost leaves its timestamp in
 * a ring of N slots; a timestamp t still counts at `now` iff now - t < W.  So the accepted
 * cost in any half-open span of length W never exceeds N.  Timestamps are kept sorted: a
 * request at a `now` earlier than the newest entry (a clock stepping back) is recorded at the
 * newest entry's time, which keeps it longer, never shorter.  Memory O(N); time amortised
 * O(1) (each timestamp is dropped once), O(log N) to find the expired prefix. */
#include "internal.h"

typedef struct log_state {
    int64_t head;  /* ring index of the oldest entry */
    int64_t count; /* entries in the ring */
    int64_t ts[];  /* N slots */
} log_state;

static int64_t at(const rlt_policy *p, const log_state *s, int64_t i)
{
    int64_t j = s->head + i;
    if (j >= p->limit) j -= p->limit;
    return s->ts[j];
}

static bool expired(const rlt_policy *p, int64_t t, rlt_ns now)
{
    return rlt__sat_sub(now, t) >= p->period;
}

/* How many of the oldest entries have expired at `now`.  Entries are sorted, so the expired
 * ones are a prefix: a galloping search (probe entries 0, 1, 3, 7..., then binary search the
 * last gap) finds its length g in O(log g) probes; a steady stream expires 0 or 1 entry per
 * request, so most calls take one to three probes where a binary search over all takes log N. */
static int64_t expired_prefix(const rlt_policy *p, const log_state *s, rlt_ns now)
{
    int64_t lo = 0, hi = s->count, probe = 0;
    while (probe < hi) { /* the entries before lo have expired: the length is in [lo, hi] */
        if (!expired(p, at(p, s, probe), now)) {
            hi = probe;
            break;
        }
        lo = probe + 1;
        if (lo - 1 >= hi - lo) break; /* the next probe, 2 lo - 1, is past the end */
        probe = lo + (lo - 1);
    }
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (expired(p, at(p, s, mid), now))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int rlt__sliding_log_decide(const rlt_policy *p, void *st, rlt_ns now, int64_t cost,
                            rlt_decision *d, int commit)
{
    log_state *s = st;
    int64_t gone = expired_prefix(p, s, now), live = s->count - gone;
    int64_t need = cost > 0 ? cost : 1;
    rlt__decision_clear(d, p->limit);
    if (need > p->limit) {
        d->retry_after = -1;
    } else {
        d->allowed = live <= p->limit - need;
        if (!d->allowed) /* wait for the entry that frees the last unit needed to expire */
            d->retry_after = rlt__sat_sub(
                rlt__sat_add(at(p, s, gone + live + need - p->limit - 1), p->period), now);
    }
    bool charge = d->allowed && cost > 0;
    int64_t newest = live > 0 ? at(p, s, s->count - 1) : now;
    if (charge && now > newest) newest = now;
    int64_t after = live + (charge ? cost : 0);
    d->remaining = p->limit - after;
    d->reset_after = after > 0 ? rlt__sat_sub(rlt__sat_add(newest, p->period), now) : 0;
    if (d->reset_after < 0) d->reset_after = 0;
    if (commit && charge) {
        s->head += gone; /* head < N and gone <= N (a valid state): no division needed */
        if (s->head >= p->limit) s->head -= p->limit;
        s->count = live;
        for (int64_t i = 0; i < cost; i++) {
            int64_t j = s->head + s->count++;
            if (j >= p->limit) j -= p->limit;
            s->ts[j] = newest;
        }
    }
    return RLT_OK;
}

bool rlt__sliding_log_fresh(const rlt_policy *p, const void *st, rlt_ns now)
{
    const log_state *s = st;
    return s->count == 0 || expired(p, at(p, s, s->count - 1), now);
}

int rlt__sliding_log_shift(const rlt_policy *p, void *st, rlt_ns delta)
{
    log_state *s = st;
    for (int64_t i = 0; i < s->count; i++) {
        int64_t j = (s->head + i) % p->limit;
        s->ts[j] = rlt__sat_add(s->ts[j], delta);
    }
    return RLT_OK;
}

/* Settles a reservation (settle.c).  A refund removes up to k of the newest live entries
 * stamped no later than reserved_at (the reservation's own, when nothing was recorded at that
 * instant since): an entry removed never expires later than one of the reservation's would
 * have.  An extra charge records x entries at max(now, newest); the ring has N slots, so when
 * live + x > N the oldest live entries make room (at most N are recorded): a log full of
 * entries stamped at the settle is the most it can hold, and debt beyond it is not kept. */
int rlt__sliding_log_settle(const rlt_policy *p, void *st, rlt_ns now, rlt_ns reserved_at,
                            int64_t estimate, int64_t real)
{
    log_state *s = st;
    int64_t gone = expired_prefix(p, s, now);
    s->head = (s->head + gone) % p->limit;
    s->count -= gone;
    if (real > estimate) {
        int64_t x = real - estimate;
        if (x > p->limit) x = p->limit;
        int64_t stamp = s->count > 0 ? at(p, s, s->count - 1) : now;
        if (now > stamp) stamp = now;
        int64_t drop = s->count + x - p->limit;
        if (drop > 0) {
            s->head = (s->head + drop) % p->limit;
            s->count -= drop;
        }
        for (int64_t i = 0; i < x; i++) {
            int64_t j = s->head + s->count++;
            if (j >= p->limit) j -= p->limit;
            s->ts[j] = stamp;
        }
        return RLT_OK;
    }
    /* Entries <= reserved_at form a prefix of the sorted live entries: [0, end). */
    int64_t lo = 0, hi = s->count;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (at(p, s, mid) <= reserved_at)
            lo = mid + 1;
        else
            hi = mid;
    }
    int64_t end = lo, k = estimate - real;
    if (k > end) k = end;
    if (k == 0) return RLT_OK;
    /* Close the gap [end - k, end): move the later entries down by k, keeping the order. */
    for (int64_t i = end; i < s->count; i++) {
        int64_t from = (s->head + i) % p->limit, to = (s->head + i - k) % p->limit;
        s->ts[to] = s->ts[from];
    }
    s->count -= k;
    return RLT_OK;
}
