/* The policy registry (registry.c): the daemon's keyed store (rlt_store) seen as the table of
 * policies and tier assignments that every backend decides under, with the config in force and
 * the generation of the id -> policy mapping.  Policy ids, tiers, snapshots and the store's
 * figures are read and written here; the local backend (local.c) also keeps its keys' states
 * in the same store.  No file outside this room touches the store: they ask the registry, or
 * decide through the backend table (backend.h).
 *
 * Thread-safety: the store's (every call may run on any thread); `cfg` and `policy_gen` are
 * written by one thread at a time (the server context's apply, under its lock) and read with
 * acquire loads. */
#ifndef RLT_SERVER_BACKEND_REGISTRY_H
#define RLT_SERVER_BACKEND_REGISTRY_H

#include "ratelimit/ratelimit.h"
#include "ratelimit/store.h"
#include "server/config/config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rlt__registry {
    rlt_store *store;    /* registry.c and local.c only */
    rlt__config *cfg;    /* the config in force (rlt__registry_config) */
    uint64_t policy_gen; /* bumped whenever a policy id may now mean another policy (an apply,
                            a restore, an inline slot reused): caches of policies by id compare
                            it (rlt__registry_gen) */
} rlt__registry;

/* Opens the store with `opt` (no config yet: cfg NULL, generation 0).  Returns RLT_OK, or
 * rlt_store_open's code. */
int rlt__registry_open(rlt__registry *r, const rlt_store_options *opt);
/* Closes the store (the config is its owner's).  A registry never opened is a no-op. */
void rlt__registry_close(rlt__registry *r);

/* The config in force, and the generation of the id -> policy mapping (acquire loads). */
static inline rlt__config *rlt__registry_config(const rlt__registry *r)
{
    return __atomic_load_n(&r->cfg, __ATOMIC_ACQUIRE);
}
static inline uint64_t rlt__registry_gen(const rlt__registry *r)
{
    return __atomic_load_n(&r->policy_gen, __ATOMIC_ACQUIRE);
}
/* Publishes a new config (release); the caller keeps the old one until no thread reads it. */
void rlt__registry_set_config(rlt__registry *r, rlt__config *cfg);
/* Bumps the generation (release): caches of policies by id must be rebuilt. */
void rlt__registry_bump(rlt__registry *r);

/* The store's policy table (rlt_store_set_policy, _policy_id, _get_policy's contracts). */
int rlt__registry_set_policy(rlt__registry *r, const char *name, const rlt_policy *p,
                             rlt_change change, int *id);
int rlt__registry_policy_id(rlt__registry *r, const char *name);
int rlt__registry_policy(rlt__registry *r, int id, rlt_policy *p);
/* Tiers (rlt_store_set_tier, _assign_tier, _tier_policy's contracts). */
int rlt__registry_set_tier(rlt__registry *r, const char *name, int policy_id);
int rlt__registry_assign_tier(rlt__registry *r, const void *key, size_t klen, const char *tier);
int rlt__registry_tier_policy(rlt__registry *r, const char *default_tier, const void *key,
                              size_t klen, int *policy_id);

/* Snapshots and upkeep (rlt_store_load, _save, _sweep's contracts). */
int rlt__registry_load(rlt__registry *r, const char *path, rlt_ns now, int64_t wall_ns);
int rlt__registry_save(rlt__registry *r, const char *path, rlt_ns now, int64_t wall_ns);
size_t rlt__registry_sweep(rlt__registry *r, rlt_ns now, size_t budget);
/* The store's figures for INFO, DBSIZE and /metrics. */
void rlt__registry_stats(rlt__registry *r, rlt_store_stats *st);
size_t rlt__registry_reservations(rlt__registry *r, rlt_ns now);
/* Concurrency leases held at `now` in the store (rlt_store_leases). */
size_t rlt__registry_leases(rlt__registry *r, rlt_ns now);

#endif
