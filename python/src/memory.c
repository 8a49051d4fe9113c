/* The in-process store's operations (backend.h): libratelimit's keyed store, on a clock that
 * reads the Unix time minus the store's origin, with idle keys swept now and then; and the
 * fork handlers that keep its locks sound across a fork(). */
#include "backend.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* Clock-driven calls between two sweeps of idle keys, and the entries one sweep examines. */
#define SWEEP_EVERY 4096
#define SWEEP_BUDGET 256

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

/* ---- The operations -------------------------------------------------------------------- */

static int mem_open(StoreObject *s, const pyrlt_store_args *a)
{
    rlt_store_options o = {.max_keys = (size_t)a->max_keys,
                           .max_bytes = (size_t)a->max_bytes,
                           .fail_closed = a->fail_closed != 0,
                           .shards = a->shards};
    int64_t org = 0;
    if (a->origin != Py_None &&
        pyrlt_int(a->origin, "origin_ns", INT64_MIN / 4, INT64_MAX / 4, &org))
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
    s->sweep = a->sweep;
    forks_add(s);
    return 0;
}

static void mem_close(StoreObject *s)
{
    if (s->mem) forks_remove(s);
    rlt_store_close(s->mem);
    s->mem = NULL;
}

static PyObject *mem_stats(StoreObject *s)
{
    rlt_store_stats st;
    rlt_store_stats_get(s->mem, &st);
    return Py_BuildValue("{sKsKsKsKsKsKsK}", "keys", st.keys, "bytes", st.bytes, "evicted_idle",
                         st.evicted_idle, "evicted_forced", st.evicted_forced, "refused_full",
                         st.refused_full, "allowed", st.allowed, "denied", st.denied);
}

/* A memory store's policy name: the canonical text when it fits, else its hash, so limiters
 * with the same policy share state as they do in Redis and in a ratelimitd. */
static int mem_prepare(StoreObject *s, LimiterObject *lim)
{
    for (int i = 0; i < lim->n; i++) {
        char name[RLT_NAME_MAX + 1];
        size_t tl = strlen(lim->text[i]);
        rlt_policy p = lim->pol[i];
        rlt_policy_set_origin(&p, s->origin);
        if (tl <= RLT_NAME_MAX)
            memcpy(name, lim->text[i], tl + 1);
        else
            snprintf(name, sizeof name, "#%016llx",
                     (unsigned long long)rlt_hash_fnv1a(lim->text[i], tl));
        int rc = rlt_store_set_policy(s->mem, name, &p, RLT_CHANGE_KEEP, &lim->ids[i]);
        if (rc) {
            pyrlt_raise(rc, lim->text[i]);
            return -1;
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

static int mem_decide(StoreObject *s, const pyrlt_check *c, rlt_ns now, rlt_decision *d)
{
    int rc;
    now = mem_now(s, now);
    Py_BEGIN_ALLOW_THREADS rc =
        rlt_store_decide(s->mem, c->lim->ids[c->pidx], c->k, c->kl, now, c->cost, d);
    Py_END_ALLOW_THREADS return rc;
}

static int mem_multi(StoreObject *s, const pyrlt_check *c, size_t n, rlt_ns now, rlt_decision *d,
                     int *refused)
{
    int rc;
    rlt_check m[64];
    for (size_t i = 0; i < n; i++)
        m[i] = (rlt_check){c[i].lim->ids[c[i].pidx], c[i].k, c[i].kl, c[i].cost};
    now = mem_now(s, now);
    Py_BEGIN_ALLOW_THREADS rc = rlt_store_decide_multi(s->mem, m, n, now, d, refused);
    Py_END_ALLOW_THREADS return rc;
}

static int mem_reset(StoreObject *s, const pyrlt_check *c)
{
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = rlt_store_reset(s->mem, c->lim->ids[c->pidx], c->k, c->kl);
    Py_END_ALLOW_THREADS return rc;
}

static int mem_release(StoreObject *s, const pyrlt_check *c, rlt_ns now, int64_t lease)
{
    int rc;
    now = mem_now(s, now);
    Py_BEGIN_ALLOW_THREADS rc =
        rlt_store_release(s->mem, c->lim->ids[c->pidx], c->k, c->kl, now, lease);
    Py_END_ALLOW_THREADS return rc;
}

static int mem_reserve(StoreObject *s, const pyrlt_check *c, rlt_ns now, rlt_ns timeout,
                       rlt_decision *d, uint64_t *id)
{
    int rc;
    now = mem_now(s, now);
    Py_BEGIN_ALLOW_THREADS rc =
        rlt_store_reserve(s->mem, c->lim->ids[c->pidx], c->k, c->kl, now, c->cost, timeout, d, id);
    Py_END_ALLOW_THREADS return rc;
}

static int mem_settle(StoreObject *s, const pyrlt_check *c, rlt_ns now, uint64_t id,
                      rlt_decision *d)
{
    int rc;
    now = mem_now(s, now);
    Py_BEGIN_ALLOW_THREADS rc =
        rlt_store_settle(s->mem, c->lim->ids[c->pidx], c->k, c->kl, now, id, c->cost, d);
    Py_END_ALLOW_THREADS return rc;
}

static int mem_reserve_limits(StoreObject *s, const pyrlt_check *c, const rlt_weights *w, size_t n,
                              const rlt_usage *est, rlt_ns now, rlt_ns timeout,
                              rlt_decision *combined, rlt_decision *each, int *refused,
                              uint64_t *id)
{
    rlt_limit l[RLT_BUDGET_LIMITS];
    for (size_t i = 0; i < n; i++)
        l[i] = (rlt_limit){c[i].lim->ids[c[i].pidx], c[i].k, c[i].kl, w[i]};
    int rc;
    now = mem_now(s, now);
    Py_BEGIN_ALLOW_THREADS rc =
        rlt_store_reserve_limits(s->mem, 0, l, n, est, now, timeout, combined, each, refused, id);
    Py_END_ALLOW_THREADS return rc;
}

static int mem_settle_limits(StoreObject *s, const pyrlt_check *c, size_t n, uint64_t id,
                             const rlt_usage *u, bool final, rlt_ns now, rlt_decision *combined,
                             rlt_decision *each, int64_t *charged)
{
    rlt_check k[RLT_BUDGET_LIMITS];
    for (size_t i = 0; i < n; i++)
        k[i] = (rlt_check){c[i].lim->ids[c[i].pidx], c[i].k, c[i].kl, 0};
    int rc;
    now = mem_now(s, now);
    Py_BEGIN_ALLOW_THREADS rc =
        rlt_store_settle_limits(s->mem, id, k, n, u, final, now, combined, each, charged);
    Py_END_ALLOW_THREADS return rc;
}

const pyrlt_backend_ops pyrlt_memory_ops = {
    .name = "memory",
    .kind = PYRLT_MEMORY,
    .open = mem_open,
    .close = mem_close,
    .stats = mem_stats,
    .prepare = mem_prepare,
    .decide = mem_decide,
    .multi = mem_multi,
    .reset = mem_reset,
    .release = mem_release,
    .reserve = mem_reserve,
    .settle = mem_settle,
    .reserve_limits = mem_reserve_limits,
    .settle_limits = mem_settle_limits,
};
