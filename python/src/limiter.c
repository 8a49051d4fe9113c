/* libratelimit._native.Limiter: policies over a store; hit, peek, reset, multi, leases and
 * reservations, each a Python exception for bad input and a Decision otherwise. */
#include "native.h"

#include <stdlib.h>
#include <string.h>

/* ---- Construction --------------------------------------------------------------------- */

/* Frees the policies (a failed __init__ leaves them for the next one or the dealloc). */
static void limiter_clear(LimiterObject *self)
{
    for (int i = 0; self->text && i < self->cap; i++)
        free(self->text[i]);
    free(self->text);
    free(self->pol);
    free(self->ids);
    self->text = NULL;
    self->pol = NULL;
    self->ids = NULL;
    self->cap = 0;
    Py_CLEAR(self->store);
}

static void limiter_dealloc(LimiterObject *self)
{
    limiter_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int limiter_init(LimiterObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"policies", "store", "name", "fail_open", "reservation_timeout_ns",
                            NULL};
    PyObject *policies, *seq;
    StoreObject *store;
    const char *name = NULL;
    int fail_open = 0;
    long long rtimeout = 0;
    if (self->n) {
        PyErr_SetString(PyExc_RuntimeError, "Limiter is already initialised");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO!|$zpL", names, &policies, &pyrlt_StoreType,
                                     &store, &name, &fail_open, &rtimeout))
        return -1;
    if (store->kind == 0) {
        PyErr_SetString(PyExc_ValueError, "store is not initialised");
        return -1;
    }
    if (rtimeout < 0) {
        PyErr_SetString(PyExc_ValueError, "reservation_timeout_ns must be >= 0");
        return -1;
    }
    if (PyUnicode_Check(policies)) {
        seq = PyTuple_Pack(1, policies);
    } else {
        seq = PySequence_Tuple(policies);
    }
    if (!seq) return -1;
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    limiter_clear(self);
    if (n < 1 || n > 16) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "a limiter has 1 to 16 policies");
        return -1;
    }
    self->pol = calloc((size_t)n, sizeof *self->pol);
    self->ids = calloc((size_t)n, sizeof *self->ids);
    self->text = calloc((size_t)n, sizeof *self->text);
    self->cap = (int)n;
    if (!self->pol || !self->ids || !self->text) {
        self->cap = 0;
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyTuple_GET_ITEM(seq, i);
        Py_ssize_t tl;
        const char *tx;
        if (!PyUnicode_Check(t)) {
            PyErr_Format(PyExc_TypeError, "policy must be str, not %.100s", Py_TYPE(t)->tp_name);
            goto fail;
        }
        if (!(tx = PyUnicode_AsUTF8AndSize(t, &tl))) goto fail;
        char err[256] = "", buf[512];
        int rc = rlt_policy_parse(&self->pol[i], tx, (size_t)tl, err, sizeof err);
        if (rc) {
            PyErr_Format(rc == RLT_ERANGE ? PyExc_OverflowError : PyExc_ValueError, "policy %R: %s",
                         t, err[0] ? err : rlt_strerror(rc));
            goto fail;
        }
        if (n > 1 && self->pol[i].algo == RLT_CONCURRENCY) {
            PyErr_SetString(PyExc_ValueError,
                            "a concurrency policy cannot be one of several (multi-limit) policies");
            goto fail;
        }
        rc = rlt_policy_format(&self->pol[i], buf, sizeof buf);
        if (rc < 0 || !(self->text[i] = strdup(buf))) {
            pyrlt_raise(rc < 0 ? rc : RLT_ENOMEM, "policy");
            goto fail;
        }
    }
    Py_DECREF(seq);
    self->n = (int)n;
    if (!name) name = "default";
    if (!*name || strlen(name) > 64 ||
        strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                     "0123456789_.:-") != strlen(name)) {
        PyErr_SetString(PyExc_ValueError, "name must be 1..64 characters of [A-Za-z0-9_.:-]");
        self->n = 0;
        return -1;
    }
    strcpy(self->name, name);
    self->flags = fail_open ? RLT_REDIS_FAIL_OPEN : 0;
    self->resv_timeout = (rlt_ns)rtimeout;
    Py_INCREF(store);
    self->store = store;
    if (pyrlt_store_prepare(store, self)) {
        self->n = 0;
        return -1;
    }
    return 0;
