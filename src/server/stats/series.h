/* Decisions per second over the last five minutes, per policy (series.c): a fixed ring of
 * RLT__SERIES_LEN one-second samples for each of at most RLT__SERIES_POLICIES policies, fed
 * by the daemon's main thread once a second from the counters' running totals and read by
 * /v1/stats.  Bounded memory whatever the traffic: policies past the cap are summed into
 * `untracked`.  One lock: one writer a second, a reader per /v1/stats. */
#ifndef RLT_SERVER_STATS_SERIES_H
#define RLT_SERVER_STATS_SERIES_H

#include "ratelimit/ratelimit.h"
#include "server/stats/metrics.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define RLT__SERIES_LEN 300     /* samples kept: 5 minutes of seconds */
#define RLT__SERIES_POLICIES 64 /* policies tracked; the first seen keep their row */

typedef struct rlt__series_row {
    uint32_t id;                 /* the policy id (metrics.h's) */
    uint64_t allowed, denied;    /* the running totals at the newest sample */
    uint32_t a[RLT__SERIES_LEN]; /* allowed in the second s, at [s % RLT__SERIES_LEN] */
    uint32_t d[RLT__SERIES_LEN];
} rlt__series_row;

typedef struct rlt__series {
    pthread_mutex_t lock;
    int64_t last;       /* the newest sample's second (the daemon's clock / 1 s); -1 before any */
    size_t n;           /* rows in use */
    uint64_t untracked; /* decisions of policies past the cap, up to the newest sample */
    rlt__series_row *rows; /* RLT__SERIES_POLICIES of them */
} rlt__series;

/* Opens an empty series (about 160 KiB).  Returns RLT_OK or RLT_ENOMEM. */
int rlt__series_open(rlt__series *s);
/* Frees it; a series never opened (zeroed) is a no-op. */
void rlt__series_close(rlt__series *s);

/* Takes the sample of second `sec` from the counters: each policy id below nids (and the
 * shared last id) whose totals moved gets their growth since the previous sample in its row;
 * the seconds skipped since then read 0.  A second already sampled is left as it is (the next
 * one takes its growth).  Called from one thread. */
void rlt__series_sample(rlt__series *s, const rlt__metrics *m, size_t nids, int64_t sec);

/* One row as a reader gets it: samples oldest first (the oldest is second last - LEN + 1). */
typedef struct rlt__series_view {
    uint32_t id;
    uint64_t allowed, denied;
    uint32_t a[RLT__SERIES_LEN], d[RLT__SERIES_LEN];
} rlt__series_view;

/* Copies the rows (at most cap) into out, oldest sample first, under the lock; *last is the
 * newest second (-1: none yet) and *untracked the decisions not in any row.  Returns the number
 * of rows. */
size_t rlt__series_read(rlt__series *s, rlt__series_view *out, size_t cap, int64_t *last,
                        uint64_t *untracked);

/* The decisions of policy id summed over every thread's slot: allowed, denied and
 * shadow-denied (report.c's per-policy figures use it too). */
void rlt__metrics_policy(const rlt__metrics *m, size_t id, uint64_t *allowed, uint64_t *denied,
                         uint64_t *shadowed);

#endif
