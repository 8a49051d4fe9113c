/* ratelimit for Node.js: Limiter, policies over a store; hit, peek, reset, multi, leases,
 * reservations and header text, each a TypeError or RangeError naming the argument for bad
 * input and a decision (in the environment's output area) otherwise. */
#include "native.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static nrlt_env *env_data(napi_env env)
{
    nrlt_env *e = NULL;
    napi_get_instance_data(env, (void **)&e);
    return e;
}

static void limiter_finalize(napi_env env, void *data, void *hint)
{
    (void)hint;
    nrlt_limiter *l = data;
    if (l->store_ref) napi_delete_reference(env, l->store_ref);
    free(l);
}

/* Parses one policy text into l->pol[i]. */
static int parse_one(napi_env env, nrlt_limiter *l, int i, napi_value v)
{
    char *text, err[256] = "", msg[400];
    if (nrlt_string(env, v, "policy", false, &text)) return -1;
    int rc = rlt_policy_parse(&l->pol[i], text, strlen(text), err, sizeof err);
    if (rc) {
        snprintf(msg, sizeof msg, "\"%.100s\": %s", text, err[0] ? err : rlt_strerror(rc));
        free(text);
        if (rc == RLT_ERANGE)
            nrlt_range_error(env, "policy", msg);
        else
            nrlt_range_error(env, "policy", msg);
        return -1;
    }
    free(text);
    return 0;
}

/* new Limiter(policies, store, name): policies a string or an array of 1..16 strings. */
static napi_value limiter_ctor(napi_env env, napi_callback_info info)
{
    size_t argc = 3;
    napi_value argv[3], self;
    napi_get_cb_info(env, info, &argc, argv, &self, NULL);
    if (argc < 2) return nrlt_type_error(env, "Limiter", "needs (policies, store[, name])");
    nrlt_limiter *l = calloc(1, sizeof *l);
    if (!l) return nrlt_throw_status(env, RLT_ENOMEM, "Limiter");
    l->magic = NRLT_MAGIC_LIMITER;
    bool arr = false;
    napi_is_array(env, argv[0], &arr);
    if (arr) {
        uint32_t n;
        napi_get_array_length(env, argv[0], &n);
        if (n < 1 || n > NRLT_POLICIES_MAX) {
            free(l);
            return nrlt_range_error(env, "policy", "a limiter has 1 to 16 policies");
        }
        for (uint32_t i = 0; i < n; i++) {
            napi_value v;
            napi_get_element(env, argv[0], i, &v);
            if (parse_one(env, l, (int)i, v)) goto fail;
        }
        l->n = (int)n;
    } else {
        if (parse_one(env, l, 0, argv[0])) goto fail;
        l->n = 1;
    }
    for (int i = 0; l->n > 1 && i < l->n; i++)
        if (l->pol[i].algo == RLT_CONCURRENCY) {
            nrlt_range_error(env, "policy",
                             "a concurrency policy cannot be one of several (multi-limit) policies");
            goto fail;
        }
    snprintf(l->name, sizeof l->name, "default");
    if (argc >= 3 && !nrlt_absent(env, argv[2])) {
        char *name;
        if (nrlt_string(env, argv[2], "name", false, &name)) goto fail;
        size_t nl = strlen(name);
        bool ok = nl >= 1 && nl <= 64 &&
                  strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                               "0123456789_.:-") == nl;
        if (ok) memcpy(l->name, name, nl + 1);
        free(name);
        if (!ok) {
            nrlt_range_error(env, "name", "must be 1..64 characters of [A-Za-z0-9_.:-]");
            goto fail;
        }
    }
    if (!(l->store = nrlt_store_of(env, argv[1], "store"))) goto fail;
    if (l->store->kind == NRLT_REDIS ? nrlt_redis_prepare(env, l) : nrlt_store_prepare(env, l))
        goto fail;
    napi_create_reference(env, argv[1], 1, &l->store_ref);
    if (napi_wrap(env, self, l, limiter_finalize, NULL, NULL) != napi_ok) {
        limiter_finalize(env, l, NULL);
        return NULL;
    }
    return self;
