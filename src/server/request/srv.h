/* The server context (srv.c): the daemon's state, handed to every request.  It owns the
 * registry (backend/registry.h: the store's policy table and tier assignments, whatever
 * backend decides, and the config in force, swapped on reload), the interned inline policies
 * behind a per-thread cache, the policy id -> name table, the counters, the top offenders and
 * the backend.  It opens them and passes each what it needs: none of them calls back. */
#ifndef RLT_SERVER_REQUEST_SRV_H
#define RLT_SERVER_REQUEST_SRV_H

#include "ratelimit/ratelimit.h"
#include "ratelimit/store.h"
#include "server/backend/registry.h"
#include "server/base/obuf.h"
#include "server/config/config.h"
#include "server/request/inline.h"
#include "server/stats/metrics.h"
#include "server/stats/series.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rlt__backend;

typedef struct rlt__srv {
    rlt__registry reg;    /* policies, tiers, the config in force (rlt__srv_config) */
    rlt__config *retired; /* replaced configs, freed at close (readers may still hold them) */
    pthread_mutex_t lock; /* inline policies and the id -> name table */
    rlt__inline_table inl;
    char (*names)[RLT__STR_MAX]; /* policy id -> name for metrics/logs (a rule's path) */
    size_t names_cap;
    rlt__metrics metrics;
    rlt_ns started;
    uint64_t gen;                   /* unique per context: tags the per-thread policy caches */
    struct rlt__backend *be;        /* where decisions are made: chosen once (decide.h) */
    struct rlt__top *top;           /* top offenders (top.h); NULL when server.top_keys is 0 */
    rlt__series series;             /* decisions per second per policy (series.h, /v1/stats) */
    /* Envoy's quota service (envoy/rlqs_srv.h attaches it; NULL when not attached): */
    struct rlt__rlqs *rlqs;                 /* its buckets and their division (envoy/rlqs.h) */
    struct rlt__rlqs_sync *rlqs_sync;       /* Redis mode: their exchanges with the fleet */
    const struct rlt__srv_service *service; /* how the context closes and reports it */
} rlt__srv;

/* A service that a room above this one attaches to the context (envoy/'s RLQS: the context
 * does not know it otherwise, so nothing here calls up).  rlt__srv_close calls svc_close
 * first, before the backend and the configs the service may use; report.c calls the others
 * where their parts belong.  Every member is required. */
typedef struct rlt__srv_service {
    void (*svc_close)(struct rlt__srv *s);
    /* Requests it would have denied in shadow mode: counted with the shadow decisions. */
    uint64_t (*svc_shadow_denied)(struct rlt__srv *s);
    /* INFO: its section (backend false), or its lines of the Backend section (true). */
    void (*svc_info)(struct rlt__srv *s, rlt__obuf *o, bool backend);
    /* /metrics: its families (backend false), or its backend's families (true). */
    void (*svc_prometheus)(struct rlt__srv *s, rlt__obuf *o, bool backend);
    /* /v1/stats: its members, each preceded by ',' (after the policies). */
    void (*svc_stats_json)(struct rlt__srv *s, rlt_ns now, rlt__obuf *o);
} rlt__srv_service;

/* Opens a server context over a new store built from cfg->set, loads the snapshot
 * cfg->set.snapshot if it exists, applies cfg, and opens the backend (backend.h): Redis when
 * cfg->set.redis.address is set, else the local store; it does not need Redis up.  The
 * context owns cfg (also on failure).  Returns RLT_OK, or an RLT_* code with a message in
 * err. */
int rlt__srv_open(rlt__srv **out, rlt__config *cfg, rlt_ns now, int64_t wall_ns, char *err,
                  size_t errlen);
/* Closes the backend (after every thread stopped deciding) and frees the context.  NULL is a
 * no-op. */
void rlt__srv_close(rlt__srv *s);
/* Installs a new config (policies replaced with RLT_CHANGE_KEEP); the old one is retired.
 * All or nothing: every name and policy is checked (rlt__srv_check_config) before the store
 * changes; if a store write still fails (out of memory), the old config's policies and tiers
 * are written back and err says so.  Called from one thread at a time.  Returns RLT_OK, or an
 * RLT_* code with err (the old config stays; cfg is still the caller's). */
int rlt__srv_apply_config(rlt__srv *s, rlt__config *cfg, char *err, size_t errlen);
/* Checks, without a server, everything rlt__srv_apply_config would give the store: the store
 * names of named policies, rules and tiers, and every policy.  --check-config and start run
 * it.  Returns RLT_OK or RLT_EINVAL with a message in err. */
