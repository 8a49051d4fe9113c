/* The Redis backend's checks (redis_check.c): the `redis:` settings, `lease: true`, and that
 * every configured policy can run inside Redis and, with `fail: local`, has a share on each
 * node of the fleet; and the library's options built from the settings. */
#ifndef RLT_SERVER_BACKEND_REDIS_CHECK_H
#define RLT_SERVER_BACKEND_REDIS_CHECK_H

#include "ratelimit/redis.h"
#include "server/config/config.h"

#include <stddef.h>

/* The nodes sharing the Redis limit (redis.fleet_size; 0 = 1): fail: local's divisor. */
static inline unsigned rlt__backend_redis_fleet(const rlt__config *c)
{
    return c->set.redis.fleet_size ? c->set.redis.fleet_size : 1;
}

/* Checks the `redis:` settings and that every configured policy can run inside Redis.
 * Returns RLT_OK (also when Redis is off), or RLT_EINVAL with a message in err (also for a
 * configured Redis when the daemon was built without libratelimit_redis). */
int rlt__backend_redis_check_config(const rlt__config *c, char *err, size_t errlen);

/* What a daemon built without libratelimit_redis answers a configured Redis. */
extern const char rlt__backend_redis_missing[];

/* The texts rlt_redis_options points into. */
typedef struct rlt__redis_texts {
    char servers[RLT__STR_MAX], password[RLT__STR_MAX], prefix[65];
    char master[129]; /* Sentinel: the master's name ("" = none) */
} rlt__redis_texts;

/* The library's options for settings rs, pointing into *t (which must outlive them): the
 * servers, or with redis.master_name the sentinels and the master's name. */
void rlt__backend_redis_options(const rlt__redis_settings *rs, rlt__redis_texts *t,
                                rlt_redis_options *o);

#endif
