/* libratelimit._native: the module itself, its exceptions, clocks and argument conversions. */
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

/* format_policy(text) -> canonical text: rlt_policy_parse then rlt_policy_format. */
static PyObject *format_policy(PyObject *self, PyObject *arg)
{
    (void)self;
    Py_ssize_t n;
    if (!PyUnicode_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "policy must be str, not %.100s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    const char *t = PyUnicode_AsUTF8AndSize(arg, &n);
    if (!t) return NULL;
    rlt_policy p;
    char err[256] = "", buf[512];
    int rc = rlt_policy_parse(&p, t, (size_t)n, err, sizeof err);
    if (rc) {
        PyErr_Format(rc == RLT_ERANGE ? PyExc_OverflowError : PyExc_ValueError, "policy %R: %s",
                     arg, err[0] ? err : rlt_strerror(rc));
        return NULL;
    }
    rc = rlt_policy_format(&p, buf, sizeof buf);
    if (rc < 0) return pyrlt_raise(rc, "policy");
    return PyUnicode_FromStringAndSize(buf, rc);
}

static PyMethodDef module_methods[] = {
    {"format_policy", format_policy, METH_O,
     "format_policy(text) -> str\n\nParses policy text in ratelimit's notation "
     "(\"gcra:100/1m,burst=20\") and returns its canonical form; ValueError with the parser's "
     "message when it is not valid."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "libratelimit._native",
    "The C core of libratelimit: Limiter, Decision and the stores (use the libratelimit "
    "package, not this module).",
    -1,
    module_methods,
    NULL,
    NULL,
    NULL,
    NULL};

PyMODINIT_FUNC PyInit__native(void);
PyMODINIT_FUNC PyInit__native(void)
{
    if (PyType_Ready(&pyrlt_StoreType) < 0 || PyType_Ready(&pyrlt_LimiterType) < 0 ||
        PyType_Ready(&pyrlt_DecisionType) < 0)
        return NULL;
    int frc = pyrlt_fork_handlers_register();
    if (frc) {
        errno = frc;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    pyrlt_BackendError = PyErr_NewExceptionWithDoc(
        "libratelimit.BackendError",
        "Redis or the ratelimitd could not answer (a decision call answers with its fail mode "
        "instead of raising).",
        PyExc_RuntimeError, NULL);
    pyrlt_StoreFullError = PyErr_NewExceptionWithDoc(
        "libratelimit.StoreFullError",
        "A fail-closed store at its cap refused a new key, or the reservation table is full.",
        PyExc_RuntimeError, NULL);
    if (!pyrlt_BackendError || !pyrlt_StoreFullError ||
        PyModule_AddObjectRef(m, "BackendError", pyrlt_BackendError) < 0 ||
        PyModule_AddObjectRef(m, "StoreFullError", pyrlt_StoreFullError) < 0 ||
        PyModule_AddObjectRef(m, "Store", (PyObject *)&pyrlt_StoreType) < 0 ||
        PyModule_AddObjectRef(m, "Limiter", (PyObject *)&pyrlt_LimiterType) < 0 ||
        PyModule_AddObjectRef(m, "Decision", (PyObject *)&pyrlt_DecisionType) < 0 ||
        PyModule_AddIntConstant(m, "KEY_MAX", RLT_KEY_MAX) < 0 ||
        PyModule_AddIntConstant(m, "HDR_RETRY_AFTER", RLT_HDR_RETRY_AFTER) < 0 ||
        PyModule_AddIntConstant(m, "HDR_IETF", RLT_HDR_IETF) < 0 ||
        PyModule_AddIntConstant(m, "HDR_LEGACY", RLT_HDR_LEGACY) < 0 ||
        PyModule_AddIntConstant(m, "HDR_X", RLT_HDR_X) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