fail:
    free(l);
    return NULL;
}

/* Arguments of a method: `this` as a limiter and up to 6 values (missing ones undefined). */
typedef struct margs {
    nrlt_limiter *l;
    napi_value a[6];
    size_t n;
} margs;

static int get_args(napi_env env, napi_callback_info info, margs *m)
{
    napi_value self;
    m->n = 6;
    napi_get_cb_info(env, info, &m->n, m->a, &self, NULL);
    napi_value undef;
    napi_get_undefined(env, &undef);
    for (size_t i = m->n; i < 6; i++)
        m->a[i] = undef;
    if (!(m->l = nrlt_limiter_of(env, self))) return -1;
    if (m->l->store->kind != NRLT_MEMORY) {
        nrlt_type_error(env, "this", "decides over a network store: use the async methods");
        return -1;
    }
    return 0;
}

static napi_value boolean(napi_env env, bool b)
{
    napi_value v;
    napi_get_boolean(env, b, &v);
    return v;
}

/* Which policy a combined decision's numbers are of: the refusing one, else the first whose
 * limit is the combined limit (the combine keeps the limit of the fewest remaining). */
static int pick(const rlt_policy *const *pol, size_t n, const rlt_decision *d, int refused)
{
    if (refused >= 0 && (size_t)refused < n) return refused;
    for (size_t i = 0; i < n; i++)
        if (rlt_policy_limit(pol[i]) == d->limit) return (int)i;
    return 0;
}

/* Decides `cost` on key over every policy of `l` and writes the output area. */
static napi_value decide(napi_env env, nrlt_limiter *l, const char *k, size_t kl, int64_t cost,
                         rlt_ns now)
{
    rlt_decision d;
    int refused = -1, rc;
    now = nrlt_store_now(l->store, now);
    if (l->n == 1) {
        rc = rlt_store_decide(l->store->mem, l->ids[0], k, kl, now, cost, &d);
    } else {
        rlt_check c[NRLT_POLICIES_MAX];
        for (int i = 0; i < l->n; i++)
            c[i] = (rlt_check){l->ids[i], k, kl, cost};
        rc = rlt_store_decide_multi(l->store->mem, c, (size_t)l->n, now, &d, &refused);
    }
    if (rc != RLT_OK) return nrlt_throw_status(env, rc, "hit");
    const rlt_policy *pp[NRLT_POLICIES_MAX];
    for (int i = 0; i < l->n; i++)
        pp[i] = &l->pol[i];
    int pidx = l->n == 1 ? 0 : pick(pp, (size_t)l->n, &d, refused);
    nrlt_out(env_data(env), &d, 0, d.allowed ? -1 : refused, pidx, 0);
    return boolean(env, d.allowed);
}

/* lim.hit(key, cost = 1, nowNs) -> allowed; the decision in the output area.  The common call,
 * lim.hit(stringKey) on an in-process store, takes 3 Node-API calls before the store (the
 * arguments, the unwrap, the key's bytes); anything else goes the checked way below. */
