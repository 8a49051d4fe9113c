/* gRPC over h2c (grpc.c): Envoy's rate limit service and the health check, as a protocol of
 * the connection layer (rlt__proto_grpc, net/protocol.h).  The HTTP/2 session is exposed apart from
 * the connection so that a fuzz target can feed it bytes. */
#ifndef RLT_SERVER_GRPC_GRPC_H
#define RLT_SERVER_GRPC_GRPC_H

#include "ratelimit/ratelimit.h"
#include "server/base/obuf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rlt__srv;
typedef struct rlt__conn rlt__conn;
typedef struct rlt__grpc_session rlt__grpc_session;

/* A server-side HTTP/2 session deciding with server s; c is its connection (NULL: none, no
 * latency accounting).  Its SETTINGS are queued.  Returns RLT_OK or RLT_ENOMEM. */
int rlt__grpc_session_new(rlt__grpc_session **out, struct rlt__srv *s, rlt__conn *c);
/* Frees the session and its streams.  NULL is a no-op. */
void rlt__grpc_session_free(rlt__grpc_session *g);
/* Feeds in[0..len) received at `now` (every byte is consumed), answers every call that
 * completed, and appends what the session has to send to out.  Returns false when the
 * connection must close after out is sent (a protocol error: GOAWAY is in out; or both sides
 * are done). */
bool rlt__grpc_session_feed(rlt__grpc_session *g, const uint8_t *in, size_t len, rlt_ns now,
                            rlt__obuf *out);

#endif
