/* ratelimitd's Redis backend (backend.h): with `redis.address` set, the seam hands every
 * decision to libratelimit_redis (include/ratelimit/redis.h), so a fleet of daemons pointed at
 * one Redis (or Redis Cluster) enforces one limit.  One rlt_redis handle per thread (handles
 * are not thread-safe), opened lazily on the thread's first decision; each thread publishes
 * its handle's counters (redis_stats.c) so INFO and /metrics can sum them.  Failure is a
 * decision: when Redis cannot answer within the timeout, the policy's fail mode (open: allow,
 * closed: deny) answers, the library's breaker short-circuits while Redis is down, and every
 * such decision is counted.  `fail: local` (fallback.h) asks the library for a fail-closed
 * answer and replaces it with a decision on the fallback store at the node's share of the
 * limit; see "the local fallback" below.  The config's checks are redis_check.c's. */
#include "server/backend/backend.h"

#include "server/backend/redis_check.h"

#include <stdio.h>

#ifdef RLT_SERVER_REDIS
#include "redis/quota.h"
#include "server/backend/fallback.h"
#include "server/backend/redis_stats.h"
#include "server/backend/redis_types.h"
#include "server/base/log.h"
#include "server/base/mem.h"

#include <stdlib.h>
#include <string.h>

static uint64_t next_gen = 1;
/* Per-thread state, not scratch (tests/docs/thread_state.sh): each worker's own Redis
 * connection (a tctx, on the backend's list and freed with it), found again without a lock;
 * 16 bytes a thread. */
static __thread struct {
    uint64_t gen;
    tctx *t;
} tl;

static tctx *thread_ctx(redis_be *b)
{
    if (tl.gen == b->gen && tl.t != NULL) return tl.t;
    tctx *t = calloc(1, sizeof *t);
    if (t == NULL) return NULL;
    pthread_mutex_init(&t->nodes_mu, NULL);
    if (rlt_redis_open(&t->r, &b->opt) != RLT_OK) {
        free(t);
        return NULL;
    }
    pthread_mutex_lock(&b->mu);
    t->next = b->threads;
    b->threads = t;
    pthread_mutex_unlock(&b->mu);
    tl.gen = b->gen;
    tl.t = t;
    return t;
}

/* Per policy id: the fail mode (RLT__FAIL_*) in the low bits, LEASE_BIT for `lease: true`. */
#define LEASE_BIT 0x10
/* In fail_flags' answer (never passed to the library): fail: local. */
#define LOCAL_FLAG 0x100u

static void set_fail(tctx *t, int id, int fail, bool lease)
{
    if (id >= 0 && (size_t)id < t->nfail)
        t->fail[id] = (unsigned char)(fail | (lease ? LEASE_BIT : 0));
}

/* Rebuilds the per-config caches when the config changed (a reload replaces named policies
 * in the store before it publishes the new config, so a policy read after the config pointer
 * is never older than that config). */
static int refresh(tctx *t, const rlt__config *c, uint64_t pgen)
{
    /* A reload swaps the config; a reload, its restore or a reused inline slot can give a
     * policy id another policy: either way the cached policies are stale. */
    if (t->cfg == c && t->pgen == pgen) return RLT_OK;
    t->pgen = pgen;
    if (t->pol != NULL) memset(t->pol, 0, t->npol * sizeof *t->pol);
    size_t need = 0;
    for (size_t i = 0; i < c->nnamed; i++)
        if (c->named[i].policy_id >= 0 && (size_t)c->named[i].policy_id + 1 > need)
            need = (size_t)c->named[i].policy_id + 1;
    for (size_t i = 0; i < c->nrules; i++)
        if (c->rules[i].policy_id >= 0 && (size_t)c->rules[i].policy_id + 1 > need)
            need = (size_t)c->rules[i].policy_id + 1;
    if (need > t->nfail) {
        unsigned char *f = realloc(t->fail, need);
        if (f == NULL) return RLT_ENOMEM;
        t->fail = f;
        t->nfail = need;
    }
    if (t->nfail > 0) memset(t->fail, RLT__FAIL_DEFAULT, t->nfail);
    for (size_t i = 0; i < c->nnamed; i++)
        set_fail(t, c->named[i].policy_id, c->named[i].fail, c->named[i].lease);
    for (size_t i = 0; i < c->nrules; i++)
        set_fail(t, c->rules[i].policy_id, c->rules[i].fail, c->rules[i].lease);
    t->cfg = c;
    return RLT_OK;
}

