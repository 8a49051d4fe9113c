/* One Redis call of libratelimit_redis (call.c): a command's arguments laid out in one
 * allocation, the decision's two forms (the algorithm's EVALSHA and the module's RL.DECIDE),
 * built when a node first needs one, the run on the node serving its slot (NOSCRIPT recovery,
 * cluster redirects, the breaker), and the decisions made without Redis.  Not installed; the
 * handle is not thread-safe, and neither is anything here. */
#ifndef RLT_REDIS_CALL_H
#define RLT_REDIS_CALL_H

#include "internal.h"

#define RLT__POLTEXT_MAX 160 /* rlt_policy_format's text */

/* The arguments of one EVALSHA (or RL.DECIDE) for up to `cap` limits (rlt__call_new). */
typedef struct rlt__call {
    int argc;
    int nnums;
    unsigned slot;
    int script; /* rlt__script_id of the EVALSHA */
    const char **argv;
    size_t *lens;
    char (*keys)[RLT__KEYNAME_MAX];
    char (*nums)[24];
    /* The same decision as the module's RL.DECIDE (margc 0: scripts only). */
    int margc;
    const char **margv;
    size_t *mlens;
    char (*pols)[RLT__POLTEXT_MAX];
    bool caller_time;
    /* Each form is built when a node first needs it (build_decide builds the key names). */
    const rlt_redis *r;
    const rlt__limit *l;
    size_t n;
    int64_t now_us;
    bool multi, script_done, module_done, module_ok;
    bool boxed; /* a limit has block=: multi.lua's op 'b', with the companion keys after */
} rlt__call;

/* The hot helpers of a decision are static inline here rather than calls into call.c: as
 * calls between files (fc8f9d5 split redis.c) they cost a pipelined decision ~55 instructions
 * (docs/performance.md; rlt__build_one takes back ~60 more).  Link-time optimisation
 * (INTERPROCEDURAL_OPTIMIZATION) of main's code measured 1,266 / 1,073 a GCRA decision (module /
 * scripts engine; this way 1,317 / 1,113, then 1,269 / 1,089 with rlt__policy_texts's cheaper
 * compare), but it would make the installed libratelimit_redis.a hold only one gcc version's
 * LTO bytecode, which the Python extension's and every other user's link would depend on. */

#define RLT__FIELDS 10 /* script arguments per limit (the last: calendar) */
#define RLT__BFIELDS 3 /* and with a penalty box (op 'b'): blk fac max */

/* Bytes of a call for `cap` limits. */
static inline size_t rlt__call_size(size_t cap)
{
    size_t args =
        3 + 2 * cap + 4 + (RLT__FIELDS + RLT__BFIELDS) * cap + 3 + 3 * cap; /* script, module */
    return sizeof(rlt__call) + args * (sizeof(char *) + sizeof(size_t)) +
           2 * cap * RLT__KEYNAME_MAX +
           (4 + (RLT__FIELDS + RLT__BFIELDS) * cap + 1 + 2 + cap) * 24 + cap * RLT__POLTEXT_MAX;
}

/* Lays out a call for `cap` limits in mem[0..rlt__call_size(cap)), empty, as a script call
 * (the form a call built by hand with rlt__arg has). */
static inline rlt__call *rlt__call_init(void *mem, size_t cap)
{
    rlt__call *c = mem;
    size_t args = 3 + 2 * cap + 4 + (RLT__FIELDS + RLT__BFIELDS) * cap;
    char *p = (char *)(c + 1);
    c->argv = (const char **)(void *)p, p += args * sizeof(char *);
    c->lens = (size_t *)(void *)p, p += args * sizeof(size_t);
    size_t margs = 3 + 3 * cap;
    c->margv = (const char **)(void *)p, p += margs * sizeof(char *);
    c->mlens = (size_t *)(void *)p, p += margs * sizeof(size_t);
    c->keys = (char(*)[RLT__KEYNAME_MAX])p,
    p += 2 * cap * RLT__KEYNAME_MAX; /* [cap..): block= keys */
    c->pols = (char(*)[RLT__POLTEXT_MAX])p, p += cap * RLT__POLTEXT_MAX;
    c->nums = (char(*)[24])p;
    c->margc = 0;
    c->caller_time = false;
    c->script_done = true; /* a call built by hand (release, reset) is a script call */
    c->module_done = c->module_ok = false;
    c->argc = c->nnums = 0;
    c->slot = 0;
    c->script = RLT__S_MULTI;
    c->boxed = false;
    return c;
}

/* A call for `cap` limits in one malloc (the caller frees it), or NULL. */
rlt__call *rlt__call_new(size_t cap);

/* Appends the argument s[0..len) (not copied: it must outlive the call). */
static inline void rlt__arg(rlt__call *c, const char *s, size_t len)
{
    c->argv[c->argc] = s;
    c->lens[c->argc++] = len;
}

/* Appends the decimal text of v (kept in the call). */
void rlt__arg_num(rlt__call *c, int64_t v);

/* The handle's key name of (p, key) into buf[0..cap) (layout.c's rule with its prefix).
 * Returns the length, or RLT_EKEYLEN, RLT_EINVAL, RLT_ENOSPC as rlt__key_name. */
static inline int rlt__redis_name(const rlt_redis *r, const rlt_policy *p, const void *key,
                                  size_t klen, char *buf, size_t cap)
{
    return rlt__key_name(r->prefix, r->prefix_len, p, key, klen, buf, cap);
}

