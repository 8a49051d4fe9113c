/* The Redis module's arguments (args.c): its load arguments (the settings below), and the
 * commands' arguments read into limits (limit.h): policies through a cache of parsed ones, key
 * names by the library's rule (src/redis/layout.c), costs.  Statuses as limit.h says: RLT_OK,
 * or a negative RLT_* with the error reply's text in the command's rlt__mcmd.  Commands run on
 * Redis's main thread only: the settings and the cache need no lock. */
#ifndef RLT_REDISMODULE_ARGS_H
#define RLT_REDISMODULE_ARGS_H

#include "limit.h"

#include "core/text.h"

/* The module's settings: the defaults until rlt__margs_load has read the load arguments. */
typedef struct rlt__msettings {
    char prefix[65]; /* `prefix P`: the library's key prefix, default "rlt:" */
    size_t plen;
    bool testing; /* `testing yes`: RL.TESTTIME and RL.DECIDE's caller time (tests only) */
    bool cluster; /* the server runs in cluster mode (fixed for its life) */
} rlt__msettings;

extern rlt__msettings rlt__mset;

/* Reads the load arguments (`prefix P`, `testing yes|no`, in pairs) and the server's mode into
 * rlt__mset.  RLT_OK, or RLT_EINVAL after logging which argument is wrong. */
int rlt__margs_load(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

/* Whether s is a whole integer (core/text.h's strict syntax); *v its value.  Inline, as
 * rlt__marg_cost: every command reads a few, and out of line they cost RL.DECIDE about 1% of
 * the module's own instructions (callgrind). */
static inline bool rlt__marg_i64(RedisModuleString *s, int64_t *v)
{
    size_t n;
    const char *p = rlt__rm.StringPtrLen(s, &n);
    return rlt__parse_i64(p, n, v);
}

/* The cache of parsed policies by text t[0..n): the entry, or NULL. */
const rlt__mpol *rlt__mpcache_get(const char *t, size_t n);
/* Caches m under t[0..n) (texts longer than the cache keeps are not cached). */
void rlt__mpcache_put(const char *t, size_t n, const rlt__mpol *m);

/* l->m from policy p.  RLT_OK; RLT_EINVAL or RLT_ERANGE when it cannot run inside Redis. */
int rlt__marg_mpol(rlt__mcmd *c, const rlt_policy *p, rlt__mlim *l);

/* l->m from a policy's text.  RLT_OK; RLT_EPARSE, or as rlt__marg_mpol. */
int rlt__marg_policy(rlt__mcmd *c, RedisModuleString *s, rlt__mlim *l);

/* l->name, the library's key name of user key `key` under l->m (owned by l), and l->ukey.
 * RLT_OK; RLT_EKEYLEN (empty or too long), RLT_EINVAL (in a cluster, a hash tag that would
 * put the state in another slot than the key's). */
int rlt__marg_name(rlt__mcmd *c, RedisModuleString *key, rlt__mlim *l);

/* A cost: an integer >= 0.  RLT_OK or RLT_EINVAL. */
static inline int rlt__marg_cost(rlt__mcmd *c, RedisModuleString *s, int64_t *cost)
{
    if (rlt__marg_i64(s, cost) && *cost >= 0) return RLT_OK;
    return rlt__mcmd_fail(c, RLT_EINVAL, "ERR cost must be an integer >= 0");
}

/* L[0..n) from (key, policy, cost) triples at argv[first..]; with `names` the keys are full
 * Redis key names (RL.DECIDE), else user keys.  RLT_OK; as the functions above, or RLT_EINVAL
 * (a concurrency policy among several limits, the same key and policy twice). */
int rlt__margs_triples(rlt__mcmd *c, RedisModuleString **argv, int first, size_t n, rlt__mlim *L,
                       bool names);

#endif
