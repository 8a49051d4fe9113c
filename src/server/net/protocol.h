/* A protocol of the connection layer (conn.h): a parser plus a handler.  The layer owns the
 * socket, the buffers, the deadlines and the connection count; a protocol only turns bytes
 * into requests and appends replies.  RESP (proto_resp.c), HTTP/1.1 (http.c) and gRPC over
 * h2c (grpc.c); adding one is a new rlt__proto and a listener entry, nothing in the layer. */
#ifndef RLT_SERVER_NET_PROTOCOL_H
#define RLT_SERVER_NET_PROTOCOL_H

#include "ratelimit/ratelimit.h"
#include "server/base/obuf.h"

#include <stddef.h>

typedef struct rlt__conn rlt__conn;

/* Why the layer ends a connection with a last reply. */
typedef enum rlt__refusal {
    RLT__REFUSE_FULL,      /* max_connections reached: answered, then closed */
    RLT__REFUSE_TIMEOUT,   /* a started request did not arrive whole within client_timeout */
    RLT__REFUSE_TOO_LARGE, /* more unparsed input than the layer buffers (1 MiB) */
} rlt__refusal;

typedef struct rlt__proto {
    const char *name; /* "resp", "http", "grpc": in logs and the start line */
    /* Called once per accepted connection before any input; may set a per-connection state
     * with rlt__conn_set_state.  Returns RLT_OK, or an RLT_* code to drop the connection.
     * NULL: nothing to set up. */
    int (*open)(rlt__conn *c);
    /* Releases the per-connection state.  NULL: none. */
    void (*close)(rlt__conn *c);
    /* Consumes whole requests from in[0..len) (a partial one stays for the next call, with
     * more bytes) and appends their replies to rlt__conn_out(c), or stages their decisions in
     * rlt__conn_pipe(c) (the layer flushes the pipe at the end of the turn, before it sends).
     * `in` is the layer's buffer: the protocol may modify it in place but keeps no pointer
     * into it after returning.  Returns the bytes consumed.  When framing is lost it writes
     * its error reply and calls rlt__conn_close_after. */
    size_t (*feed)(rlt__conn *c, char *in, size_t len, rlt_ns now);
    /* Appends the last reply of a connection the layer refuses or times out (may write
     * nothing). */
    void (*refuse)(rlt__conn *c, rlt__refusal why, rlt__obuf *out);
} rlt__proto;

/* The protocols. */
extern const rlt__proto rlt__proto_resp; /* proto_resp.c */
extern const rlt__proto rlt__proto_http; /* http.c */
extern const rlt__proto rlt__proto_grpc; /* grpc.c: gRPC over h2c */
extern const rlt__proto rlt__proto_spop; /* spop/proto_spop.c: HAProxy's SPOE agent */

#endif
