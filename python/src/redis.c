/* The Redis store's operations (backend.h): a pool of libratelimit_redis handles, one taken
 * for each call (under the GIL) and given back after it, the call itself without the GIL. */
#include "backend.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void close_redis(void *h)
{
    rlt_redis_close(h);
}

static char *dup_or_null(const char *t)
{
    return t ? strdup(t) : NULL;
}

static int redis_open(StoreObject *s, const pyrlt_store_args *a)
{
    if (a->engine < 0 || a->engine > 2) {
        PyErr_SetString(PyExc_ValueError, "engine must be 0 (auto), 1 (scripts), 2 (module)");
        return -1;
    }
    s->servers = dup_or_null(a->servers);
    s->password = dup_or_null(a->password);
    s->prefix = dup_or_null(a->prefix);
    s->sentinels = dup_or_null(a->sentinels);
    s->master = dup_or_null(a->master);
    s->ropt = (rlt_redis_options){.servers = s->servers,
                                  .cluster = a->cluster != 0,
                                  .password = s->password,
                                  .prefix = s->prefix,
                                  .timeout = s->timeout,
                                  .sentinels = s->sentinels,
                                  .master_name = s->master,
                                  .engine = (rlt_redis_engine)a->engine,
                                  .backoff_min = (rlt_ns)a->backoff_min,
                                  .backoff_max = (rlt_ns)a->backoff_max};
    /* Validate the options now, with the library's own checks: open needs no server. */
    rlt_redis *r = NULL;
    int rc = rlt_redis_open(&r, &s->ropt);
    if (rc) return pyrlt_raise(rc, "RedisStore options"), -1;
    pyrlt_pool_give(&s->pool, r, close_redis);
    return 0;
}

static void redis_close(StoreObject *s)
{
    pyrlt_pool_clear(&s->pool, close_redis);
    free(s->servers);
    free(s->password);
    free(s->prefix);
    free(s->sentinels);
    free(s->master);
    s->servers = s->password = s->prefix = s->sentinels = s->master = NULL;
}

/* A Redis handle's counters, summed over the pool. */
static PyObject *redis_stats(StoreObject *s)
{
    rlt_redis_stats t = {0}, st;
    for (size_t i = 0; i < s->pool.n && s->pool.pid == pyrlt_self_pid(); i++) {
        rlt_redis_stats_get(s->pool.items[i], &st);
        t.decisions += st.decisions;
        t.round_trips += st.round_trips;
        t.module_calls += st.module_calls;
        t.fail_open += st.fail_open;
        t.fail_closed += st.fail_closed;
        t.errors += st.errors;
    }
    return Py_BuildValue("{sKsKsKsKsKsKsn}", "decisions", t.decisions, "round_trips", t.round_trips,
                         "module_calls", t.module_calls, "fail_open", t.fail_open, "fail_closed",
                         t.fail_closed, "errors", t.errors, "connections", (Py_ssize_t)s->pool.n);
}

static int redis_prepare(StoreObject *s, LimiterObject *lim)
{
    (void)s;
    for (int i = 0; i < lim->n; i++) {
        int rc = rlt_redis_policy_check(&lim->pol[i]);
        if (rc) {
            PyErr_Format(rc == RLT_ERANGE ? PyExc_OverflowError : PyExc_ValueError,
                         "policy '%s' cannot run in Redis: %s", lim->text[i], rlt_strerror(rc));
            return -1;
        }
    }
    return 0;
}

static unsigned redis_flags(const pyrlt_check *c, rlt_ns now)
{
    return c->lim->flags | (now != PYRLT_NOW_NONE ? RLT_REDIS_CALLER_TIME : 0);
}

/* Runs `call` on a handle (from the pool or newly opened) with the GIL released; the handle
 * goes back to the pool. */
#define WITH_REDIS(s, rc, r, call)                                                                 \
    do {                                                                                           \
        rlt_redis *r = pyrlt_pool_take(&(s)->pool);                                                \
        rc = r ? RLT_OK : rlt_redis_open(&r, &(s)->ropt);                                          \
        if (rc == RLT_OK) {                                                                        \
            Py_BEGIN_ALLOW_THREADS rc = (call);                                                    \
            Py_END_ALLOW_THREADS pyrlt_pool_give(&(s)->pool, r, close_redis);                      \
        }                                                                                          \
    } while (0)

