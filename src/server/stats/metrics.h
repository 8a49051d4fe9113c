/* ratelimitd's counters (metrics.c): per-worker slots written without locks, summed by the
 * readers (request/report.h renders them as Prometheus text and INFO), and the Prometheus
 * family header every rendering starts a family with. */
#ifndef RLT_SERVER_STATS_METRICS_H
#define RLT_SERVER_STATS_METRICS_H

#include "ratelimit/ratelimit.h"
#include "server/base/obuf.h"

#include <stdint.h>

#define RLT__METRIC_IDS 1024 /* per-policy counters; ids beyond share the last slot */
#define RLT__LAT_BUCKETS 22  /* latency buckets: <= 1us, 2us, 4us ... 2^20 us, +Inf */
#define RLT__METRIC_SLOTS 65 /* one writer per slot: workers 1..64, slot 0 for the rest */

/* envoyproxy/ratelimit's per-rule counters (by policy id) and the gRPC front end's: one block,
 * rendered with the Prometheus text (request/report.h). */
#define RLT__GRPC_STATUSES 17 /* gRPC status codes 0 (OK) .. 16 (UNAUTHENTICATED) */
typedef struct rlt__envoy_counters {
    uint64_t total_hits[RLT__METRIC_IDS];
    uint64_t over_limit[RLT__METRIC_IDS];
    uint64_t near_limit[RLT__METRIC_IDS];
    uint64_t within_limit[RLT__METRIC_IDS];
    uint64_t shadow_mode[RLT__METRIC_IDS];
    uint64_t grpc_calls[3];                   /* ShouldRateLimit, Health/Check, other */
    uint64_t grpc_status[RLT__GRPC_STATUSES]; /* calls answered with each status */
} rlt__envoy_counters;

typedef struct rlt__mslot {
    uint64_t allowed[RLT__METRIC_IDS];
    uint64_t denied[RLT__METRIC_IDS];
    uint64_t shadowed[RLT__METRIC_IDS]; /* would have been denied, allowed by shadow mode */
    uint64_t lat[RLT__LAT_BUCKETS];
    uint64_t lat_sum_ns;
    uint64_t commands;
    uint64_t errors;
    uint64_t http_requests;
    /* The SPOE agent's service time per NOTIFY: from the turn's clock reading (right after the
     * recv that completed the frame) to its ACK queued for sending; buckets as lat. */
    uint64_t spop_lat[RLT__LAT_BUCKETS];
    uint64_t spop_lat_sum_ns;
    rlt__envoy_counters envoy;
} rlt__mslot;

typedef struct rlt__metrics {
    rlt__mslot *slots; /* RLT__METRIC_SLOTS of them */
    uint64_t connections_total;
    uint64_t connections_rejected;
    int64_t connections_current;
    uint64_t snapshots_ok;
    uint64_t snapshots_failed;
    uint64_t reloads_ok;
    uint64_t reloads_failed;
} rlt__metrics;

/* The calling thread's metric slot (0 unless rlt__metrics_bind_thread was called). */
rlt__mslot *rlt__mslot_get(rlt__metrics *m);
void rlt__metrics_bind_thread(unsigned slot);
void rlt__metrics_latency(rlt__mslot *s, rlt_ns ns);
/* Counts ns in a log2 histogram of RLT__LAT_BUCKETS buckets (bucket b: <= 2^b us, the last
 * +Inf) and adds it to *sum_ns. */
void rlt__metrics_hist(uint64_t *buckets, uint64_t *sum_ns, rlt_ns ns);

/* The calling thread's slot index: 1..64 have one writer each (a worker), 0 is shared.
 * Per-thread state, not scratch (tests/docs/thread_state.sh): the thread's identity. */
extern __thread unsigned rlt__tl_slot;

/* Adds v to a counter of the calling thread's slot.  A worker's slot has one writer, so a
 * relaxed load and store suffice (no lock-prefixed add on the hot path; readers still see
 * whole values); the shared slot 0 takes an atomic add. */
static inline void rlt__mcount(uint64_t *c, uint64_t v)
{
    if (rlt__tl_slot != 0)
        __atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + v, __ATOMIC_RELAXED);
    else
        __atomic_fetch_add(c, v, __ATOMIC_RELAXED);
}

/* Writes the "# HELP" and "# TYPE" lines of a Prometheus family (type: counter, gauge,
 * histogram); every family rendered anywhere starts with them. */
void rlt__prom_family(rlt__obuf *out, const char *name, const char *type, const char *help);
/* A histogram family `name` (seconds) from RLT__LAT_BUCKETS log2 buckets (not cumulative) and
 * their sum in ns: the header, the cumulative `_bucket{le=..}` lines, `_sum` and `_count`. */
void rlt__prom_histogram(rlt__obuf *out, const char *name, const char *help,
                         const uint64_t *buckets, uint64_t sum_ns);
/* The family's header, then its one sample `name v`. */
void rlt__prom_value(rlt__obuf *out, const char *name, const char *type, const char *help,
                     uint64_t v);

#endif