static unsigned fail_flags(const tctx *t, const rlt__config *c, int id)
{
    int v = id >= 0 && (size_t)id < t->nfail ? t->fail[id] : RLT__FAIL_DEFAULT;
    int f = v & ~LEASE_BIT;
    if (f == RLT__FAIL_DEFAULT)
        f = c->set.redis.fail_local  ? RLT__FAIL_LOCAL
            : c->set.redis.fail_open ? RLT__FAIL_OPEN
                                     : RLT__FAIL_CLOSED;
    return (f == RLT__FAIL_OPEN ? RLT_REDIS_FAIL_OPEN : 0) | (v & LEASE_BIT ? RLT_REDIS_LEASE : 0) |
           (f == RLT__FAIL_LOCAL ? LOCAL_FLAG : 0);
}

/* Policy `id` (cached per thread).  Returns RLT_OK and *out, RLT_ENOENT, RLT_ENOMEM, or the
 * policy check's RLT_EINVAL / RLT_ERANGE when Redis cannot run it. */
static int get_policy(tctx *t, rlt__registry *reg, int id, const rlt_policy **out)
{
    if (id < 0) return RLT_ENOENT;
    if ((size_t)id >= t->npol) {
        size_t cap = t->npol ? t->npol : 64;
        while (cap <= (size_t)id)
            cap *= 2;
        pcache *n = realloc(t->pol, cap * sizeof *n);
        if (n == NULL) return RLT_ENOMEM;
        memset(n + t->npol, 0, (cap - t->npol) * sizeof *n);
        t->pol = n;
        t->npol = cap;
    }
    pcache *pc = &t->pol[id];
    if (!pc->have) {
        int st = rlt__registry_policy(reg, id, &pc->p);
        if (st != RLT_OK) return st;
        pc->check = rlt_redis_policy_check(&pc->p);
        pc->have = true;
    }
    *out = &pc->p;
    return pc->check;
}

/* The calling thread's context with its caches current, and the config they are for. */
static tctx *enter(redis_be *b, const rlt__config **c, int *st)
{
    tctx *t = thread_ctx(b);
    uint64_t pgen = rlt__registry_gen(b->reg);
    *c = rlt__registry_config(b->reg);
    *st = t == NULL ? RLT_ENOMEM : refresh(t, *c, pgen);
    return t;
}

/* enter(), then policy `id` (get_policy): the context with *c and *p, or NULL with *st why
 * not. */
static tctx *enter_policy(redis_be *b, int id, const rlt__config **c, const rlt_policy **p, int *st)
{
    tctx *t = enter(b, c, st);
    *p = NULL;
    if (*st == RLT_OK) *st = get_policy(t, b->reg, id, p);
    return *st == RLT_OK ? t : NULL;
}

/* A Redis failure has already been turned into the fail-mode decision by the library. */
static int decided(int st)
{
    return st == RLT_EBACKEND || st == RLT_ETIMEDOUT ? RLT_OK : st;
}

/* ---- the local fallback (fail: local) ---------------------------------------------------
 * A policy with fail: local is sent to Redis as fail-closed.  When the library answers
 * without Redis (RLT_EBACKEND / RLT_ETIMEDOUT, a failed call or an open breaker), its denial
 * is replaced by a decision on the fallback store under the node's share of the policy
 * (fallback.c), keyed the same, at the daemon's clock; the library counted it as fail-closed,
 * INFO and /metrics move it to fail_local.  When a share cannot be had (a concurrency policy,
 * an inline policy too small to divide, the fallback store full or out of memory) the
 * fail-closed denial stands: the fallback never admits what the fleet's limit would not.
 * The first Redis answer after that goes back to Redis; the local counts are not carried
 * into Redis (they expire with the fallback store's idle keys).  The daemon logs once when it
 * enters local fallback and once when Redis answers again (in_local: with several worker
 * threads, the line of one thread's recovery may be followed by another thread's still-open
 * breaker entering again, at most once per thread and outage). */

