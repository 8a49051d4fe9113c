/* ratelimitd internals shared by its files: configuration, the server context, metrics, the
 * decision seam and the command layer.  Nothing here is public API. */
#ifndef RLT_SERVER_SRV_H
#define RLT_SERVER_SRV_H

#include "ratelimit/ratelimit.h"
#include "ratelimit/store.h"
#include "server/resp.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- configuration (config.c) ------------------------------------------------------------ */

#define RLT__STR_MAX 256 /* longest string setting (bind, password, prefix, path pieces) */

/* The shared store (docs/distributed.md): ratelimitd decides in Redis instead of its local
 * store when `address` is set.  Settings of the `redis:` config section. */
typedef struct rlt__redis_settings {
    char address[RLT__STR_MAX];  /* "host:port[,host:port...]"; "" = the local store decides */
    bool cluster;                /* route by hash slot across a Redis Cluster (seed nodes) */
    char password[RLT__STR_MAX]; /* Redis AUTH; "" = none */
    char prefix[65];             /* prefix of every Redis key; "" = the library's "rlt:" */
    rlt_ns timeout;              /* deadline of one Redis call; 0 = 50 ms */
    bool fail_open;              /* default fail mode: allow (true) or deny (false, default) */
    unsigned breaker_failures;   /* consecutive failures that open a node's breaker; 0 = 3 */
    rlt_ns backoff_min;          /* first wait of an open breaker; 0 = 100 ms */
    rlt_ns backoff_max;          /* longest wait of an open breaker; 0 = 5 s */
} rlt__redis_settings;

/* Per-policy fail mode (a rule's or named policy's `fail:`). */
enum { RLT__FAIL_DEFAULT = 0, RLT__FAIL_CLOSED = 1, RLT__FAIL_OPEN = 2 };

typedef struct rlt__settings {
    char bind[RLT__STR_MAX];     /* address to listen on; default 127.0.0.1 */
    int port;                    /* RESP port; 0 = any free port; -1 = off; default 6380 */
    int http_port;               /* HTTP port; 0 = any free port; -1 = off; default 8080 */
    int threads;                 /* worker threads; 0 = number of cores */
    char password[RLT__STR_MAX]; /* AUTH password / HTTP bearer token; "" = none */
    char snapshot[RLT__STR_MAX]; /* snapshot file; "" = none; default ratelimitd.snap */
    rlt_ns snapshot_interval;    /* periodic snapshots; default 5 s; 0 = only on exit */
    size_t max_keys;             /* store cap; 0 = none; default 1,000,000 */
    bool fail_closed;            /* store full: refuse new keys instead of evicting LRU */
    size_t max_connections;      /* per daemon; default 10,000 */
    size_t max_output;           /* per connection output buffer cap, bytes; default 1 MiB */
    rlt_ns client_timeout;       /* a started command must complete within it; default 10 s */
    rlt_ns idle_timeout;         /* 0 = never close idle connections (default) */
    size_t max_inline_policies;  /* distinct inline policy texts; default 1024 */
    size_t max_args;             /* RESP arguments per command; default 1024 */
    size_t max_bulk;             /* RESP bulk string bytes; default 65536 */
    bool shadow_mode;            /* global shadow mode: never deny, count would-be denials */
    rlt__redis_settings redis;   /* the shared store; redis.address "" = off */
} rlt__settings;

/* A rule of an envoy-style descriptor tree: what a matching descriptor is limited by. */
typedef struct rlt__rule {
    char name[RLT_NAME_MAX + 1]; /* store policy name (stable across restarts) */
    char path[RLT__STR_MAX];     /* "domain.key_value.subkey" for logs and metrics */
    char rl_name[RLT__STR_MAX];  /* rate_limit.name, for `replaces` */
    char **replaces;             /* names this rule replaces */
    size_t nreplaces;
    rlt_policy policy;
    bool unlimited; /* rate_limit.unlimited: always OK, never stored */
    bool block_all; /* requests_per_unit: 0: always OVER_LIMIT */
    bool shadow;    /* shadow_mode: count would-be denials, never deny */
    int fail;       /* RLT__FAIL_*: without Redis, allow or deny (rate_limit.fail) */
    int64_t requests_per_unit;
    const char *unit; /* "SECOND" ... "DAY" for the envoy reply; NULL if not envoy */
    int policy_id;    /* filled by rlt__srv_apply_config */
    int line;
} rlt__rule;

