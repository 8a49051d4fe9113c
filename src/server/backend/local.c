/* The local backend: decisions in the daemon's own keyed store (rlt_store), at the daemon's
 * clock.  The store is the registry's, the same one that holds the policies. */
#include "server/backend/backend.h"

#include <stdlib.h>

typedef struct local_be {
    rlt__backend base; /* first: the seam's handle */
    rlt_store *store;
} local_be;

static rlt_store *store_of(rlt__backend *b)
{
    return ((local_be *)b)->store;
}

static int local_decide(rlt__backend *b, int policy_id, const void *key, size_t klen, rlt_ns now,
                        int64_t cost, rlt_decision *d)
{
    return rlt_store_decide(store_of(b), policy_id, key, klen, now, cost, d);
}

static int local_decide_class(rlt__backend *b, int policy_id, const void *key, size_t klen,
                              rlt_ns now, int64_t cost, rlt_class c, int reserve_pct,
                              rlt_decision *d)
{
    return rlt_store_decide_class(store_of(b), policy_id, key, klen, now, cost, c, reserve_pct, d);
}

static void local_decide_batch(rlt__backend *b, const int *policy, const rlt_key *keys, size_t n,
                               rlt_ns now, const int64_t *costs, rlt_decision *out, int *status)
{
    /* One store batch per run of one policy: the store keeps items of one key in index order
     * within a batch, and runs are decided in order, so every key sees its requests in the
     * order they came. */
    for (size_t i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && policy[j] == policy[i]; j++)
            ;
        rlt_store_decide_batch(store_of(b), policy[i], &keys[i], j - i, now, &costs[i], &out[i],
                               &status[i]);
    }
}

static int local_decide_multi(rlt__backend *b, const rlt_check *checks, size_t n, rlt_ns now,
                              rlt_decision *combined, int *refused)
{
    return rlt_store_decide_multi(store_of(b), checks, n, now, combined, refused);
}

static int local_reset(rlt__backend *b, int policy_id, const void *key, size_t klen)
{
    return rlt_store_reset(store_of(b), policy_id, key, klen);
}

static int local_release(rlt__backend *b, int policy_id, const void *key, size_t klen, rlt_ns now,
                         int64_t lease, rlt_ns latency_ns, int outcome)
{
    return rlt_store_release_report(store_of(b), policy_id, key, klen, now, lease, latency_ns,
                                    outcome);
}

static int local_reserve(rlt__backend *b, uint64_t holder, int policy_id, const void *key,
                         size_t klen, rlt_ns now, int64_t estimate, rlt_ns timeout, rlt_decision *d,
                         uint64_t *reservation)
{
    return rlt_store_reserve_for(store_of(b), holder, policy_id, key, klen, now, estimate, timeout,
                                 d, reservation);
}

static int local_settle(rlt__backend *b, int policy_id, const void *key, size_t klen, rlt_ns now,
                        uint64_t reservation, int64_t real_cost, rlt_decision *d)
{
    return rlt_store_settle(store_of(b), policy_id, key, klen, now, reservation, real_cost, d);
}

static int local_reserve_limits(rlt__backend *b, uint64_t holder, const rlt_limit *limits,
                                size_t n, const rlt_usage *estimate, rlt_ns now, rlt_ns timeout,
                                rlt_decision *combined, rlt_decision *each, int *refused,
                                uint64_t *reservation)
{
    return rlt_store_reserve_limits(store_of(b), holder, limits, n, estimate, now, timeout,
                                    combined, each, refused, reservation);
}

static int local_settle_limits(rlt__backend *b, uint64_t reservation, const rlt_check *keys,
                               size_t n, const rlt_usage *usage, bool final, rlt_ns now,
                               rlt_decision *combined, rlt_decision *each, int64_t *charged)
{
    return rlt_store_settle_limits(store_of(b), reservation, keys, n, usage, final, now, combined,
                                   each, charged);
}

static void local_nothing(rlt__backend *b, rlt__obuf *out)
{
    (void)b;
    (void)out;
}

static void local_close(rlt__backend *b)
{
    free(b);
}

static const rlt__backend_ops local_ops = {
    .name = "local",
    .daemon_clock = true,
    .decide = local_decide,
    .decide_batch = local_decide_batch,
    .decide_multi = local_decide_multi,
    .decide_class = local_decide_class,
    .reset = local_reset,
    .release = local_release,
    .reserve = local_reserve,
    .settle = local_settle,
    .reserve_limits = local_reserve_limits,
    .settle_limits = local_settle_limits,
    .info = local_nothing,
    .prometheus = local_nothing,
    .close = local_close,
};

int rlt__backend_local_open(rlt__registry *reg, rlt__backend **out)
{
    local_be *b = calloc(1, sizeof *b);
    if (b == NULL) return RLT_ENOMEM;
    b->base.ops = &local_ops;
    b->store = reg->store;
    *out = &b->base;
    return RLT_OK;
}
