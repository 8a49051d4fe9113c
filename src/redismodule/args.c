/* The Redis module's arguments: the load arguments into the module's settings, and the
 * commands' arguments (policies, key names, costs) into limits, each checked with an error
 * reply that names what is wrong. */
#include "args.h"

#include "redis/layout.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#define RM rlt__rm

rlt__msettings rlt__mset = {"rlt:", 4, false, false};

/* Parsed policies by their text (commands run on Redis's main thread only): parsing and the
 * gcd work cost about a fifth of a decision, and a fleet uses few policies.  Direct-mapped;
 * a collision only costs a parse. */
#define PCACHE 256
#define PTEXT_MAX 160
static struct pentry {
    size_t len;
    char text[PTEXT_MAX];
    rlt__mpol m;
} pcache[PCACHE];

static struct pentry *pcache_slot(const char *t, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)t[i]) * 16777619u;
    return &pcache[h % PCACHE];
}

const rlt__mpol *rlt__mpcache_get(const char *t, size_t n)
{
    struct pentry *e = pcache_slot(t, n);
    return n > 0 && e->len == n && memcmp(e->text, t, n) == 0 ? &e->m : NULL;
}

void rlt__mpcache_put(const char *t, size_t n, const rlt__mpol *m)
{
    if (n == 0 || n > PTEXT_MAX) return;
    struct pentry *e = pcache_slot(t, n);
    memcpy(e->text, t, n);
    e->len = n;
    e->m = *m;
}

int rlt__marg_mpol(rlt__mcmd *c, const rlt_policy *p, rlt__mlim *l)
{
    int rc = rlt__mpol_init(&l->m, p);
    if (rc == RLT_EINVAL && p->months != 0)
        return rlt__mcmd_fail(c, rc,
                              "ERR calendar windows (mo, y) are not module commands: "
                              "libratelimit_redis runs them as its scripts");
    if (rc == RLT_EINVAL)
        return rlt__mcmd_fail(c, rc,
                              "ERR policy cannot run inside Redis: its period and block= "
                              "durations must be whole numbers of microseconds");
    if (rc)
        return rlt__mcmd_fail(c, rc,
                              "ERR policy cannot run inside Redis: a number passes 2^50 "
                              "(burst x period, limit x period or the rate)");
    return RLT_OK;
}

int rlt__marg_policy(rlt__mcmd *c, RedisModuleString *s, rlt__mlim *l)
{
    size_t n;
    const char *t = RM.StringPtrLen(s, &n);
    const rlt__mpol *hit = rlt__mpcache_get(t, n);
    if (hit) {
        l->m = *hit;
        return RLT_OK;
    }
    rlt_policy p;
    char err[200];
    int rc = rlt_policy_parse(&p, t, n, err, sizeof err);
    if (rc != RLT_OK) return rlt__mcmd_failf(c, rc, "ERR %s", err);
    if (p.adapt)
        return rlt__mcmd_fail(c, RLT_EINVAL,
                              "ERR an adaptive limit (adaptive=) learns in ratelimitd's local store "
                              "only (RL.RELEASE ... LATENCY)");
    rc = rlt__marg_mpol(c, &p, l);
    if (rc == RLT_OK) rlt__mpcache_put(t, n, &l->m);
    return rc;
}

int rlt__marg_name(rlt__mcmd *c, RedisModuleString *key, rlt__mlim *l)
{
    size_t kl;
    const char *k = RM.StringPtrLen(key, &kl);
    l->ukey = key;
    char buf[RLT__KEYNAME_MAX];
    int len = rlt__key_name_tail(rlt__mset.prefix, rlt__mset.plen, l->m.tail, l->m.tl, k, kl, buf,
                                 sizeof buf);
    if (len < 0) return rlt__mcmd_fail(c, RLT_EKEYLEN, "ERR key is empty or longer than 512 bytes");
    /* Cluster clients route by the key argument: the state must live in that key's slot. */
    if (rlt__mset.cluster && rlt__key_slot(buf, (size_t)len) != rlt__key_slot(k, kl))
        return rlt__mcmd_fail(c, RLT_EINVAL,
                              "ERR in a cluster a key must not hold an empty or unbalanced "
                              "'{' '}' hash tag (its state would live in another slot)");
    l->name = RM.CreateString(c->ctx, buf, (size_t)len);
    l->own_name = true;
    return RLT_OK;
}

static bool same_name(const rlt__mlim *a, const rlt__mlim *b)
{
    size_t la, lb;
    const char *pa = RM.StringPtrLen(a->name, &la), *pb = RM.StringPtrLen(b->name, &lb);
    return la == lb && memcmp(pa, pb, la) == 0;
}

int rlt__margs_triples(rlt__mcmd *c, RedisModuleString **argv, int first, size_t n, rlt__mlim *L,
                       bool names)
{
    for (size_t i = 0; i < n; i++) {
        RedisModuleString **t = argv + first + 3 * i;
        int rc = rlt__marg_cost(c, t[2], &L[i].cost);
        if (!rc) rc = rlt__marg_policy(c, t[1], &L[i]);
        if (rc) return rc;
        if (n > 1 && L[i].m.p.algo == RLT_CONCURRENCY)
            return rlt__mcmd_fail(c, RLT_EINVAL, "ERR RL.MULTI takes no concurrency policy");
        if (names)
            L[i].name = t[0];
        else if ((rc = rlt__marg_name(c, t[0], &L[i])) != RLT_OK)
            return rc;
        for (size_t j = 0; j < i; j++)
            if (same_name(&L[j], &L[i]))
                return rlt__mcmd_fail(c, RLT_EINVAL,
                                      "ERR the same key and policy twice in one check");
    }
    return RLT_OK;
}

int rlt__margs_load(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    rlt__mset.cluster = (RM.GetContextFlags(ctx) & RLT_RM_CTX_FLAGS_CLUSTER) != 0;
    if (argc % 2 != 0) {
        RM.Log(ctx, "warning", "ratelimit: arguments come in pairs: prefix P, testing yes|no");
        return RLT_EINVAL;
    }
    for (int i = 0; i < argc; i += 2) {
        size_t nl, vl;
        const char *name = RM.StringPtrLen(argv[i], &nl), *v = RM.StringPtrLen(argv[i + 1], &vl);
        if (nl == 6 && strncasecmp(name, "prefix", 6) == 0) {
            if (vl > 64 || memchr(v, '{', vl) || memchr(v, '}', vl)) {
                RM.Log(ctx, "warning", "ratelimit: prefix: at most 64 bytes, no '{' or '}'");
                return RLT_EINVAL;
            }
            memcpy(rlt__mset.prefix, v, vl);
            rlt__mset.prefix[vl] = '\0';
            rlt__mset.plen = vl;
        } else if (nl == 7 && strncasecmp(name, "testing", 7) == 0) {
            if (vl == 3 && strncasecmp(v, "yes", 3) == 0)
                rlt__mset.testing = true;
            else if (vl == 2 && strncasecmp(v, "no", 2) == 0)
                rlt__mset.testing = false;
            else {
                RM.Log(ctx, "warning", "ratelimit: testing: yes or no");
                return RLT_EINVAL;
            }
        } else {
            RM.Log(ctx, "warning", "ratelimit: unknown argument '%.*s' (prefix, testing)",
                   (int)(nl > 40 ? 40 : nl), name);
            return RLT_EINVAL;
        }
    }
    return RLT_OK;
}