typedef struct rlt__desc {
    char *key;
    char *value; /* NULL: any value; ending in '*': prefix match */
    int rule;    /* index into rules, or -1 */
    struct rlt__desc *children;
    size_t nchildren;
} rlt__desc;

typedef struct rlt__named {
    char name[RLT_NAME_MAX + 1];
    rlt_policy policy;
    bool shadow;
    int fail;      /* RLT__FAIL_*: without Redis, allow or deny */
    int policy_id; /* filled by rlt__srv_apply_config */
} rlt__named;

typedef struct rlt__tier {
    char name[RLT_NAME_MAX + 1];
    char policy[RLT_NAME_MAX + 1]; /* a named policy */
} rlt__tier;

typedef struct rlt__tenant {
    char name[RLT__STR_MAX];
    char password[RLT__STR_MAX];
    char prefix[RLT__STR_MAX]; /* prepended to every key; default "<name>:" */
} rlt__tenant;

typedef struct rlt__domain {
    char *name;
    rlt__desc *descs;
    size_t ndescs;
} rlt__domain;

typedef struct rlt__config {
    rlt__settings set;
    rlt__domain *domains;
    size_t ndomains;
    rlt__rule *rules;
    size_t nrules;
    rlt__named *named; /* always holds "default" */
    size_t nnamed;
    rlt__tier *tiers;
    size_t ntiers;
    char default_tier[RLT_NAME_MAX + 1];
    rlt__tenant *tenants;
    size_t ntenants;
    struct rlt__config *retired_next; /* server-owned list of replaced configs */
} rlt__config;

/* The settings and the single "default" policy used without a config file. */
#define RLT__DEFAULT_POLICY "gcra:1000/1s,burst=1000"
void rlt__settings_default(rlt__settings *s);

/* Parses YAML config text.  `file` names it in messages.  Returns 0 and *out, or -1 with a
 * message "file:line: reason" in err. */
int rlt__config_parse(const char *text, size_t len, const char *file, rlt__config **out, char *err,
                      size_t errlen);
/* Reads and parses a file (as rlt__config_parse). */
int rlt__config_load(const char *path, rlt__config **out, char *err, size_t errlen);
/* The embedded default configuration (no file).  NULL only when out of memory. */
rlt__config *rlt__config_default(void);
void rlt__config_free(rlt__config *c);

/* One entry of an envoy descriptor. */
typedef struct rlt__entry {
    const char *key;
    size_t klen;
    const char *value;
    size_t vlen;
} rlt__entry;

/* Most specific match of descriptor e[0..n) in `domain`: exact key+value before a value
 * prefix wildcard before a key-only entry, at each level, with n levels.  Returns a rule
 * index or -1 (no limit applies). */
int rlt__config_match(const rlt__config *c, const char *domain, size_t dlen, const rlt__entry *e,
                      size_t n);

/* A named policy by name, or NULL. */
const rlt__named *rlt__config_named(const rlt__config *c, const char *name, size_t len);

/* ---- metrics (metrics.c) ----------------------------------------------------------------- */

#define RLT__METRIC_IDS 1024 /* per-policy counters; ids beyond share the last slot */
#define RLT__LAT_BUCKETS 22  /* latency buckets: <= 1us, 2us, 4us ... 2^20 us, +Inf */
#define RLT__METRIC_SLOTS 65 /* one writer per slot: workers 1..64, slot 0 for the rest */

