/* Concurrency limiter: at most N leases in flight.  A lease not released within the policy's
 * period (its timeout) is reclaimed, so a crashed client cannot leak a slot.  Lease ids grow
 * with the clock (max(previous + 1, now)), so a stale release cannot free a newer lease even
 * after the key's state was dropped as fresh and started over. */
#include "ratelimit/adaptive.h"

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

/* An adaptive policy's learned state: 32 bytes after the slots (rlt__algo_state_size). */
static rlt_adapt_state *adapt_state(const rlt_policy *p, const void *st)
{
    return (rlt_adapt_state *)((char *)st + 16 + 16 * (size_t)p->limit);
}

static rlt_adapt_policy adapt_policy(const rlt_policy *p)
{
    /* rlt_adapt_policy_check's defaults; rlt_policy_set_adaptive checked the rest */
    return (rlt_adapt_policy){(rlt_adapt_algo)p->adapt, p->adapt_min, p->limit, p->adapt_init,
                              p->adapt_slow, 900, 30 * RLT_NS_PER_S};
}

int64_t rlt__concurrency_cap(const rlt_policy *p, const void *st)
{
    if (!p->adapt) return p->limit;
    rlt_adapt_policy a = adapt_policy(p);
    rlt_adapt_state s;
    memcpy(&s, adapt_state(p, st), sizeof s);
    return rlt_adapt_limit(&a, &s);
}

bool rlt__concurrency_adapt_valid(const rlt_policy *p, const void *st)
{
    if (!p->adapt) return true;
    rlt_adapt_state s;
    memcpy(&s, adapt_state(p, st), sizeof s);
    return (s.limit_milli == 0 ||
            (s.limit_milli >= p->adapt_min * 1000 && s.limit_milli <= p->limit * 1000)) &&
           s.rtt_noload >= 0 && s.rtt_noload <= RLT_ADAPT_LATENCY_MAX && s.updates >= 0;
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
    if (p->adapt) {
        int64_t cap = rlt__concurrency_cap(p, st);
        if (top > cap) top = cap;
    }
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
    return rlt__concurrency_release_report(p, st, now, lease, -1, RLT_OUTCOME_IGNORE);
}

int rlt__concurrency_release_report(const rlt_policy *p, void *st, rlt_ns now, int64_t lease,
                                    rlt_ns latency_ns, int outcome)
{
    cc_state *s = st;
    if (lease <= 0) return RLT_ENOENT;
    int64_t found = -1, in_flight = 0;
    /* The controllers use the load only to ask whether half the limit is in use: once the
     * lease is found and that many are counted, the rest of the scan changes nothing. */
    int64_t enough = INT64_MAX;
    if (p->adapt && latency_ns >= 0) {
        int64_t m = adapt_state(p, st)->limit_milli;
        enough = (m > 0 ? m : p->adapt_init * 1000) / 2000 + 1;
    }
    for (int64_t i = 0; i < p->limit; i++) {
        if (s->slots[i].lease == lease) found = i;
        if (live(&s->slots[i], now)) in_flight++;
        if (found >= 0 && (p->adapt ? in_flight >= enough : true)) break;
    }
    if (found < 0) return RLT_ENOENT;
    bool was_live = s->slots[found].expires > now;
    /* Learn first (it may refuse the report: then nothing changes), from live leases only: a
     * lease that timed out already told its story by timing out. */
    if (was_live && p->adapt && latency_ns >= 0) {
        rlt_adapt_policy a = adapt_policy(p);
        rlt_adapt_state t;
        memcpy(&t, adapt_state(p, st), sizeof t);
        int rc = rlt_adapt_update(&a, &t, now, latency_ns, in_flight, (rlt_outcome)outcome);
        if (rc) return rc;
        memcpy(adapt_state(p, st), &t, sizeof t);
    }
    s->slots[found].lease = 0;
    s->slots[found].expires = 0;
    return was_live ? RLT_OK : RLT_ENOENT;
}

bool rlt__concurrency_fresh(const rlt_policy *p, const void *st, rlt_ns now)
{
    const cc_state *s = st;
    for (int64_t i = 0; i < p->limit; i++)
        if (live(&s->slots[i], now)) return false;
    /* what an adaptive limit learned is kept until the key is evicted: dropping it as fresh
     * would start every idle key over at init */
    if (p->adapt) {
        rlt_adapt_state a;
        memcpy(&a, adapt_state(p, st), sizeof a);
        return a.limit_milli == 0 && a.updates == 0 && a.rtt_noload == 0;
    }
    return true;
}

int rlt__concurrency_shift(const rlt_policy *p, void *st, rlt_ns delta)
{
    cc_state *s = st;
    for (int64_t i = 0; i < p->limit; i++)
        if (s->slots[i].lease != 0) s->slots[i].expires = rlt__sat_add(s->slots[i].expires, delta);
    if (p->adapt) {
        rlt_adapt_state *a = adapt_state(p, st), t;
        memcpy(&t, a, sizeof t);
        if (t.probe_at != 0) t.probe_at = rlt__sat_add(t.probe_at, delta);
        memcpy(a, &t, sizeof t);
    }
    return RLT_OK;
}
