/* The decision seam: every decision ratelimitd makes goes through these functions, which call
 * the local keyed store, or the Redis backend (backend_redis.c) when `redis.address` is set,
 * and count the outcome per policy.  Shadow mode is applied here, the same for both. */
#include "server/srv.h"

#include <stdio.h>
#include <stdlib.h>

static void count(rlt__srv *s, int id, bool allowed, bool shadowed)
{
    rlt__mslot *m = rlt__mslot_get(&s->metrics);
    size_t i = id >= 0 && id < RLT__METRIC_IDS ? (size_t)id : RLT__METRIC_IDS - 1;
    if (shadowed) rlt__mcount(&m->shadowed[i], 1);
    if (allowed)
        rlt__mcount(&m->allowed[i], 1);
    else
        rlt__mcount(&m->denied[i], 1);
}

int rlt__decide(rlt__srv *s, int policy_id, bool shadow, const void *key, size_t klen, rlt_ns now,
                int64_t cost, rlt_decision *d)
{
    /* With Redis, `now` is not used: the Redis server's clock decides (skewed daemons cannot
     * mint allowance). */
    int st = s->backend != NULL ? rlt__backend_decide(s, policy_id, key, klen, cost, d)
                                : rlt_store_decide(s->store, policy_id, key, klen, now, cost, d);
    if (st != RLT_OK) return st;
    bool shadowed = false;
    if (!d->allowed && cost > 0 && (shadow || rlt__srv_config(s)->set.shadow_mode)) {
        /* Would have been denied: report allowed, charge nothing (the store charged nothing
         * for the denial either). */
        shadowed = true;
        d->allowed = true;
        d->retry_after = 0;
    }
    count(s, policy_id, d->allowed, shadowed);
    return RLT_OK;
}

int rlt__decide_tier(rlt__srv *s, const char *default_tier, const void *key, size_t klen,
                     rlt_ns now, int64_t cost, rlt_decision *d)
{
    int st = s->backend != NULL
                 ? rlt__backend_decide_tier(s, default_tier, key, klen, now, cost, d)
                 : rlt_store_decide_tier(s->store, default_tier, key, klen, now, cost, d);
    if (st != RLT_OK) return st;
    count(s, RLT__METRIC_IDS - 1, d->allowed, false);
    return RLT_OK;
}

int rlt__decide_multi(rlt__srv *s, const rlt_check *checks, size_t n, rlt_ns now,
                      rlt_decision *combined, int *refused)
{
    int st = s->backend != NULL
                 ? rlt__backend_decide_multi(s, checks, n, combined, refused)
                 : rlt_store_decide_multi(s->store, checks, n, now, combined, refused);
    if (st != RLT_OK) return st;
    /* Allowed: every limit was charged.  Denied: only the refusing limit denied; the others
     * were neither charged nor refused. */
    if (combined->allowed) {
        for (size_t i = 0; i < n; i++)
            count(s, checks[i].policy, true, false);
    } else if (refused != NULL && *refused >= 0 && (size_t)*refused < n) {
        count(s, checks[*refused].policy, false, false);
    }
    return RLT_OK;
}

int rlt__decide_reset(rlt__srv *s, int policy_id, const void *key, size_t klen)
{
    if (s->backend != NULL) return rlt__backend_reset(s, policy_id, key, klen);
    return rlt_store_reset(s->store, policy_id, key, klen);
}

int rlt__decide_release(rlt__srv *s, int policy_id, const void *key, size_t klen, rlt_ns now,
                        int64_t lease)
{
    if (s->backend != NULL) return rlt__backend_release(s, policy_id, key, klen, lease);
    return rlt_store_release(s->store, policy_id, key, klen, now, lease);
}

int rlt__decide_peek(rlt__srv *s, int policy_id, const void *key, size_t klen, rlt_ns now,
                     rlt_decision *d)
{
    if (s->backend != NULL) return rlt__backend_decide(s, policy_id, key, klen, 0, d);
    return rlt_store_decide(s->store, policy_id, key, klen, now, 0, d);
}

/* Whether policy `id` cannot decide at all at `now`: its time scale times the clock leaves
 * int64 (GCRA, leaky bucket with a fine rate), whatever the cost. */
static bool rate_out_of_range(rlt__srv *s, int id, rlt_ns now)
{
    rlt_policy p;
    if (rlt_store_get_policy(s->store, id, &p) != RLT_OK) return false;
    void *state = calloc(1, rlt_state_size(&p));
    if (state == NULL) return false;
    rlt_decision d;
    int st = rlt_decide(&p, state, now, 0, &d);
    free(state);
    return st == RLT_ERANGE;
}

const char *rlt__decide_strerror(rlt__srv *s, int id, rlt_ns now, int st, char *buf, size_t cap)
{
    rlt_policy p;
    switch (st) {
    case RLT_EKEYLEN:
        return "invalid key: empty or longer than 512 bytes (tenant prefix included)";
    case RLT_EFULL:
        return "store is full (fail-closed): new key refused";
    case RLT_ENOENT:
        return "unknown policy";
    case RLT_ERANGE:
        if (s->backend == NULL && id >= 0 && rate_out_of_range(s, id, now))
            return "rate (count/period) out of range: the policy's arithmetic overflows on "
                   "the server's clock (use a smaller count or a longer period)";
        return "cost out of range for this policy";
    case RLT_EINVAL:
        if (id >= 0 && rlt_store_get_policy(s->store, id, &p) == RLT_OK &&
            p.algo == RLT_CONCURRENCY)
            return "cost must be 0 or 1 for a concurrency policy (RL.ACQUIRE takes one slot)";
        break;
    default:
        break;
    }
    snprintf(buf, cap, "%s", rlt_strerror(st));
    return buf;
}
