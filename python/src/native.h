/* libratelimit._native: the CPython extension's shared declarations (stores, limiter, decision).
 *
 * Threading: every object here is used under the GIL except inside the Py_BEGIN/END_ALLOW_THREADS
 * regions around store and network calls.  Such a region touches only what cannot change while
 * the GIL is released: a limiter's policies are fixed once its __init__ has run (a second
 * __init__ is refused), a Redis or daemon connection is taken out of its store's pool for the
 * call (under the GIL) and put back after it, so no two threads share one connection. */
#ifndef PY_RLT_NATIVE_H
#define PY_RLT_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <hiredis/hiredis.h>
#include <stdint.h>
#include <sys/types.h>

#include "ratelimit/ratelimit.h"
#include "ratelimit/redis.h"
#include "ratelimit/store.h"

/* `now` when the caller gave none: the store's own clock. */
#define PYRLT_NOW_NONE INT64_MIN

/* Which kind of store a StoreObject is. */
enum { PYRLT_MEMORY = 1, PYRLT_REDIS = 2, PYRLT_DAEMON = 3 };

/* A pool of connections (rlt_redis handles or hiredis contexts) owned by one store: taken and
 * given back under the GIL, emptied without closing after a fork (the child's copies of the
 * parent's sockets are left alone: closing them could send nothing harmful, but reusing them
 * would interleave the parent's and the child's replies). */
typedef struct pyrlt_pool {
    void **items;
    size_t n, cap;
    pid_t pid; /* the process the pooled connections belong to */
} pyrlt_pool;

/* A kind of store's table of operations (backend.h). */
typedef struct pyrlt_backend_ops pyrlt_backend_ops;

/* A store: in-process (rlt_store), Redis (rlt_redis handles) or a ratelimitd (RESP). */
typedef struct StoreObject {
    PyObject_HEAD int kind;       /* ops->kind; 0 until __init__ ran */
    const pyrlt_backend_ops *ops; /* chosen once, by __init__ */
    /* memory */
    rlt_store *mem;
    rlt_ns origin;       /* Unix ns at the store's now = 0 (calendar windows); default 0 */
    rlt_ns clock_shift;  /* now = monotonic + clock_shift = Unix time - origin (store_init) */
    int sweep;           /* sweep idle keys on clock-driven calls */
    unsigned long calls; /* clock-driven calls since the last sweep */
    /* redis and daemon */
    pyrlt_pool pool;
    rlt_redis_options ropt; /* redis: the options, strings owned below */
    char *servers, *password, *prefix, *sentinels, *master;
    char *host; /* daemon */
    int port;
    rlt_ns timeout;
    /* memory: the live in-process stores' list, which the fork handlers walk (store.c) */
    struct StoreObject *fork_prev, *fork_next;
} StoreObject;

/* Registers (once per process, with pthread_atfork) the handlers that take every live
 * in-process store's locks around a fork() and free them in the parent and the child, so a
 * child forked while other threads are inside the store finds its locks free.  Returns 0, or
 * an errno value. */
int pyrlt_fork_handlers_register(void);

/* A limiter: one or more policies (all-or-nothing when several) over one store. */
typedef struct LimiterObject {
    PyObject_HEAD StoreObject *store;
    int n;           /* policies; 0 until __init__ ran */
    int cap;         /* entries allocated in pol, ids, text */
    rlt_policy *pol; /* n policies */
    int *ids;        /* memory store: the policy ids */
    char **text;     /* canonical texts (daemon commands, repr) */
    char name[72];   /* the IETF policy name in headers */
    unsigned flags;  /* RLT_REDIS_FAIL_OPEN */
    rlt_ns resv_timeout;
} LimiterObject;

/* A decision, with what headers() needs. */
typedef struct DecisionObject {
    PyObject_HEAD rlt_decision d;
    LimiterObject *lim; /* strong reference */
    int pidx;           /* which policy the numbers are of */
    int status;         /* RLT_OK, or the backend failure the fail mode answered */
    uint64_t reservation;
    int refused; /* multi: index of the first refusing check, or -1 */
} DecisionObject;

/* A subclassable type with __init__ (Store, Limiter): name, object struct, doc, and the
 * prefix of its <prefix>_init, <prefix>_dealloc, <prefix>_methods and <prefix>_getset. */
