/* Tiers: named tiers (tier name -> policy), the assignment of keys to them, and the decisions
 * under a key's tier (its assignment, else a default tier), each in one critical section of
 * the key's shard with the single call's hot path (hot.h) inlined. */
#include <stdlib.h>
#include <string.h>

#include "store/assign.h"
#include "store/hot.h"
#include "store/lock.h"
#include "store/policy.h"
#include "store/table.h"
#include "store/tier.h"

#define MAX_TIERS 65535u

static int tier_find(const rlt_store *s, const char *name, size_t len)
{
    for (uint32_t i = 0; i < s->ntier; i++)
        if (s->tiers[i].nlen == len && memcmp(s->tiers[i].name, name, len) == 0) return (int)i;
    return -1;
}

static int tier_append(rlt_store *s, const char *name, size_t len, int policy)
{
    if (s->ntier >= MAX_TIERS) return RLT_ENOMEM;
    if (s->ntier == s->tiercap) {
        uint32_t nc = s->tiercap ? s->tiercap * 2 : 8;
        rlt__named_tier *nt = realloc(s->tiers, nc * sizeof *nt);
        if (!nt) return RLT_ENOMEM;
        s->tiers = nt;
        s->tiercap = nc;
    }
    rlt__named_tier *t = &s->tiers[s->ntier++];
    memset(t, 0, sizeof *t);
    t->nlen = (uint8_t)len;
    memcpy(t->name, name, len);
    t->policy = policy;
    return RLT_OK;
}

int rlt__add_tier(rlt_store *s, const char *name, size_t nlen, int policy)
{
    if (!rlt__valid_name(name, nlen) || tier_find(s, name, nlen) >= 0) return RLT_EINVAL;
    if (policy < 0 || (uint32_t)policy >= s->npol) return RLT_EINVAL;
    return tier_append(s, name, nlen, policy);
}

int rlt_store_set_tier(rlt_store *s, const char *tier, int policy_id)
{
    size_t len;
    if (!s || rlt__name_len(tier, &len)) return RLT_EINVAL;
    pthread_mutex_lock(&s->pol_mu);
    int rc = RLT_OK;
    if (policy_id < 0 || (uint32_t)policy_id >= s->npol) {
        rc = RLT_ENOENT;
    } else {
        rlt__lock_all(s);
        int t = tier_find(s, tier, len);
        if (t >= 0)
            s->tiers[t].policy = policy_id;
        else
            rc = tier_append(s, tier, len, policy_id);
        rlt__unlock_all(s);
    }
    pthread_mutex_unlock(&s->pol_mu);
    return rc;
}

int rlt_store_assign_tier(rlt_store *s, const void *key, size_t klen, const char *tier)
{
    size_t len;
    if (!s || rlt__name_len(tier, &len)) return RLT_EINVAL;
    uint64_t h;
    rlt__shard *sh;
    int rc = rlt__lock_key(s, key, klen, &h, &sh);
    if (rc) return rc;
    /* Tiers are written under every shard lock: reading them under one is safe. */
    int t = tier_find(s, tier, len);
    rc = t < 0 ? RLT_ENOENT : rlt__assign_set(s, sh, h, key, klen, (uint32_t)t);
    rlt__shard_unlock(sh);
    return rc;
}

/* The tier policy of `key` (its assignment, else default_tier), and optionally a decision
 * under it in the same critical section (d != NULL). */
static int tier_call(rlt_store *s, const char *default_tier, const void *key, size_t klen,
                     rlt_ns now, int64_t cost, rlt_decision *d, int *policy_id)
{
    int rc = rlt__check_key(key, klen); /* a bad key is reported before a bad tier name */
    if (rc) return rc;
    size_t dlen = 0;
    if (default_tier && rlt__name_len(default_tier, &dlen)) return RLT_EINVAL;
    uint64_t h;
    rlt__shard *sh;
    (void)rlt__lock_key(s, key, klen, &h, &sh);
    const rlt__assign *a = rlt__assign_find(sh, h, key, klen);
    int t = a ? (int)a->tier : default_tier ? tier_find(s, default_tier, dlen) : -1;
    if (t < 0)
        rc = RLT_ENOENT;
    else if (d != NULL)
        rc = rlt__decide_locked(s, sh, h, s->tiers[t].policy, key, klen, now, cost, d);
    else
        *policy_id = s->tiers[t].policy;
    rlt__shard_unlock(sh);
    return rc;
}

int rlt_store_decide_tier(rlt_store *s, const char *default_tier, const void *key, size_t klen,
                          rlt_ns now, int64_t cost, rlt_decision *d)
{
    if (!s || !d || cost < 0) return RLT_EINVAL;
    return tier_call(s, default_tier, key, klen, now, cost, d, NULL);
}

int rlt_store_tier_policy(rlt_store *s, const char *default_tier, const void *key, size_t klen,
                          int *policy_id)
{
    if (!s || !policy_id) return RLT_EINVAL;
    return tier_call(s, default_tier, key, klen, 0, 0, NULL, policy_id);
}
