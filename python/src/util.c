/* libratelimit._native: what every file of the extension uses: the exceptions and the
 * mapping of RLT_* codes to them, the clocks, and the argument conversions.  It calls no other
 * file of the extension. */
#include "native.h"

#include <errno.h>
#include <string.h>
#include <time.h>

PyObject *pyrlt_BackendError, *pyrlt_StoreFullError;

PyObject *pyrlt_raise(int rc, const char *what)
{
    PyObject *type;
    switch (rc) {
    case RLT_ERANGE:
        type = PyExc_OverflowError;
        break;
    case RLT_ENOMEM:
        return PyErr_NoMemory();
    case RLT_EFULL:
        type = pyrlt_StoreFullError;
        break;
    case RLT_ENOENT:
        type = PyExc_KeyError;
        break;
    case RLT_EBACKEND:
    case RLT_ETIMEDOUT:
    case RLT_EIO:
        type = pyrlt_BackendError;
        break;
    default:
        type = PyExc_ValueError;
        break;
    }
    if (what && *what)
        PyErr_Format(type, "%s: %s", what, rlt_strerror(rc));
    else
        PyErr_SetString(type, rlt_strerror(rc));
    return NULL;
}

rlt_ns pyrlt_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (rlt_ns)ts.tv_sec * RLT_NS_PER_S + ts.tv_nsec;
}

rlt_ns pyrlt_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (rlt_ns)ts.tv_sec * RLT_NS_PER_S + ts.tv_nsec;
}

int pyrlt_args(const char *fn, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
               const char *const *names, int nnames, int required, PyObject **out)
{
    if (nargs > nnames) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most %d arguments (%zd given)", fn, nnames,
                     nargs);
        return -1;
    }
    for (int i = 0; i < nnames; i++)
        out[i] = i < nargs ? args[i] : NULL;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t j = 0; j < nkw; j++) {
        const char *kw = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, j));
        if (!kw) return -1;
        int i = 0;
        while (i < nnames && strcmp(kw, names[i]) != 0)
            i++;
        if (i == nnames) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%s'", fn, kw);
            return -1;
        }
        if (out[i]) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", fn, kw);
            return -1;
        }
        out[i] = args[nargs + j];
    }
    for (int i = 0; i < required; i++)
        if (!out[i]) {
            PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'", fn, names[i]);
            return -1;
        }
    return 0;
}

int pyrlt_int(PyObject *o, const char *name, int64_t lo, int64_t hi, int64_t *v)
{
    if (!PyLong_Check(o) || PyBool_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int, not %.100s", name, Py_TYPE(o)->tp_name);
        return -1;
    }
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow) {
        PyErr_Format(PyExc_OverflowError, "%s does not fit a signed 64-bit integer", name);
        return -1;
    }
    if (x == -1 && PyErr_Occurred()) return -1;
    if (x < lo || x > hi) {
        PyErr_Format(PyExc_ValueError, "%s must be in %lld..%lld, not %lld", name, (long long)lo,
                     (long long)hi, x);
        return -1;
    }
    *v = (int64_t)x;
    return 0;
}

int pyrlt_key(PyObject *o, const char **k, size_t *klen)
{
    Py_ssize_t n;
    if (PyUnicode_Check(o)) {
        *k = PyUnicode_AsUTF8AndSize(o, &n);
        if (!*k) return -1;
    } else if (PyBytes_Check(o)) {
        *k = PyBytes_AS_STRING(o);
        n = PyBytes_GET_SIZE(o);
    } else {
        PyErr_Format(PyExc_TypeError, "key must be str or bytes, not %.100s", Py_TYPE(o)->tp_name);
        return -1;
    }
    if (n < 1 || n > RLT_KEY_MAX) {
        PyErr_Format(PyExc_ValueError, "key: %s (%zd bytes; 1..%d)", rlt_strerror(RLT_EKEYLEN), n,
                     RLT_KEY_MAX);
        return -1;
    }
    *klen = (size_t)n;
    return 0;
}