static napi_value lim_hit(napi_env env, napi_callback_info info)
{
    margs m;
    char k[RLT_KEY_MAX + 8];
    size_t kl;
    int64_t cost = 1;
    rlt_ns now;
    {
        size_t argc = 1;
        napi_value key, self;
        void *p = NULL;
        if (napi_get_cb_info(env, info, &argc, &key, &self, NULL) == napi_ok && argc == 1 &&
            napi_unwrap(env, self, &p) == napi_ok && p && *(uint32_t *)p == NRLT_MAGIC_LIMITER &&
            ((nrlt_limiter *)p)->store->kind == NRLT_MEMORY &&
            napi_get_value_string_utf8(env, key, k, RLT_KEY_MAX + 8, &kl) == napi_ok && kl >= 1 &&
            kl <= RLT_KEY_MAX)
            return decide(env, p, k, kl, 1, NRLT_NOW_NONE);
        bool pending = false;
        napi_value ignored;
        napi_is_exception_pending(env, &pending); /* a failed unwrap of a foreign `this` */
        if (pending) napi_get_and_clear_last_exception(env, &ignored);
    }
    if (get_args(env, info, &m) || nrlt_key(env, m.a[0], "key", k, &kl)) return NULL;
    if (!nrlt_absent(env, m.a[1]) && nrlt_int(env, m.a[1], "cost", 0, INT64_C(1) << 53, &cost))
        return NULL;
    if (nrlt_now(env, m.a[2], &now)) return NULL;
    if (cost > 1 && m.l->pol[0].algo == RLT_CONCURRENCY)
        return nrlt_range_error(env, "cost", "must be 0 or 1 for a concurrency policy");
    return decide(env, m.l, k, kl, cost, now);
}

/* lim.hitMany(keys, cost = 1, nowNs) -> a Uint8Array, 1 where keys[i] was allowed: n
 * decisions at one instant through rlt_store_decide_batch (the store prefetches their slots),
 * for a caller holding many keys at once (a queue consumer, a batch of messages).  Each item
 * is decided as lim.hit would, in order; the batch is not all-or-nothing. */
#define BATCH 256
static napi_value lim_hit_many(napi_env env, napi_callback_info info)
{
    margs m;
    bool arr = false;
    uint32_t n;
    int64_t cost = 1;
    rlt_ns now;
    if (get_args(env, info, &m)) return NULL;
    napi_is_array(env, m.a[0], &arr);
    if (!arr) return nrlt_type_error(env, "keys", "must be an array");
    if (!nrlt_absent(env, m.a[1]) && nrlt_int(env, m.a[1], "cost", 0, INT64_C(1) << 53, &cost))
        return NULL;
    if (nrlt_now(env, m.a[2], &now)) return NULL;
    if (m.l->n != 1 || m.l->pol[0].algo == RLT_CONCURRENCY)
        return nrlt_type_error(env, "hitMany", "needs a limiter with one policy, not concurrency");
    napi_get_array_length(env, m.a[0], &n);
    napi_value ab, out;
    void *data;
    if (napi_create_arraybuffer(env, n, &data, &ab) != napi_ok) return NULL;
    napi_create_typedarray(env, napi_uint8_array, n, ab, 0, &out);
    uint8_t *flags = data;
    char *buf = malloc((size_t)BATCH * (RLT_KEY_MAX + 8));
    if (!buf) return nrlt_throw_status(env, RLT_ENOMEM, "hitMany");
    rlt_key keys[BATCH];
    int64_t costs[BATCH];
    rlt_decision d[BATCH];
    int st[BATCH];
    now = nrlt_store_now(m.l->store, now);
    for (uint32_t base = 0; base < n; base += BATCH) {
        uint32_t k = n - base < BATCH ? n - base : BATCH;
        for (uint32_t i = 0; i < k; i++) {
            napi_value v;
            size_t kl;
            char *kb = buf + (size_t)i * (RLT_KEY_MAX + 8);
            napi_get_element(env, m.a[0], base + i, &v);
            if (nrlt_key(env, v, "keys", kb, &kl)) {
                free(buf);
                return NULL;
            }
            keys[i] = (rlt_key){kb, kl};
            costs[i] = cost;
        }
        rlt_store_decide_batch(m.l->store->mem, m.l->ids[0], keys, k, now, costs, d, st);
        for (uint32_t i = 0; i < k; i++) {
            if (st[i] != RLT_OK) {
                free(buf);
                return nrlt_throw_status(env, st[i], "hitMany");
            }
            flags[base + i] = d[i].allowed;
        }
    }
    free(buf);
    return out;
}

