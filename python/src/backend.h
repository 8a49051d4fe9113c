/* libratelimit._native: the stores' table of operations.  One table per store kind, chosen
 * once when a Store is made (store.c, by its kind's name) and called through s->ops ever
 * after: memory.c (the in-process keyed store), redis.c (a pool of libratelimit_redis
 * handles), daemon.c (a pool of RESP connections to a ratelimitd).  The same seam as the
 * server's src/server/backend/backend.h.  The store type (store.c) knows no kind's
 * details; no kind knows another.
 *
 * Every operation is called with the GIL held and releases it itself around the store call or
 * the network I/O.  The decision operations return an rlt status; a backend failure
 * (RLT_EBACKEND, RLT_ETIMEDOUT) fills *d with the fail-mode decision.  `now` PYRLT_NOW_NONE:
 * the store's own clock (memory: monotonic shifted to Unix time - origin; Redis: Redis's; the
 * daemon always reads its own). */
#ifndef PY_RLT_BACKEND_H
#define PY_RLT_BACKEND_H

#include "native.h"
#include "ratelimit/budget.h"

#include <stdbool.h>

/* Store(kind, **options)'s options, parsed once by store.c; strings borrowed for open. */
typedef struct pyrlt_store_args {
    Py_ssize_t max_keys, max_bytes;
    int fail_closed, sweep, cluster, engine, port;
    unsigned shards;
    PyObject *origin; /* Py_None or an int */
    const char *servers, *password, *prefix, *sentinels, *master, *host;
    long long backoff_min, backoff_max;
} pyrlt_store_args;

struct pyrlt_backend_ops {
    const char *name; /* "memory", "redis", "daemon": Store.kind */
    int kind;         /* PYRLT_MEMORY, PYRLT_REDIS, PYRLT_DAEMON */
    /* Sets the store up from a (s->timeout and s->pool.pid are set).  Returns 0, or -1 with a
     * Python exception set; a failed open leaves what it allocated to close. */
    int (*open)(StoreObject *s, const pyrlt_store_args *a);
    /* Frees what open and the calls allocated (not s itself); safe after a failed open. */
    void (*close)(StoreObject *s);
    /* stats() -> dict: a new reference, or NULL with an exception. */
    PyObject *(*stats)(StoreObject *s);
    /* Checks (and registers) a limiter's policies.  Returns 0, or -1 with an exception set. */
    int (*prepare)(StoreObject *s, LimiterObject *lim);
    int (*decide)(StoreObject *s, const pyrlt_check *c, rlt_ns now, rlt_decision *d);
    /* All or nothing over c[0..n), 1 <= n <= 64; *refused the first refusing index or -1. */
    int (*multi)(StoreObject *s, const pyrlt_check *c, size_t n, rlt_ns now, rlt_decision *d,
                 int *refused);
    int (*reset)(StoreObject *s, const pyrlt_check *c);
    int (*release)(StoreObject *s, const pyrlt_check *c, rlt_ns now, int64_t lease);
    int (*reserve)(StoreObject *s, const pyrlt_check *c, rlt_ns now, rlt_ns timeout,
                   rlt_decision *d, uint64_t *id);
    int (*settle)(StoreObject *s, const pyrlt_check *c, rlt_ns now, uint64_t id, rlt_decision *d);
    /* One reservation over n (1..16) limits c[i] (policy 0 of each limiter, cost unused)
     * weighed by w[i] (include/ratelimit/budget.h's rlt_store_reserve_limits: *combined, each,
     * *refused, *id), and its settle (rlt_store_settle_limits: combined, each, charged). */
    int (*reserve_limits)(StoreObject *s, const pyrlt_check *c, const rlt_weights *w, size_t n,
                          const rlt_usage *estimate, rlt_ns now, rlt_ns timeout,
                          rlt_decision *combined, rlt_decision *each, int *refused, uint64_t *id);
    int (*settle_limits)(StoreObject *s, const pyrlt_check *c, size_t n, uint64_t id,
                         const rlt_usage *usage, bool final, rlt_ns now, rlt_decision *combined,
                         rlt_decision *each, int64_t *charged);
};

extern const pyrlt_backend_ops pyrlt_memory_ops, pyrlt_redis_ops, pyrlt_daemon_ops;

#endif
