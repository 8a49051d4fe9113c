/* ratelimit for Node.js: argument checks that name the argument, exceptions, the clock. */
#include "native.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static napi_value throw_kind(napi_env env, int kind, const char *code, const char *arg,
                             const char *what)
{
    char msg[512];
    napi_value m, c = NULL, err;
    snprintf(msg, sizeof msg, "%s%s%s", arg ? arg : "", arg ? ": " : "", what);
    napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &m);
    if (code) napi_create_string_utf8(env, code, NAPI_AUTO_LENGTH, &c);
    if (kind == 1)
        napi_create_type_error(env, c, m, &err);
    else if (kind == 2)
        napi_create_range_error(env, c, m, &err);
    else
        napi_create_error(env, c, m, &err);
    napi_throw(env, err);
    return NULL;
}

napi_value nrlt_type_error(napi_env env, const char *arg, const char *what)
{
    return throw_kind(env, 1, NULL, arg, what);
}

napi_value nrlt_range_error(napi_env env, const char *arg, const char *what)
{
    return throw_kind(env, 2, NULL, arg, what);
}

napi_value nrlt_throw_status(napi_env env, int rc, const char *arg)
{
    char code[32];
    snprintf(code, sizeof code, "RLT_E%d", -rc);
    int kind = rc == RLT_EKEYLEN || rc == RLT_ERANGE ? 2 : rc == RLT_EINVAL ? 1 : 0;
    return throw_kind(env, kind, code, arg, rlt_strerror(rc));
}

bool nrlt_absent(napi_env env, napi_value v)
{
    napi_valuetype t;
    if (!v || napi_typeof(env, v, &t) != napi_ok) return true;
    return t == napi_undefined || t == napi_null;
}

int nrlt_key(napi_env env, napi_value v, const char *arg, char *buf, size_t *len)
{
    napi_valuetype t;
    bool is;
    napi_typeof(env, v, &t);
    if (t == napi_string) {
        /* buf holds RLT_KEY_MAX + 8: a longer string is cut at a character boundary (at most 3
         * bytes short of the buffer), so a copy over RLT_KEY_MAX means too long. */
        if (napi_get_value_string_utf8(env, v, buf, RLT_KEY_MAX + 8, len) != napi_ok) return -1;
    } else if (napi_is_typedarray(env, v, &is) == napi_ok && is) {
        napi_typedarray_type tt;
        size_t n, off;
        void *data;
        napi_value ab;
        napi_get_typedarray_info(env, v, &tt, &n, &data, &ab, &off);
        if (tt != napi_uint8_array) {
            nrlt_type_error(env, arg, "must be a string, a Buffer or a Uint8Array");
            return -1;
        }
        if (n > RLT_KEY_MAX) {
            nrlt_range_error(env, arg, "is over 512 bytes");
            return -1;
        }
        if (n) memcpy(buf, data, n);
        *len = n;
    } else {
        nrlt_type_error(env, arg, "must be a string, a Buffer or a Uint8Array");
        return -1;
    }
    if (*len == 0) {
        nrlt_range_error(env, arg, "must not be empty");
        return -1;
    }
    if (*len > RLT_KEY_MAX) {
        nrlt_range_error(env, arg, "is over 512 bytes");
        return -1;
    }
    return 0;
}

int nrlt_int(napi_env env, napi_value v, const char *arg, int64_t lo, int64_t hi, int64_t *out)
{
    napi_valuetype t;
    char msg[128];
    napi_typeof(env, v, &t);
    if (t == napi_bigint) {
        bool lossless;
        napi_get_value_bigint_int64(env, v, out, &lossless);
        if (!lossless) goto range;
    } else if (t == napi_number) {
        double d;
        napi_get_value_double(env, v, &d);
        if (d != d || d != floor(d)) {
            nrlt_range_error(env, arg, "must be an integer");
            return -1;
        }
        if (d < -9007199254740992.0 || d > 9007199254740992.0) goto range;
        *out = (int64_t)d;
    } else {
        nrlt_type_error(env, arg, "must be an integer (a number or a BigInt)");
        return -1;
    }
    if (*out >= lo && *out <= hi) return 0;
range:
    snprintf(msg, sizeof msg, "must be an integer in %lld..%lld", (long long)lo, (long long)hi);
    nrlt_range_error(env, arg, msg);
    return -1;
}

int nrlt_now(napi_env env, napi_value v, rlt_ns *out)
{
    *out = NRLT_NOW_NONE;
    if (nrlt_absent(env, v)) return 0;
    return nrlt_int(env, v, "nowNs", INT64_MIN + 1, INT64_MAX, out);
}

int nrlt_string(napi_env env, napi_value v, const char *arg, bool optional, char **out)
{
    napi_valuetype t;
    size_t n;
    *out = NULL;
    if (optional && nrlt_absent(env, v)) return 0;
    napi_typeof(env, v, &t);
    if (t != napi_string) {
        nrlt_type_error(env, arg, "must be a string");
        return -1;
    }
    napi_get_value_string_utf8(env, v, NULL, 0, &n);
    if (!(*out = malloc(n + 1))) {
        nrlt_throw_status(env, RLT_ENOMEM, arg);
        return -1;
    }
    napi_get_value_string_utf8(env, v, *out, n + 1, &n);
    if (strlen(*out) != n) {
        free(*out);
        *out = NULL;
        nrlt_type_error(env, arg, "must not hold a NUL character");
        return -1;
    }
    return 0;
}

rlt_ns nrlt_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (rlt_ns)ts.tv_sec * RLT_NS_PER_S + ts.tv_nsec;
}

rlt_ns nrlt_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (rlt_ns)ts.tv_sec * RLT_NS_PER_S + ts.tv_nsec;
}

static double exact(int64_t v)
{
    return v >= -(INT64_C(1) << 53) && v <= (INT64_C(1) << 53) ? (double)v : NAN;
}

void nrlt_out(nrlt_env *e, const rlt_decision *d, uint64_t reservation, int refused, int pidx,
              int status)
{
    double f[10] = {d->allowed,         (double)d->limit,       (double)d->remaining,
                    (double)d->lease,   refused,                pidx,
                    status,             exact(d->retry_after),  exact(d->reset_after),
                    exact(d->delay)};
    int64_t i[3] = {d->retry_after, d->reset_after, d->delay};
    memcpy(e->out, f, sizeof f);
    memcpy(e->out + 80, i, sizeof i);
    memcpy(e->out + 104, &reservation, sizeof reservation);
    memcpy(e->out + 112, &d->lease, sizeof d->lease);
}

nrlt_limiter *nrlt_limiter_of(napi_env env, napi_value self)
{
    void *p = NULL;
    napi_valuetype t;
    napi_typeof(env, self, &t);
    if (t != napi_object || napi_unwrap(env, self, &p) != napi_ok || !p ||
        *(uint32_t *)p != NRLT_MAGIC_LIMITER) {
        napi_value ignored;
        bool pending = false;
        napi_is_exception_pending(env, &pending);
        if (pending) napi_get_and_clear_last_exception(env, &ignored);
        nrlt_type_error(env, "this", "must be a Limiter");
        return NULL;
    }
    return p;
}
