/* libratelimit_redis's local leases (lease.c): with RLT_REDIS_LEASE, a key's decisions are
 * taken from a batch of units granted by one Redis call (lease_units, for lease_ttl), and a
 * denial is remembered until its wait is over.  Not installed. */
#ifndef RLT_REDIS_LEASE_H
#define RLT_REDIS_LEASE_H

#include "internal.h"

/* One entry of the handle's lease cache (r->leases, r->nleases entries, by key name hash). */
typedef struct rlt__lease {
    char *name; /* Redis key name (owned); NULL = empty entry */
    size_t len;
    int64_t units;        /* leased units not yet spent */
    int64_t expires;      /* ns (monotonic, or the caller's clock with RLT_REDIS_CALLER_TIME) */
    rlt_decision d;       /* the grant's decision, for limit and reset_after */
    int64_t denied_until; /* Redis denied a cost-1 request until then: deny locally */
    rlt_decision denied;  /* that denial */
} rlt__lease;

/* Whether decisions of p may come from a lease. */
bool rlt__leasable(const rlt_policy *p);

/* Decides l (of check ck) from the key's lease, or from a new one taken in one Redis call
 * (max(lease_units, cost)).  RLT_OK with *d; else the status of the Redis call, with *d the
 * fail mode's decision.  Counts the decision in the handle's stats. */
int rlt__lease_decide(rlt_redis *r, const rlt__limit *l, const rlt_redis_check *ck, unsigned flags,
                      rlt_ns now_ns, int64_t now_us, rlt_decision *d);

/* Drops what is left of the lease of key name[0..len) (a reset). */
void rlt__lease_forget(rlt_redis *r, const char *name, size_t len);

/* Frees the lease cache's names (the handle's close). */
void rlt__leases_free(rlt_redis *r);

#endif
