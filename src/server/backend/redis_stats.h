/* The Redis backend's counters (redis_stats.c): each thread publishes its handle's counters
 * and the nodes it sees after its calls; INFO and /metrics sum every thread's. */
#ifndef RLT_SERVER_BACKEND_REDIS_STATS_H
#define RLT_SERVER_BACKEND_REDIS_STATS_H

#include "server/backend/redis_types.h"
#include "server/base/obuf.h"

/* Publishes thread context t's counters and node list (relaxed atomic stores under its own
 * lock; called by t's thread only). */
void rlt__backend_redis_publish(tctx *t);
/* The backend's lines of INFO and families of /metrics (the backend table's info and
 * prometheus). */
void rlt__backend_redis_info(rlt__backend *be, rlt__obuf *o);
void rlt__backend_redis_prometheus(rlt__backend *be, rlt__obuf *o);

/* Local lease units the worker handles hold now (the backend table's lease_units). */
uint64_t rlt__backend_redis_lease_units(rlt__backend *be);

#endif
