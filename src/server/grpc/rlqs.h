/* Envoy's Rate Limit Quota Service on the gRPC session (rlqs.c):
 * /envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas, a
 * bidirectional stream.  Each length-prefixed report is decoded as its bytes arrive
 * (rlqs_pb.h), its usages fed to the daemon's quota state (envoy/rlqs_srv.h), and the actions
 * it answers sent at once on the still-open response stream (an nghttp2 data provider that
 * defers while nothing is queued); the trailers (grpc-status) end it when the client ends its
 * side or the call fails.  grpc.c calls these from its nghttp2 callbacks. */
#ifndef RLT_SERVER_GRPC_RLQS_H
#define RLT_SERVER_GRPC_RLQS_H

#include "server/grpc/grpc_internal.h"

#include <stddef.h>
#include <stdint.h>

/* The largest report message (more: RESOURCE_EXHAUSTED), within the session's 1 MiB of
 * buffered request bodies. */
#define RLT__RLQS_MAX_MESSAGE (512 << 10)
/* The most response bytes queued for a client that does not read (more: the stream is
 * reset). */
#define RLT__RLQS_MAX_QUEUED (2 << 20)

typedef struct rlt__rlqs_call rlt__rlqs_call;

/* st's request headers are complete: checks the call (POST, a gRPC content type, the bearer
 * token when the server has a password or tenants) and starts the response, or answers it
 * with an error at once. */
void rlt__rlqs_begin(gconn *g, gstream *st);
/* Request bytes of st: each whole message is a report, answered at once. */
void rlt__rlqs_data(gconn *g, gstream *st, const uint8_t *data, size_t len);
/* The client ended its side: the call ends with OK once the queued answers are sent. */
void rlt__rlqs_end(gconn *g, gstream *st);
/* The stream is gone (closed, reset, or its session freed): the Envoy's memberships depart
 * and the call's memory is freed; st->rq is NULL after. */
void rlt__rlqs_release(gconn *g, gstream *st);

#endif
