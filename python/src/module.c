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