static void local_enter(redis_be *b, const rlt__config *c, int why)
{
    if (__atomic_exchange_n(&b->in_local, 1, __ATOMIC_RELAXED) != 0) return;
    __atomic_fetch_add(&b->local_entered, 1, __ATOMIC_RELAXED);
    rlt__log(RLT__LOG_WARN,
             "redis unreachable (%s): fail: local policies decide on this node's store at "
             "1/%u of each limit until Redis answers",
             rlt_strerror(why), rlt__backend_redis_fleet(c));
}

/* Redis answered a call (not a lease held locally): leave local fallback if in it. */
static void local_leave(redis_be *b)
{
    if (__atomic_load_n(&b->in_local, __ATOMIC_RELAXED) == 0 ||
        __atomic_exchange_n(&b->in_local, 0, __ATOMIC_RELAXED) == 0)
        return;
    rlt__log(RLT__LOG_NOTICE, "redis answers again: fail: local policies decide in Redis "
                              "(the local counts are not carried into it)");
}

/* The fallback store's id of policy `id`'s share (cached with the policy).  RLT_OK or why
 * there is none. */
static int local_id(redis_be *b, tctx *t, const rlt__config *c, int id, int *lid)
{
    if (id < 0 || (size_t)id >= t->npol || !t->pol[id].have) return RLT_ENOENT;
    pcache *pc = &t->pol[id];
    if (!pc->lhave) {
        pc->lcheck = rlt__fallback_policy(b->fb, id, &pc->p, rlt__backend_redis_fleet(c), &pc->lid);
        pc->lhave = true;
    }
    *lid = pc->lid;
    return pc->lcheck;
}

/* After the library answered `st` with *d for policy `id` under `flags`: a Redis answer
 * leaves local fallback; a fail-mode answer of a fail: local policy becomes a local decision
 * when one can be made.  Returns st. */
static int local_after(redis_be *b, tctx *t, const rlt__config *c, unsigned flags, int id,
                       const void *key, size_t klen, rlt_ns now, int64_t cost, int st,
                       rlt_decision *d)
{
    if (st == RLT_OK && !(flags & RLT_REDIS_LEASE)) local_leave(b);
    if ((st != RLT_EBACKEND && st != RLT_ETIMEDOUT) || !(flags & LOCAL_FLAG)) return st;
    int lid;
    rlt_decision ld;
    if (local_id(b, t, c, id, &lid) != RLT_OK ||
        rlt_store_decide(rlt__fallback_store(b->fb), lid, key, klen, now, cost, &ld) != RLT_OK)
        return st;
    *d = ld;
    t->fail_local++;
    local_enter(b, c, st);
    return st;
}

static int redis_decide(rlt__backend *be, int policy_id, const void *key, size_t klen, rlt_ns now,
                        int64_t cost, rlt_decision *d)
{
    /* Redis's clock decides; `now` is the local fallback's */
    redis_be *b = (redis_be *)be;
    const rlt__config *c;
    const rlt_policy *p;
    int st;
    tctx *t = enter_policy(b, policy_id, &c, &p, &st);
    if (st != RLT_OK) {
        memset(d, 0, sizeof *d);
        return st;
    }
    unsigned f = fail_flags(t, c, policy_id);
    st = rlt_redis_decide(t->r, p, f & ~LOCAL_FLAG, key, klen, 0, cost, d);
    st = local_after(b, t, c, f, policy_id, key, klen, now, cost, st, d);
    rlt__backend_redis_publish(t);
    return decided(st);
}

