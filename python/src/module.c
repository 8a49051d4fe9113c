/* libratelimit._native: the module itself (its types, exceptions and fork handlers registered
 * at import); the helpers every file uses are in util.c. */
#include "native.h"

#include <errno.h>
#include <string.h>
#include <time.h>

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

/* addr_key(addr, prefix=56) -> the key of a client address: rlt_addr_key, the rule every door
 * of ratelimit uses (IPv6 masked to the prefix, IPv4-mapped folded).  ValueError for a
 * malformed address or a prefix outside 32..128. */
static PyObject *addr_key(PyObject *self, PyObject *args)
{
    (void)self;
    const char *a;
    Py_ssize_t n;
    int prefix = RLT_ADDR_V6_PREFIX;
    if (!PyArg_ParseTuple(args, "s#|i:addr_key", &a, &n, &prefix)) return NULL;
    char buf[RLT_ADDR_KEY_MAX];
    int rc = rlt_addr_key(a, (size_t)n, prefix, buf, sizeof buf);
    if (rc == RLT_EINVAL) {
        PyErr_Format(PyExc_ValueError, "prefix must be 32..128, not %d", prefix);
        return NULL;
    }
    if (rc < 0) {
        PyErr_Format(PyExc_ValueError, "malformed address %R (an IPv4 or IPv6 address)",
                     PyTuple_GET_ITEM(args, 0));
        return NULL;
    }
    return PyUnicode_FromStringAndSize(buf, rc);
}

PyObject *pyrlt_reserve_limits(PyObject *self, PyObject *args);
PyObject *pyrlt_settle_limits(PyObject *self, PyObject *args);

static PyMethodDef module_methods[] = {
    {"reserve_limits", pyrlt_reserve_limits, METH_VARARGS,
     "reserve_limits(limits, estimate, timeout_ns, now_ns) -> (reservation, refused, "
     "[Decision])\n\nOne reservation over 1..16 (Limiter, key, weighting) limits, all or "
     "nothing (libratelimit.budget wraps it)."},
    {"settle_limits", pyrlt_settle_limits, METH_VARARGS,
     "settle_limits(reservation, limits, usage, final, now_ns) -> ([Decision], [charged])\n\n"
     "Settles it with the real usage; final False: a partial settle (a streamed chunk)."},
    {"addr_key", addr_key, METH_VARARGS,
     "addr_key(addr, prefix=56) -> str\n\nThe key of a client address, as every part of "
     "ratelimit makes it: IPv4 as itself, IPv4-mapped folded to IPv4, IPv6 masked to its /prefix "
     "(32..128) in canonical form (\"2001:db8:0:100::/56\").  ValueError when malformed."},
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
