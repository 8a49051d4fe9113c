/* libratelimit._native.Store: the in-process keyed store, a pool of libratelimit_redis handles,
 * or a pool of RESP connections to a ratelimitd, behind one set of calls for the limiter. */
#include "native.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Clock-driven calls between two sweeps of idle keys, and the entries one sweep examines. */
#define SWEEP_EVERY 4096
#define SWEEP_BUDGET 256

/* ---- Connection pools (under the GIL) ------------------------------------------------- */

void *pyrlt_pool_take(pyrlt_pool *p)
{
    pid_t pid = getpid();
    if (p->pid != pid) { /* forked: the pooled connections are the parent's */
        p->n = 0;
        p->pid = pid;
    }
    return p->n ? p->items[--p->n] : NULL;
}

void pyrlt_pool_give(pyrlt_pool *p, void *item, void (*close_fn)(void *))
{
    if (!item) return;
    if (p->pid != getpid()) { /* taken before a fork in another thread: not ours to pool */
        close_fn(item);
        return;
    }
    if (p->n == p->cap) {
        size_t nc = p->cap ? p->cap * 2 : 8;
        void **ni = realloc(p->items, nc * sizeof *ni);
        if (!ni) {
            close_fn(item);
            return;
        }
        p->items = ni;
        p->cap = nc;
    }
    p->items[p->n++] = item;
}

static void close_redis(void *h)
{
    rlt_redis_close(h);
}
static void close_daemon(void *c)
{
    redisFree(c);
}

static void pool_clear(StoreObject *s)
{
    for (size_t i = 0; i < s->pool.n; i++)
        if (s->pool.pid == getpid())
            s->kind == PYRLT_REDIS ? close_redis(s->pool.items[i]) : close_daemon(s->pool.items[i]);
    free(s->pool.items);
    memset(&s->pool, 0, sizeof s->pool);
}

/* A Redis handle for one call: from the pool or newly opened. */
static rlt_redis *redis_take(StoreObject *s, int *rc)
{
    rlt_redis *r = pyrlt_pool_take(&s->pool);
    *rc = RLT_OK;
    if (!r) *rc = rlt_redis_open(&r, &s->ropt);
    return r;
}

/* ---- fork() ----------------------------------------------------------------------------
 * Threads call the in-process store with the GIL released, so a fork() from another thread
 * can copy a shard lock held by a thread the child will not have: the child's first call on
 * that shard would spin for good.  pthread_atfork's handlers take every live store's locks
 * before the fork (waiting for the calls in flight, which need no GIL to finish) and free
 * them after it on both sides (rlt_store_fork_*).  The list of live stores is changed under
 * the GIL and `forks_mu`; the handlers hold `forks_mu` across the fork so that no store joins
 * or leaves between prepare and release.  pthread_atfork rather than os.register_at_fork:
 * it covers every fork() in the process, from Python or from C. */
static pthread_mutex_t forks_mu = PTHREAD_MUTEX_INITIALIZER;
static StoreObject *forks_head; /* newest first */

static void forks_add(StoreObject *s)
{
    pthread_mutex_lock(&forks_mu);
    s->fork_prev = NULL;
    s->fork_next = forks_head;
    if (forks_head) forks_head->fork_prev = s;
    forks_head = s;
    pthread_mutex_unlock(&forks_mu);
}

static void forks_remove(StoreObject *s)
{
    pthread_mutex_lock(&forks_mu);
    if (s->fork_prev)
        s->fork_prev->fork_next = s->fork_next;
    else if (forks_head == s)
        forks_head = s->fork_next;
    if (s->fork_next) s->fork_next->fork_prev = s->fork_prev;
    s->fork_prev = s->fork_next = NULL;
    pthread_mutex_unlock(&forks_mu);
}

/* One order for every fork (the list's), released in the reverse. */
static void forks_prepare(void)
{
    pthread_mutex_lock(&forks_mu);
    for (StoreObject *s = forks_head; s; s = s->fork_next)
        rlt_store_fork_prepare(s->mem);
}

static StoreObject *forks_tail(void)
{
    StoreObject *t = forks_head;
    while (t && t->fork_next)
        t = t->fork_next;
    return t;
}