static void redis_decide_batch(rlt__backend *be, const int *policy, const rlt_key *keys, size_t n,
                               rlt_ns now, const int64_t *costs, rlt_decision *out, int *status)
{
    enum { CHUNK = 256 };
    redis_be *b = (redis_be *)be;
    const rlt__config *c;
    int st;
    tctx *t = enter(b, &c, &st);
    rlt_redis_check checks[CHUNK];
    size_t idx[CHUNK];
    /* Runs of one fail mode (the library takes one per call), at most CHUNK items each; the
     * runs go in order, so every key sees its requests in the order they came. */
    for (size_t i = 0; i < n;) {
        size_t m = 0;
        unsigned flags = 0;
        for (; i < n && m < CHUNK; i++) {
            const rlt_policy *p = NULL;
            int ps = st == RLT_OK ? get_policy(t, b->reg, policy[i], &p) : st;
            if (ps != RLT_OK) {
                memset(&out[i], 0, sizeof out[i]);
                status[i] = ps;
                continue;
            }
            unsigned f = fail_flags(t, c, policy[i]);
            if ((f & RLT_REDIS_LEASE) && m == 0) {
                /* A lease answers locally most of the time: decided on its own, in order
                 * (a pending run was sent first, below). */
                int ls = rlt_redis_decide(t->r, p, f & ~LOCAL_FLAG, keys[i].key, keys[i].klen, 0,
                                          costs[i], &out[i]);
                status[i] = decided(local_after(b, t, c, f, policy[i], keys[i].key, keys[i].klen,
                                                now, costs[i], ls, &out[i]));
                continue;
            }
            if (m > 0 && (f != flags || (f & RLT_REDIS_LEASE))) break;
            flags = f;
            checks[m] = (rlt_redis_check){
                .policy = p, .key = keys[i].key, .klen = keys[i].klen, .cost = costs[i]};
            idx[m++] = i;
        }
        if (m == 0) continue;
        rlt_decision dd[CHUNK];
        int ds[CHUNK];
        rlt_redis_decide_batch(t->r, checks, m, flags & ~LOCAL_FLAG, 0, dd, ds);
        for (size_t k = 0; k < m; k++) {
            size_t j = idx[k];
            out[j] = dd[k];
            status[j] = decided(local_after(b, t, c, flags, policy[j], keys[j].key, keys[j].klen,
                                            now, costs[j], ds[k], &out[j]));
        }
    }
    if (t != NULL) rlt__backend_redis_publish(t);
}

/* A multi-limit check whose limits all fail local, after Redis failed with `st`: all or
 * nothing on the fallback store under every limit's share, or the fail-closed answer
 * stands. */
static void local_multi(redis_be *b, tctx *t, const rlt__config *c, const rlt_check *checks,
                        size_t n, rlt_ns now, int st, rlt_decision *combined, int *refused)
{
    rlt_check lc[64];
    for (size_t i = 0; i < n; i++) {
        lc[i] = checks[i];
        if (local_id(b, t, c, checks[i].policy, &lc[i].policy) != RLT_OK) return;
    }
    rlt_decision d;
    int r = -1;
    if (rlt_store_decide_multi(rlt__fallback_store(b->fb), lc, n, now, &d, &r) != RLT_OK) return;
    *combined = d;
    if (refused != NULL) *refused = r;
    t->fail_local++;
    local_enter(b, c, st);
}

static int redis_decide_multi(rlt__backend *be, const rlt_check *checks, size_t n, rlt_ns now,
                              rlt_decision *combined, int *refused)
{
    enum { MAX = 64 };
    redis_be *b = (redis_be *)be;
    memset(combined, 0, sizeof *combined);
    if (refused != NULL) *refused = -1;
    if (n == 0 || n > MAX) return RLT_EINVAL;
    const rlt__config *c;
    int st;
    tctx *t = enter(b, &c, &st);
    if (st != RLT_OK) return st;
    rlt_redis_check rc[MAX];
    unsigned flags = RLT_REDIS_FAIL_OPEN; /* open only when every limit fails open */
    bool local = true;                    /* local only when every limit fails local */
    for (size_t i = 0; i < n; i++) {
        const rlt_policy *p;
        st = get_policy(t, b->reg, checks[i].policy, &p);
        if (st != RLT_OK) return st;
        if (p->algo == RLT_CONCURRENCY) return RLT_EINVAL;
        rc[i] = (rlt_redis_check){
            .policy = p, .key = checks[i].key, .klen = checks[i].klen, .cost = checks[i].cost};
        unsigned f = fail_flags(t, c, checks[i].policy);
        if (!(f & RLT_REDIS_FAIL_OPEN)) flags = 0;
        if (!(f & LOCAL_FLAG)) local = false;
    }
    st = rlt_redis_decide_multi(t->r, rc, n, flags, 0, combined, refused);
    if (st == RLT_OK) local_leave(b);
    if (local && (st == RLT_EBACKEND || st == RLT_ETIMEDOUT))
        local_multi(b, t, c, checks, n, now, st, combined, refused);
    if (st == RLT_EINVAL && b->opt.cluster && n > 1) {
        /* On a cluster the keys of one script must share a hash slot.  Without a common hash
         * tag the limits are decided one at a time in order, stopping at the first that
         * denies: not all-or-nothing (the limits before it stay charged: this errs towards
         * admitting less, never more). */
        __atomic_fetch_add(&b->multi_split, 1, __ATOMIC_RELAXED);
        st = RLT_OK;
        for (size_t i = 0; i < n && st == RLT_OK; i++) {
            rlt_decision x;
            unsigned f = fail_flags(t, c, checks[i].policy);
            st = rlt_redis_decide(t->r, rc[i].policy, f & ~LOCAL_FLAG, rc[i].key, rc[i].klen, 0,
                                  rc[i].cost, &x);
            st = decided(local_after(b, t, c, f, checks[i].policy, rc[i].key, rc[i].klen, now,
                                     rc[i].cost, st, &x));
            if (st != RLT_OK) break;
            rlt_decision_combine(combined, &x, i == 0);
            if (!x.allowed) {
                if (refused != NULL) *refused = (int)i;
                break;
            }
        }
    }
    rlt__backend_redis_publish(t);
    return decided(st);
}