fail:
    Py_DECREF(seq);
    return -1;
}

/* ---- Argument helpers ----------------------------------------------------------------- */

static int ready(LimiterObject *self)
{
    if (self->n) return 0;
    PyErr_SetString(PyExc_RuntimeError, "Limiter.__init__ has not run");
    return -1;
}

/* now_ns: None (the store's clock) or an int; the daemon reads only its own clock. */
static int get_now(LimiterObject *self, PyObject *o, rlt_ns *now)
{
    *now = PYRLT_NOW_NONE;
    if (!o || o == Py_None) return 0;
    if (self->store->kind == PYRLT_DAEMON) {
        PyErr_SetString(PyExc_ValueError,
                        "now_ns is not supported by a ratelimitd store: the daemon reads its own "
                        "clock");
        return -1;
    }
    int64_t lo = self->store->kind == PYRLT_REDIS ? 0 : INT64_MIN + 1;
    return pyrlt_int(o, "now_ns", lo, INT64_MAX, now);
}

static int single(LimiterObject *self, const char *what)
{
    if (self->n == 1) return 0;
    PyErr_Format(PyExc_ValueError, "%s needs a limiter with one policy (this one has %d)", what,
                 self->n);
    return -1;
}

/* Which policy a combined decision's numbers are of: the refusing one, else the first whose
 * limit is the combined limit (the combine keeps the limit of the fewest remaining). */
static int pick(const pyrlt_check *c, size_t n, const rlt_decision *d, int refused)
{
    if (refused >= 0 && (size_t)refused < n) return refused;
    for (size_t i = 0; i < n; i++)
        if (rlt_policy_limit(&c[i].lim->pol[c[i].pidx]) == d->limit) return (int)i;
    return 0;
}

/* Decides `cost` on `k` over every policy of `self` (multi when several). */
static PyObject *decide(LimiterObject *self, PyObject *key, int64_t cost, rlt_ns now)
{
    pyrlt_check c[16];
    rlt_decision d;
    int refused = -1, rc;
    if (pyrlt_key(key, &c[0].k, &c[0].kl)) return NULL;
    for (int i = 0; i < self->n; i++)
        c[i] = (pyrlt_check){self, i, c[0].k, c[0].kl, cost};
    if (self->n == 1)
        rc = pyrlt_store_decide(self->store, c, now, &d);
    else
        rc = pyrlt_store_multi(self->store, c, (size_t)self->n, now, &d, &refused);
    if (rc != RLT_OK && rc != RLT_EBACKEND && rc != RLT_ETIMEDOUT) return pyrlt_raise(rc, "hit");
    int pidx = self->n == 1 ? 0 : pick(c, (size_t)self->n, &d, refused);
    DecisionObject *o = (DecisionObject *)pyrlt_decision_new(self, pidx, &d, rc);
    if (o && self->n > 1) o->refused = d.allowed ? -1 : refused;
    return (PyObject *)o;
}

/* ---- Methods -------------------------------------------------------------------------- */

static PyObject *limiter_hit(LimiterObject *self, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames)
{
    static const char *const names[] = {"key", "cost", "now_ns"};
    PyObject *a[3];
    int64_t cost = 1;
    rlt_ns now;
    if (ready(self) || pyrlt_args("hit", args, nargs, kwnames, names, 3, 1, a)) return NULL;
    if (a[1] && pyrlt_int(a[1], "cost", 0, INT64_MAX, &cost)) return NULL;
    if (get_now(self, a[2], &now)) return NULL;
    return decide(self, a[0], cost, now);
}

static PyObject *limiter_peek(LimiterObject *self, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames)
{
    static const char *const names[] = {"key", "now_ns"};
    PyObject *a[2];
    rlt_ns now;
    if (ready(self) || pyrlt_args("peek", args, nargs, kwnames, names, 2, 1, a)) return NULL;
    if (get_now(self, a[1], &now)) return NULL;
    return decide(self, a[0], 0, now);
}

