/* The local fallback (fallback.h): a node's share of each limit, and the store that decides
 * under those shares while Redis is unreachable.
 *
 * The share of a policy over F nodes.  The fleet's shares must add up to no more than the
 * shared limit (never mint allowance), so every number is divided and rounded down; a share
 * of 0 is refused at config time rather than rounded up to 1, which would let F nodes admit
 * F where the limit says fewer.
 *   - Rate-based algorithms (token bucket, GCRA, leaky bucket) keep their exact rate: N per
 *     W becomes N/g per W*(F/g) with g = gcd(N, F) (100/1s over 2 nodes: 50/1s; 5/1s over
 *     10 nodes: 1/2s), so no rate is lost to rounding.  The token bucket's and GCRA's burst
 *     B becomes floor(B/F) (>= 1).  The leaky bucket's limit is its queue plus the request
 *     served, Q + 1: that is divided, floor((Q+1)/F) (>= 1), and the queue is one less; the
 *     delay D becomes floor(D/F), at most the new queue.
 *   - Windows (fixed window, sliding log, sliding window counter) keep their window: N
 *     becomes floor(N/F) (>= 1), for window edges that stay where they were.
 *   - Concurrency is not divided: its leases are Redis's (a release must find its lease), so
 *     a concurrency policy with `fail: local` fails closed.
 *
 * The store is the fallback's own, bounded like the local backend's, and policies are
 * registered in it lazily under "fallback.<registry id>", checked against the registered
 * share first so that threads asking for the same share do not replace it again (replacing
 * locks every shard). */
#include "server/backend/fallback.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rlt__fallback {
    rlt_store *store;
    pthread_mutex_t mu; /* one registration at a time: check, then set */
};

static bool rate_based(rlt_algo a)
{
    return a == RLT_TOKEN_BUCKET || a == RLT_GCRA || a == RLT_LEAKY_BUCKET;
}

static int divide_numbers(const rlt_policy *p, unsigned fleet, rlt_policy *out)
{
    if (p == NULL || out == NULL || fleet == 0 || p->scale_ <= 0 || p->algo == RLT_CONCURRENCY)
        return RLT_EINVAL;
    int64_t f = fleet;
    if (!rate_based(p->algo)) {
        if (p->limit / f < 1) return RLT_ERANGE;
        return rlt_policy_init(out, p->algo, p->limit / f, p->period, 0, 0, 0);
    }
    int64_t g = rlt_gcd(p->limit, f), period;
    if (__builtin_mul_overflow(p->period, f / g, &period)) return RLT_ERANGE;
    int64_t n = p->limit / g;
    if (p->algo == RLT_LEAKY_BUCKET) {
        int64_t share = (p->queue + 1) / f; /* queue < 2^62: the +1 cannot overflow */
        if (share < 1) return RLT_ERANGE;
        int64_t q = share - 1, d = p->delay / f;
        return rlt_policy_init(out, p->algo, n, period, 0, q, d > q ? q : d);
    }
    if (p->burst / f < 1) return RLT_ERANGE;
    return rlt_policy_init(out, p->algo, n, period, p->burst / f, 0, 0);
}

/* The numbers are divided; the options that do not count allowance (the per-key jitter, the
 * penalty box's lengths) carry over as they are, so a client sees the same kind of answer from
 * its node's share as from Redis. */
int rlt__fallback_divide(const rlt_policy *p, unsigned fleet, rlt_policy *out)
{
    int rc = divide_numbers(p, fleet, out);
    if (rc == RLT_OK && p->jitter > 0) rc = rlt_policy_set_jitter(out, p->jitter);
    if (rc == RLT_OK && p->block > 0)
        rc = rlt_policy_set_block(out, p->block, p->block_factor, p->block_max);
    if (rc == RLT_OK) rc = rlt_policy_copy_calendar(out, p); /* a month stays the local month */
    return rc;
}

void rlt__fallback_explain(const rlt_policy *p, unsigned fleet, char *err, size_t errlen)
{
    char text[256] = "";
    if (p != NULL) rlt_policy_format(p, text, sizeof text);
    rlt_policy q;
    int st = rlt__fallback_divide(p, fleet, &q);
    if (st == RLT_OK) {
        snprintf(err, errlen, "%s over %u nodes divides fine", text, fleet);
    } else if (p != NULL && p->algo == RLT_CONCURRENCY) {
        snprintf(err, errlen,
                 "%s: a concurrency limit has no local share (its leases live in "
                 "Redis)",
                 text);
    } else if (st == RLT_ERANGE && p != NULL) {
        const char *what = p->algo == RLT_LEAKY_BUCKET ? "queue + 1"
                           : rate_based(p->algo)       ? "burst"
                                                       : "limit";
        int64_t v = p->algo == RLT_LEAKY_BUCKET ? p->queue + 1
                    : rate_based(p->algo)       ? p->burst
                                                : p->limit;
        snprintf(err, errlen,
                 "%s over %u nodes: its %s %" PRId64 " divided by %u leaves %" PRId64
                 " per node (raise the limit, lower redis.fleet_size, or use fail: open or "
                 "closed)",
                 text, fleet, what, v, fleet, v / (int64_t)fleet);
    } else {
        snprintf(err, errlen, "%s over %u nodes: %s", text, fleet, rlt_strerror(st));
    }
}

int rlt__fallback_open(rlt__fallback **out, size_t max_keys, size_t max_bytes)
{
    *out = NULL;
    rlt__fallback *f = calloc(1, sizeof *f);
    if (f == NULL) return RLT_ENOMEM;
    rlt_store_options o = {.max_keys = max_keys, .max_bytes = max_bytes};
    int st = rlt_store_open(&f->store, &o);
    if (st != RLT_OK) {
        free(f);
        return st;
    }
    pthread_mutex_init(&f->mu, NULL);
    *out = f;
    return RLT_OK;
}

void rlt__fallback_close(rlt__fallback *f)
{
    if (f == NULL) return;
    rlt_store_close(f->store);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

static bool same_policy(const rlt_policy *a, const rlt_policy *b)
{
    return rlt_policy_equal(a, b); /* a new jitter= or tz= is a new share too */
}

int rlt__fallback_policy(rlt__fallback *f, int id, const rlt_policy *p, unsigned fleet, int *lid)
{
    if (f == NULL || id < 0 || lid == NULL) return RLT_EINVAL;
    rlt_policy share;
    int st = rlt__fallback_divide(p, fleet, &share);
    if (st != RLT_OK) return st;
    char name[RLT_NAME_MAX + 1];
    snprintf(name, sizeof name, "fallback.%d", id);
    pthread_mutex_lock(&f->mu);
    int have = rlt_store_policy_id(f->store, name);
    rlt_policy cur;
    if (have >= 0 && rlt_store_get_policy(f->store, have, &cur) == RLT_OK &&
        same_policy(&cur, &share)) {
        *lid = have;
    } else {
        /* A registry id that now holds another policy (a reload, a reused inline slot):
         * its keys here start fresh rather than carry a count of another limit. */
        st = rlt_store_set_policy(f->store, name, &share, RLT_CHANGE_RESET, lid);
    }
    pthread_mutex_unlock(&f->mu);
    return st;
}

rlt_store *rlt__fallback_store(rlt__fallback *f)
{
    return f->store;
}