static int redis_reset(rlt__backend *be, int policy_id, const void *key, size_t klen)
{
    redis_be *b = (redis_be *)be;
    const rlt__config *c;
    const rlt_policy *p;
    int st;
    tctx *t = enter_policy(b, policy_id, &c, &p, &st);
    if (st != RLT_OK) return st;
    st = rlt_redis_reset(t->r, p, key, klen);
    int lid;
    if (local_id(b, t, c, policy_id, &lid) == RLT_OK) /* and its local share, if it has one */
        (void)rlt_store_reset(rlt__fallback_store(b->fb), lid, key, klen);
    rlt__backend_redis_publish(t);
    return st; /* a reset that Redis did not take is an error for the client to see */
}

static int redis_release(rlt__backend *be, int policy_id, const void *key, size_t klen, rlt_ns now,
                         int64_t lease, rlt_ns latency_ns, int outcome)
{
    (void)now;
    (void)latency_ns; /* Redis mode refuses adaptive policies: nothing learns from a report */
    (void)outcome;
    redis_be *b = (redis_be *)be;
    const rlt__config *c;
    const rlt_policy *p;
    int st;
    tctx *t = enter_policy(b, policy_id, &c, &p, &st);
    if (st != RLT_OK) return st;
    st = rlt_redis_release(t->r, p, fail_flags(t, c, policy_id), key, klen, 0, lease);
    rlt__backend_redis_publish(t);
    if (st == RLT_EBACKEND || st == RLT_ETIMEDOUT) {
        /* Not released now; Redis reclaims the slot after the policy's timeout. */
        __atomic_fetch_add(&b->release_lost, 1, __ATOMIC_RELAXED);
        return RLT_ENOENT;
    }
    return st;
}

/* Charge after the response in Redis (rlt_redis_reserve / rlt_redis_settle): the reservation
 * is a Redis key beside the limit's, so any daemon of the fleet can settle it.  Redis's clock
 * decides; `now` is the local fallback's.  A reserve without Redis is the policy's fail mode
 * (fail: local decides on the fallback store) and makes no reservation; a settle without
 * Redis is RLT_EBACKEND for the client to see (the reservation expires charged as
 * estimated if it is never settled). */
static int redis_reserve(rlt__backend *be, uint64_t holder, int policy_id, const void *key,
                         size_t klen, rlt_ns now, int64_t estimate, rlt_ns timeout, rlt_decision *d,
                         uint64_t *reservation)
{
    (void)holder; /* Redis keeps a reservation in the key's own state: no shared table */
    redis_be *b = (redis_be *)be;
    const rlt__config *c;
    const rlt_policy *p;
    int st;
    *reservation = 0;
    memset(d, 0, sizeof *d);
    tctx *t = enter_policy(b, policy_id, &c, &p, &st);
    if (st != RLT_OK) return st;
    unsigned f = fail_flags(t, c, policy_id) & ~RLT_REDIS_LEASE;
    st = rlt_redis_reserve(t->r, p, f & ~LOCAL_FLAG, key, klen, 0, estimate, timeout, d,
                           reservation);
    st = local_after(b, t, c, f, policy_id, key, klen, now, estimate, st, d);
    rlt__backend_redis_publish(t);
    return decided(st);
}

