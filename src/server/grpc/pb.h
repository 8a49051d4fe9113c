/* A small protobuf codec (pb.c) for the messages ratelimitd's gRPC front end uses
 * (src/server/grpc/proto/rls.proto: envoy.service.ratelimit.v3 and grpc.health.v1, with the
 * upstream field numbers).  Sans-I/O like resp.h: decoding reads one whole message from a
 * caller buffer without allocating (strings point into it), encoding appends to an obuf. */
#ifndef RLT_SERVER_GRPC_PB_H
#define RLT_SERVER_GRPC_PB_H

#include "ratelimit/ratelimit.h"
#include "server/envoy/rls.h"
#include "server/base/obuf.h"

#include <stddef.h>
#include <stdint.h>

/* Results of the decoders: RLT_* codes, named for what they mean here. */
enum {
    RLT__PB_OK = RLT_OK,
    RLT__PB_MALFORMED = RLT_EPARSE, /* not a valid RateLimitRequest: gRPC INVALID_ARGUMENT */
    RLT__PB_EMPTY = RLT_EINVAL,     /* an empty domain or no descriptors: an error as
                                       envoyproxy/ratelimit answers it (gRPC UNKNOWN with its
                                       message) */
    RLT__PB_TOO_MANY = RLT_ERANGE,  /* more descriptors or entries than ratelimitd decides at
                                       once */
};

/* Decodes a RateLimitRequest from buf[0..len) into r (strings point into buf, which must
 * outlive r).  Unknown fields are skipped, as proto3 requires; a known field with another
 * wire type, a truncated or overlong varint, a length past the end, a group, a string that
 * holds a NUL, hits_addend or requests_per_unit past uint32 (per-descriptor hits_addend past
 * INT64_MAX) are malformed.  Returns RLT__PB_OK or an RLT__PB_* error with a message in err.
 * Never reads outside buf; no recursion deeper than the message's own three levels. */
int rlt__pb_decode_rls(const uint8_t *buf, size_t len, rlt__envoy_req *r, char *err, size_t errlen);

/* A response header (HeaderValue). */
typedef struct rlt__pb_header {
    const char *key, *value;
} rlt__pb_header;

/* Appends the RateLimitResponse of `res` with headers h[0..nh) as response_headers_to_add
 * (limit_remaining clamped to uint32). */
void rlt__pb_encode_rls(const rlt__envoy_result *res, const rlt__pb_header *h, size_t nh,
                        rlt__obuf *out);

/* Decodes a grpc.health.v1.HealthCheckRequest: *service (not NUL-terminated) and *slen.
 * Returns RLT__PB_OK or RLT__PB_MALFORMED. */
int rlt__pb_decode_health(const uint8_t *buf, size_t len, const char **service, size_t *slen);
/* Appends a HealthCheckResponse with `status` (1 = SERVING, 3 = SERVICE_UNKNOWN). */
void rlt__pb_encode_health(int status, rlt__obuf *out);

#endif