/* lim.peek(key, nowNs): a cost-0 decision. */
static napi_value lim_peek(napi_env env, napi_callback_info info)
{
    margs m;
    char k[RLT_KEY_MAX + 8];
    size_t kl;
    rlt_ns now;
    if (get_args(env, info, &m) || nrlt_key(env, m.a[0], "key", k, &kl)) return NULL;
    if (nrlt_now(env, m.a[1], &now)) return NULL;
    return decide(env, m.l, k, kl, 0, now);
}

/* lim.reset(key): the key starts fresh under every policy. */
static napi_value lim_reset(napi_env env, napi_callback_info info)
{
    margs m;
    char k[RLT_KEY_MAX + 8];
    size_t kl;
    if (get_args(env, info, &m) || nrlt_key(env, m.a[0], "key", k, &kl)) return NULL;
    for (int i = 0; i < m.l->n; i++) {
        int rc = rlt_store_reset(m.l->store->mem, m.l->ids[i], k, kl);
        if (rc) return nrlt_throw_status(env, rc, "reset");
    }
    return boolean(env, true);
}

/* lim.multi([[limiter, key, cost], ...], nowNs): all-or-nothing over every policy of every
 * limiter (one store); refused is the index into the flattened list of limits. */
static napi_value lim_multi(napi_env env, napi_callback_info info)
{
    margs m;
    bool arr = false;
    uint32_t n;
    rlt_ns now;
    if (get_args(env, info, &m)) return NULL;
    napi_is_array(env, m.a[0], &arr);
    if (!arr) return nrlt_type_error(env, "checks", "must be an array of [limiter, key, cost]");
    napi_get_array_length(env, m.a[0], &n);
    if (n < 1 || n > 64) return nrlt_range_error(env, "checks", "must hold 1..64 checks");
    if (nrlt_now(env, m.a[1], &now)) return NULL;
    rlt_check c[64];
    const rlt_policy *pp[64];
    static __thread char keys[64][RLT_KEY_MAX + 8];
    size_t nc = 0;
    for (uint32_t i = 0; i < n; i++) {
        napi_value item, v[3];
        bool ia = false;
        uint32_t il = 0;
        napi_get_element(env, m.a[0], i, &item);
        napi_is_array(env, item, &ia);
        if (ia) napi_get_array_length(env, item, &il);
        if (!ia || il < 2 || il > 3)
            return nrlt_type_error(env, "checks", "each check is [limiter, key, cost]");
        for (uint32_t j = 0; j < 3; j++)
            if (j < il)
                napi_get_element(env, item, j, &v[j]);
            else
                napi_get_undefined(env, &v[j]);
        nrlt_limiter *o = nrlt_limiter_of(env, v[0]);
        size_t kl;
        int64_t cost = 1;
        if (!o) return NULL;
        if (o->store != m.l->store)
            return nrlt_type_error(env, "checks", "every limiter must use this limiter's store");
        if (nrlt_key(env, v[1], "key", keys[i], &kl)) return NULL;
        if (!nrlt_absent(env, v[2]) && nrlt_int(env, v[2], "cost", 0, INT64_C(1) << 53, &cost))
            return NULL;
        for (int p = 0; p < o->n; p++) {
            if (nc == 64) return nrlt_range_error(env, "checks", "must hold at most 64 limits");
            if (o->pol[p].algo == RLT_CONCURRENCY)
                return nrlt_type_error(env, "checks", "a concurrency limiter cannot be in multi");
            pp[nc] = &o->pol[p];
            c[nc++] = (rlt_check){o->ids[p], keys[i], kl, cost};
        }
    }
    rlt_decision d;
    int refused = -1;
    int rc = rlt_store_decide_multi(m.l->store->mem, c, nc, nrlt_store_now(m.l->store, now), &d,
                                    &refused);
    if (rc) return nrlt_throw_status(env, rc, "multi");
    nrlt_out(env_data(env), &d, 0, d.allowed ? -1 : refused, pick(pp, nc, &d, refused), 0);
    return boolean(env, d.allowed);
}

