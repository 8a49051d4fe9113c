/* ratelimit for Node.js: MemoryStore, the in-process sharded store, shared across worker
 * threads by name through one process-wide table. */
#include "native.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A store shared by name: every environment that opens `name` gets the same rlt_store; the
 * last close frees it.  Unnamed stores are private entries (name "") never found by lookup. */
typedef struct nrlt_shared {
    char name[65];
    rlt_store *mem;
    rlt_ns clock_shift;
    int refs;
    struct nrlt_shared *next;
} nrlt_shared;

static pthread_mutex_t shared_mu = PTHREAD_MUTEX_INITIALIZER;
static nrlt_shared *shared_list;

static void shared_drop(nrlt_shared *sh)
{
    pthread_mutex_lock(&shared_mu);
    if (--sh->refs == 0) {
        for (nrlt_shared **p = &shared_list; *p; p = &(*p)->next)
            if (*p == sh) {
                *p = sh->next;
                break;
            }
        rlt_store_close(sh->mem);
        free(sh);
    }
    pthread_mutex_unlock(&shared_mu);
}

static void store_finalize(napi_env env, void *data, void *hint)
{
    (void)env, (void)hint;
    nrlt_store *s = data;
    if (s->shared) shared_drop(s->shared);
    free(s);
}

/* Reads an optional non-negative integer option `name` of `opts`. */
static int opt_int(napi_env env, napi_value opts, const char *name, int64_t hi, int64_t *out)
{
    napi_value v;
    bool has = false;
    if (!opts) return 0;
    napi_has_named_property(env, opts, name, &has);
    if (!has) return 0;
    napi_get_named_property(env, opts, name, &v);
    if (nrlt_absent(env, v)) return 0;
    return nrlt_int(env, v, name, 0, hi, out);
}

/* new MemoryStore({maxKeys, maxBytes, failClosed, shards, name}) */
static napi_value memory_ctor(napi_env env, napi_callback_info info)
{
    size_t argc = 1;
    napi_value argv[1], self, opts = NULL;
    napi_get_cb_info(env, info, &argc, argv, &self, NULL);
    if (argc >= 1 && !nrlt_absent(env, argv[0])) {
        napi_valuetype t;
        napi_typeof(env, argv[0], &t);
        if (t != napi_object) return nrlt_type_error(env, "options", "must be an object");
        opts = argv[0];
    }
    int64_t max_keys = 0, max_bytes = 0, shards = 0;
    bool fail_closed = false;
    char *name = NULL;
    if (opt_int(env, opts, "maxKeys", INT64_C(1) << 40, &max_keys) ||
        opt_int(env, opts, "maxBytes", INT64_C(1) << 50, &max_bytes) ||
        opt_int(env, opts, "shards", 65536, &shards))
        return NULL;
    if (opts) {
        napi_value v;
        napi_get_named_property(env, opts, "failClosed", &v);
        if (!nrlt_absent(env, v)) {
            napi_valuetype t;
            napi_typeof(env, v, &t);
            if (t != napi_boolean) return nrlt_type_error(env, "failClosed", "must be a boolean");
            napi_get_value_bool(env, v, &fail_closed);
        }
        napi_get_named_property(env, opts, "name", &v);
        if (nrlt_string(env, v, "name", true, &name)) return NULL;
        if (name && (!*name || strlen(name) > 64)) {
            free(name);
            return nrlt_range_error(env, "name", "must be 1..64 bytes");
        }
    }
    nrlt_store *s = calloc(1, sizeof *s);
    if (!s) {
        free(name);
        return nrlt_throw_status(env, RLT_ENOMEM, "MemoryStore");
    }
    s->magic = NRLT_MAGIC_STORE;
    s->kind = NRLT_MEMORY;
    pthread_mutex_lock(&shared_mu);
    nrlt_shared *sh = NULL;
    if (name)
        for (sh = shared_list; sh && strcmp(sh->name, name) != 0; sh = sh->next) {
        }
    int rc = RLT_OK;
    if (sh) {
        sh->refs++;
    } else if ((sh = calloc(1, sizeof *sh))) {
        rlt_store_options o = {.max_keys = (size_t)max_keys,
                               .max_bytes = (size_t)max_bytes,
                               .fail_closed = fail_closed,
                               .shards = (unsigned)shards};
        rc = rlt_store_open(&sh->mem, &o);
        if (rc == RLT_OK) {
            if (name) snprintf(sh->name, sizeof sh->name, "%s", name);
            /* now = monotonic + shift reads Unix time (windows on the wall clock's minutes)
             * and never steps back. */
            sh->clock_shift = nrlt_wall_ns() - nrlt_mono_ns();
            sh->refs = 1;
            sh->next = shared_list;
            shared_list = sh;
        } else {
            free(sh);
            sh = NULL;
        }
    } else {
        rc = RLT_ENOMEM;
    }
    pthread_mutex_unlock(&shared_mu);
    free(name);
    if (!sh) {
        free(s);
        return nrlt_throw_status(env, rc, "MemoryStore");
    }
    s->shared = sh;
    s->mem = sh->mem;
    s->clock_shift = sh->clock_shift;
    if (napi_wrap(env, self, s, store_finalize, NULL, NULL) != napi_ok) {
        store_finalize(env, s, NULL);
        return NULL;
    }
    return self;
}

