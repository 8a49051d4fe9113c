/* The RLQS quota state's counters (rlqs.h's stats, kept in rlqs_int.h's record): their own
 * header so that the record's header need not include rlqs.h. */
#ifndef RLT_SERVER_ENVOY_RLQS_COUNTERS_H
#define RLT_SERVER_ENVOY_RLQS_COUNTERS_H

#include <stdint.h>

/* What the reports brought, counted by the gRPC service (grpc/rlqs.c, under the lock). */
typedef struct rlt__rlqs_counters {
    uint64_t usages;        /* bucket usages reported */
    uint64_t skipped;       /* of them, skipped: no BucketId or an empty one */
    uint64_t actions;       /* bucket actions sent */
    uint64_t shadow_denied; /* requests shadow-mode buckets would have denied */
    uint64_t over_cap;      /* usages of new buckets past their client's bucket cap: not kept,
                               not answered */
} rlt__rlqs_counters;

#endif
