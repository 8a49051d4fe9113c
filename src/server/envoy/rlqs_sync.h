/* Redis mode of the daemon's RLQS quota state (rlqs_sync.c): a thread that exchanges every
 * policy bucket with the fleet of daemons sharing its budget (the backend's quota_exchange,
 * on the thread's own Redis connection), every RLT__RLQS_SYNC_INTERVAL and at once when a
 * new bucket appears, and applies the answers to the quota state (rlqs.h, "Redis mode").
 * No Redis call is made under the quota state's lock. */
#ifndef RLT_SERVER_ENVOY_RLQS_SYNC_H
#define RLT_SERVER_ENVOY_RLQS_SYNC_H

#include "server/backend/backend.h"
#include "server/envoy/rlqs_redis.h"

#include <stdint.h>

/* The time between two exchanges of a bucket; a claim lives its bucket's assignment TTL + 2
 * of them (+ fail: local's hold) without another exchange.  After a failed exchange, the
 * exchanges of the next claim's TTL are flagged RLT__QUOTA_X_GAP (Redis may have lost the
 * fleet's claims meanwhile). */
#define RLT__RLQS_SYNC_INTERVAL (500 * RLT_NS_PER_MS)

typedef struct rlt__rlqs_sync rlt__rlqs_sync;

/* Puts q in Redis mode and starts the exchanges with the fleet through be (which must have
 * quota_exchange), as a server with a random 64-bit id.  q and be must outlive it.  Returns
 * RLT_OK and *out; RLT_ENOMEM (also when the thread cannot start). */
int rlt__rlqs_sync_start(rlt__rlqs_sync **out, rlt__rlqs *q, rlt__backend *be);

/* Stops the thread (waits for its exchange in flight) and frees it.  NULL is a no-op. */
void rlt__rlqs_sync_stop(rlt__rlqs_sync *s);

/* Counters for INFO and /metrics (relaxed atomic loads; any thread). */
typedef struct rlt__rlqs_sync_stats {
    uint64_t ok, errors; /* bucket exchanges answered by Redis, and failed */
    uint64_t failing;    /* buckets in their fail mode after the latest round */
    uint64_t server;     /* this daemon's id in Redis */
} rlt__rlqs_sync_stats;
void rlt__rlqs_sync_stats_get(rlt__rlqs_sync *s, rlt__rlqs_sync_stats *out);

#endif