static PyObject *limiter_reset(LimiterObject *self, PyObject *key)
{
    pyrlt_check c = {self, 0, NULL, 0, 0};
    if (ready(self) || pyrlt_key(key, &c.k, &c.kl)) return NULL;
    for (c.pidx = 0; c.pidx < self->n; c.pidx++) {
        int rc = pyrlt_store_reset(self->store, &c);
        if (rc != RLT_OK && rc != RLT_ENOENT) return pyrlt_raise(rc, "reset");
    }
    Py_RETURN_NONE;
}

/* multi(items, now_ns=None): items of (key, cost) on this limiter or (limiter, key, cost) on
 * another limiter over the same store; every policy of every limiter, all-or-nothing. */
static PyObject *limiter_multi(LimiterObject *self, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames)
{
    static const char *const names[] = {"items", "now_ns"};
    PyObject *a[2], *seq;
    pyrlt_check c[64];
    size_t n = 0;
    rlt_ns now;
    if (ready(self) || pyrlt_args("multi", args, nargs, kwnames, names, 2, 1, a)) return NULL;
    if (get_now(self, a[1], &now)) return NULL;
    if (!(seq = PySequence_Fast(a[0], "items must be a sequence of (key, cost) or "
                                      "(limiter, key, cost)")))
        return NULL;
    Py_ssize_t m = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < m; i++) {
        PyObject *it = PySequence_Fast_GET_ITEM(seq, i);
        Py_ssize_t il = PyTuple_Check(it) ? PyTuple_GET_SIZE(it) : -1;
        if (il != 2 && il != 3) {
            PyErr_SetString(PyExc_TypeError,
                            "each item of multi() is a tuple (key, cost) or (limiter, key, cost)");
            goto fail;
        }
        LimiterObject *l = self;
        if (il == 3) {
            l = (LimiterObject *)PyTuple_GET_ITEM(it, 0);
            if (!PyObject_TypeCheck((PyObject *)l, &pyrlt_LimiterType) || ready(l)) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "multi(): the first of three is a Limiter");
                goto fail;
            }
            if (l->store != self->store) {
                PyErr_SetString(PyExc_ValueError, "multi(): every limiter must share one store");
                goto fail;
            }
        }
        const char *k;
        size_t kl;
        int64_t cost;
        if (pyrlt_key(PyTuple_GET_ITEM(it, il - 2), &k, &kl) ||
            pyrlt_int(PyTuple_GET_ITEM(it, il - 1), "cost", 0, INT64_MAX, &cost))
            goto fail;
        for (int p = 0; p < l->n; p++) {
            if (n == 64) {
                PyErr_SetString(PyExc_ValueError, "multi(): at most 64 limits at once");
                goto fail;
            }
            if (l->pol[p].algo == RLT_CONCURRENCY) {
                PyErr_SetString(PyExc_ValueError, "multi(): concurrency policies are not allowed");
                goto fail;
            }
            c[n++] = (pyrlt_check){l, p, k, kl, cost};
        }
    }
    if (n == 0) {
        PyErr_SetString(PyExc_ValueError, "multi(): no items");
        goto fail;
    }
    rlt_decision d;
    int refused = -1;
    int rc = pyrlt_store_multi(self->store, c, n, now, &d, &refused);
    if (rc != RLT_OK && rc != RLT_EBACKEND && rc != RLT_ETIMEDOUT) {
        pyrlt_raise(rc, "multi");
        goto fail;
    }
    int pidx = pick(c, n, &d, refused);
    DecisionObject *o = (DecisionObject *)pyrlt_decision_new(c[pidx].lim, c[pidx].pidx, &d, rc);
    if (o) o->refused = d.allowed ? -1 : refused;
    Py_DECREF(seq);
    return (PyObject *)o;
fail:
    Py_DECREF(seq);
    return NULL;
}

