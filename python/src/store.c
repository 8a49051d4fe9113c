/* libratelimit._native.Store: one type for the three kinds of store (in-process, Redis,
 * ratelimitd).  __init__ picks the kind's table of operations (backend.h) once, by name; every
 * call after that goes through it.  Nothing here knows a kind's details. */
#include "backend.h"

#include <string.h>
#include <unistd.h>

static const pyrlt_backend_ops *const kinds[] = {&pyrlt_memory_ops, &pyrlt_redis_ops,
                                                 &pyrlt_daemon_ops};

static int store_init(StoreObject *s, PyObject *args, PyObject *kw)
{
    static char *names[] = {"kind",      "max_keys",       "max_bytes",      "fail_closed",
                            "shards",    "origin_ns",      "sweep",          "servers",
                            "cluster",   "password",       "prefix",         "timeout_ns",
                            "sentinels", "master_name",    "engine",         "host",
                            "port",      "backoff_min_ns", "backoff_max_ns", NULL};
    const char *kind;
    pyrlt_store_args a = {.sweep = 1, .origin = Py_None};
    long long timeout = 0;
    if (s->ops) {
        PyErr_SetString(PyExc_RuntimeError, "Store is already initialised");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|$nnpIOpzpzzLzziziLL", names, &kind, &a.max_keys,
                                     &a.max_bytes, &a.fail_closed, &a.shards, &a.origin, &a.sweep,
                                     &a.servers, &a.cluster, &a.password, &a.prefix, &timeout,
                                     &a.sentinels, &a.master, &a.engine, &a.host, &a.port,
                                     &a.backoff_min, &a.backoff_max))
        return -1;
    if (a.max_keys < 0 || a.max_bytes < 0 || timeout < 0 || a.backoff_min < 0 ||
        a.backoff_max < 0) {
        PyErr_SetString(PyExc_ValueError,
                        "max_keys, max_bytes, timeout_ns and backoff_*_ns must be >= 0");
        return -1;
    }
    const pyrlt_backend_ops *ops = NULL;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(kind, kinds[i]->name) == 0) ops = kinds[i];
    if (!ops) {
        PyErr_Format(PyExc_ValueError, "unknown store kind '%s' (memory, redis, daemon)", kind);
        return -1;
    }
    s->timeout = timeout ? (rlt_ns)timeout : RLT_REDIS_DEFAULT_TIMEOUT;
    s->pool.pid = pyrlt_self_pid();
    if (ops->open(s, &a)) {
        ops->close(s);
        return -1;
    }
    s->ops = ops;
    s->kind = ops->kind;
    return 0;
}

static void store_dealloc(StoreObject *s)
{
    if (s->ops) s->ops->close(s);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

/* stats() -> dict: the memory store's counters, or a Redis handle's (summed over the pool). */
static PyObject *store_stats(StoreObject *s, PyObject *unused)
{
    (void)unused;
    if (!s->ops) {
        PyErr_SetString(PyExc_RuntimeError, "Store.__init__ was not called");
        return NULL;
    }
    return s->ops->stats(s);
}

static PyObject *store_kind(StoreObject *s, void *c)
{
    (void)c;
    if (!s->ops) Py_RETURN_NONE;
    return PyUnicode_FromString(s->ops->name);
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

/* ---- Calls: through the table (the limiter checked that the store was initialised) ---- */

int pyrlt_store_prepare(StoreObject *s, LimiterObject *lim)
{
    return s->ops->prepare(s, lim);
}

int pyrlt_store_decide(StoreObject *s, const pyrlt_check *c, rlt_ns now, rlt_decision *d)
{
    return s->ops->decide(s, c, now, d);
}

int pyrlt_store_multi(StoreObject *s, const pyrlt_check *c, size_t n, rlt_ns now, rlt_decision *d,
                      int *refused)
{
    if (n == 0 || n > 64) return RLT_EINVAL;
    return s->ops->multi(s, c, n, now, d, refused);
}

int pyrlt_store_reset(StoreObject *s, const pyrlt_check *c)
{
    return s->ops->reset(s, c);
}

int pyrlt_store_release(StoreObject *s, const pyrlt_check *c, rlt_ns now, int64_t lease)
{
    return s->ops->release(s, c, now, lease);
}

int pyrlt_store_reserve(StoreObject *s, const pyrlt_check *c, rlt_ns now, rlt_ns timeout,
                        rlt_decision *d, uint64_t *id)
{
    return s->ops->reserve(s, c, now, timeout, d, id);
}

int pyrlt_store_settle(StoreObject *s, const pyrlt_check *c, rlt_ns now, uint64_t id,
                       rlt_decision *d)
{
    return s->ops->settle(s, c, now, id, d);
}
