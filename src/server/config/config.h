/* ratelimitd's configuration as plain data (config.c: defaults, lookups, freeing): settings,
 * envoy descriptor trees and their rules, named policies, tiers and tenants.  load.h reads it
 * from YAML.  A parsed config knows nothing of the server that applies it. */
#ifndef RLT_SERVER_CONFIG_CONFIG_H
#define RLT_SERVER_CONFIG_CONFIG_H

#include "ratelimit/ratelimit.h"
#include "ratelimit/store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RLT__STR_MAX 256 /* longest string setting (bind, password, prefix, path pieces) */
#define RLT__MAX_INPUT (1u << 20) /* unparsed input one connection may hold (conn.c) */
/* The RESP parser's limits when a setting is 0 (resp.h) and the settings' defaults. */
#define RLT__RESP_DEFAULT_MAX_ARGS 1024
#define RLT__RESP_DEFAULT_MAX_BULK 65536
#define RLT__RESP_DEFAULT_MAX_INLINE 65536
/* Most server.top_keys (top.h): a read merges every thread's sketch, O(threads^2 x K). */
#define RLT__TOP_KEYS_MAX 1000
/* The memory budget by default: 1 GiB, of which 7/8 for the store (keys, states, policies,
 * tier assignments, its index) and 1/8 for connection buffers. */
#define RLT__DEFAULT_MAX_MEMORY ((size_t)1 << 30)

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
    int64_t lease_units;         /* lease size for policies with `lease: true`; 0 = off */
    rlt_ns lease_ttl;            /* a lease is spent within it, then dropped; 0 = the library's */
    int engine;                  /* 0 auto (the module where loaded), 1 scripts, 2 module */
    bool fail_local;             /* default fail mode is local (fail: local; then fail_open is
                                    false): decide on this node's share of the limit */
    unsigned fleet_size;         /* nodes sharing the Redis limit, for fail: local's share
                                    (the limit divided by it); 0 = 1 */
    /* Redis Sentinel: the master's name; with it, `address` lists the sentinels
     * (redis.sentinel, --redis-sentinel) and the library asks them for the master. */
    char master_name[129];
} rlt__redis_settings;

/* Per-policy fail mode (a rule's or named policy's `fail:`).  LOCAL: decide on the node's
 * own store at the limit divided by redis.fleet_size (fallback.h). */
enum { RLT__FAIL_DEFAULT = 0, RLT__FAIL_CLOSED = 1, RLT__FAIL_OPEN = 2, RLT__FAIL_LOCAL = 3 };

/* The response headers a gRPC ShouldRateLimit answer asks Envoy to add (server.*_headers). */
typedef struct rlt__envoy_headers_cfg {
    bool ietf;          /* RateLimit-Policy and RateLimit; default on */
    bool retry_after;   /* Retry-After on OVER_LIMIT, whole seconds rounded up; default on */
    bool x;             /* the X-RateLimit trio; default off */
    char x_limit[64];   /* its names: X-RateLimit-Limit, X-RateLimit-Remaining, */
    char x_remaining[64]; /* X-RateLimit-Reset by default (lower case on the wire) */
    char x_reset[64];
} rlt__envoy_headers_cfg;