static PyObject *limiter_acquire_raw(LimiterObject *self, PyObject *const *args, Py_ssize_t nargs,
                                     PyObject *kwnames)
{
    static const char *const names[] = {"key", "now_ns"};
    PyObject *a[2];
    rlt_ns now;
    if (ready(self) || pyrlt_args("acquire", args, nargs, kwnames, names, 2, 1, a) ||
        single(self, "acquire()") || get_now(self, a[1], &now))
        return NULL;
    if (self->pol[0].algo != RLT_CONCURRENCY) {
        PyErr_SetString(PyExc_ValueError, "acquire() needs a concurrency policy "
                                          "(\"concurrency:N[/TIMEOUT]\")");
        return NULL;
    }
    return decide(self, a[0], 1, now);
}

static PyObject *limiter_release(LimiterObject *self, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames)
{
    static const char *const names[] = {"key", "lease", "now_ns"};
    PyObject *a[3];
    pyrlt_check c = {self, 0, NULL, 0, 0};
    int64_t lease;
    rlt_ns now;
    if (ready(self) || pyrlt_args("release", args, nargs, kwnames, names, 3, 2, a) ||
        single(self, "release()") || pyrlt_key(a[0], &c.k, &c.kl) ||
        pyrlt_int(a[1], "lease", 1, INT64_MAX, &lease) || get_now(self, a[2], &now))
        return NULL;
    int rc = pyrlt_store_release(self->store, &c, now, lease);
    if (rc == RLT_OK) Py_RETURN_TRUE;
    if (rc == RLT_ENOENT || rc == RLT_EBACKEND || rc == RLT_ETIMEDOUT) Py_RETURN_FALSE;
    return pyrlt_raise(rc, "release");
}

static PyObject *limiter_reserve(LimiterObject *self, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames)
{
    static const char *const names[] = {"key", "estimate", "timeout_ns", "now_ns"};
    PyObject *a[4];
    pyrlt_check c = {self, 0, NULL, 0, 0};
    int64_t timeout = self->resv_timeout;
    rlt_ns now;
    if (ready(self) || pyrlt_args("reserve", args, nargs, kwnames, names, 4, 2, a) ||
        single(self, "reserve()") || pyrlt_key(a[0], &c.k, &c.kl) ||
        pyrlt_int(a[1], "estimate", 0, INT64_MAX, &c.cost) ||
        (a[2] && a[2] != Py_None && pyrlt_int(a[2], "timeout_ns", 0, INT64_MAX, &timeout)) ||
        get_now(self, a[3], &now))
        return NULL;
    if (!rlt_settle_supported(&self->pol[0])) {
        PyErr_Format(PyExc_ValueError,
                     "reserve(): policy '%s' cannot settle (not leaky_bucket nor concurrency)",
                     self->text[0]);
        return NULL;
    }
    rlt_decision d;
    uint64_t id = 0;
    int rc = pyrlt_store_reserve(self->store, &c, now, timeout, &d, &id);
    if (rc != RLT_OK && rc != RLT_EBACKEND && rc != RLT_ETIMEDOUT)
        return pyrlt_raise(rc, "reserve");
    DecisionObject *o = (DecisionObject *)pyrlt_decision_new(self, 0, &d, rc);
    if (o) o->reservation = id;
    return (PyObject *)o;
}