static int redis_decide(StoreObject *s, const pyrlt_check *c, rlt_ns now, rlt_decision *d)
{
    int rc;
    WITH_REDIS(s, rc, r,
               rlt_redis_decide(r, &c->lim->pol[c->pidx], redis_flags(c, now), c->k, c->kl, now,
                                c->cost, d));
    return rc;
}

static int redis_multi(StoreObject *s, const pyrlt_check *c, size_t n, rlt_ns now, rlt_decision *d,
                       int *refused)
{
    int rc;
    rlt_redis_check m[64];
    for (size_t i = 0; i < n; i++)
        m[i] = (rlt_redis_check){&c[i].lim->pol[c[i].pidx], c[i].k, c[i].kl, c[i].cost};
    WITH_REDIS(s, rc, r, rlt_redis_decide_multi(r, m, n, redis_flags(c, now), now, d, refused));
    return rc;
}

static int redis_reset(StoreObject *s, const pyrlt_check *c)
{
    int rc;
    WITH_REDIS(s, rc, r, rlt_redis_reset(r, &c->lim->pol[c->pidx], c->k, c->kl));
    return rc;
}

static int redis_release(StoreObject *s, const pyrlt_check *c, rlt_ns now, int64_t lease)
{
    int rc;
    WITH_REDIS(
        s, rc, r,
        rlt_redis_release(r, &c->lim->pol[c->pidx], redis_flags(c, now), c->k, c->kl, now, lease));
    return rc;
}

static int redis_reserve(StoreObject *s, const pyrlt_check *c, rlt_ns now, rlt_ns timeout,
                         rlt_decision *d, uint64_t *id)
{
    int rc;
    WITH_REDIS(s, rc, r,
               rlt_redis_reserve(r, &c->lim->pol[c->pidx], redis_flags(c, now), c->k, c->kl, now,
                                 c->cost, timeout, d, id));
    return rc;
}

static int redis_settle(StoreObject *s, const pyrlt_check *c, rlt_ns now, uint64_t id,
                        rlt_decision *d)
{
    int rc;
    WITH_REDIS(s, rc, r,
               rlt_redis_settle(r, &c->lim->pol[c->pidx], redis_flags(c, now), c->k, c->kl, now, id,
                                c->cost, d));
    return rc;
}

static int redis_reserve_limits(StoreObject *s, const pyrlt_check *c, const rlt_weights *w,
                                size_t n, const rlt_usage *est, rlt_ns now, rlt_ns timeout,
                                rlt_decision *combined, rlt_decision *each, int *refused,
                                uint64_t *id)
{
    rlt_redis_limit l[RLT_BUDGET_LIMITS];
    for (size_t i = 0; i < n; i++)
        l[i] = (rlt_redis_limit){&c[i].lim->pol[c[i].pidx], c[i].k, c[i].kl, w[i]};
    int rc;
    WITH_REDIS(s, rc, r,
               rlt_redis_reserve_limits(r, l, n, redis_flags(c, now), est, now, timeout, combined,
                                        each, refused, id));
    return rc;
}

static int redis_settle_limits(StoreObject *s, const pyrlt_check *c, size_t n, uint64_t id,
                               const rlt_usage *u, bool final, rlt_ns now, rlt_decision *combined,
                               rlt_decision *each, int64_t *charged)
{
    rlt_redis_check k[RLT_BUDGET_LIMITS];
    for (size_t i = 0; i < n; i++)
        k[i] = (rlt_redis_check){&c[i].lim->pol[c[i].pidx], c[i].k, c[i].kl, 0};
    int rc;
    WITH_REDIS(s, rc, r,
               rlt_redis_settle_limits(r, id, k, n, redis_flags(c, now), u, final, now, combined,
                                       each, charged));
    return rc;
}

const pyrlt_backend_ops pyrlt_redis_ops = {
    .name = "redis",
    .kind = PYRLT_REDIS,
    .open = redis_open,
    .close = redis_close,
    .stats = redis_stats,
    .prepare = redis_prepare,
    .decide = redis_decide,
    .multi = redis_multi,
    .reset = redis_reset,
    .release = redis_release,
    .reserve = redis_reserve,
    .settle = redis_settle,
    .reserve_limits = redis_reserve_limits,
    .settle_limits = redis_settle_limits,
};