typedef struct rlt__mslot {
    uint64_t allowed[RLT__METRIC_IDS];
    uint64_t denied[RLT__METRIC_IDS];
    uint64_t shadowed[RLT__METRIC_IDS]; /* would have been denied, allowed by shadow mode */
    uint64_t lat[RLT__LAT_BUCKETS];
    uint64_t lat_sum_ns;
    uint64_t commands;
    uint64_t errors;
    uint64_t http_requests;
} rlt__mslot;

typedef struct rlt__metrics {
    rlt__mslot *slots; /* RLT__METRIC_SLOTS of them */
    uint64_t connections_total;
    uint64_t connections_rejected;
    int64_t connections_current;
    uint64_t snapshots_ok;
    uint64_t snapshots_failed;
    uint64_t reloads_ok;
    uint64_t reloads_failed;
} rlt__metrics;

/* The calling thread's metric slot (0 unless rlt__metrics_bind_thread was called). */
rlt__mslot *rlt__mslot_get(rlt__metrics *m);
void rlt__metrics_bind_thread(unsigned slot);
void rlt__metrics_latency(rlt__mslot *s, rlt_ns ns);

/* The calling thread's slot index: 1..64 have one writer each (a worker), 0 is shared. */
extern __thread unsigned rlt__tl_slot;

/* Adds v to a counter of the calling thread's slot.  A worker's slot has one writer, so a
 * relaxed load and store suffice (no lock-prefixed add on the hot path; readers still see
 * whole values); the shared slot 0 takes an atomic add. */
static inline void rlt__mcount(uint64_t *c, uint64_t v)
{
    if (rlt__tl_slot != 0)
        __atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + v, __ATOMIC_RELAXED);
    else
        __atomic_fetch_add(c, v, __ATOMIC_RELAXED);
}

/* ---- the server context (srv.c) ---------------------------------------------------------- */

typedef struct rlt__srv {
    rlt_store *store;
    rlt__config *cfg;     /* current config: read with rlt__srv_config (acquire) */
    rlt__config *retired; /* replaced configs, freed at close (readers may still hold them) */
    pthread_mutex_t lock; /* inline policies and the id -> name table */
    struct rlt__inline *inl;
    size_t ninl, inl_cap, inl_max;
    char (*names)[RLT__STR_MAX]; /* policy id -> name for metrics/logs (a rule's path) */
    size_t names_cap;
    rlt__metrics metrics;
    rlt_ns started;
    uint64_t gen;                 /* unique per context: tags the per-thread policy caches */
    struct rlt__backend *backend; /* the Redis backend (backend_redis.c); NULL = local store */
} rlt__srv;

/* Opens a server context over a new store built from cfg->set, loads the snapshot at
 * snapshot_path if it exists (NULL: none), then applies cfg.  The context owns cfg.
 * Returns 0, or -1 with a message in err. */
int rlt__srv_open(rlt__srv **out, rlt__config *cfg, rlt_ns now, int64_t wall_ns, char *err,
                  size_t errlen);
void rlt__srv_close(rlt__srv *s);
/* Installs a new config (policies replaced with RLT_CHANGE_KEEP); the old one is retired.
 * All or nothing: every name and policy is checked (rlt__srv_check_config) before the store
 * changes; if a store write still fails (out of memory), the old config's policies and tiers
 * are written back and err says so.  Called from one thread at a time.  Returns 0, or -1 with
 * err (the old config stays; cfg is still the caller's). */
int rlt__srv_apply_config(rlt__srv *s, rlt__config *cfg, char *err, size_t errlen);
/* Checks, without a server, everything rlt__srv_apply_config would give the store: the store
 * names of named policies, rules and tiers, and every policy.  --check-config and start run
 * it.  Returns 0 or -1 with a message in err. */
int rlt__srv_check_config(const rlt__config *cfg, char *err, size_t errlen);
/* Test hook: store write number N (from 0) of the next apply fails once with RLT_ENOMEM.
 * -1 (default): never. */