static PyObject *limiter_settle(LimiterObject *self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames)
{
    static const char *const names[] = {"key", "reservation", "real_cost", "now_ns"};
    PyObject *a[4];
    pyrlt_check c = {self, 0, NULL, 0, 0};
    unsigned long long id;
    rlt_ns now;
    if (ready(self) || pyrlt_args("settle", args, nargs, kwnames, names, 4, 3, a) ||
        single(self, "settle()") || pyrlt_key(a[0], &c.k, &c.kl))
        return NULL;
    if (!PyLong_Check(a[1]) || PyBool_Check(a[1])) {
        PyErr_SetString(PyExc_TypeError, "reservation must be the int reserve() returned");
        return NULL;
    }
    id = PyLong_AsUnsignedLongLong(a[1]);
    if (id == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    if (id == 0) {
        PyErr_SetString(PyExc_ValueError, "reservation 0 is no reservation (a denied reserve)");
        return NULL;
    }
    if (pyrlt_int(a[2], "real_cost", 0, INT64_MAX, &c.cost) || get_now(self, a[3], &now))
        return NULL;
    rlt_decision d;
    int rc = pyrlt_store_settle(self->store, &c, now, id, &d);
    if (rc == RLT_ENOENT) {
        PyErr_Format(PyExc_KeyError,
                     "unknown reservation %llx: never made for this key, already "
                     "settled, or expired",
                     id);
        return NULL;
    }
    if (rc != RLT_OK) return pyrlt_raise(rc, "settle");
    return pyrlt_decision_new(self, 0, &d, rc);
}

static PyObject *get_policies(LimiterObject *self, void *c)
{
    (void)c;
    PyObject *t = PyTuple_New(self->n);
    for (int i = 0; t && i < self->n; i++) {
        PyObject *s = PyUnicode_FromString(self->text[i]);
        if (!s) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, s);
    }
    return t;
}

static PyObject *get_store(LimiterObject *self, void *c)
{
    (void)c;
    if (!self->store) Py_RETURN_NONE;
    return Py_NewRef((PyObject *)self->store);
}

static PyObject *get_name(LimiterObject *self, void *c)
{
    (void)c;
    return PyUnicode_FromString(self->name);
}

#define FAST(fn) (PyCFunction)(void (*)(void))(fn), METH_FASTCALL | METH_KEYWORDS
static PyMethodDef limiter_methods[] = {
    {"hit", FAST(limiter_hit),
     "hit(key, cost=1, now_ns=None) -> Decision\n\nDecides one request of `cost` for `key` "
     "(str or bytes) and charges it when allowed; with several policies, all-or-nothing.  "
     "now_ns: integer nanoseconds for tests and replays (default: the store's clock)."},
    {"peek", FAST(limiter_peek),
     "peek(key, now_ns=None) -> Decision\n\nWhat a cost-1 request would get, charging nothing."},
    {"reset", (PyCFunction)limiter_reset, METH_O, "reset(key)\n\nForgets `key`: it starts fresh."},
    {"multi", FAST(limiter_multi),
     "multi(items, now_ns=None) -> Decision\n\nAll-or-nothing over several limits: items are "
     "(key, cost) on this limiter or (limiter, key, cost) on another one over the same store; "
     "every limit is charged only if every one allows.  Decision.refused is the index (among "
     "the limits, in order) of the first that refused."},
    {"_acquire", FAST(limiter_acquire_raw),
     "_acquire(key, now_ns=None) -> Decision\n\nTakes a concurrency slot (Decision.lease)."},
    {"release", FAST(limiter_release),
     "release(key, lease, now_ns=None) -> bool\n\nGives a concurrency lease back; False when it "
     "was unknown, already released or had expired (or the store could not be reached)."},
    {"reserve", FAST(limiter_reserve),
     "reserve(key, estimate, timeout_ns=None, now_ns=None) -> Decision\n\nCharge after the "
     "response: decides and charges `estimate`; Decision.reservation is the id to settle."},
    {"settle", FAST(limiter_settle),
     "settle(key, reservation, real_cost, now_ns=None) -> Decision\n\nSettles a reservation at "
     "its real cost (more is charged as debt, less refunded as far as it still holds); KeyError "
     "for an unknown, settled or expired reservation.  The decision is a peek afterwards."},
    {NULL, NULL, 0, NULL}};
#undef FAST

static PyGetSetDef limiter_getset[] = {
    {"policies", (getter)get_policies, NULL, "The canonical texts of the policies.", NULL},
    {"store", (getter)get_store, NULL, "The store the state lives in.", NULL},
    {"name", (getter)get_name, NULL, "The policy name in the IETF headers.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject pyrlt_LimiterType = PYRLT_TYPE("libratelimit._native.Limiter", LimiterObject,
                                            "The C limiter (use libratelimit.Limiter).", limiter);
