/* libratelimit._native's reservations over several limits (include/ratelimit/budget.h):
 * reserve_limits() and settle_limits(), through the store's table of operations (backend.h),
 * so the same on the memory, Redis and daemon stores.  A limit is (Limiter, key[, weighting])
 * with a one-policy Limiter; every limit's Limiter on one store.  libratelimit/budget.py wraps
 * them (Reservation). */
#include "backend.h"

#include <string.h>

/* The limits of a call: each a tuple (Limiter, key[, weighting]) into c[], w[] (weighted). */
static int limits_of(const char *fn, PyObject *seq, bool weighted, pyrlt_check *c, rlt_weights *w,
                     size_t *n, StoreObject **store)
{
    Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
    if (len < 1 || len > RLT_BUDGET_LIMITS) {
        PyErr_Format(PyExc_ValueError, "%s: 1 to %d limits", fn, RLT_BUDGET_LIMITS);
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        PyObject *t = PySequence_Fast_GET_ITEM(seq, i);
        Py_ssize_t want = weighted ? 3 : 2;
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != want ||
            !PyObject_TypeCheck(PyTuple_GET_ITEM(t, 0), &pyrlt_LimiterType)) {
            PyErr_Format(PyExc_TypeError, "%s: limit %zd must be a tuple (Limiter, key%s)", fn, i,
                         weighted ? ", weighting" : "");
            return -1;
        }
        LimiterObject *lim = (LimiterObject *)PyTuple_GET_ITEM(t, 0);
        if (!lim->n) {
            PyErr_SetString(PyExc_RuntimeError, "Limiter.__init__ has not run");
            return -1;
        }
        if (lim->n != 1 || !rlt_settle_supported(&lim->pol[0])) {
            PyErr_Format(PyExc_ValueError,
                         "%s: limit %zd needs a limiter of one policy that can settle (not "
                         "leaky_bucket nor concurrency)",
                         fn, i);
            return -1;
        }
        if (i == 0) *store = lim->store;
        if (lim->store != *store) {
            PyErr_Format(PyExc_ValueError, "%s: every limit's Limiter must be on one store", fn);
            return -1;
        }
        c[i] = (pyrlt_check){lim, 0, NULL, 0, 0};
        if (pyrlt_key(PyTuple_GET_ITEM(t, 1), &c[i].k, &c[i].kl)) return -1;
        if (weighted) {
            PyObject *wo = PyTuple_GET_ITEM(t, 2);
            Py_ssize_t wl;
            const char *wt = PyUnicode_Check(wo) ? PyUnicode_AsUTF8AndSize(wo, &wl) : NULL;
            if (!wt || rlt_weights_parse(wt, (size_t)wl, &w[i]) != RLT_OK) {
                PyErr_Clear();
                PyErr_Format(PyExc_ValueError,
                             "%s: limit %zd: the weighting must be a str like in+out or "
                             "in*3+out*15+cached*1",
                             fn, i);
                return -1;
            }
        }
    }
    *n = (size_t)len;
    return 0;
}

/* A usage: a str "in=1200,out=4096" ("" or "-": none). */
static int usage_of(const char *fn, const char *what, PyObject *o, rlt_usage *u)
{
    Py_ssize_t len;
    const char *t = PyUnicode_Check(o) ? PyUnicode_AsUTF8AndSize(o, &len) : NULL;
    if (t && (len == 0 || (len == 1 && t[0] == '-'))) {
        memset(u, 0, sizeof *u);
        return 0;
    }
    if (!t || rlt_usage_parse(t, (size_t)len, u) != RLT_OK) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError,
                     "%s: %s must be named counts like in=1200,out=4096 (counts 0..%lld, at most "
                     "%d names)",
                     fn, what, (long long)RLT_USAGE_VALUE_MAX, RLT_USAGE_NAMES);
        return -1;
    }
    return 0;
}

static int now_of(StoreObject *s, PyObject *o, rlt_ns *now)
{
    *now = PYRLT_NOW_NONE;
    if (o == Py_None) return 0;
    if (s->kind == PYRLT_DAEMON) {
        PyErr_SetString(PyExc_ValueError,
                        "now_ns is not supported by a ratelimitd store: the daemon reads its own "
                        "clock");
        return -1;
    }
    return pyrlt_int(o, "now_ns", s->kind == PYRLT_REDIS ? 0 : INT64_MIN + 1, INT64_MAX, now);
}

