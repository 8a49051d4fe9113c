/* The Redis backend's checks of a config, run at start, on --check-config and on reload,
 * before anything is applied. */
#include "server/backend/redis_check.h"

#include "server/backend/fallback.h"

#include <stdio.h>
#include <string.h>

/* What a daemon built without libratelimit_redis answers a configured Redis. */
const char rlt__backend_redis_missing[] =
    "redis: this ratelimitd was built without Redis support (install libhiredis-dev and "
    "pkg-config, and rebuild)";

/* `lease: true` needs Redis and a lease size: refused otherwise, naming the policy. */
static int check_leases(const rlt__config *c, char *err, size_t errlen)
{
    const char *why = c->set.redis.address[0] == '\0' ? "needs the redis: section (leases are "
                                                        "local shares of a Redis limit)"
                      : c->set.redis.lease_units == 0 ? "needs redis.lease_units"
                                                      : NULL;
    for (size_t i = 0; i < c->nnamed && why; i++)
        if (c->named[i].lease) {
            snprintf(err, errlen, "policy '%s': lease: true %s", c->named[i].name, why);
            return RLT_EINVAL;
        }
    for (size_t i = 0; i < c->nrules && why; i++)
        if (c->rules[i].lease) {
            snprintf(err, errlen, "rule %s (line %d): lease: true %s", c->rules[i].path,
                     c->rules[i].line, why);
            return RLT_EINVAL;
        }
    return RLT_OK;
}

#ifdef RLT_SERVER_REDIS

void rlt__backend_redis_options(const rlt__redis_settings *rs, rlt__redis_texts *t,
                                rlt_redis_options *o)
{
    char *servers = t->servers, *password = t->password, *prefix = t->prefix, *master = t->master;
    memset(o, 0, sizeof *o);
    snprintf(servers, RLT__STR_MAX, "%s", rs->address);
    snprintf(password, RLT__STR_MAX, "%s", rs->password);
    snprintf(prefix, 65, "%s", rs->prefix);
    o->servers = servers;
    o->cluster = rs->cluster;
    o->password = password[0] ? password : NULL;
    o->prefix = prefix[0] ? prefix : NULL;
    o->timeout = rs->timeout;
    o->breaker_failures = rs->breaker_failures;
    o->backoff_min = rs->backoff_min;
    o->backoff_max = rs->backoff_max;
    o->lease_units = rs->lease_units;
    o->lease_ttl = rs->lease_ttl;
    o->engine = rs->engine == 2   ? RLT_REDIS_ENGINE_MODULE
                : rs->engine == 1 ? RLT_REDIS_ENGINE_SCRIPTS
                                  : RLT_REDIS_ENGINE_AUTO;
    /* Sentinel (redis.master_name): `address` lists the sentinels. */
    snprintf(master, sizeof t->master, "%s", rs->master_name);
    if (master[0] == '\0') return;
    o->sentinels = o->servers;
    o->master_name = master;
    o->servers = NULL;
}

static int check_policy(const rlt_policy *p, const char *what, const char *name, char *err,
                        size_t errlen)
{
    int st = rlt_redis_policy_check(p);
    if (st == RLT_OK) return RLT_OK;
    char text[256] = "";
    rlt_policy_format(p, text, sizeof text);
    snprintf(err, errlen,
             "%s '%s' (%s) cannot run in Redis: %s (periods and block= durations must be whole "
             "microseconds and numbers below 2^50)",
             what, name, text, rlt_strerror(st));
    return RLT_EINVAL;
}

/* Whether policy p, of fail mode `fail` (RLT__FAIL_*), fails local under c's default. */
static bool fails_local(const rlt__config *c, int fail, const rlt_policy *p)
{
    bool local = fail == RLT__FAIL_LOCAL || (fail == RLT__FAIL_DEFAULT && c->set.redis.fail_local);
    return local && p->algo != RLT_CONCURRENCY; /* concurrency fails closed (fallback.h) */
}

/* Every fail: local policy must have a share of at least 1 on each node of the fleet. */
static int check_local_shares(const rlt__config *c, char *err, size_t errlen)
{
    unsigned fleet = rlt__backend_redis_fleet(c);
    rlt_policy q;
    char why[384];
    for (size_t i = 0; i < c->nnamed; i++) {
        const rlt__named *np = &c->named[i];
        if (!fails_local(c, np->fail, &np->policy) ||
            rlt__fallback_divide(&np->policy, fleet, &q) == RLT_OK)
            continue;
        rlt__fallback_explain(&np->policy, fleet, why, sizeof why);
        snprintf(err, errlen, "policy '%s' (fail: local): %s", np->name, why);
        return RLT_EINVAL;
    }
    for (size_t i = 0; i < c->nrules; i++) {
        const rlt__rule *r2 = &c->rules[i];
        if (r2->unlimited || r2->block_all || !fails_local(c, r2->fail, &r2->policy) ||
            rlt__fallback_divide(&r2->policy, fleet, &q) == RLT_OK)
            continue;
        rlt__fallback_explain(&r2->policy, fleet, why, sizeof why);
        snprintf(err, errlen, "rule '%s' (line %d, fail: local): %s", r2->path, r2->line, why);
        return RLT_EINVAL;
    }
    return RLT_OK;
}

int rlt__backend_redis_check_config(const rlt__config *c, char *err, size_t errlen)
{
    const rlt__redis_settings *rs = &c->set.redis;
    if (check_leases(c, err, errlen) != RLT_OK) return RLT_EINVAL;
    if (rs->address[0] == '\0') return RLT_OK;
    rlt_redis_options o;
    rlt__redis_texts texts;
    rlt__backend_redis_options(rs, &texts, &o);
    rlt_redis *r = NULL;
    int st = rlt_redis_open(&r, &o); /* validates the options; connects only on first use */
    rlt_redis_close(r);
    if (st != RLT_OK) {
        snprintf(err, errlen, "redis: invalid settings (%s '%s', prefix '%s'): %s",
                 rs->master_name[0] ? "sentinels" : "address", rs->address, rs->prefix,
                 rlt_strerror(st));
        return RLT_EINVAL;
    }
    for (size_t i = 0; i < c->nnamed; i++)
        if (check_policy(&c->named[i].policy, "policy", c->named[i].name, err, errlen) != RLT_OK)
            return RLT_EINVAL;
    for (size_t i = 0; i < c->nrules; i++) {
        const rlt__rule *r2 = &c->rules[i];
        if (r2->unlimited || r2->block_all) continue;
        if (check_policy(&r2->policy, "rule", r2->path, err, errlen) != RLT_OK) return RLT_EINVAL;
    }
    return check_local_shares(c, err, errlen);
}

#else /* built without libratelimit_redis: a configured Redis is refused */

int rlt__backend_redis_check_config(const rlt__config *c, char *err, size_t errlen)
{
    if (check_leases(c, err, errlen) != RLT_OK) return RLT_EINVAL;
    if (c->set.redis.address[0] == '\0') return RLT_OK;
    snprintf(err, errlen, "%s", rlt__backend_redis_missing);
    return RLT_EINVAL;
}

#endif