/* store.stats(): {keys, bytes, ...} of the in-process store. */
static napi_value memory_stats(napi_env env, napi_callback_info info)
{
    napi_value self, o, v;
    napi_get_cb_info(env, info, NULL, NULL, &self, NULL);
    nrlt_store *s = nrlt_store_of(env, self, "this");
    if (!s) return NULL;
    rlt_store_stats st;
    rlt_store_stats_get(s->mem, &st);
    napi_create_object(env, &o);
    napi_create_double(env, (double)st.keys, &v);
    napi_set_named_property(env, o, "keys", v);
    napi_create_double(env, (double)st.bytes, &v);
    napi_set_named_property(env, o, "bytes", v);
    napi_create_double(env, (double)(st.evicted_idle + st.evicted_forced), &v);
    napi_set_named_property(env, o, "evictions", v);
    return o;
}

/* store.nowNs(): the store's clock (Unix ns, monotonic) as a BigInt. */
static napi_value memory_now(napi_env env, napi_callback_info info)
{
    napi_value self, v;
    napi_get_cb_info(env, info, NULL, NULL, &self, NULL);
    nrlt_store *s = nrlt_store_of(env, self, "this");
    if (!s) return NULL;
    napi_create_bigint_int64(env, nrlt_store_now(s, NRLT_NOW_NONE), &v);
    return v;
}

nrlt_store *nrlt_store_of(napi_env env, napi_value v, const char *arg)
{
    void *p = NULL;
    napi_valuetype t;
    napi_typeof(env, v, &t);
    if (t != napi_object || napi_unwrap(env, v, &p) != napi_ok || !p ||
        *(uint32_t *)p != NRLT_MAGIC_STORE) {
        bool pending = false;
        napi_is_exception_pending(env, &pending);
        if (pending) {
            napi_value ignored;
            napi_get_and_clear_last_exception(env, &ignored);
        }
        nrlt_type_error(env, arg, "must be a MemoryStore or a RedisStore");
        return NULL;
    }
    return p;
}

int nrlt_store_prepare(napi_env env, nrlt_limiter *l)
{
    char name[32], text[512];
    for (int i = 0; i < l->n; i++) {
        /* Named by the hash of the canonical text: every limiter (and every worker thread)
         * with the same policy on the same store shares its counters, as the Python
         * package's limiters do. */
        int tl = rlt_policy_format(&l->pol[i], text, sizeof text);
        if (tl < 0) {
            nrlt_throw_status(env, tl, "policy");
            return -1;
        }
        snprintf(name, sizeof name, "#%016llx",
                 (unsigned long long)rlt_hash_fnv1a(text, (size_t)tl));
        int rc = rlt_store_set_policy(l->store->mem, name, &l->pol[i], RLT_CHANGE_KEEP, &l->ids[i]);
        if (rc) {
            nrlt_throw_status(env, rc, "policy");
            return -1;
        }
    }
    return 0;
}

rlt_ns nrlt_store_now(nrlt_store *s, rlt_ns now)
{
    return now != NRLT_NOW_NONE ? now : nrlt_mono_ns() + s->clock_shift;
}

napi_status nrlt_store_init(napi_env env, napi_value exports, nrlt_env *e)
{
    napi_property_descriptor props[] = {
        {"stats", NULL, memory_stats, NULL, NULL, NULL, napi_default, NULL},
        {"nowNs", NULL, memory_now, NULL, NULL, NULL, napi_default, NULL},
    };
    napi_value cls;
    napi_status st = napi_define_class(env, "MemoryStore", NAPI_AUTO_LENGTH, memory_ctor, NULL, 2,
                                       props, &cls);
    if (st != napi_ok) return st;
    if ((st = napi_create_reference(env, cls, 1, &e->store_ctor)) != napi_ok) return st;
    return napi_set_named_property(env, exports, "MemoryStore", cls);
}
