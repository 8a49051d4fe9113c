/* ratelimitd's top offenders (top.c): the keys denied most, kept in one rlt_topk sketch per
 * metric slot (a worker thread each, slot 0 for the rest) so that a denial only takes its own
 * thread's uncontended lock, merged when INFO, /v1/top or /metrics reads them.  Bounded:
 * server.top_keys (K) counters per sketch, whatever the number of keys denied. */
#ifndef RLT_SERVER_STATS_TOP_H
#define RLT_SERVER_STATS_TOP_H

#include "ratelimit/topk.h"
#include "server/config/config.h"

#include <stddef.h>

/* Entries /metrics shows (a bounded label set). */
#define RLT__TOP_METRICS 10

typedef struct rlt__top rlt__top;

/* Opens the sketches' registry for K counters each (none is allocated before its thread's
 * first denial).  k == 0 turns the feature off: RLT_OK with *out NULL, and every function
 * below takes NULL.  Returns RLT_OK, RLT_EINVAL (k > RLT__TOP_KEYS_MAX), RLT_ENOMEM, RLT_EIO. */
int rlt__top_open(rlt__top **out, size_t k);
/* Frees everything (after every thread stopped deciding).  NULL is a no-op. */
void rlt__top_close(rlt__top *t);
/* K (0 when off). */
size_t rlt__top_k(const rlt__top *t);

/* Counts one denial of (policy id, store key) in the calling thread's sketch.  Thread-safe;
 * a sketch that cannot be allocated or an invalid key drops the count (counted in
 * rlt__top_dropped). */
void rlt__top_denied(rlt__top *t, int policy, const void *key, size_t klen);
/* Denials that could not be counted. */
uint64_t rlt__top_dropped(const rlt__top *t);

/* The merge of every thread's sketch, in a new sketch the caller closes (rlt_topk_close), or
 * NULL when off or out of memory.  Each thread's sketch is copied under its lock and merged
 * outside it. */
rlt_topk *rlt__top_merged(rlt__top *t);

/* Parses /v1/top's query: "" or "n=N" (1 <= N, clamped to k).  *n gets N, or k without one.
 * Returns RLT_OK, or RLT_EINVAL with a message in err. */
int rlt__top_query(const char *q, size_t len, size_t k, size_t *n, char *err, size_t errlen);

#endif