static int redis_settle(rlt__backend *be, int policy_id, const void *key, size_t klen, rlt_ns now,
                        uint64_t reservation, int64_t real_cost, rlt_decision *d)
{
    (void)now;
    redis_be *b = (redis_be *)be;
    const rlt__config *c;
    const rlt_policy *p;
    int st;
    memset(d, 0, sizeof *d);
    tctx *t = enter_policy(b, policy_id, &c, &p, &st);
    if (st != RLT_OK) return st;
    st = rlt_redis_settle(t->r, p, 0, key, klen, 0, reservation, real_cost, d);
    if (st == RLT_OK) local_leave(b);
    rlt__backend_redis_publish(t);
    return st;
}

/* One reservation over several limits (rlt_redis_reserve_limits / _settle_limits): kept in
 * Redis beside the first limit's key, so any daemon of the fleet settles it.  Without Redis a
 * reserve is the fail mode of its limits (open only when every one fails open; a limit that
 * fails local counts as closed: no local reservation to settle later) and makes no
 * reservation; a settle is RLT_EBACKEND for the client to see. */
static int redis_reserve_limits(rlt__backend *be, uint64_t holder, const rlt_limit *limits,
                                size_t n, const rlt_usage *estimate, rlt_ns now, rlt_ns timeout,
                                rlt_decision *combined, rlt_decision *each, int *refused,
                                uint64_t *reservation)
{
    (void)holder, (void)now;
    redis_be *b = (redis_be *)be;
    *reservation = 0;
    memset(combined, 0, sizeof *combined);
    if (n == 0 || n > RLT_BUDGET_LIMITS) return RLT_EINVAL;
    const rlt__config *c;
    int st;
    tctx *t = enter(b, &c, &st);
    if (st != RLT_OK) return st;
    rlt_redis_limit rl[RLT_BUDGET_LIMITS];
    unsigned flags = RLT_REDIS_FAIL_OPEN;
    for (size_t i = 0; i < n; i++) {
        const rlt_policy *p;
        if ((st = get_policy(t, b->reg, limits[i].policy, &p)) != RLT_OK) return st;
        rl[i] = (rlt_redis_limit){p, limits[i].key, limits[i].klen, limits[i].weights};
        unsigned f = fail_flags(t, c, limits[i].policy);
        if (!(f & RLT_REDIS_FAIL_OPEN) || (f & LOCAL_FLAG)) flags = 0;
    }
    st = rlt_redis_reserve_limits(t->r, rl, n, flags, estimate, 0, timeout, combined, each, refused,
                                  reservation);
    if (st == RLT_OK) local_leave(b);
    rlt__backend_redis_publish(t);
    return decided(st);
}

static int redis_settle_limits(rlt__backend *be, uint64_t reservation, const rlt_check *keys,
                               size_t n, const rlt_usage *usage, bool final, rlt_ns now,
                               rlt_decision *combined, rlt_decision *each, int64_t *charged)
{
    (void)now;
    redis_be *b = (redis_be *)be;
    memset(combined, 0, sizeof *combined);
    if (n == 0 || n > RLT_BUDGET_LIMITS) return RLT_EINVAL;
    const rlt__config *c;
    int st;
    tctx *t = enter(b, &c, &st);
    if (st != RLT_OK) return st;
    rlt_redis_check rc[RLT_BUDGET_LIMITS];
    for (size_t i = 0; i < n; i++) {
        const rlt_policy *p;
        if ((st = get_policy(t, b->reg, keys[i].policy, &p)) != RLT_OK) return st;
        rc[i] = (rlt_redis_check){p, keys[i].key, keys[i].klen, 0};
    }
    st = rlt_redis_settle_limits(t->r, reservation, rc, n, 0, usage, final, 0, combined, each,
                                 charged);
    if (st == RLT_OK) local_leave(b);
    rlt__backend_redis_publish(t);
    return st;
}

