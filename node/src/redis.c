/* ratelimit for Node.js: RedisStore, libratelimit_redis (the scripts or the module, Cluster,
 * Sentinel) run on libuv's thread pool through napi async work, so the event loop never
 * waits on Redis; each call resolves a Promise with the decision's fields and its status. */
#include "native.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

/* ---- The store and its pool ---------------------------------------------------------- */

static void redis_finalize(napi_env env, void *data, void *hint)
{
    (void)env, (void)hint;
    nrlt_store *s = data;
    for (size_t i = 0; i < s->npool; i++)
        rlt_redis_close(s->pool[i]);
    free(s->pool);
    free(s->servers), free(s->password), free(s->prefix), free(s->sentinels), free(s->master);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* A handle from the pool or a new one (on a pool thread). */
static int take(nrlt_store *s, rlt_redis **out)
{
    pthread_mutex_lock(&s->mu);
    *out = s->npool ? s->pool[--s->npool] : NULL;
    pthread_mutex_unlock(&s->mu);
    return *out ? RLT_OK : rlt_redis_open(out, &s->ropt);
}

static void give(nrlt_store *s, rlt_redis *r)
{
    pthread_mutex_lock(&s->mu);
    if (s->npool == s->cappool) {
        size_t cap = s->cappool ? 2 * s->cappool : 8;
        rlt_redis **p = realloc(s->pool, cap * sizeof *p);
        if (!p) {
            pthread_mutex_unlock(&s->mu);
            rlt_redis_close(r);
            return;
        }
        s->pool = p;
        s->cappool = cap;
    }
    s->pool[s->npool++] = r;
    pthread_mutex_unlock(&s->mu);
}

static int opt_str(napi_env env, napi_value o, const char *name, char **out)
{
    napi_value v;
    napi_get_named_property(env, o, name, &v);
    return nrlt_string(env, v, name, true, out);
}

/* new RedisStore({servers, cluster, password, prefix, timeoutMs, sentinels, masterName,
 * engine: 'auto' | 'scripts' | 'module'}) */
static napi_value redis_ctor(napi_env env, napi_callback_info info)
{
    size_t argc = 1;
    napi_value argv[1], self, v;
    napi_valuetype t = napi_undefined;
    napi_get_cb_info(env, info, &argc, argv, &self, NULL);
    if (argc >= 1) napi_typeof(env, argv[0], &t);
    if (t != napi_object) return nrlt_type_error(env, "options", "must be an object");
    nrlt_store *s = calloc(1, sizeof *s);
    if (!s) return nrlt_throw_status(env, RLT_ENOMEM, "RedisStore");
    s->magic = NRLT_MAGIC_STORE;
    s->kind = NRLT_REDIS;
    pthread_mutex_init(&s->mu, NULL);
    char *engine = NULL;
    int64_t timeout = 50;
    bool cluster = false;
    if (opt_str(env, argv[0], "servers", &s->servers) ||
        opt_str(env, argv[0], "password", &s->password) ||
        opt_str(env, argv[0], "prefix", &s->prefix) ||
        opt_str(env, argv[0], "sentinels", &s->sentinels) ||
        opt_str(env, argv[0], "masterName", &s->master) || opt_str(env, argv[0], "engine", &engine))
        goto fail;
    napi_get_named_property(env, argv[0], "timeoutMs", &v);
    if (!nrlt_absent(env, v) && nrlt_int(env, v, "timeoutMs", 1, 3600000, &timeout)) goto fail;
    napi_get_named_property(env, argv[0], "cluster", &v);
    if (!nrlt_absent(env, v) && napi_get_value_bool(env, v, &cluster) != napi_ok) {
        nrlt_type_error(env, "cluster", "must be a boolean");
        goto fail;
    }
    s->ropt.engine = RLT_REDIS_ENGINE_AUTO;
    if (engine && strcmp(engine, "auto") != 0) {
        if (strcmp(engine, "scripts") == 0)
            s->ropt.engine = RLT_REDIS_ENGINE_SCRIPTS;
        else if (strcmp(engine, "module") == 0)
            s->ropt.engine = RLT_REDIS_ENGINE_MODULE;
        else {
            nrlt_range_error(env, "engine", "must be 'auto', 'scripts' or 'module'");
            goto fail;
        }
    }
    free(engine);
    engine = NULL;
    s->ropt.servers = s->servers;
    s->ropt.cluster = cluster;
    s->ropt.password = s->password;
    s->ropt.prefix = s->prefix;
    s->ropt.sentinels = s->sentinels;
    s->ropt.master_name = s->master;
    s->ropt.timeout = timeout * RLT_NS_PER_MS;
    /* Checks the options now (a bad server list is the caller's error, not an outage). */
    rlt_redis *r;
    int rc = rlt_redis_open(&r, &s->ropt);
    if (rc) {
        nrlt_range_error(env, "options", rc == RLT_EINVAL ? "bad server list, prefix or sentinels"
                                                          : rlt_strerror(rc));
        goto fail;
    }
    give(s, r);
    if (napi_wrap(env, self, s, redis_finalize, NULL, NULL) != napi_ok) {
        redis_finalize(env, s, NULL);
        return NULL;
    }
    return self;
fail:
    free(engine);
    redis_finalize(env, s, NULL);
    return NULL;
}

int nrlt_redis_prepare(napi_env env, nrlt_limiter *l)
{
    for (int i = 0; i < l->n; i++) {
        int rc = rlt_redis_policy_check(&l->pol[i]);
        if (rc) {
            nrlt_range_error(env, "policy",
                             rc == RLT_EINVAL ? "cannot run inside Redis (its durations must be "
                                                "whole microseconds)"
                                              : "its numbers reach 2^53 inside Redis");
            return -1;
        }
    }
    return 0;
}

/* ---- One call on the thread pool ----------------------------------------------------- */

typedef struct call {
    napi_async_work work;
    napi_deferred deferred;
    napi_ref lim_ref; /* keeps the limiter (and through it the store) alive */
    nrlt_limiter *l;
    char op;
    char key[RLT_KEY_MAX + 8];
    size_t klen;
    int64_t arg;     /* cost, estimate, real cost */
    int64_t lease;   /* release */
    uint64_t resv;   /* settle */
    rlt_ns timeout;  /* reserve */
    rlt_decision d;
    uint64_t out_resv;
    int refused, status;
    /* 'b' (a batch): n keys packed in bkeys, their decisions and statuses */
    size_t n;
    char *bkeys;
    rlt_redis_check *checks;
    rlt_decision *bd;
    int *bst;
} call;

static void call_free(call *c)
{
    free(c->bkeys), free(c->checks), free(c->bd), free(c->bst);
    free(c);
}

static void execute(napi_env env, void *data)
{
    (void)env;
    call *c = data;
    nrlt_limiter *l = c->l;
    rlt_redis *r;
    c->refused = -1;
    if ((c->status = take(l->store, &r)) != RLT_OK) return;
    switch (c->op) {
    case 'c':
        if (l->n == 1) {
            c->status = rlt_redis_decide(r, &l->pol[0], 0, c->key, c->klen, 0, c->arg, &c->d);
        } else {
            rlt_redis_check ch[NRLT_POLICIES_MAX];
            for (int i = 0; i < l->n; i++)
                ch[i] = (rlt_redis_check){&l->pol[i], c->key, c->klen, c->arg};
            c->status = rlt_redis_decide_multi(r, ch, (size_t)l->n, 0, 0, &c->d, &c->refused);
        }
        break;
    case 'x':
        for (int i = 0; i < l->n && c->status == RLT_OK; i++)
            c->status = rlt_redis_reset(r, &l->pol[i], c->key, c->klen);
        break;
    case 'l':
        c->status = rlt_redis_release(r, &l->pol[0], 0, c->key, c->klen, 0, c->lease);
        break;
    case 'r':
        c->status = rlt_redis_reserve(r, &l->pol[0], 0, c->key, c->klen, 0, c->arg, c->timeout,
                                      &c->d, &c->out_resv);
        break;
    case 's':
        c->status =
            rlt_redis_settle(r, &l->pol[0], 0, c->key, c->klen, 0, c->resv, c->arg, &c->d);
        break;
    case 'b':
        /* One pipeline for the calls of one turn of the event loop. */
        c->status = rlt_redis_decide_batch(r, c->checks, c->n, 0, 0, c->bd, c->bst);
        break;
    }
    give(l->store, r);
}

static void set_num(napi_env env, napi_value o, const char *name, double v)
{
    napi_value x;
    napi_create_double(env, v, &x);
    napi_set_named_property(env, o, name, x);
}

static void set_big(napi_env env, napi_value o, const char *name, int64_t v)
{
    napi_value x;
    napi_create_bigint_int64(env, v, &x);
    napi_set_named_property(env, o, name, x);
}

/* The fields of decision `d` with `status` as a plain object. */
static napi_value fields(napi_env env, const rlt_decision *d, int refused, uint64_t resv,
                         int status)
{
    napi_value o, x;
    napi_create_object(env, &o);
    napi_get_boolean(env, d->allowed, &x);
    napi_set_named_property(env, o, "allowed", x);
    set_num(env, o, "limit", (double)d->limit);
    set_num(env, o, "remaining", (double)d->remaining);
    set_big(env, o, "retryAfterNs", d->retry_after);
    set_big(env, o, "resetAfterNs", d->reset_after);
    set_big(env, o, "delayNs", d->delay);
    set_big(env, o, "lease", d->lease);
    napi_create_bigint_uint64(env, resv, &x);
    napi_set_named_property(env, o, "reservation", x);
    set_num(env, o, "refused", d->allowed ? -1 : refused);
    set_num(env, o, "policy", refused > 0 ? refused : 0);
    set_num(env, o, "status", status);
    return o;
}

/* v as a double when it is exact (|v| <= 2^53), else NaN (the int64 word then holds it). */
static double exact_ns(int64_t v)
{
    return v >= -(INT64_C(1) << 53) && v <= (INT64_C(1) << 53) ? (double)v : NAN;
}

static void complete(napi_env env, napi_status st, void *data)
{
    call *c = data;
    napi_value o;
    (void)st;
    if (c->op == 'b') {
        /* One ArrayBuffer for the whole batch, NRLT_BATCH_WORDS 8-byte words an item (no
         * object or BigInt made here; daemon.js reads it): doubles 0 allowed, 1 limit,
         * 2 remaining, 3 status, 4..6 retry_after, reset_after, delay in ns when exact (else
         * NaN), int64 7..9 the same three exactly.  A handle that could not be had fails
         * every item with the call's status. */
        void *buf = NULL;
        if (napi_create_arraybuffer(env, c->n * NRLT_BATCH_WORDS * 8, &buf, &o) != napi_ok) {
            napi_get_undefined(env, &o);
        } else {
            unsigned char *w = buf;
            for (size_t i = 0; i < c->n; i++, w += NRLT_BATCH_WORDS * 8) {
                const rlt_decision *d = &c->bd[i];
                double f[7] = {d->allowed,
                               (double)d->limit,
                               (double)d->remaining,
                               c->bst[i] ? c->bst[i] : c->status,
                               exact_ns(d->retry_after),
                               exact_ns(d->reset_after),
                               exact_ns(d->delay)};
                int64_t x[3] = {d->retry_after, d->reset_after, d->delay};
                memcpy(w, f, sizeof f);
                memcpy(w + sizeof f, x, sizeof x);
            }
        }
    } else {
        o = fields(env, &c->d, c->refused, c->out_resv, c->status);
    }
    napi_resolve_deferred(env, c->deferred, o);
    napi_delete_reference(env, c->lim_ref);
    napi_delete_async_work(env, c->work);
    call_free(c);
}

napi_value nrlt_redis_call(napi_env env, napi_callback_info info)
{
    size_t argc = 5;
    napi_value a[5], self, promise, name;
    char op[16];
    size_t ol = 0;
    napi_get_cb_info(env, info, &argc, a, &self, NULL);
    nrlt_limiter *l = nrlt_limiter_of(env, self);
    if (!l) return NULL;
    if (l->store->kind != NRLT_REDIS) return nrlt_type_error(env, "redisCall", "needs a RedisStore");
    if (argc < 2) return nrlt_type_error(env, "redisCall", "needs (op, key, ...)");
    call *c = calloc(1, sizeof *c);
    if (!c) return nrlt_throw_status(env, RLT_ENOMEM, "redisCall");
    c->l = l;
    napi_get_value_string_utf8(env, a[0], op, sizeof op, &ol);
    c->op = strcmp(op, "check") == 0     ? 'c'
            : strcmp(op, "reset") == 0   ? 'x'
            : strcmp(op, "release") == 0 ? 'l'
            : strcmp(op, "reserve") == 0 ? 'r'
            : strcmp(op, "settle") == 0  ? 's'
                                         : 0;
    if (!c->op) {
        free(c);
        return nrlt_range_error(env, "op", "unknown");
    }
    if (nrlt_key(env, a[1], "key", c->key, &c->klen)) goto fail;
    if (c->op == 'c' || c->op == 'r') {
        if (argc > 2 && !nrlt_absent(env, a[2]) &&
            nrlt_int(env, a[2], c->op == 'c' ? "cost" : "estimate", 0, INT64_C(1) << 53, &c->arg))
            goto fail;
        if (c->op == 'c' && (argc < 3 || nrlt_absent(env, a[2]))) c->arg = 1;
        if (c->op == 'r' && argc > 3 && !nrlt_absent(env, a[3]) &&
            nrlt_int(env, a[3], "timeoutNs", 0, INT64_MAX, &c->timeout))
            goto fail;
    } else if (c->op == 'l') {
        if (argc < 3 || nrlt_int(env, a[2], "lease", 1, INT64_MAX, &c->lease)) goto fail;
    } else if (c->op == 's') {
        bool lossless = false;
        napi_valuetype t = napi_undefined;
        if (argc > 2) napi_typeof(env, a[2], &t);
        if (t != napi_bigint) {
            nrlt_type_error(env, "reservation", "must be a BigInt");
            goto fail;
        }
        napi_get_value_bigint_uint64(env, a[2], &c->resv, &lossless);
        if (argc < 4 || nrlt_int(env, a[3], "realCost", 0, INT64_C(1) << 53, &c->arg)) goto fail;
    }
    if ((c->op == 'l' || c->op == 'r' || c->op == 's') && l->n != 1) {
        nrlt_type_error(env, op, "needs a limiter with one policy");
        goto fail;
    }
    if (c->op == 'c' && c->arg > 1 && l->pol[0].algo == RLT_CONCURRENCY) {
        nrlt_range_error(env, "cost", "must be 0 or 1 for a concurrency policy");
        goto fail;
    }
    napi_create_reference(env, self, 1, &c->lim_ref);
    napi_create_promise(env, &c->deferred, &promise);
    napi_create_string_utf8(env, "libratelimit.redis", NAPI_AUTO_LENGTH, &name);
    napi_create_async_work(env, NULL, name, execute, complete, c, &c->work);
    napi_queue_async_work(env, c->work);
    return promise;
fail:
    call_free(c);
    return NULL;
}

/* lim.redisBatch(keys, cost = 1) -> a Promise of an ArrayBuffer of the decisions (native.h):
 * n calls of one policy in one pipeline (rlt_redis_decide_batch) on the thread pool. */
napi_value nrlt_redis_batch(napi_env env, napi_callback_info info)
{
    size_t argc = 2;
    napi_value a[2], self, promise, name;
    bool arr = false;
    uint32_t n;
    int64_t cost = 1;
    napi_get_cb_info(env, info, &argc, a, &self, NULL);
    nrlt_limiter *l = nrlt_limiter_of(env, self);
    if (!l) return NULL;
    if (l->store->kind != NRLT_REDIS || l->n != 1)
        return nrlt_type_error(env, "redisBatch", "needs a RedisStore and one policy");
    if (argc < 1 || napi_is_array(env, a[0], &arr) != napi_ok || !arr)
        return nrlt_type_error(env, "keys", "must be an array");
    if (argc > 1 && !nrlt_absent(env, a[1]) && nrlt_int(env, a[1], "cost", 0, INT64_C(1) << 53, &cost))
        return NULL;
    napi_get_array_length(env, a[0], &n);
    if (n < 1 || n > 4096) return nrlt_range_error(env, "keys", "must hold 1..4096 keys");
    call *c = calloc(1, sizeof *c);
    if (!c) return nrlt_throw_status(env, RLT_ENOMEM, "redisBatch");
    c->l = l;
    c->op = 'b';
    c->n = n;
    c->bkeys = malloc((size_t)n * (RLT_KEY_MAX + 8));
    c->checks = calloc(n, sizeof *c->checks);
    c->bd = calloc(n, sizeof *c->bd);
    c->bst = calloc(n, sizeof *c->bst);
    if (!c->bkeys || !c->checks || !c->bd || !c->bst) {
        call_free(c);
        return nrlt_throw_status(env, RLT_ENOMEM, "redisBatch");
    }
    for (uint32_t i = 0; i < n; i++) {
        napi_value v;
        size_t kl;
        char *kb = c->bkeys + (size_t)i * (RLT_KEY_MAX + 8);
        napi_get_element(env, a[0], i, &v);
        if (nrlt_key(env, v, "keys", kb, &kl)) {
            call_free(c);
            return NULL;
        }
        c->checks[i] = (rlt_redis_check){&l->pol[0], kb, kl, cost};
    }
    napi_create_reference(env, self, 1, &c->lim_ref);
    napi_create_promise(env, &c->deferred, &promise);
    napi_create_string_utf8(env, "libratelimit.redis", NAPI_AUTO_LENGTH, &name);
    napi_create_async_work(env, NULL, name, execute, complete, c, &c->work);
    napi_queue_async_work(env, c->work);
    return promise;
}

napi_status nrlt_redis_init(napi_env env, napi_value exports)
{
    napi_value cls;
    napi_status st =
        napi_define_class(env, "RedisStore", NAPI_AUTO_LENGTH, redis_ctor, NULL, 0, NULL, &cls);
    if (st != napi_ok) return st;
    return napi_set_named_property(env, exports, "RedisStore", cls);
}