/* lim.release(key, lease, nowNs) -> true released, false unknown (already released or
 * expired). */
static napi_value lim_release(napi_env env, napi_callback_info info)
{
    margs m;
    char k[RLT_KEY_MAX + 8];
    size_t kl;
    int64_t lease;
    rlt_ns now;
    if (get_args(env, info, &m) || nrlt_key(env, m.a[0], "key", k, &kl)) return NULL;
    if (nrlt_int(env, m.a[1], "lease", 1, INT64_MAX, &lease) || nrlt_now(env, m.a[2], &now))
        return NULL;
    if (m.l->pol[0].algo != RLT_CONCURRENCY)
        return nrlt_type_error(env, "release", "needs a concurrency policy");
    int rc = rlt_store_release(m.l->store->mem, m.l->ids[0], k, kl,
                               nrlt_store_now(m.l->store, now), lease);
    if (rc && rc != RLT_ENOENT) return nrlt_throw_status(env, rc, "release");
    return boolean(env, rc == RLT_OK);
}

/* lim.reserve(key, estimate, nowNs, timeoutNs) -> allowed; the reservation in the output. */
static napi_value lim_reserve(napi_env env, napi_callback_info info)
{
    margs m;
    char k[RLT_KEY_MAX + 8];
    size_t kl;
    int64_t est, timeout = 0;
    rlt_ns now;
    if (get_args(env, info, &m) || nrlt_key(env, m.a[0], "key", k, &kl)) return NULL;
    if (nrlt_int(env, m.a[1], "estimate", 0, INT64_C(1) << 53, &est) || nrlt_now(env, m.a[2], &now))
        return NULL;
    if (!nrlt_absent(env, m.a[3]) && nrlt_int(env, m.a[3], "timeoutNs", 0, INT64_MAX, &timeout))
        return NULL;
    if (m.l->n != 1) return nrlt_type_error(env, "reserve", "needs a limiter with one policy");
    rlt_decision d;
    uint64_t resv = 0;
    int rc = rlt_store_reserve(m.l->store->mem, m.l->ids[0], k, kl, nrlt_store_now(m.l->store, now),
                               est, timeout, &d, &resv);
    if (rc) return nrlt_throw_status(env, rc, "reserve");
    nrlt_out(env_data(env), &d, resv, -1, 0, 0);
    return boolean(env, d.allowed);
}

/* lim.settle(key, reservation, realCost, nowNs) -> true settled (a peek in the output), false
 * when the reservation is unknown, settled or expired. */
static napi_value lim_settle(napi_env env, napi_callback_info info)
{
    margs m;
    char k[RLT_KEY_MAX + 8];
    size_t kl;
    int64_t real;
    uint64_t resv = 0;
    bool lossless = false;
    napi_valuetype t;
    rlt_ns now;
    if (get_args(env, info, &m) || nrlt_key(env, m.a[0], "key", k, &kl)) return NULL;
    napi_typeof(env, m.a[1], &t);
    if (t != napi_bigint) return nrlt_type_error(env, "reservation", "must be a BigInt");
    napi_get_value_bigint_uint64(env, m.a[1], &resv, &lossless);
    if (!lossless || !resv) return nrlt_range_error(env, "reservation", "is not a reservation id");
    if (nrlt_int(env, m.a[2], "realCost", 0, INT64_C(1) << 53, &real) || nrlt_now(env, m.a[3], &now))
        return NULL;
    if (m.l->n != 1) return nrlt_type_error(env, "settle", "needs a limiter with one policy");
    rlt_decision d;
    int rc = rlt_store_settle(m.l->store->mem, m.l->ids[0], k, kl, nrlt_store_now(m.l->store, now),
                              resv, real, &d);
    if (rc == RLT_ENOENT) return boolean(env, false);
    if (rc) return nrlt_throw_status(env, rc, "settle");
    nrlt_out(env_data(env), &d, 0, -1, 0, 0);
    return boolean(env, true);
}