#define PYRLT_TYPE(tname, obj, doc, prefix)                                                        \
    {                                                                                              \
        PyVarObject_HEAD_INIT(NULL, 0).tp_name = (tname), .tp_basicsize = sizeof(obj),             \
                                    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,          \
                                    .tp_doc = (doc), .tp_new = PyType_GenericNew,                  \
                                    .tp_init = (initproc)prefix##_init,                            \
                                    .tp_dealloc = (destructor)prefix##_dealloc,                    \
                                    .tp_methods = prefix##_methods, .tp_getset = prefix##_getset   \
    }

extern PyTypeObject pyrlt_StoreType, pyrlt_LimiterType, pyrlt_DecisionType;
extern PyObject *pyrlt_BackendError, *pyrlt_StoreFullError;

/* Raises the Python exception for status `rc` (< 0) with `what` as context and returns NULL. */
PyObject *pyrlt_raise(int rc, const char *what);

/* Monotonic and wall-clock ns. */
rlt_ns pyrlt_mono_ns(void);
rlt_ns pyrlt_wall_ns(void);

/* Keyword/positional parsing for METH_FASTCALL|METH_KEYWORDS: fills out[0..nnames) with
 * borrowed references (NULL for absent).  Returns 0, or -1 with TypeError set. */
int pyrlt_args(const char *fn, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
               const char *const *names, int nnames, int required, PyObject **out);

/* Converts an int argument (not bool) into *v within [lo, hi]: TypeError for other types,
 * OverflowError beyond int64, ValueError outside [lo, hi].  Returns 0 or -1. */
int pyrlt_int(PyObject *o, const char *name, int64_t lo, int64_t hi, int64_t *v);

/* A key: str (UTF-8) or bytes, 1..RLT_KEY_MAX bytes; the buffer lives as long as `o`.
 * Returns 0 or -1 (TypeError, ValueError). */
int pyrlt_key(PyObject *o, const char **k, size_t *klen);

/* A new Decision for limiter `lim`, policy pidx. */
PyObject *pyrlt_decision_new(LimiterObject *lim, int pidx, const rlt_decision *d, int status);

/* One limit of a call: policy pidx of limiter lim, on key k[0..kl), at cost. */
typedef struct pyrlt_check {
    LimiterObject *lim;
    int pidx;
    const char *k;
    size_t kl;
    int64_t cost;
} pyrlt_check;

/* Store calls (store.c, through the store's table of operations, backend.h): each releases the GIL
 * itself around the store call or the network I/O and returns an rlt status (a backend failure
 * fills *d with the fail-mode decision); `now` PYRLT_NOW_NONE means the caller gave none: the
 * store's clock (memory: monotonic; Redis: Redis's; the daemon always its own).  Must be called
 * with the GIL held. */
int pyrlt_store_prepare(StoreObject *s, LimiterObject *lim); /* checks/registers; raises */
int pyrlt_store_decide(StoreObject *s, const pyrlt_check *c, rlt_ns now, rlt_decision *d);
int pyrlt_store_multi(StoreObject *s, const pyrlt_check *c, size_t n, rlt_ns now, rlt_decision *d,
                      int *refused);
int pyrlt_store_reset(StoreObject *s, const pyrlt_check *c);
int pyrlt_store_release(StoreObject *s, const pyrlt_check *c, rlt_ns now, int64_t lease);
int pyrlt_store_reserve(StoreObject *s, const pyrlt_check *c, rlt_ns now, rlt_ns timeout,
                        rlt_decision *d, uint64_t *id);
int pyrlt_store_settle(StoreObject *s, const pyrlt_check *c, rlt_ns now, uint64_t id,
                       rlt_decision *d);

/* Pool helpers (pool.c).  pyrlt_self_pid: getpid() without the system call (kept across
 * fork by a pthread_atfork handler). */
pid_t pyrlt_self_pid(void);
void *pyrlt_pool_take(pyrlt_pool *p);
void pyrlt_pool_give(pyrlt_pool *p, void *item, void (*close_fn)(void *));
/* Closes every pooled item (not after a fork: the parent's are left alone) and empties p. */
void pyrlt_pool_clear(pyrlt_pool *p, void (*close_fn)(void *));

#endif
