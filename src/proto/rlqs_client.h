/* The client side of Envoy's Rate Limit Quota Service codec, for `ratelimit quota`: writes a
 * RateLimitQuotaUsageReports as an Envoy sends it and reads the BucketActions of a
 * RateLimitQuotaResponse (schemas and field numbers: src/server/grpc/proto/rlqs.proto and
 * ratelimit_strategy.proto; the daemon's side is src/server/envoy/rlqs_pb.c).  Sans-I/O: bytes
 * in caller buffers, no allocation, no state beyond the caller's reader; thread-safe. */
#ifndef RLT_PROTO_RLQS_CLIENT_H
#define RLT_PROTO_RLQS_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Pairs of one BucketId this codec reads; a larger one is refused as malformed. */
#define RLT__RLQSC_MAX_PAIRS 16

/* One key/value pair of a BucketId, not NUL-terminated (pointing into a message or into the
 * caller's strings). */
typedef struct rlt__rlqsc_pair {
    const char *key;
    size_t klen;
    const char *value;
    size_t vlen;
} rlt__rlqsc_pair;

/* One BucketQuotaUsage to report. */
typedef struct rlt__rlqsc_usage {
    const rlt__rlqsc_pair *pairs; /* the BucketId, n >= 1 pairs */
    size_t n;
    int64_t elapsed_ns; /* time_elapsed, >= 0 */
    uint64_t allowed;   /* num_requests_allowed */
    uint64_t denied;    /* num_requests_denied */
} rlt__rlqsc_usage;

/* Writes a RateLimitQuotaUsageReports of `domain` (NUL-terminated) and u[0..n) into
 * out[0..cap) (the message alone: the caller adds gRPC's 5-byte prefix).  Returns the length,
 * or 0 when it does not fit. */
size_t rlt__rlqsc_encode_reports(const char *domain, const rlt__rlqsc_usage *u, size_t n,
                                 uint8_t *out, size_t cap);

/* What one BucketAction says (as the daemon's rlt__rlqs_kind). */
typedef enum rlt__rlqsc_kind {
    RLT__RLQSC_TOKEN_BUCKET = 0, /* a QuotaAssignmentAction with a TokenBucket */
    RLT__RLQSC_ALLOW_ALL = 1,    /* ... with blanket_rule ALLOW_ALL */
    RLT__RLQSC_DENY_ALL = 2,     /* ... with blanket_rule DENY_ALL */
    RLT__RLQSC_ABANDON = 3       /* an AbandonAction */
} rlt__rlqsc_kind;

/* One BucketAction read from a response. */
typedef struct rlt__rlqsc_action {
    size_t n; /* the BucketId's pairs, in the message's order (pointing into it) */
    rlt__rlqsc_pair pairs[RLT__RLQSC_MAX_PAIRS];
    rlt__rlqsc_kind kind;
    uint32_t max_tokens;      /* TOKEN_BUCKET: as sent (0 when absent) */
    uint32_t tokens_per_fill; /* TOKEN_BUCKET: as sent (0 when absent) */
    int64_t fill_interval_ns; /* TOKEN_BUCKET: as sent, saturated to int64 */
    int64_t ttl_ns;           /* assignment_time_to_live, saturated; 0 when absent */
} rlt__rlqsc_action;

/* A response being read: the bytes not yet read. */
typedef struct rlt__rlqsc_reader {
    const uint8_t *p, *end;
} rlt__rlqsc_reader;

/* Starts *r over a RateLimitQuotaResponse in buf[0..len) (without gRPC's prefix). */
void rlt__rlqsc_reader_init(rlt__rlqsc_reader *r, const uint8_t *buf, size_t len);

/* The next BucketAction into *a.  Unknown fields are skipped; an action that is neither an
 * assignment nor an abandon, or a strategy that is neither a blanket rule nor a token bucket
 * (requests_per_time_unit), is malformed for this client.  Returns 1 with *a, 0 after the
 * last, -1 for a malformed message (with a reason in *why, a static string). */
int rlt__rlqsc_next_action(rlt__rlqsc_reader *r, rlt__rlqsc_action *a, const char **why);

/* Whether a BucketId read from a response (in any order) is the one of `pairs[0..n)` (the
 * same pairs, each key once).  Pure. */
bool rlt__rlqsc_same_id(const rlt__rlqsc_action *a, const rlt__rlqsc_pair *pairs, size_t n);

#endif