/* lim.formatHeaders(policyIndex, allowed, limit, remaining, retryAfterNs, resetAfterNs, which)
 * -> "Field: value\r\n..." as rlt_format_headers writes them. */
static napi_value lim_headers(napi_env env, napi_callback_info info)
{
    napi_value argv[7], self, out;
    size_t argc = 7;
    int64_t v[7];
    napi_get_cb_info(env, info, &argc, argv, &self, NULL);
    nrlt_limiter *l = nrlt_limiter_of(env, self);
    if (!l) return NULL;
    if (argc < 7) return nrlt_type_error(env, "formatHeaders", "needs 7 arguments");
    static const char *names[] = {"policyIndex", "allowed", "limit", "remaining",
                                  "retryAfterNs", "resetAfterNs", "which"};
    for (int i = 0; i < 7; i++) {
        if (i == 1) {
            bool b = false;
            napi_get_value_bool(env, argv[1], &b);
            v[1] = b;
            continue;
        }
        if (nrlt_int(env, argv[i], names[i], i == 4 ? -1 : 0, INT64_MAX, &v[i])) return NULL;
    }
    if (v[0] >= l->n) return nrlt_range_error(env, "policyIndex", "is not a policy of this limiter");
    rlt_decision d = {.allowed = v[1], .limit = v[2], .remaining = v[3], .retry_after = v[4],
                      .reset_after = v[5]};
    char buf[1024];
    int rc = rlt_format_headers(buf, sizeof buf, l->name, &l->pol[v[0]], &d, (unsigned)v[6]);
    if (rc < 0) return nrlt_throw_status(env, rc, "formatHeaders");
    napi_create_string_utf8(env, buf, NAPI_AUTO_LENGTH, &out);
    return out;
}

/* lim.policies() -> the canonical texts of the policies. */
static napi_value lim_policies(napi_env env, napi_callback_info info)
{
    napi_value self, arr, s;
    napi_get_cb_info(env, info, NULL, NULL, &self, NULL);
    nrlt_limiter *l = nrlt_limiter_of(env, self);
    if (!l) return NULL;
    napi_create_array_with_length(env, (size_t)l->n, &arr);
    for (int i = 0; i < l->n; i++) {
        char buf[512];
        int rc = rlt_policy_format(&l->pol[i], buf, sizeof buf);
        if (rc < 0) return nrlt_throw_status(env, rc, "policies");
        napi_create_string_utf8(env, buf, (size_t)rc, &s);
        napi_set_element(env, arr, (uint32_t)i, s);
    }
    return arr;
}

napi_status nrlt_limiter_init(napi_env env, napi_value exports, nrlt_env *e)
{
#define M(n, f) {n, NULL, f, NULL, NULL, NULL, napi_default, NULL}
    napi_property_descriptor props[] = {
        M("hit", lim_hit),         M("hitMany", lim_hit_many),         M("peek", lim_peek),       M("reset", lim_reset),
        M("multi", lim_multi),     M("release", lim_release), M("reserve", lim_reserve),
        M("settle", lim_settle),   M("formatHeaders", lim_headers),
        M("policies", lim_policies), M("redisCall", nrlt_redis_call),
        M("redisBatch", nrlt_redis_batch),
    };
#undef M
    napi_value cls;
    napi_status st = napi_define_class(env, "Limiter", NAPI_AUTO_LENGTH, limiter_ctor, NULL,
                                       sizeof props / sizeof props[0], props, &cls);
    if (st != napi_ok) return st;
    if ((st = napi_create_reference(env, cls, 1, &e->limiter_ctor)) != napi_ok) return st;
    return napi_set_named_property(env, exports, "Limiter", cls);
}
