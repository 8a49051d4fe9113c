/* The policy registry over the daemon's keyed store: the one door to the store for every file
 * outside the backend room. */
#include "server/backend/registry.h"

int rlt__registry_open(rlt__registry *r, const rlt_store_options *opt)
{
    r->cfg = NULL;
    r->policy_gen = 0;
    return rlt_store_open(&r->store, opt);
}

void rlt__registry_close(rlt__registry *r)
{
    rlt_store_close(r->store);
    r->store = NULL;
}

void rlt__registry_set_config(rlt__registry *r, rlt__config *cfg)
{
    __atomic_store_n(&r->cfg, cfg, __ATOMIC_RELEASE);
}

void rlt__registry_bump(rlt__registry *r)
{
    __atomic_add_fetch(&r->policy_gen, 1, __ATOMIC_RELEASE);
}

int rlt__registry_set_policy(rlt__registry *r, const char *name, const rlt_policy *p,
                             rlt_change change, int *id)
{
    return rlt_store_set_policy(r->store, name, p, change, id);
}

int rlt__registry_policy_id(rlt__registry *r, const char *name)
{
    return rlt_store_policy_id(r->store, name);
}

int rlt__registry_policy(rlt__registry *r, int id, rlt_policy *p)
{
    return rlt_store_get_policy(r->store, id, p);
}

int rlt__registry_set_tier(rlt__registry *r, const char *name, int policy_id)
{
    return rlt_store_set_tier(r->store, name, policy_id);
}

int rlt__registry_assign_tier(rlt__registry *r, const void *key, size_t klen, const char *tier)
{
    return rlt_store_assign_tier(r->store, key, klen, tier);
}

int rlt__registry_tier_policy(rlt__registry *r, const char *default_tier, const void *key,
                              size_t klen, int *policy_id)
{
    return rlt_store_tier_policy(r->store, default_tier, key, klen, policy_id);
}

int rlt__registry_load(rlt__registry *r, const char *path, rlt_ns now, int64_t wall_ns)
{
    return rlt_store_load(r->store, path, now, wall_ns);
}

int rlt__registry_save(rlt__registry *r, const char *path, rlt_ns now, int64_t wall_ns)
{
    return rlt_store_save(r->store, path, now, wall_ns);
}

size_t rlt__registry_sweep(rlt__registry *r, rlt_ns now, size_t budget)
{
    return rlt_store_sweep(r->store, now, budget);
}

void rlt__registry_stats(rlt__registry *r, rlt_store_stats *st)
{
    rlt_store_stats_get(r->store, st);
}

size_t rlt__registry_reservations(rlt__registry *r, rlt_ns now)
{
    return rlt_store_reservations(r->store, now);
}

size_t rlt__registry_leases(rlt__registry *r, rlt_ns now)
{
    return rlt_store_leases(r->store, now);
}
