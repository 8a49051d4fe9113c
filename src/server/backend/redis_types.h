/* The Redis backend's state (redis.c), shared with its counters' renderings (redis_stats.c):
 * the backend, each thread's context (its rlt_redis handle, its caches, what it publishes)
 * and the counters a thread publishes. */
#ifndef RLT_SERVER_BACKEND_REDIS_TYPES_H
#define RLT_SERVER_BACKEND_REDIS_TYPES_H

#include "ratelimit/redis.h"
#include "server/backend/backend.h"
#include "server/backend/fallback.h"
#include "server/backend/redis_check.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* A policy as this thread last read it from the store, and whether Redis can run it. */
typedef struct pcache {
    bool have;
    int check; /* rlt_redis_policy_check's status */
    rlt_policy p;
    bool lhave; /* the fallback's share of it (fail: local), looked up on first use */
    int lcheck; /* rlt__fallback_policy's status */
    int lid;    /* the share's id in the fallback store */
} pcache;

/* The counters one thread publishes (relaxed atomic stores by the owner, loads by readers). */
typedef struct pubstats {
    uint64_t decisions, round_trips, fail_open, fail_closed, timeouts, errors, breaker_opened,
        short_circuited, connects, script_loads, redirects, lease_local, nodes, nodes_open;
    uint64_t fail_local; /* library fail-closed answers replaced by a local decision */
    uint64_t tryagain, topology_reads, master_switches; /* cluster and Sentinel failovers */
} pubstats;

#define NODES_SHOWN 16 /* nodes listed in INFO */

typedef struct tctx {
    struct tctx *next; /* the backend's list of every thread's context */
    rlt_redis *r;
    pubstats pub;
    uint64_t fail_local;    /* this thread's own count, published with the library's */
    const rlt__config *cfg; /* the config the caches below were built for */
    uint64_t pgen;          /* and the registry's policy generation (rlt__registry_gen) */
    pcache *pol;            /* by policy id */
    size_t npol;
    unsigned char *fail; /* RLT__FAIL_* by policy id (named policies and rules) */
    size_t nfail;
    /* The nodes as this thread's handle sees them (which path, module or scripts), copied
     * at each publish under `nodes_mu` for INFO: the handle itself is this thread's only. */
    pthread_mutex_t nodes_mu;
    rlt_redis_node_info nodes[NODES_SHOWN];
    unsigned nnodes;
} tctx;

typedef struct redis_be {
    rlt__backend base;  /* first: the seam's handle */
    rlt__registry *reg; /* the policies and the config in force */
    rlt_redis_options opt;
    rlt__redis_texts txt; /* what opt points into */
    uint64_t gen;         /* tags the thread-local pointer, so it never outlives this backend */
    pthread_mutex_t mu;
    tctx *threads;
    uint64_t release_lost;  /* releases Redis could not take (the lease expires by itself) */
    uint64_t multi_split;   /* cluster multi-limit checks decided one limit at a time */
    rlt__fallback *fb;      /* the local fallback's store (fail: local) */
    int in_local;           /* 1 while decisions fall back locally (atomic; logged on change) */
    uint64_t local_entered; /* times the daemon entered local fallback */
} redis_be;

#endif
