/* libratelimit_redis's local leases: a cache of units granted by Redis per key, spent here
 * without a round trip, and of denials that stand until their wait is over (other servers can
 * only use more, so a remembered denial under-admits, never over-admits). */
#include "lease.h"

#include "call.h"

#include <stdlib.h>
#include <string.h>

#define KEYNAME_MAX RLT__KEYNAME_MAX

/* Units and expiry are stored atomically (relaxed): rlt_redis_lease_units reads them from
 * another thread than the handle's.  Only the handle's thread writes them. */
static void set_units(rlt__lease *e, int64_t units)
{
    __atomic_store_n(&e->units, units, __ATOMIC_RELAXED);
}

bool rlt__leasable(const rlt_policy *p)
{
    /* Not with block=: a denied big lease would start a block that the cost alone escapes. */
    return p->block == 0 &&
           (p->algo == RLT_FIXED_WINDOW || p->algo == RLT_SLIDING_LOG ||
            p->algo == RLT_SLIDING_WINDOW || p->algo == RLT_TOKEN_BUCKET || p->algo == RLT_GCRA);
}

int rlt__lease_decide(rlt_redis *r, const rlt__limit *l, const rlt_redis_check *ck, unsigned flags,
                      rlt_ns now_ns, int64_t now_us, rlt_decision *d)
{
    char name[KEYNAME_MAX];
    int len = rlt__redis_name(r, l->p, ck->key, ck->klen, name, sizeof name);
    if (len < 0) return len == RLT_ENOSPC ? RLT_EKEYLEN : len;
    rlt__lease *e = &r->leases[rlt_hash_fnv1a(name, (size_t)len) % r->nleases];
    int64_t t = (flags & RLT_REDIS_CALLER_TIME) ? now_ns : rlt__mono_ns();
    bool mine = e->name && e->len == (size_t)len && memcmp(e->name, name, e->len) == 0;
    if (mine && t < e->denied_until && e->units < l->cost) {
        /* Redis said no request fits before denied_until if nothing else happens; other
         * servers can only use more, so the answer stands (it can only under-admit). */
        *d = e->denied;
        d->retry_after = e->denied_until - t;
        r->st.lease_local++;
        r->st.decisions++;
        return RLT_OK;
    }
    if (mine && t < e->expires && e->units >= l->cost) {
        set_units(e, e->units - l->cost);
        *d = e->d;
        d->allowed = true;
        d->retry_after = 0;
        d->remaining += e->units;
        r->st.lease_local++;
        r->st.decisions++;
        return RLT_OK;
    }
    /* Take a new lease: max(lease_units, cost) in one script call.  What is left of an old
     * lease is dropped (never returned: a refund could mint when it comes late). */
    rlt__limit big = *l;
    big.cost = l->cost > r->opt.lease_units ? l->cost : r->opt.lease_units;
    int64_t retry_at = 0;
    int rc = rlt__decide_call(r, &big, ck, 1, false, now_us, d, &retry_at);
    if (rc) {
        rlt__fail_decision(r, l->p, flags, retry_at, d);
        return rc;
    }
    if (!d->allowed && big.cost > l->cost) {
        /* The lease did not fit (nothing was consumed): ask for the cost alone. */
        rc = rlt__decide_call(r, l, ck, 1, false, now_us, d, &retry_at);
        if (rc) {
            rlt__fail_decision(r, l->p, flags, retry_at, d);
            return rc;
        }
        if (d->allowed) {
            r->st.decisions++;
            return RLT_OK;
        }
    }
    if (!mine) { /* take over the cache entry (another key's lease is dropped) */
        char *copy = malloc((size_t)len);
        if (copy) {
            free(e->name);
            memcpy(copy, name, (size_t)len);
            e->name = copy;
            e->len = (size_t)len;
            mine = true;
        }
    }
    if (mine) {
        set_units(e, 0);
        e->denied_until = INT64_MIN;
        if (d->allowed) {
            __atomic_store_n(&e->expires, t + r->opt.lease_ttl, __ATOMIC_RELAXED);
            set_units(e, big.cost - l->cost);
            e->d = *d;
            d->remaining += e->units;
        } else if (d->retry_after > 0 && l->cost == 1) {
            e->denied_until = t + d->retry_after;
            e->denied = *d;
        }
    }
    if (d->allowed) r->st.lease_grants++;
    r->st.decisions++;
    return RLT_OK;
}

void rlt__lease_forget(rlt_redis *r, const char *name, size_t len)
{
    if (!r->leases) return;
    rlt__lease *e = &r->leases[rlt_hash_fnv1a(name, len) % r->nleases];
    if (e->name && e->len == len && memcmp(e->name, name, len) == 0) {
        set_units(e, 0);
        e->denied_until = INT64_MIN;
    }
}

int64_t rlt_redis_lease_units(const rlt_redis *r, unsigned flags, rlt_ns now)
{
    if (!r || !r->leases) return 0;
    int64_t t = (flags & RLT_REDIS_CALLER_TIME) ? now : rlt__mono_ns(), n = 0;
    for (size_t i = 0; i < r->nleases; i++) {
        const rlt__lease *e = &r->leases[i];
        int64_t u = __atomic_load_n(&e->units, __ATOMIC_RELAXED);
        if (u > 0 && __atomic_load_n(&e->expires, __ATOMIC_RELAXED) > t) n += u;
    }
    return n;
}

void rlt__leases_free(rlt_redis *r)
{
    for (size_t i = 0; i < r->nleases; i++)
        free(r->leases[i].name);
}
