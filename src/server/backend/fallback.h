/* The local fallback of the Redis backend (fallback.c): with `fail: local`, while Redis
 * cannot answer, a node decides on its own keyed store at its share of each limit, the
 * limit divided by the fleet size (`redis.fleet_size`), so that the fleet as a whole still
 * admits no more than the shared limit.  The store here is the fallback's own, not the
 * registry's; its state never goes back into Redis (docs/distributed.md). */
#ifndef RLT_SERVER_BACKEND_FALLBACK_H
#define RLT_SERVER_BACKEND_FALLBACK_H

#include "ratelimit/ratelimit.h"
#include "ratelimit/store.h"

#include <stddef.h>

/* One node's share of `p` in a fleet of `fleet` nodes (>= 1): limit and burst divided and
 * rounded down (so the shares never add up to more than the limit), queue and delay too
 * (they may become 0), same algorithm; a bucket's or GCRA's rate N/W becomes (N/g) per
 * W x (F/g) with g = gcd(N, F), exact; jitter= and block= carry over.  Returns RLT_OK and *out;
 * RLT_ERANGE when the limit or the burst would be 0 (a node cannot have a share: refused, never
 * rounded up, which would mint allowance); RLT_EINVAL for NULL, fleet 0 or a concurrency policy
 * (its leases live in Redis: a concurrency policy fails closed instead). */
int rlt__fallback_divide(const rlt_policy *p, unsigned fleet, rlt_policy *out);

/* Writes why rlt__fallback_divide refused `p` over `fleet` nodes into err[0..errlen):
 * "gcra:1/1s over 2 nodes: the limit 1 divided by 2 leaves 0 ...".  For config errors. */
void rlt__fallback_explain(const rlt_policy *p, unsigned fleet, char *err, size_t errlen);

typedef struct rlt__fallback rlt__fallback;

/* Opens the fallback's store, bounded by max_keys and max_bytes (rlt_store_options; 0 =
 * none), evicting the least recently used key when full.  Returns RLT_OK and *out,
 * RLT_ENOMEM, or rlt_store_open's codes. */
int rlt__fallback_open(rlt__fallback **out, size_t max_keys, size_t max_bytes);
/* Frees it.  NULL is a no-op.  Not thread-safe with other calls. */
void rlt__fallback_close(rlt__fallback *f);

/* The fallback store's id for the share of policy `id` (the registry's id) under `p` over
 * `fleet` nodes, registering the share (as "fallback.<id>") when it is new or changed: the
 * caller caches the answer until its policy or fleet size changes.  Thread-safe.  Returns
 * RLT_OK and *lid; rlt__fallback_divide's RLT_ERANGE / RLT_EINVAL; RLT_ENOMEM. */
int rlt__fallback_policy(rlt__fallback *f, int id, const rlt_policy *p, unsigned fleet, int *lid);

/* The fallback's store (decisions, resets), for the caller holding fallback ids. */
rlt_store *rlt__fallback_store(rlt__fallback *f);

#endif