static void forks_parent(void)
{
    for (StoreObject *s = forks_tail(); s; s = s->fork_prev)
        rlt_store_fork_parent(s->mem);
    pthread_mutex_unlock(&forks_mu);
}

static void forks_child(void)
{
    for (StoreObject *s = forks_tail(); s; s = s->fork_prev)
        rlt_store_fork_child(s->mem);
    pthread_mutex_init(&forks_mu, NULL); /* held by the forking thread: made anew */
}

static int forks_rc;
static void forks_register_once(void)
{
    forks_rc = pthread_atfork(forks_prepare, forks_parent, forks_child);
}

int pyrlt_fork_handlers_register(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, forks_register_once);
    return forks_rc;
}

/* ---- The type ------------------------------------------------------------------------ */

static char *dup_or_null(const char *t)
{
    return t ? strdup(t) : NULL;
}

static int store_init(StoreObject *s, PyObject *args, PyObject *kw)
{
    static char *names[] = {"kind",      "max_keys",       "max_bytes",      "fail_closed",
                            "shards",    "origin_ns",      "sweep",          "servers",
                            "cluster",   "password",       "prefix",         "timeout_ns",
                            "sentinels", "master_name",    "engine",         "host",
                            "port",      "backoff_min_ns", "backoff_max_ns", NULL};
    const char *kind, *servers = NULL, *password = NULL, *prefix = NULL, *sentinels = NULL,
                      *master = NULL, *host = NULL;
    Py_ssize_t max_keys = 0, max_bytes = 0;
    int fail_closed = 0, sweep = 1, cluster = 0, engine = 0, port = 0;
    unsigned shards = 0;
    PyObject *origin = Py_None;
    long long timeout = 0, backoff_min = 0, backoff_max = 0;
    if (s->kind) {
        PyErr_SetString(PyExc_RuntimeError, "Store is already initialised");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|$nnpIOpzpzzLzziziLL", names, &kind, &max_keys,
                                     &max_bytes, &fail_closed, &shards, &origin, &sweep, &servers,
                                     &cluster, &password, &prefix, &timeout, &sentinels, &master,
                                     &engine, &host, &port, &backoff_min, &backoff_max))
        return -1;
    if (max_keys < 0 || max_bytes < 0 || timeout < 0 || backoff_min < 0 || backoff_max < 0) {
        PyErr_SetString(PyExc_ValueError,
                        "max_keys, max_bytes, timeout_ns and backoff_*_ns must be >= 0");
        return -1;
    }
    s->timeout = timeout ? (rlt_ns)timeout : RLT_REDIS_DEFAULT_TIMEOUT;
    s->pool.pid = getpid();
    if (strcmp(kind, "memory") == 0) {
        rlt_store_options o = {.max_keys = (size_t)max_keys,
                               .max_bytes = (size_t)max_bytes,
                               .fail_closed = fail_closed != 0,
                               .shards = shards};
        int64_t org = 0;
        if (origin != Py_None && pyrlt_int(origin, "origin_ns", INT64_MIN / 4, INT64_MAX / 4, &org))
            return -1;
        int rc = rlt_store_open(&s->mem, &o);
        if (rc) return pyrlt_raise(rc, "MemoryStore"), -1;
        /* The clock: the monotonic clock (never steps back) shifted once so that it reads the
         * Unix time minus the origin.  Fixed windows [kW, (k+1)W) then start on the wall
         * clock's whole minutes and hours (with the default origin 0), as limits counts them,
         * and every process of a machine agrees on them; calendar windows see origin + now =
         * Unix time. */
        s->origin = org;
        s->clock_shift = pyrlt_wall_ns() - pyrlt_mono_ns() - org;
        s->sweep = sweep;
        s->kind = PYRLT_MEMORY;
        forks_add(s);
        return 0;
    }
    if (strcmp(kind, "redis") == 0) {
        if (engine < 0 || engine > 2) {
            PyErr_SetString(PyExc_ValueError, "engine must be 0 (auto), 1 (scripts), 2 (module)");
            return -1;
        }
        s->servers = dup_or_null(servers);
        s->password = dup_or_null(password);
        s->prefix = dup_or_null(prefix);
        s->sentinels = dup_or_null(sentinels);
        s->master = dup_or_null(master);
        s->ropt = (rlt_redis_options){.servers = s->servers,
                                      .cluster = cluster != 0,
                                      .password = s->password,
                                      .prefix = s->prefix,
                                      .timeout = s->timeout,
                                      .sentinels = s->sentinels,
                                      .master_name = s->master,
                                      .engine = (rlt_redis_engine)engine,
                                      .backoff_min = (rlt_ns)backoff_min,
                                      .backoff_max = (rlt_ns)backoff_max};
        /* Validate the options now, with the library's own checks: open needs no server. */
        rlt_redis *r = NULL;
        int rc = rlt_redis_open(&r, &s->ropt);
        if (rc) return pyrlt_raise(rc, "RedisStore options"), -1;
        s->kind = PYRLT_REDIS;
        pyrlt_pool_give(&s->pool, r, close_redis);
        return 0;
    }
    if (strcmp(kind, "daemon") == 0) {
        if (!host || !*host || port < 1 || port > 65535) {
            PyErr_SetString(PyExc_ValueError, "DaemonStore needs a host and a port in 1..65535");
            return -1;
        }
        s->host = strdup(host);
        s->password = dup_or_null(password);
        s->port = port;
        s->kind = PYRLT_DAEMON;
        return 0;
    }
    PyErr_Format(PyExc_ValueError, "unknown store kind '%s' (memory, redis, daemon)", kind);
    return -1;
}

