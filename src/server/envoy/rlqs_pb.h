/* The protobuf codec of Envoy's Rate Limit Quota Service (rlqs_pb.c; schemas in
 * proto/rlqs.proto and proto/ratelimit_strategy.proto, upstream field numbers).  Sans-I/O like
 * pb.h: a report is read in place from the caller's buffer (strings point into it), one
 * bucket usage at a time, after one pass that checks the whole message; a response is
 * appended to an obuf. */
#ifndef RLT_SERVER_ENVOY_RLQS_PB_H
#define RLT_SERVER_ENVOY_RLQS_PB_H

#include "ratelimit/ratelimit.h"
#include "server/base/obuf.h"
#include "server/config/config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bounds of one BucketId: its pairs, and the bytes of its keys and values together.  Envoy's
 * bucket ids are a few pairs built from request attributes; larger ones are refused. */
#define RLT__RLQS_MAX_PAIRS 16
#define RLT__RLQS_MAX_ID 1024

/* Results of the decoder (RLT_* codes, named for what they mean here). */
enum {
    RLT__RLQS_OK = RLT_OK,
    RLT__RLQS_END = RLT_ENOENT,       /* no more bucket usages */
    RLT__RLQS_MALFORMED = RLT_EPARSE, /* not a valid message: gRPC INVALID_ARGUMENT */
    RLT__RLQS_TOO_LARGE = RLT_ERANGE, /* a BucketId past its bounds: RESOURCE_EXHAUSTED */
};

/* A BucketId: its pairs sorted by key (bytewise, shorter first), one per key (a repeated key
 * keeps its last value, as a protobuf map does), keys and values 1..RLT__RLQS_MAX_ID bytes
 * without NUL, pointing into the message. */
typedef struct rlt__rlqs_bucket_id {
    size_t n; /* 0..RLT__RLQS_MAX_PAIRS; 0: the usage had no BucketId or an empty one (Envoy
                 skips such an action; the caller skips such a usage, the others answered) */
    rlt__entry pairs[RLT__RLQS_MAX_PAIRS];
} rlt__rlqs_bucket_id;

/* One BucketQuotaUsage. */
typedef struct rlt__rlqs_usage {
    rlt__rlqs_bucket_id id;
    rlt_ns elapsed;   /* time_elapsed in ns, saturated to int64; 0 when absent; may be < 0 */
    uint64_t allowed; /* num_requests_allowed */
    uint64_t denied;  /* num_requests_denied */
} rlt__rlqs_usage;

/* A report being read: the usages not yet returned. */
typedef struct rlt__rlqs_reader {
    const uint8_t *p, *end;
} rlt__rlqs_reader;

/* Checks a whole RateLimitQuotaUsageReports in buf[0..len) (every usage, as
 * rlt__rlqs_next_usage reads it) and starts *it at its first usage.  *domain (not
 * NUL-terminated, no NUL inside; may be empty) and *dlen get the domain, *count the usages.
 * Unknown fields are skipped; the newer upstream form of bucket_quota_usages (a map from a
 * uint64 to the usage) is read as the list.  Returns RLT__RLQS_OK, RLT__RLQS_MALFORMED or
 * RLT__RLQS_TOO_LARGE with a message in err. */
int rlt__rlqs_decode_reports(const uint8_t *buf, size_t len, const char **domain, size_t *dlen,
                             size_t *count, rlt__rlqs_reader *it, char *err, size_t errlen);

/* The next usage of a checked report into *u; RLT__RLQS_END after the last.  (On a report
 * rlt__rlqs_decode_reports did not check, the other codes as it.) */
int rlt__rlqs_next_usage(rlt__rlqs_reader *it, rlt__rlqs_usage *u, char *err, size_t errlen);

/* What one BucketAction says. */
typedef enum rlt__rlqs_kind {
    RLT__RLQS_TOKEN_BUCKET = 0, /* QuotaAssignmentAction with a TokenBucket */
    RLT__RLQS_ALLOW_ALL = 1,    /* QuotaAssignmentAction with blanket_rule ALLOW_ALL */
    RLT__RLQS_DENY_ALL = 2,     /* QuotaAssignmentAction with blanket_rule DENY_ALL */
    RLT__RLQS_ABANDON = 3       /* AbandonAction */
} rlt__rlqs_kind;

typedef struct rlt__rlqs_action {
    const rlt__rlqs_bucket_id *id;
    rlt__rlqs_kind kind;
    uint32_t max_tokens;      /* TOKEN_BUCKET: >= 1 */
    uint32_t tokens_per_fill; /* TOKEN_BUCKET: >= 1 */
    rlt_ns fill_interval;     /* TOKEN_BUCKET: > 0 */
    rlt_ns ttl;               /* assignment_time_to_live, >= 0 (not ABANDON) */
} rlt__rlqs_action;

/* Appends a RateLimitQuotaResponse of a[0..n) (in order).  On overflow of `out`, as obuf. */
void rlt__rlqs_encode_response(const rlt__rlqs_action *a, size_t n, rlt__obuf *out);

/* The canonical bytes of a BucketId (each pair as key, NUL, value, NUL, in its order) into
 * out[0..cap); returns their length, at most RLT__RLQS_MAX_ID + 2 x RLT__RLQS_MAX_PAIRS. */
size_t rlt__rlqs_id_key(const rlt__rlqs_bucket_id *id, char *out, size_t cap);

#endif
