/* ratelimit for Node.js: the Node-API addon's shared declarations (stores, limiter, helpers).
 *
 * Threading: each Node environment (the main thread, each worker_thread) loads the addon
 * once; its JavaScript objects belong to that environment.  An in-process store may be shared
 * by several environments through its name (store.c keeps one process-wide table of named
 * stores, refcounted under a mutex); rlt_store itself is thread-safe. */
#ifndef NODE_RLT_NATIVE_H
#define NODE_RLT_NATIVE_H

#define NAPI_VERSION 8
#include <node_api.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "ratelimit/ratelimit.h"
#include "ratelimit/redis.h"
#include "ratelimit/store.h"

/* `now` when the caller gave none: the store's own clock. */
#define NRLT_NOW_NONE INT64_MIN
/* Policies one limiter holds (all-or-nothing when several). */
#define NRLT_POLICIES_MAX 16

/* Which kind of store a store object is. */
enum { NRLT_MEMORY = 1, NRLT_REDIS = 2 };

/* A store: an in-process rlt_store, possibly shared by name across worker threads.  Owned by
 * its JavaScript object; freed by its finalizer once no limiter holds it (limiters keep a
 * reference). */
/* The first word of every wrapped struct: napi_unwrap of a foreign object as `this` is then
 * told apart by a load and a compare (cheaper than napi_instanceof on every call). */
#define NRLT_MAGIC_STORE 0x53544f52u
#define NRLT_MAGIC_LIMITER 0x4c494d54u

typedef struct nrlt_store {
    uint32_t magic;
    int kind;
    struct nrlt_shared *shared; /* memory: the table entry owning the rlt_store */
    rlt_store *mem;
    rlt_ns clock_shift;           /* memory: now = monotonic + shift = Unix time */
    /* redis: the options (strings owned below) and a pool of handles (an rlt_redis is not
     * thread-safe: each async call takes one out under `mu` for its run on libuv's pool) */
    rlt_redis_options ropt;
    char *servers, *password, *prefix, *sentinels, *master;
    pthread_mutex_t mu;
    rlt_redis **pool;
    size_t npool, cappool;
} nrlt_store;

/* A limiter: 1..16 parsed policies over one store, and their ids in a memory store. */
typedef struct nrlt_limiter {
    uint32_t magic;
    nrlt_store *store;
    napi_ref store_ref;
    int n;
    rlt_policy pol[NRLT_POLICIES_MAX];
    int ids[NRLT_POLICIES_MAX];
    char name[65];
} nrlt_limiter;

/* The per-environment output area: a decision's fields written here for JavaScript to read
 * (cheaper than building an object through Node-API on every call).  Layout, 8-byte words:
 * doubles 0 allowed, 1 limit, 2 remaining, 3 lease, 4 refused (-1 none), 5 policy index,
 * 6 status; 7..9 retry_after, reset_after, delay in ns as doubles when exact (|v| <= 2^53),
 * else NaN; int64 10..12 the same three exactly; uint64 13 the reservation id; int64 14 the
 * lease (word 3 is then only "non-zero": a lease is 64 random-looking bits). */
enum { NRLT_OUT_WORDS = 15 };
typedef struct nrlt_env {
    unsigned char *out;
    napi_ref out_ref;
    napi_ref store_ctor, limiter_ctor;
} nrlt_env;

/* ---- util.c ---------------------------------------------------------------------------- */

/* Throws a TypeError / RangeError / Error whose message starts with `arg` (may be NULL).
 * Always returns NULL (for `return nrlt_throw...`). */
napi_value nrlt_type_error(napi_env env, const char *arg, const char *what);
napi_value nrlt_range_error(napi_env env, const char *arg, const char *what);
/* The right exception for library status `rc` (< 0) about `arg`: RangeError for EKEYLEN and
 * ERANGE, TypeError for EINVAL, Error (with .code) otherwise. */
napi_value nrlt_throw_status(napi_env env, int rc, const char *arg);
/* True when `v` is undefined or null. */
bool nrlt_absent(napi_env env, napi_value v);
/* Reads a key (string: UTF-8, or a Buffer / Uint8Array) of 1..RLT_KEY_MAX bytes into buf
 * (RLT_KEY_MAX + 8 bytes).  Returns 0, or -1 with an exception pending. */
int nrlt_key(napi_env env, napi_value v, const char *arg, char *buf, size_t *len);
/* An integer in lo..hi from a number (integral) or a BigInt.  Returns 0, or -1 with a
 * TypeError or RangeError naming `arg` pending. */
int nrlt_int(napi_env env, napi_value v, const char *arg, int64_t lo, int64_t hi, int64_t *out);
/* now: undefined (NRLT_NOW_NONE) or an integer (BigInt or number) of ns. */
int nrlt_now(napi_env env, napi_value v, rlt_ns *out);
/* A string argument into a malloc'd NUL-terminated copy (*out NULL for undefined/null when
 * `optional`).  Returns 0 or -1 with an exception pending. */
int nrlt_string(napi_env env, napi_value v, const char *arg, bool optional, char **out);
/* The monotonic clock in ns (the addon's only clock: a program's, not the library's). */
rlt_ns nrlt_mono_ns(void);
/* The Unix time in ns. */
rlt_ns nrlt_wall_ns(void);
/* Writes decision `d` and its status into the environment's output area. */
void nrlt_out(nrlt_env *e, const rlt_decision *d, uint64_t reservation, int refused, int pidx,
              int status);
/* The limiter behind `self` (its magic word checked), or NULL with a TypeError naming
 * `this`. */
nrlt_limiter *nrlt_limiter_of(napi_env env, napi_value self);

/* ---- store.c --------------------------------------------------------------------------- */

/* Defines MemoryStore on `exports`. */
napi_status nrlt_store_init(napi_env env, napi_value exports, nrlt_env *e);
/* The store behind a JavaScript store object, or NULL with a TypeError naming `arg`. */
nrlt_store *nrlt_store_of(napi_env env, napi_value v, const char *arg);

/* Registers limiter `l`'s policies in its memory store (their ids; a Redis store's limiter
 * goes to nrlt_redis_prepare instead).  Returns 0 or -1 with an exception pending. */
int nrlt_store_prepare(napi_env env, nrlt_limiter *l);
/* The now of a memory-store call (the store's clock when the caller gave none). */
rlt_ns nrlt_store_now(nrlt_store *s, rlt_ns now);

/* ---- redis.c --------------------------------------------------------------------------- */

/* Defines RedisStore on `exports`. */
napi_status nrlt_redis_init(napi_env env, napi_value exports);
/* Checks limiter `l`'s policies can run inside Redis.  0 or -1 with a RangeError pending. */
int nrlt_redis_prepare(napi_env env, nrlt_limiter *l);
/* lim.redisCall(op, key, cost | lease | reservation, extra) -> a Promise of a plain object of
 * the decision's fields and `status` (0, or the library's negative code: the fail mode is the
 * caller's).  op: "check", "reset", "release", "reserve", "settle". */
napi_value nrlt_redis_call(napi_env env, napi_callback_info info);
/* lim.redisBatch(keys, cost) -> a Promise of an ArrayBuffer of NRLT_BATCH_WORDS 8-byte words
 * an item (layout in redis.c's complete), one pipeline. */
#define NRLT_BATCH_WORDS 10
napi_value nrlt_redis_batch(napi_env env, napi_callback_info info);

/* ---- limiter.c ------------------------------------------------------------------------- */

/* Defines Limiter on `exports`. */
napi_status nrlt_limiter_init(napi_env env, napi_value exports, nrlt_env *e);

#endif