static void store_dealloc(StoreObject *s)
{
    pool_clear(s);
    if (s->kind == PYRLT_MEMORY) forks_remove(s);
    rlt_store_close(s->mem);
    free(s->servers);
    free(s->password);
    free(s->prefix);
    free(s->sentinels);
    free(s->master);
    free(s->host);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

/* stats() -> dict: the memory store's counters, or a Redis handle's (summed over the pool). */
static PyObject *store_stats(StoreObject *s, PyObject *unused)
{
    (void)unused;
    if (s->kind == PYRLT_MEMORY) {
        rlt_store_stats st;
        rlt_store_stats_get(s->mem, &st);
        return Py_BuildValue("{sKsKsKsKsKsKsK}", "keys", st.keys, "bytes", st.bytes, "evicted_idle",
                             st.evicted_idle, "evicted_forced", st.evicted_forced, "refused_full",
                             st.refused_full, "allowed", st.allowed, "denied", st.denied);
    }
    if (s->kind == PYRLT_REDIS) {
        rlt_redis_stats t = {0}, st;
        for (size_t i = 0; i < s->pool.n && s->pool.pid == getpid(); i++) {
            rlt_redis_stats_get(s->pool.items[i], &st);
            t.decisions += st.decisions;
            t.round_trips += st.round_trips;
            t.module_calls += st.module_calls;
            t.fail_open += st.fail_open;
            t.fail_closed += st.fail_closed;
            t.errors += st.errors;
        }
        return Py_BuildValue("{sKsKsKsKsKsKsn}", "decisions", t.decisions, "round_trips",
                             t.round_trips, "module_calls", t.module_calls, "fail_open",
                             t.fail_open, "fail_closed", t.fail_closed, "errors", t.errors,
                             "connections", (Py_ssize_t)s->pool.n);
    }
    return Py_BuildValue("{sn}", "connections", (Py_ssize_t)s->pool.n);
}

static PyObject *store_kind(StoreObject *s, void *c)
{
    (void)c;
    return PyUnicode_FromString(s->kind == PYRLT_MEMORY  ? "memory"
                                : s->kind == PYRLT_REDIS ? "redis"
                                                         : "daemon");
}

static PyMethodDef store_methods[] = {
    {"stats", (PyCFunction)store_stats, METH_NOARGS,
     "stats() -> dict\n\nThe store's counters: keys, bytes, evictions, allowed and denied "
     "(in-process); decisions, round trips, module calls, fail-mode answers (Redis)."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef store_getset[] = {
    {"kind", (getter)store_kind, NULL, "'memory', 'redis' or 'daemon'.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject pyrlt_StoreType =
    PYRLT_TYPE("libratelimit._native.Store", StoreObject,
               "Store(kind, **options): where limiter state lives (use MemoryStore, RedisStore, "
               "DaemonStore or a URL).",
               store);

/* ---- Calls ---------------------------------------------------------------------------- */

/* A memory store's policy name: the canonical text when it fits, else its hash, so limiters
 * with the same policy share state as they do in Redis and in a ratelimitd. */
int pyrlt_store_prepare(StoreObject *s, LimiterObject *lim)
{
    for (int i = 0; i < lim->n; i++) {
        int rc = RLT_OK;
        if (s->kind == PYRLT_REDIS) {
            rc = rlt_redis_policy_check(&lim->pol[i]);
            if (rc) {
                PyErr_Format(rc == RLT_ERANGE ? PyExc_OverflowError : PyExc_ValueError,
                             "policy '%s' cannot run in Redis: %s", lim->text[i], rlt_strerror(rc));
                return -1;
            }
        } else if (s->kind == PYRLT_MEMORY) {
            char name[RLT_NAME_MAX + 1];
            size_t tl = strlen(lim->text[i]);
            rlt_policy p = lim->pol[i];
            rlt_policy_set_origin(&p, s->origin);
            if (tl <= RLT_NAME_MAX)
                memcpy(name, lim->text[i], tl + 1);
            else
                snprintf(name, sizeof name, "#%016llx",
                         (unsigned long long)rlt_hash_fnv1a(lim->text[i], tl));
            rc = rlt_store_set_policy(s->mem, name, &p, RLT_CHANGE_KEEP, &lim->ids[i]);
            if (rc) {
                pyrlt_raise(rc, lim->text[i]);
                return -1;
            }
        }
    }
    return 0;
}

/* The clock of a memory-store call, and now and then a sweep of idle keys (only on clock-driven
 * calls: a replay's instants go where its trace says, and a drop would be seen there). */
static rlt_ns mem_now(StoreObject *s, rlt_ns now)
{
    if (now != PYRLT_NOW_NONE) return now;
    now = pyrlt_mono_ns() + s->clock_shift;
    if (s->sweep && ++s->calls >= SWEEP_EVERY) {
        s->calls = 0;
        rlt_store_sweep(s->mem, now, SWEEP_BUDGET);
    }
    return now;
}

static unsigned redis_flags(const pyrlt_check *c, rlt_ns now)
{
    return c->lim->flags | (now != PYRLT_NOW_NONE ? RLT_REDIS_CALLER_TIME : 0);
}

/* Runs `call` on a Redis handle with the GIL released; the handle goes back to the pool. */
#define WITH_REDIS(s, rc, r, call)                                                                 \
    do {                                                                                           \
        rlt_redis *r = redis_take(s, &rc);                                                         \
        if (rc == RLT_OK) {                                                                        \
            Py_BEGIN_ALLOW_THREADS rc = (call);                                                    \
            Py_END_ALLOW_THREADS pyrlt_pool_give(&(s)->pool, r, close_redis);                      \
        }                                                                                          \
    } while (0)

int pyrlt_store_decide(StoreObject *s, const pyrlt_check *c, rlt_ns now, rlt_decision *d)
{
    int rc = RLT_OK;
    const rlt_policy *p = &c->lim->pol[c->pidx];
    switch (s->kind) {
    case PYRLT_MEMORY:
        now = mem_now(s, now);
        Py_BEGIN_ALLOW_THREADS rc =
            rlt_store_decide(s->mem, c->lim->ids[c->pidx], c->k, c->kl, now, c->cost, d);
        Py_END_ALLOW_THREADS return rc;
    case PYRLT_REDIS:
        WITH_REDIS(s, rc, r,
                   rlt_redis_decide(r, p, redis_flags(c, now), c->k, c->kl, now, c->cost, d));
        return rc;
    default:
        return pyrlt_daemon_op(s, 'c', c, 1, 0, 0, 0, d, NULL, NULL);
    }
}

int pyrlt_store_multi(StoreObject *s, const pyrlt_check *c, size_t n, rlt_ns now, rlt_decision *d,
                      int *refused)
{
    int rc = RLT_OK;
    if (n == 0 || n > 64) return RLT_EINVAL;
    if (s->kind == PYRLT_DAEMON) return pyrlt_daemon_op(s, 'm', c, n, 0, 0, 0, d, NULL, refused);
    if (s->kind == PYRLT_MEMORY) {
        rlt_check m[64];
        for (size_t i = 0; i < n; i++)
            m[i] = (rlt_check){c[i].lim->ids[c[i].pidx], c[i].k, c[i].kl, c[i].cost};
        now = mem_now(s, now);
        Py_BEGIN_ALLOW_THREADS rc = rlt_store_decide_multi(s->mem, m, n, now, d, refused);
        Py_END_ALLOW_THREADS return rc;
    }
    rlt_redis_check m[64];
    for (size_t i = 0; i < n; i++)
        m[i] = (rlt_redis_check){&c[i].lim->pol[c[i].pidx], c[i].k, c[i].kl, c[i].cost};
    WITH_REDIS(s, rc, r, rlt_redis_decide_multi(r, m, n, redis_flags(c, now), now, d, refused));
    return rc;
}

int pyrlt_store_reset(StoreObject *s, const pyrlt_check *c)
{
    int rc = RLT_OK;
    switch (s->kind) {
    case PYRLT_MEMORY:
        Py_BEGIN_ALLOW_THREADS rc = rlt_store_reset(s->mem, c->lim->ids[c->pidx], c->k, c->kl);
        Py_END_ALLOW_THREADS return rc;
    case PYRLT_REDIS:
        WITH_REDIS(s, rc, r, rlt_redis_reset(r, &c->lim->pol[c->pidx], c->k, c->kl));
        return rc;
    default:
        return pyrlt_daemon_op(s, 'x', c, 1, 0, 0, 0, NULL, NULL, NULL);
    }
}

int pyrlt_store_release(StoreObject *s, const pyrlt_check *c, rlt_ns now, int64_t lease)
{
    int rc = RLT_OK;
    switch (s->kind) {
    case PYRLT_MEMORY:
        now = mem_now(s, now);
        Py_BEGIN_ALLOW_THREADS rc =
            rlt_store_release(s->mem, c->lim->ids[c->pidx], c->k, c->kl, now, lease);
        Py_END_ALLOW_THREADS return rc;
    case PYRLT_REDIS:
        WITH_REDIS(s, rc, r,
                   rlt_redis_release(r, &c->lim->pol[c->pidx], redis_flags(c, now), c->k, c->kl,
                                     now, lease));
        return rc;
    default:
        return pyrlt_daemon_op(s, 'l', c, 1, 0, 0, lease, NULL, NULL, NULL);
    }
}

int pyrlt_store_reserve(StoreObject *s, const pyrlt_check *c, rlt_ns now, rlt_ns timeout,
                        rlt_decision *d, uint64_t *id)
{
    int rc = RLT_OK;
    switch (s->kind) {
    case PYRLT_MEMORY:
        now = mem_now(s, now);
        Py_BEGIN_ALLOW_THREADS rc = rlt_store_reserve(s->mem, c->lim->ids[c->pidx], c->k, c->kl,
                                                      now, c->cost, timeout, d, id);
        Py_END_ALLOW_THREADS return rc;
    case PYRLT_REDIS:
        WITH_REDIS(s, rc, r,
                   rlt_redis_reserve(r, &c->lim->pol[c->pidx], redis_flags(c, now), c->k, c->kl,
                                     now, c->cost, timeout, d, id));
        return rc;
    default:
        return pyrlt_daemon_op(s, 'r', c, 1, timeout, 0, 0, d, id, NULL);
    }
}

int pyrlt_store_settle(StoreObject *s, const pyrlt_check *c, rlt_ns now, uint64_t id,
                       rlt_decision *d)
{
    int rc = RLT_OK;
    switch (s->kind) {
    case PYRLT_MEMORY:
        now = mem_now(s, now);
        Py_BEGIN_ALLOW_THREADS rc =
            rlt_store_settle(s->mem, c->lim->ids[c->pidx], c->k, c->kl, now, id, c->cost, d);
        Py_END_ALLOW_THREADS return rc;
    case PYRLT_REDIS:
        WITH_REDIS(s, rc, r,
                   rlt_redis_settle(r, &c->lim->pol[c->pidx], redis_flags(c, now), c->k, c->kl, now,
                                    id, c->cost, d));
        return rc;
    default:
        return pyrlt_daemon_op(s, 's', c, 1, 0, id, 0, d, NULL, NULL);
    }
}
