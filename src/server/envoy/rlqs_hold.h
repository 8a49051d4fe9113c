/* Who holds the RLQS quota state's streams and buckets (rlqs_hold.c): a holder is a client,
 * as for RL.RESERVE's reservations (request.h's rlt__session_holder): a tenant, every
 * connection of it together, or else one connection.  Each counts its open streams and the
 * buckets it created (charged until the bucket is freed, its idle TTL included, so that a
 * client that reconnects or ends its streams does not get its share back early), so that the
 * quota state can cap both per holder, well below the table's size: one client filling its
 * share leaves the table to the others.  Under the quotas lock; no clock. */
#ifndef RLT_SERVER_ENVOY_RLQS_HOLD_H
#define RLT_SERVER_ENVOY_RLQS_HOLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Holders are chained in this many slots (a few hundred clients at a time is usual). */
#define RLT__RLQS_HOLDER_SLOTS 256

typedef struct rlt__rlqs_holder {
    struct rlt__rlqs_holder *next;
    uint64_t id;    /* rlt__session_holder's: odd a tenant, even a connection; never 0 */
    size_t streams; /* open streams */
    size_t buckets; /* table buckets it created, not yet freed */
} rlt__rlqs_holder;

/* Zero-initialised: empty. */
typedef struct rlt__rlqs_holders {
    rlt__rlqs_holder *slot[RLT__RLQS_HOLDER_SLOTS];
    size_t n;
} rlt__rlqs_holders;

/* The holder `id` (!= 0), created with nothing held if new (its bytes counted in the
 * connections' share of max_memory).  NULL: out of memory. */
rlt__rlqs_holder *rlt__rlqs_holder_get(rlt__rlqs_holders *hs, uint64_t id);

/* Frees h if it holds nothing any more (no stream, no bucket); else nothing.  NULL: no-op. */
void rlt__rlqs_holder_release(rlt__rlqs_holders *hs, rlt__rlqs_holder *h);

/* Frees every holder (the quota state's close). */
void rlt__rlqs_holders_free(rlt__rlqs_holders *hs);

#endif