extern long rlt__srv_fail_apply_after;
rlt__config *rlt__srv_config(rlt__srv *s);
/* The name of policy `id` for metrics ("" if unknown). */
const char *rlt__srv_policy_name(rlt__srv *s, int id, char *buf, size_t cap);

/* Resolves a policy argument: a named policy ("api"), or inline policy text
 * ("gcra:100/1m,burst=20").  Inline texts are interned in the store by canonical text, at most
 * max_inline_policies distinct ones.  Returns the policy id (>= 0) and *shadow, or -1 with a
 * message in err. */
int rlt__srv_resolve(rlt__srv *s, const char *text, size_t len, bool *shadow, char *err,
                     size_t errlen);
/* True for a GCRA policy whose scale_ is too large for the daemon's clock to run 10 years
 * (scale_ > INT64_MAX / (10 years + 1 day in ns)). */
bool rlt__srv_gcra_needs_bucket(const rlt_policy *p);
/* The policy the local store runs for p: p itself, or for such a GCRA policy (unless `redis`,
 * distributed mode) the token bucket with the same limit, period and burst, built in *tmp;
 * decisions are identical on a clock that never steps back (docs/server.md "Time"). */
const rlt_policy *rlt__srv_runnable(const rlt_policy *p, bool redis, rlt_policy *tmp);
/* The id of a policy given by its parts (CL.THROTTLE), interned as an inline policy. */
int rlt__srv_intern(rlt__srv *s, const rlt_policy *p, char *err, size_t errlen);
/* The same behind the per-thread cache, keyed by caller-chosen bytes that determine p
 * (e.g. CL.THROTTLE's raw arguments).  rlt__srv_cached_id: the cached id or -1. */
int rlt__srv_intern_cached(rlt__srv *s, const char *key, size_t klen, const rlt_policy *p,
                           char *err, size_t errlen);
int rlt__srv_cached_id(rlt__srv *s, const char *key, size_t klen);

/* ---- the decision seam (decide.c) -------------------------------------------------------- */
/* Every decision of the daemon goes through these, so that another backend (the Redis one)
 * can replace the local store in one place.  They count allowed/denied per policy id and
 * apply shadow mode: with `shadow` a denial is counted and reported as allowed (no charge). */

int rlt__decide(rlt__srv *s, int policy_id, bool shadow, const void *key, size_t klen, rlt_ns now,
                int64_t cost, rlt_decision *d);
/* Decides n independent requests (a pipeline's), as n calls of rlt__decide would, in order
 * for every key: the local store decides them in one rlt_store_decide_batch per run of one
 * policy, Redis in pipelined batches (rlt_redis_decide_batch: about one round trip per node).
 * status[i] is RLT_OK (out[i] the decision, counted, shadow mode applied with shadow[i]) or
 * the item's error. */
void rlt__decide_batch(rlt__srv *s, const int *policy, const bool *shadow, const rlt_key *keys,
                       size_t n, rlt_ns now, const int64_t *costs, rlt_decision *out, int *status);
/* Shadow-mode log lines per second per worker thread; more are counted and summed up. */
#define RLT__SHADOW_LOG_PER_S 10
int rlt__decide_tier(rlt__srv *s, const char *default_tier, const void *key, size_t klen,
                     rlt_ns now, int64_t cost, rlt_decision *d);
int rlt__decide_multi(rlt__srv *s, const rlt_check *checks, size_t n, rlt_ns now,
                      rlt_decision *combined, int *refused);
int rlt__decide_reset(rlt__srv *s, int policy_id, const void *key, size_t klen);
int rlt__decide_release(rlt__srv *s, int policy_id, const void *key, size_t klen, rlt_ns now,
                        int64_t lease);
/* A peek (cost 0) that is not counted in the metrics: per-descriptor details. */
int rlt__decide_peek(rlt__srv *s, int policy_id, const void *key, size_t klen, rlt_ns now,
                     rlt_decision *d);

/* The message (without "ERR ") for status `st` of a decision on policy `id` at `now`
 * (id -1: unknown): names what is out of range, the cost or the policy's rate.  Returns a
 * constant or buf. */
