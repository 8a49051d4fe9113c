/* Sliding log: the exact rolling window.  Every accepted unit of cost leaves its timestamp in
 * a ring of slots; a timestamp t still counts at `now` iff now - t < W.  So the accepted
 * cost in any half-open span of length W never exceeds N.  Timestamps are kept sorted: a
 * request at a `now` earlier than the newest entry (a clock stepping back) is recorded at the
 * newest entry's time, which keeps it longer, never shorter.  Time amortised O(1) (each
 * timestamp is dropped once), O(log N) to find the expired prefix.
 *
 * Memory.  A full state has N slots (16 + 8N bytes, rlt_state_size): what every caller that
 * allocates rlt_state_size bytes gets.  The keyed store keeps compact states (sliding_log.h):
 * S slots, S recorded in the header's high bits (0 = N, so a zeroed full state is valid), and
 * grows a log before a charge that needs more (to min(N, max(2S, live + cost))), shrinks it
 * after one that leaves live <= S / 4 (to 2 live), so a key holds between live and 4 x live
 * slots (at least 1) where live is the entries in its window: 24 bytes for a key with one
 * entry, 16 + 8N only when N entries are live.  Decisions are the same on both: the entries
 * and their order are the state; S only says where the ring wraps.  Growing copies the live
 * entries only, which the charge it is made for would keep anyway (it drops the expired
 * prefix); a decision or settle that would need more than S returns RLT_EFULL unchanged.
 * Doubling makes the copies amortised O(1) per entry recorded. */
#include "internal.h"

#include "sliding_log.h"

typedef struct log_state {
    int64_t head;  /* bits 0..31: ring index of the oldest entry; 32..62: slots S, 0 = N */
    int64_t count; /* entries in the ring */
    int64_t ts[];  /* S slots */
} log_state;

#define HEAD_MASK INT64_C(0xffffffff)

static int64_t slots(const rlt_policy *p, const log_state *s)
{
    int64_t n = s->head >> 32;
    return n ? n : p->limit;
}

static int64_t head(const log_state *s)
{
    return s->head & HEAD_MASK;
}

static void set_head(log_state *s, int64_t h)
{
    s->head = (s->head & ~HEAD_MASK) | h;
}

static int64_t at(const rlt_policy *p, const log_state *s, int64_t i)
{
    int64_t j = head(s) + i, n = slots(p, s);
    if (j >= n) j -= n;
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
        const int64_t n = slots(p, s);
        if (live + cost > n) return RLT_EFULL; /* a compact state without room: unchanged */
        int64_t h = head(s) + gone; /* head < S and gone <= S (a valid state): no division */
        if (h >= n) h -= n;
        set_head(s, h);
        s->count = live;
        for (int64_t i = 0; i < cost; i++) {
            int64_t j = h + s->count++;
            if (j >= n) j -= n;
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
    const int64_t n = slots(p, s);
    for (int64_t i = 0; i < s->count; i++) {
        int64_t j = (head(s) + i) % n;
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
    const int64_t n = slots(p, s);
    int64_t gone = expired_prefix(p, s, now), x = real - estimate;
    if (x > p->limit) x = p->limit;
    if (x > 0 && n < p->limit && s->count - gone + x > n) return RLT_EFULL; /* unchanged */
    set_head(s, (head(s) + gone) % n);
    s->count -= gone;
    if (x > 0) {
        int64_t stamp = s->count > 0 ? at(p, s, s->count - 1) : now;
        if (now > stamp) stamp = now;
        int64_t drop = s->count + x - n;
        if (drop > 0) {
            set_head(s, (head(s) + drop) % n);
            s->count -= drop;
        }
        for (int64_t i = 0; i < x; i++) {
            int64_t j = head(s) + s->count++;
            if (j >= n) j -= n;
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
        int64_t from = (head(s) + i) % n, to = (head(s) + i - k) % n;
        s->ts[to] = s->ts[from];
    }
    s->count -= k;
    return RLT_OK;
}

/* ---- Compact states (sliding_log.h) ---------------------------------------------------- */

size_t rlt__sliding_log_bytes(int64_t n)
{
    return sizeof(log_state) + 8 * (size_t)n;
}

int64_t rlt__sliding_log_slots(const rlt_policy *p, const void *st)
{
    return slots(p, st);
}

int64_t rlt__sliding_log_count(const void *st)
{
    return ((const log_state *)st)->count;
}

int64_t rlt__sliding_log_room(const rlt_policy *p, const void *st, rlt_ns now, int64_t cost,
                              int64_t settle_x)
{
    const log_state *s = st;
    const int64_t n = slots(p, s), live = s->count - expired_prefix(p, s, now);
    int64_t need = n;
    if (settle_x > 0) {
        need = live + (settle_x < p->limit ? settle_x : p->limit);
    } else if (cost > 0 && cost <= p->limit && live <= p->limit - cost) { /* will be charged */
        need = live + cost;
    }
    if (need > p->limit) need = p->limit;
    return need > n ? need : n;
}

void rlt__sliding_log_copy(const rlt_policy *p, const void *from, void *to, int64_t n, rlt_ns now)
{
    const log_state *f = from;
    log_state *t = to;
    const int64_t gone = expired_prefix(p, f, now), keep = f->count - gone;
    for (int64_t i = 0; i < keep; i++)
        t->ts[i] = at(p, f, gone + i);
    t->count = keep;
    t->head = n == p->limit ? 0 : n << 32;
}