/* Validates one check into *l (the cost clamped to what the scripts keep exact).  RLT_OK,
 * RLT_EINVAL, RLT_ERANGE (the policy, as rlt_redis_policy_check), RLT_EKEYLEN. */
static inline int rlt__check_limit(const rlt_redis_check *ck, rlt__limit *l)
{
    if (!ck) return RLT_EINVAL;
    int rc = rlt__rpol_from(ck->policy, &l->rp);
    if (rc) return rc;
    if (ck->cost < 0) return RLT_EINVAL;
    if (ck->policy->algo == RLT_CONCURRENCY && ck->cost > 1) return RLT_EINVAL;
    if (!ck->key || ck->klen == 0 || ck->klen > RLT_REDIS_KEY_MAX) return RLT_EKEYLEN;
    l->p = ck->policy;
    /* A cost beyond every limit (all <= 2^50) never fits whatever its size: clamp it so the
     * script's numbers stay exact. */
    l->cost = ck->cost > RLT__LIM * 2 ? RLT__LIM * 2 : ck->cost;
    return RLT_OK;
}

/* The scripts' now: -1 (Redis's clock) unless flags has RLT_REDIS_CALLER_TIME, then `now` in
 * us.  RLT_OK, or RLT_ERANGE for a negative or too large now. */
int rlt__now_arg(unsigned flags, rlt_ns now, int64_t *now_us);

/* The texts of p (canonical, key tail) from the handle's small cache of recent policies. */
const struct rlt__ptext *rlt__policy_texts(const rlt_redis *r, const rlt_policy *p);

/* Prepares c as a decision of limits l[0..n) of checks ck (both must outlive the call): the
 * key names now, the arguments of either form when rlt__form first asks for it.  With `multi`
 * the multi-limit script, else n = 1 and the algorithm's own.  RLT_OK; RLT_EKEYLEN (a name too
 * long), RLT_EINVAL (keys in two slots of a cluster, the same limit twice). */
int rlt__build_decide(const rlt_redis *r, rlt__call *c, const rlt__limit *l,
                      const rlt_redis_check *ck, size_t n, int64_t now_us, bool multi);

/* rlt__build_decide(r, c, l, ck, 1, now_us, false): one limit, its algorithm's script. */
int rlt__build_one(const rlt_redis *r, rlt__call *c, const rlt__limit *l, const rlt_redis_check *ck,
                   int64_t now_us);

/* Whether node n runs call c on the module. */
static inline bool rlt__use_module(const rlt_redis *r, const rlt__node *n, const rlt__call *c)
{
    return c->module_ok && n->engine == RLT_REDIS_ENGINE_MODULE &&
           (!c->caller_time || n->module_time || r->opt.engine == RLT_REDIS_ENGINE_MODULE);
}

/* The command of call c on the module (`mod`, when c has a module form) or as a script, built
 * on first use. */
rlt__cmd rlt__form(rlt__call *c, bool mod);

/* Whether rep is an error reply starting with `prefix`. */
bool rlt__is_error(const redisReply *rep, const char *prefix);

/* Runs call c on the node serving c->slot before mono time `deadline`: loads the script after
 * a NOSCRIPT (the only retry: the script certainly did not run), follows MOVED and ASK (the
 * command did not run there either), waits out TRYAGAIN, and feeds the breaker.  RLT_OK with
 * *out the reply (caller frees) and *used_module its form; else RLT_EBACKEND or RLT_ETIMEDOUT
 * with *retry_at when the failing node's breaker next lets a call through. */
int rlt__run(rlt_redis *r, rlt__call *c, int64_t deadline, redisReply **out, int64_t *retry_at,
             bool *used_module);

/* 64 random bits, never 0 (settle.c): false if the system has none to give. */
bool rlt__random_id(uint64_t *id);

/* rlt__run of a call built by hand (a script) with the handle's timeout; then frees c.
 * retry_at may be NULL. */
int rlt__run_free(rlt_redis *r, rlt__call *c, redisReply **out, int64_t *retry_at);

/* The decision made without Redis (RLT_REDIS_FAIL_OPEN or closed until retry_at, mono ns),
 * counted in the handle's stats. */
void rlt__fail_decision(rlt_redis *r, const rlt_policy *p, unsigned flags, int64_t retry_at,
                        rlt_decision *d);

/* Decides limits l[0..n) of checks ck in one call (the multi-limit script with `multi`, else
 * n = 1 and the algorithm's own, or the module): dec[i] per limit.  RLT_OK; as
 * rlt__build_decide; RLT_ENOMEM; RLT_EBACKEND, RLT_ETIMEDOUT with *retry_at (a reply that
 * does not decode is RLT_EBACKEND too). */
int rlt__decide_call(rlt_redis *r, const rlt__limit *l, const rlt_redis_check *ck, size_t n,
                     bool multi, int64_t now_us, rlt_decision *dec, int64_t *retry_at);

/* The policy's jitter on a decision's wait: rlt_jitter of the key's FNV-1a at the caller's
 * `now`, as the keyed store does, so both backends spread the same key alike.  Applied to
 * every decision returned (Redis's, a lease's, a fail mode's). */
static inline void rlt__jitter_out(const rlt_policy *p, const void *key, size_t klen, rlt_ns now,
                                   rlt_decision *d)
{
    if (p && p->jitter > 0 && d->retry_after > 0 && key)
        d->retry_after = rlt_jitter(p, rlt_hash_fnv1a(key, klen), now, d->retry_after);
}

#endif
