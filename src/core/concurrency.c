/* Concurrency limiter: at most N leases in flight.  A lease not released within the policy's
 * period (its timeout) is reclaimed, so a crashed client cannot leak a slot.  Lease ids grow
 * with the clock (max(previous + 1, now)), so a stale release cannot free a newer lease even
 * after the key's state was dropped as fresh and started over. */
#include "internal.h"

typedef struct slot {
    int64_t lease;   /* 0 = free */
    int64_t expires; /* ns: reclaimed at or after this instant */
} slot;

typedef struct cc_state {
    int64_t last_lease;
    int64_t reserved;
    slot slots[];
} cc_state;

static bool live(const slot *sl, rlt_ns now)
{
    return sl->lease != 0 && sl->expires > now;
}

int rlt__concurrency_decide(const rlt_policy *p, void *st, rlt_ns now, int64_t cost,
                            rlt_decision *d, int commit)
{
    return rlt__concurrency_decide_under(p, st, now, cost, p->limit, d, commit);
}

int rlt__concurrency_decide_under(const rlt_policy *p, void *st, rlt_ns now, int64_t cost,
                                  int64_t top, rlt_decision *d, int commit)
{
    cc_state *s = st;
    int64_t in_use = 0, free_slot = -1;
    rlt_ns soonest = INT64_MAX, latest = INT64_MIN;
    for (int64_t i = 0; i < p->limit; i++) {
        if (live(&s->slots[i], now)) {
            in_use++;
            if (s->slots[i].expires < soonest) soonest = s->slots[i].expires;
            if (s->slots[i].expires > latest) latest = s->slots[i].expires;
        } else if (free_slot < 0) {
            free_slot = i;
        }
    }
    rlt__decision_clear(d, top);
    d->allowed = in_use < top;
    /* Below a class's ceiling more than one lease may have to go: then the wait until all of
     * today's have timed out is a bound, not exact; a class with no share never fits. */
    if (!d->allowed)
        d->retry_after = top == 0        ? -1
                         : in_use == top ? rlt__sat_sub(soonest, now)
                                         : rlt__sat_sub(latest, now);
    if (d->allowed && cost > 0 && s->last_lease == INT64_MAX)
        return RLT_ERANGE; /* no fresh id left: ids must never repeat */
    if (d->allowed && cost > 0) {
        rlt_ns expires = rlt__sat_add(now, p->period);
        int64_t lease = rlt__sat_add(s->last_lease, 1);
        if (now > lease) lease = now;
        if (lease <= 0) lease = 1;
        in_use++;
        if (expires > latest) latest = expires;
        d->lease = lease;
        if (commit) {
            s->last_lease = lease;
            s->slots[free_slot] = (slot){lease, expires};
        }
    }
    d->remaining = top > in_use ? top - in_use : 0;
    d->reset_after = in_use > 0 ? rlt__sat_sub(latest, now) : 0;
    return RLT_OK;
}

int rlt__concurrency_release(const rlt_policy *p, void *st, rlt_ns now, int64_t lease)
{
    cc_state *s = st;
    if (lease <= 0) return RLT_ENOENT;
    for (int64_t i = 0; i < p->limit; i++) {
        if (s->slots[i].lease == lease) {
            bool was_live = s->slots[i].expires > now;
            s->slots[i].lease = 0;
            s->slots[i].expires = 0;
            return was_live ? RLT_OK : RLT_ENOENT;
        }
    }
    return RLT_ENOENT;
}

bool rlt__concurrency_fresh(const rlt_policy *p, const void *st, rlt_ns now)
{
    const cc_state *s = st;
    for (int64_t i = 0; i < p->limit; i++)
        if (live(&s->slots[i], now)) return false;
    return true;
}

int rlt__concurrency_shift(const rlt_policy *p, void *st, rlt_ns delta)
{
    cc_state *s = st;
    for (int64_t i = 0; i < p->limit; i++)
        if (s->slots[i].lease != 0) s->slots[i].expires = rlt__sat_add(s->slots[i].expires, delta);
    return RLT_OK;
}
