/* libratelimit._native.Decision: one answer (allowed, limit, remaining, waits) and its headers. */
#include "native.h"

#include <string.h>

PyObject *pyrlt_decision_new(LimiterObject *lim, int pidx, const rlt_decision *d, int status)
{
    DecisionObject *o = PyObject_New(DecisionObject, &pyrlt_DecisionType);
    if (!o) return NULL;
    o->d = *d;
    Py_INCREF(lim);
    o->lim = lim;
    o->pidx = pidx;
    o->status = status;
    o->reservation = 0;
    o->refused = -1;
    return (PyObject *)o;
}

static void decision_dealloc(DecisionObject *o)
{
    Py_XDECREF(o->lim);
    PyObject_Free(o);
}

static PyObject *secs(rlt_ns ns)
{
    return PyFloat_FromDouble(ns < 0 ? -1.0 : (double)ns / 1e9);
}

#define GET(name, expr)                                                                            \
    static PyObject *get_##name(DecisionObject *o, void *c)                                        \
    {                                                                                              \
        (void)c;                                                                                   \
        return expr;                                                                               \
    }
GET(allowed, PyBool_FromLong(o->d.allowed))
GET(limit, PyLong_FromLongLong(o->d.limit))
GET(remaining, PyLong_FromLongLong(o->d.remaining))
GET(retry_after, secs(o->d.retry_after))
GET(reset_after, secs(o->d.reset_after))
GET(delay, secs(o->d.delay))
GET(retry_after_ns, PyLong_FromLongLong(o->d.retry_after))
GET(reset_after_ns, PyLong_FromLongLong(o->d.reset_after))
GET(delay_ns, PyLong_FromLongLong(o->d.delay))
GET(lease, PyLong_FromLongLong(o->d.lease))
GET(reservation, PyLong_FromUnsignedLongLong(o->reservation))
GET(refused, o->refused < 0 ? Py_NewRef(Py_None) : PyLong_FromLong(o->refused))
GET(error, o->status ? PyUnicode_FromString(rlt_strerror(o->status)) : Py_NewRef(Py_None))
GET(policy, PyUnicode_FromString(o->lim->text[o->pidx]))
#undef GET

static PyGetSetDef decision_getset[] = {
    {"allowed", (getter)get_allowed, NULL, "True when the request was allowed (and charged).",
     NULL},
    {"limit", (getter)get_limit, NULL,
     "The policy's limit: N (B for token_bucket and gcra, Q+1 for leaky_bucket).", NULL},
    {"remaining", (getter)get_remaining, NULL,
     "Cost-1 requests that would still be allowed now, after this one.", NULL},
    {"retry_after", (getter)get_retry_after, NULL,
     "Seconds (float) to wait before the same request is allowed: 0.0 when allowed, -1.0 when "
     "it never can.  retry_after_ns is the exact integer.",
     NULL},
    {"reset_after", (getter)get_reset_after, NULL,
     "Seconds (float) until the key's state is fresh again (reset_after_ns: exact).", NULL},
    {"delay", (getter)get_delay, NULL, "leaky_bucket: seconds the request waits before it is sent.",
     NULL},
    {"retry_after_ns", (getter)get_retry_after_ns, NULL, "retry_after in integer nanoseconds.",
     NULL},
    {"reset_after_ns", (getter)get_reset_after_ns, NULL, "reset_after in integer nanoseconds.",
     NULL},
    {"delay_ns", (getter)get_delay_ns, NULL, "delay in integer nanoseconds.", NULL},
    {"lease", (getter)get_lease, NULL, "concurrency: the lease to release (0 when denied).", NULL},
    {"reservation", (getter)get_reservation, NULL,
     "reserve(): the reservation's id for settle() (0 when denied).", NULL},
    {"refused", (getter)get_refused, NULL,
     "multi(): the index of the first check that refused, or None.", NULL},
    {"error", (getter)get_error, NULL,
     "None, or why the store could not answer (then this is the fail-mode decision).", NULL},
    {"policy", (getter)get_policy, NULL, "The canonical text of the policy the numbers are of.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL}};

/* headers(which=HDR_IETF|HDR_RETRY_AFTER) -> dict: "Field: value" lines as a dict. */
static PyObject *decision_headers(DecisionObject *o, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames)
{
    static const char *const names[] = {"which"};
    PyObject *a[1];
    int64_t which = RLT_HDR_IETF | RLT_HDR_RETRY_AFTER;
    if (pyrlt_args("headers", args, nargs, kwnames, names, 1, 0, a)) return NULL;
    if (a[0] && pyrlt_int(a[0], "which", 1, RLT_HDR_ALL, &which)) return NULL;
    char buf[1024];
    int n = rlt_format_headers(buf, sizeof buf, o->lim->name, &o->lim->pol[o->pidx], &o->d,
                               (unsigned)which);
    if (n < 0) return pyrlt_raise(n, "headers");
    PyObject *dict = PyDict_New();
    if (!dict) return NULL;
    for (char *line = buf; *line;) {
        char *end = strstr(line, "\r\n"), *colon = strchr(line, ':');
        if (!end || !colon || colon > end) break;
        const char *v = colon + 1;
        while (*v == ' ')
            v++;
        PyObject *k = PyUnicode_FromStringAndSize(line, colon - line);
        PyObject *val = PyUnicode_FromStringAndSize(v, end - v);
        int bad = !k || !val || PyDict_SetItem(dict, k, val) < 0;
        Py_XDECREF(k);
        Py_XDECREF(val);
        if (bad) {
            Py_DECREF(dict);
            return NULL;
        }
        line = end + 2;
    }
    return dict;
}

static PyObject *decision_repr(DecisionObject *o)
{
    char ra[32], rs[32];
    snprintf(ra, sizeof ra, "%.9g", o->d.retry_after < 0 ? -1.0 : (double)o->d.retry_after / 1e9);
    snprintf(rs, sizeof rs, "%.9g", (double)o->d.reset_after / 1e9);
    return PyUnicode_FromFormat(
        "Decision(allowed=%s, limit=%lld, remaining=%lld, retry_after=%s, reset_after=%s%s%s)",
        o->d.allowed ? "True" : "False", (long long)o->d.limit, (long long)o->d.remaining, ra, rs,
        o->status ? ", error=" : "", o->status ? rlt_strerror(o->status) : "");
}

static int decision_bool(DecisionObject *o)
{
    return o->d.allowed;
}

static PyNumberMethods decision_number = {.nb_bool = (inquiry)decision_bool};

static PyMethodDef decision_methods[] = {
    {"headers", (PyCFunction)(void (*)(void))decision_headers, METH_FASTCALL | METH_KEYWORDS,
     "headers(which=HDR_IETF | HDR_RETRY_AFTER) -> dict[str, str]\n\n"
     "The response headers for this decision, as the C library writes them: RateLimit-Policy "
     "and RateLimit (draft-ietf-httpapi-ratelimit-headers), and Retry-After in whole seconds "
     "rounded up when denied.  HDR_LEGACY adds RateLimit-Limit/-Remaining/-Reset, HDR_X the "
     "X-RateLimit-* forms."},
    {NULL, NULL, 0, NULL}};

PyTypeObject pyrlt_DecisionType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "libratelimit.Decision",
    .tp_basicsize = sizeof(DecisionObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The answer to one request: allowed, limit, remaining, retry_after and "
              "reset_after (seconds), headers().  True when allowed.",
    .tp_dealloc = (destructor)decision_dealloc,
    .tp_repr = (reprfunc)decision_repr,
    .tp_as_number = &decision_number,
    .tp_getset = decision_getset,
    .tp_methods = decision_methods,
};