int rlt__srv_check_config(const rlt__config *cfg, char *err, size_t errlen);
/* Test hook: store write number N (from 0) of the next apply fails once with RLT_ENOMEM.
 * -1 (default): never. */
extern long rlt__srv_fail_apply_after;
rlt__config *rlt__srv_config(rlt__srv *s);
/* The generation of the id -> policy mapping (acquire): a cache of policies by id built at an
 * older generation must be rebuilt. */
uint64_t rlt__srv_policy_gen(rlt__srv *s);
/* An upper bound of the policy ids handed out so far (ids are below it). */
size_t rlt__srv_policy_ids(rlt__srv *s);
/* The name of policy `id` for metrics ("" if unknown). */
const char *rlt__srv_policy_name(rlt__srv *s, int id, char *buf, size_t cap);

/* Who asks for an inline policy, and when: the tenant's key prefix ("" or NULL for the admin),
 * the client and address whose budgets a new text is charged to (rlt__session's `client` and
 * `addr`; 0: none) and the daemon clock.  NULL: the admin at 0 without a client (tests). */
typedef struct rlt__asker {
    const char *owner;
    size_t olen;
    uint64_t client, addr;
    rlt_ns now;
} rlt__asker;

/* Resolves a policy argument: a named policy ("api"), an envoy rule by its path ("r:" + the
 * path /metrics labels it with, "r:edge.remote_address"), or inline policy text
 * ("gcra:100/1m,burst=20").  Inline texts are interned in the bounded inline cache (inline.h:
 * at most max_inline_policies, a quota per tenant, idle ones reused).  Returns RLT_OK with
 * *id and *shadow, or RLT_EINVAL (a rule that keeps no state: unlimited or
 * requests_per_unit 0), RLT_ENOENT (unknown name or rule), RLT_EPARSE (bad text),
 * RLT_ENOMEM (no room for another inline policy) with a message in err. */
int rlt__srv_resolve(rlt__srv *s, const char *text, size_t len, const rlt__asker *who, int *id,
                     bool *shadow, char *err, size_t errlen);
/* True for a GCRA policy whose scale_ is too large for the daemon's clock to run 10 years
 * (scale_ > INT64_MAX / (10 years + 1 day in ns)). */
bool rlt__srv_gcra_needs_bucket(const rlt_policy *p);
/* The policy the local store runs for p: p itself, or for such a GCRA policy (unless `redis`,
 * distributed mode) the token bucket with the same limit, period and burst, built in *tmp;
 * decisions are identical on a clock that never steps back (docs/server.md "Time").  A
 * calendar window (fixed_window:N/1mo) is copied into *tmp with its origin set to the
 * daemon's clock origin (rlt__clock_origin), so that its months are the real ones. */
const rlt_policy *rlt__srv_runnable(const rlt_policy *p, bool redis, rlt_policy *tmp);
/* Most state bytes per key an inline policy may keep (a sliding log of ~500 entries): larger
 * ones must be named in the config, so that no client can make one key cost megabytes. */
#define RLT__INLINE_STATE_MAX 4096
/* The id of a policy given by its parts (CL.THROTTLE), interned as an inline policy.  Refused
 * (RLT_EINVAL) when its state per key passes RLT__INLINE_STATE_MAX, and (RLT_ERANGE) when it
 * can never decide a cost-1 request on the daemon's clock.
 * Returns RLT_OK and *id, or an RLT_* code with a message in err. */
int rlt__srv_intern(rlt__srv *s, const rlt_policy *p, const rlt__asker *who, int *id, char *err,
                    size_t errlen);
/* The same behind the per-thread cache, keyed by caller-chosen bytes that determine p
 * (e.g. CL.THROTTLE's raw arguments).  rlt__srv_cached_id: the cached id, or -1 when the
 * cache does not hold it. */
int rlt__srv_intern_cached(rlt__srv *s, const char *key, size_t klen, const rlt_policy *p,
                           const rlt__asker *who, int *id, char *err, size_t errlen);
int rlt__srv_cached_id(rlt__srv *s, const char *key, size_t klen, const rlt__asker *who);
/* The policy a key is decided under when its policy argument is "@tier": the key's assigned
 * tier (RL.TIER), else `default_tier`.  Returns RLT_OK and *policy_id, RLT_ENOENT (no such
 * tier, or the key has none and default_tier is NULL), RLT_EINVAL, RLT_EKEYLEN.  Every backend
 * asks this, so the local store and Redis decide a tier's keys under the same policy. */
int rlt__srv_tier_policy(rlt__srv *s, const char *default_tier, const void *key, size_t klen,
                         int *policy_id);

#endif