static PyObject *decisions(const pyrlt_check *c, size_t n, const rlt_decision *d, int status)
{
    PyObject *l = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; l && i < n; i++) {
        PyObject *x = pyrlt_decision_new(c[i].lim, 0, &d[i], status);
        if (!x) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, x);
    }
    return l;
}

/* reserve_limits(limits, estimate, timeout_ns, now_ns) -> (reservation, refused, [Decision]) */
PyObject *pyrlt_reserve_limits(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *lo, *eo, *to, *no;
    if (!PyArg_ParseTuple(args, "OOOO", &lo, &eo, &to, &no)) return NULL;
    PyObject *seq = PySequence_Fast(lo, "reserve_limits: limits must be a sequence");
    if (!seq) return NULL;
    pyrlt_check c[RLT_BUDGET_LIMITS];
    rlt_weights w[RLT_BUDGET_LIMITS];
    rlt_decision combined, each[RLT_BUDGET_LIMITS];
    rlt_usage est;
    size_t n;
    StoreObject *s = NULL;
    int64_t timeout = 0;
    rlt_ns now;
    PyObject *out = NULL;
    if (limits_of("reserve_limits", seq, true, c, w, &n, &s) ||
        usage_of("reserve_limits", "estimate", eo, &est) ||
        (to != Py_None && pyrlt_int(to, "timeout_ns", 0, INT64_MAX, &timeout)) ||
        now_of(s, no, &now))
        goto done;
    if (to == Py_None) timeout = c[0].lim->resv_timeout;
    int refused = -1;
    uint64_t id = 0;
    int rc = s->ops->reserve_limits(s, c, w, n, &est, now, timeout, &combined, each, &refused, &id);
    if (rc != RLT_OK && rc != RLT_EBACKEND && rc != RLT_ETIMEDOUT) {
        pyrlt_raise(rc, rc == RLT_EINVAL ? "reserve_limits (a usage name no limit weighs, a "
                                           "limit twice, or keys in several Redis slots)"
                                         : "reserve_limits");
        goto done;
    }
    PyObject *l = decisions(c, n, each, rc);
    if (l) out = Py_BuildValue("(KiN)", (unsigned long long)id, refused, l);
done:
    Py_DECREF(seq);
    return out;
}

/* settle_limits(reservation, limits, usage, final, now_ns) -> ([Decision], [charged]) */
PyObject *pyrlt_settle_limits(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *io, *lo, *uo, *no;
    int final;
    if (!PyArg_ParseTuple(args, "OOOpO", &io, &lo, &uo, &final, &no)) return NULL;
    uint64_t id = PyLong_Check(io) ? PyLong_AsUnsignedLongLong(io) : 0;
    if (PyErr_Occurred() || id == 0) {
        PyErr_Clear();
        PyErr_SetString(PyExc_ValueError,
                        "settle_limits: reservation must be the non-zero int reserve_limits gave");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(lo, "settle_limits: limits must be a sequence");
    if (!seq) return NULL;
    pyrlt_check c[RLT_BUDGET_LIMITS];
    rlt_decision combined, each[RLT_BUDGET_LIMITS];
    int64_t charged[RLT_BUDGET_LIMITS] = {0};
    rlt_usage u;
    size_t n;
    StoreObject *s = NULL;
    rlt_ns now;
    PyObject *out = NULL;
    if (limits_of("settle_limits", seq, false, c, NULL, &n, &s) ||
        usage_of("settle_limits", "usage", uo, &u) || now_of(s, no, &now))
        goto done;
    int rc = s->ops->settle_limits(s, c, n, id, &u, final != 0, now, &combined, each, charged);
    if (rc == RLT_ENOENT) {
        PyErr_SetString(PyExc_KeyError,
                        "settle_limits: unknown reservation: never made for these limits (in "
                        "this order), already settled, or expired (charged as estimated)");
        goto done;
    }
    if (rc != RLT_OK) {
        pyrlt_raise(rc, rc == RLT_EINVAL ? "settle_limits (a usage name no limit weighs)"
                                         : "settle_limits");
        goto done;
    }
    PyObject *l = decisions(c, n, each, RLT_OK);
    PyObject *ch = l ? PyList_New((Py_ssize_t)n) : NULL;
    for (size_t i = 0; ch && i < n; i++)
        PyList_SET_ITEM(ch, (Py_ssize_t)i, PyLong_FromLongLong(charged[i]));
    if (ch)
        out = Py_BuildValue("(NN)", l, ch);
    else
        Py_XDECREF(l);
done:
    Py_DECREF(seq);
    return out;
}