const char *rlt__decide_strerror(rlt__srv *s, int id, rlt_ns now, int st, char *buf, size_t cap);

/* ---- the Redis backend (backend_redis.c) -------------------------------------------------- */
/* With `redis.address` set, decide.c sends every decision to Redis (libratelimit_redis) with
 * one rlt_redis handle per thread, opened lazily.  Without the library built in
 * (RLT_SERVER_REDIS undefined), a configured address is refused at start. */

/* Checks the `redis:` settings and that every configured policy can run inside Redis
 * (rlt_redis_policy_check).  Returns 0 (also when Redis is off), or -1 with a message. */
int rlt__backend_check_config(const rlt__config *c, char *err, size_t errlen);
/* Opens the backend from the current config's redis settings into s->backend (nothing when
 * the address is empty).  Does not need Redis up.  Returns 0, or -1 with a message. */
int rlt__backend_open(rlt__srv *s, char *err, size_t errlen);
/* Closes every thread's handle and frees s->backend (after the workers stopped). */
void rlt__backend_close(rlt__srv *s);
/* The Redis side of the seam: as rlt__decide & co. without counting.  Failures of Redis are
 * decisions (the policy's fail mode) and return RLT_OK; argument errors are returned. */
int rlt__backend_decide(rlt__srv *s, int policy_id, const void *key, size_t klen, int64_t cost,
                        rlt_decision *d);
int rlt__backend_decide_tier(rlt__srv *s, const char *default_tier, const void *key, size_t klen,
                             rlt_ns now, int64_t cost, rlt_decision *d);
/* n independent decisions pipelined (rlt_redis_decide_batch per run of one fail mode). */
void rlt__backend_decide_batch(rlt__srv *s, const int *policy, const rlt_key *keys, size_t n,
                               const int64_t *costs, rlt_decision *out, int *status);
int rlt__backend_decide_multi(rlt__srv *s, const rlt_check *checks, size_t n,
                              rlt_decision *combined, int *refused);
int rlt__backend_reset(rlt__srv *s, int policy_id, const void *key, size_t klen);
int rlt__backend_release(rlt__srv *s, int policy_id, const void *key, size_t klen, int64_t lease);

/* ---- RESP commands (cmd.c) --------------------------------------------------------------- */

typedef struct rlt__session {
    bool authed;
    bool close;                /* QUIT or a fatal error: close after flushing */
    char prefix[RLT__STR_MAX]; /* tenant key prefix */
    size_t prefix_len;
} rlt__session;

/* Sets up a session for the current config (authenticated when no password is set). */
void rlt__session_init(rlt__srv *s, rlt__session *ss);
/* Executes one command and appends its reply to out.  argc >= 1. */
void rlt__cmd_exec(rlt__srv *s, rlt__session *ss, const rlt__resp_arg *argv, size_t argc,
                   rlt_ns now, rlt__obuf *out);
/* Checks a password or token: returns 1 (admin), 2 (a tenant, prefix written), 0 (wrong). */
int rlt__auth_check(rlt__srv *s, const char *user, size_t ulen, const char *pw, size_t plen,
                    char *prefix, size_t *prefix_len);

/* Builds tenant prefix + key into buf (RLT_KEY_MAX); returns the length or -1 if too long
 * or empty. */
int rlt__make_key(const char *prefix, size_t plen, const char *key, size_t klen, char *buf);

/* ---- HTTP inputs (httpin.c): parsers kept apart from evhttp so they can be fuzzed -------- */

#define RLT__ENVOY_MAX_DESCRIPTORS 32
#define RLT__ENVOY_MAX_ENTRIES 16

typedef struct rlt__envoy_req {
    void *json; /* owned parse tree (jansson) */
    const char *domain;
    size_t dlen;
    size_t ndesc;
    size_t nentries[RLT__ENVOY_MAX_DESCRIPTORS];
    rlt__entry entries[RLT__ENVOY_MAX_DESCRIPTORS][RLT__ENVOY_MAX_ENTRIES];
    int64_t hits_addend; /* default 1 */
} rlt__envoy_req;