_Static_assert(RLT__QUOTA_X_EXPECT == RLT__REDIS_QUOTA_EXPECT &&
                   RLT__QUOTA_X_GAP == RLT__REDIS_QUOTA_GAP,
               "backend.h's exchange flags are quota.h's");

/* RLQS claims (src/redis/quota.h): one script call per bucket on this thread's handle. */
static void redis_quota_exchange(rlt__backend *be, uint64_t server, rlt__quota_exchange *x,
                                 size_t n)
{
    redis_be *b = (redis_be *)be;
    const rlt__config *c;
    int st;
    tctx *t = enter(b, &c, &st);
    for (size_t i = 0; i < n; i++) {
        rlt__redis_quota q = {.key = x[i].key,
                              .klen = x[i].klen,
                              .demand = x[i].demand,
                              .held_q = x[i].held_q,
                              .held_b = x[i].held_b,
                              .cap_q = x[i].cap_q,
                              .cap_b = x[i].cap_b,
                              .ttl = x[i].ttl,
                              .flags = x[i].flags};
        x[i].status = t == NULL ? RLT_ENOMEM : rlt__redis_quota_exchange(t->r, server, &q);
        x[i].budget_q = q.budget_q;
        x[i].budget_b = q.budget_b;
        x[i].claim_q = q.claim_q;
        x[i].claim_b = q.claim_b;
        x[i].servers = q.servers;
    }
    if (t != NULL) rlt__backend_redis_publish(t);
}

static void redis_close(rlt__backend *be)
{
    redis_be *b = (redis_be *)be;
    while (b->threads != NULL) {
        tctx *t = b->threads;
        b->threads = t->next;
        rlt_redis_close(t->r);
        pthread_mutex_destroy(&t->nodes_mu);
        free(t->pol);
        free(t->fail);
        free(t);
    }
    pthread_mutex_destroy(&b->mu);
    rlt__fallback_close(b->fb);
    free(b);
}

static const rlt__backend_ops redis_ops = {
    .name = "redis",
    .daemon_clock = false,
    .decide = redis_decide,
    .decide_batch = redis_decide_batch,
    .decide_multi = redis_decide_multi,
    .reset = redis_reset,
    .release = redis_release,
    .reserve = redis_reserve,
    .settle = redis_settle,
    .reserve_limits = redis_reserve_limits,
    .settle_limits = redis_settle_limits,
    .quota_exchange = redis_quota_exchange,
    .info = rlt__backend_redis_info,
    .prometheus = rlt__backend_redis_prometheus,
    .lease_units = rlt__backend_redis_lease_units,
    .close = redis_close,
};

int rlt__backend_redis_open(rlt__registry *reg, rlt__backend **out, char *err, size_t errlen)
{
    const rlt__config *c = rlt__registry_config(reg);
    int st = rlt__backend_redis_check_config(c, err, errlen);
    if (st != RLT_OK) return st;
    redis_be *b = calloc(1, sizeof *b);
    if (b == NULL) {
        snprintf(err, errlen, "out of memory");
        return RLT_ENOMEM;
    }
    b->base.ops = &redis_ops;
    b->reg = reg;
    rlt__backend_redis_options(&c->set.redis, &b->txt, &b->opt);
    /* The fallback store, bounded like the local backend's: max_keys, and half the store's
     * share of max_memory (in Redis mode the registry's store holds only policies and tier
     * assignments). */
    st = rlt__fallback_open(&b->fb, c->set.max_keys, rlt__mem_store_share(c->set.max_memory) / 2);
    if (st != RLT_OK) {
        snprintf(err, errlen, "cannot open the local fallback store: %s", rlt_strerror(st));
        free(b);
        return st;
    }
    b->gen = __atomic_fetch_add(&next_gen, 1, __ATOMIC_RELAXED);
    pthread_mutex_init(&b->mu, NULL);
    *out = &b->base;
    return RLT_OK;
}

#else /* built without libratelimit_redis: a configured Redis is refused at start */

int rlt__backend_redis_open(rlt__registry *reg, rlt__backend **out, char *err, size_t errlen)
{
    (void)reg;
    *out = NULL;
    snprintf(err, errlen, "%s", rlt__backend_redis_missing);
    return RLT_EINVAL;
}

#endif