typedef struct rlt__settings {
    char bind[RLT__STR_MAX];     /* address to listen on; default 127.0.0.1 */
    int port;                    /* RESP port; 0 = any free port; -1 = off; default 6380 */
    int http_port;               /* HTTP port; 0 = any free port; -1 = off; default 8080 */
    int grpc_port;               /* gRPC (h2c) port; 0 = any free port; -1 = off; default 8081 */
    int spop_port;               /* HAProxy SPOE agent (SPOP v2) port; 0 = any; -1 = off (default) */
    rlt__envoy_headers_cfg envoy_headers; /* headers of gRPC ShouldRateLimit answers */
    int threads;                 /* worker threads; 0 = number of cores */
    char password[RLT__STR_MAX]; /* AUTH password / HTTP bearer token; "" = none */
    char snapshot[RLT__STR_MAX]; /* snapshot file; "" = none; default ratelimitd.snap */
    rlt_ns snapshot_interval;    /* periodic snapshots; default 5 s; 0 = only on exit */
    size_t max_keys;             /* store cap; 0 = none; default 1,000,000 */
    bool fail_closed;            /* store full: refuse new keys instead of evicting LRU */
    size_t max_connections;      /* per daemon; default 10,000 */
    size_t max_output;           /* per connection output buffer cap, bytes; default 1 MiB */
    size_t max_memory;           /* the daemon's memory budget, bytes (rlt__memory_*) */
    rlt_ns client_timeout;       /* a started command must complete within it; default 10 s */
    rlt_ns idle_timeout;         /* 0 = never close idle connections (default) */
    size_t max_inline_policies;  /* distinct inline policy texts; default 1024 */
    size_t max_args;             /* RESP arguments per command; default 1024 */
    size_t max_bulk;             /* RESP bulk string bytes; default 65536 */
    bool shadow_mode;            /* global shadow mode: never deny, count would-be denials */
    size_t max_reservations;     /* outstanding RL.RESERVE reservations; default 65536 */
    size_t max_reservations_per_client; /* of one connection, or one tenant; default 4096 */
    rlt_ns max_reservation_timeout;     /* longest TIMEOUT / timeout_ms; default 1 h */
    /* RLQS, of one connection, or one tenant (all its connections): buckets created and held
     * (until freed, a TTL after their last member), default 4096; open streams, default 256 */
    size_t rlqs_max_buckets_per_client;
    size_t rlqs_max_streams_per_client;
    size_t top_keys;             /* top offenders' counters per thread (top.h); 0 = off; 100 */
    bool ui;                     /* GET / on HTTP answers the playground and its live page
                                    (server.ui, --no-ui); default on */
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
    rlt_change change; /* what a reload does to used allowance (rate_limit.change) */
    bool lease;        /* Redis: local leases for hot keys (rate_limit.lease) */
    bool drain;        /* rate_limit.drain_over_limit: every hit is charged, debt past the
                          limit included (Envoy's apply_on_stream_done cost; rls.c) */
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
    rlt_change change; /* what a reload does to used allowance: keep (default), reset, scale */
    bool lease;        /* Redis: answer from local leases for hot keys (redis.lease_units) */
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

/* What a quota bucket rule gives (quota_buckets:, Envoy's RLQS; grpc/rlqs.c). */
enum { RLT__QUOTA_POLICY = 0, RLT__QUOTA_ALLOW_ALL = 1, RLT__QUOTA_DENY_ALL = 2 };

/* One item of a domain's `quota_buckets:` (read by rlqs_cfg.c): the BucketIds it matches and the
 * global budget every Envoy reporting one of them shares. */
typedef struct rlt__qrule {
    char **keys, **values; /* match: each key must be in the BucketId with its value; a value
                              "*" matches any (each BucketId stays its own budget) */
    size_t nmatch;
    int kind;              /* RLT__QUOTA_*: a policy's budget, or a blanket rule */
    rlt_policy policy;     /* kind POLICY: N per P is the rate R, its burst B */
    char text[RLT__STR_MAX]; /* the policy text ("" for a blanket rule) */
    bool shadow;           /* shadow_mode: assignments allow all */
    int fail;              /* RLT__FAIL_*, Redis mode */
    rlt_ns ttl;            /* assignment_ttl; 0: the domain's */
    int line;
} rlt__qrule;

typedef struct rlt__domain {
    char *name;
    rlt__desc *descs;
    size_t ndescs;
    rlt__qrule *qrules; /* quota_buckets, first match wins */
    size_t nqrules;
    int quota_default;  /* RLT__QUOTA_ALLOW_ALL (default) or DENY_ALL: a BucketId none matches */
    rlt_ns quota_ttl;   /* assignment_ttl; 0: 3 x the reporting interval, at least 2 s */
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
    bool empty;                       /* the file held no document: the defaults */
    struct rlt__config *retired_next; /* server-owned list of replaced configs */
} rlt__config;

/* The settings and the single "default" policy used without a config file. */
#define RLT__DEFAULT_POLICY "gcra:1000/1s,burst=1000"
void rlt__settings_default(rlt__settings *s);

/* A config of the default settings and the single "default" policy (what runs without a
 * config file).  NULL only when out of memory.  rlt__config_new is the reader's start. */
rlt__config *rlt__config_default(void);
rlt__config *rlt__config_new(void);
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

/* The domain `name`, or NULL. */
const rlt__domain *rlt__config_domain(const rlt__config *c, const char *name, size_t len);

/* The first of d's quota bucket rules that matches the BucketId p[0..n), or -1:
 * every key of its match is among p with its value, or with any value for "*". */
int rlt__config_quota_match(const rlt__domain *d, const rlt__entry *p, size_t n);

/* A named policy by name, or NULL. */
const rlt__named *rlt__config_named(const rlt__config *c, const char *name, size_t len);

#endif