/* Parses an envoy ratelimit /json body.  Returns 0, or -1 with a message in err. */
int rlt__envoy_parse(const char *body, size_t len, rlt__envoy_req *r, char *err, size_t errlen);
void rlt__envoy_free(rlt__envoy_req *r);
/* Decides an envoy request and writes the JSON reply into out (NUL-terminated).  Returns the
 * HTTP status (200 or 429), or -1 with a message in err (bad request). */
int rlt__envoy_decide(rlt__srv *s, const rlt__envoy_req *r, const char *prefix, size_t plen,
                      rlt_ns now, rlt__obuf *out, char *err, size_t errlen);

typedef struct rlt__check_req {
    char key[RLT_KEY_MAX + 1];
    size_t klen;
    char policy[512];
    size_t plen;
    int64_t cost;
} rlt__check_req;

/* Parses "key=K&policy=P&cost=N" (URL-encoded; policy defaults to "default", cost to 1).
 * Returns 0, or -1 with a message in err. */
int rlt__check_parse(const char *query, size_t len, rlt__check_req *r, char *err, size_t errlen);

/* Renders Prometheus text / INFO text into out. */
void rlt__metrics_prometheus(rlt__srv *s, rlt__obuf *out);
void rlt__metrics_info(rlt__srv *s, rlt__obuf *out);
/* The backend's part of them (backend local/redis, Redis counters, breaker state). */
void rlt__backend_prometheus(rlt__srv *s, rlt__obuf *out);
void rlt__backend_info(rlt__srv *s, rlt__obuf *out);

/* ---- the daemon: listeners and worker threads (net.c), HTTP (http.c) ---------------------- */

typedef struct rlt__daemon rlt__daemon;
struct event_base;
struct evhttp;

/* Binds the RESP and HTTP listeners (settings of the current config; SO_REUSEPORT, one socket
 * per worker) and starts `threads` workers, each with its own event loop.  Returns 0 and the
 * bound ports (-1 when off), or -1 with a message in err. */
int rlt__daemon_start(rlt__daemon **out, rlt__srv *s, int *resp_port, int *http_port, char *err,
                      size_t errlen);
/* Stops the workers, closes every connection and frees the daemon.  NULL is a no-op. */
void rlt__daemon_stop(rlt__daemon *d);
/* Serves HTTP on listening socket fd from `base`.  Returns the evhttp or NULL. */
struct evhttp *rlt__http_attach(struct event_base *base, rlt__srv *s, int fd);
/* True when `addr` can be bound: a numeric IPv4/IPv6 address or a name that resolves. */
bool rlt__bind_valid(const char *addr);
/* True when `addr` is a loopback address (127.0.0.0/8, ::1, localhost). */
bool rlt__is_loopback(const char *addr);

/* The daemon's clock (its only clock reads; docs/server.md "Time").  rlt__clock_start(wall)
 * sets origin = UTC midnight (00:00:00Z) of the day of `wall` (CLOCK_REALTIME, ns since the
 * epoch); from then on rlt__now() = (wall - origin) + (monotonic now - monotonic at start):
 * monotonic, small (|now| x a policy's scale must fit int64 for GCRA), and with fixed windows
 * of 1 s, 1 min, 1 h and 1 day aligned to UTC like envoyproxy/ratelimit's.  Call it once,
 * before any thread reads the clock.  Before it, rlt__now() is the monotonic clock.
 * Snapshots: save at (now, now + origin); load at (wall - origin, wall): the store then shifts
 * saved instants by origin_old - origin_new, whole days, so windows keep their meaning. */
void rlt__clock_start(int64_t wall_ns);
int64_t rlt__clock_origin(void);
rlt_ns rlt__now(void);
/* CLOCK_REALTIME in ns since the epoch. */
int64_t rlt__now_wall(void);

#endif
