/* What the files of the gRPC room share (grpc.c: the session and its unary calls, rlqs.c: the
 * RLQS stream, h2mem.c: nghttp2's memory): the session's and streams' types, their bounds,
 * the status codes, and the trailers-only error answer.  Internal to src/server/grpc/. */
#ifndef RLT_SERVER_GRPC_GRPC_INTERNAL_H
#define RLT_SERVER_GRPC_GRPC_INTERNAL_H

#include "server/base/escape.h"
#include "server/base/obuf.h"
#include "server/base/scratch.h"
#include "server/config/config.h"
#include "server/request/srv.h"
#include "server/stats/metrics.h"

#include <nghttp2/nghttp2.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* grpc.h's names, declared here so that the room's files need not include it. */
typedef struct rlt__conn rlt__conn;
typedef struct rlt__grpc_session rlt__grpc_session;

#define MAX_STREAMS 100
#define MAX_HEADER_LIST (16 << 10)
#define MAX_MESSAGE (64 << 10)
#define MAX_BUFFERED (1 << 20)

#define PATH_RLS "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
#define PATH_HEALTH "/grpc.health.v1.Health/Check"
#define PATH_RLQS "/envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas"

enum { M_NONE = -1, M_RLS = 0, M_HEALTH = 1, M_OTHER = 2, M_RLQS = 3 };

/* gRPC status codes used here. */
enum {
    G_OK = 0,
    G_UNKNOWN = 2,
    G_INVALID_ARGUMENT = 3,
    G_DEADLINE_EXCEEDED = 4,
    G_NOT_FOUND = 5,
    G_RESOURCE_EXHAUSTED = 8,
    G_UNIMPLEMENTED = 12,
    G_INTERNAL = 13,
    G_UNAVAILABLE = 14,
    G_UNAUTHENTICATED = 16,
};

typedef struct gstream {
    /* Reset for every stream (stream_start): */
    int32_t id;
    int method;
    bool post, grpc_ctype, too_large;
    bool refused;     /* reset with ENHANCE_YOUR_CALM: headers or memory over their bound */
    size_t hdr_bytes; /* the decoded header list so far, as MAX_HEADER_LIST counts it */
    size_t auth_len;
    rlt_ns deadline; /* 0: none */
    size_t len;      /* body bytes */
    size_t sent;     /* response bytes handed to nghttp2 */
    int status;      /* grpc-status of the trailers */
    struct gstream *next_free;
    struct gstream *prev, *next; /* the connection's live streams */
    /* Kept when a stream is reused (a connection's calls reuse their buffers): */
    uint8_t *body;
    size_t cap;
    rlt__obuf resp; /* the length-prefixed response message */
    char auth[RLT__STR_MAX + 16];
    struct rlt__rlqs_call *rq; /* a StreamRateLimitQuotas call's state (rlqs.h); NULL else */
} gstream;

#define FREE_STREAMS 16 /* streams kept for reuse per connection */

struct rlt__grpc_session {
    nghttp2_session *h2;
    rlt__srv *s;
    rlt__conn *c;    /* NULL when fed without a connection (the fuzz target) */
    rlt_ns now;      /* the current turn's clock */
    size_t buffered; /* request body bytes held by open streams */
    gstream *free_list;
    size_t nfree;
    gstream *live;   /* streams nghttp2 has not closed: nghttp2_session_del does not call
                        on_close, so the session frees these itself */
    size_t h2_bytes; /* what nghttp2 holds for this session (its allocator below) */
    /* a session id of its own (request.h): the connection as a holder of RLQS streams */
    uint64_t client_id;
    rlt__scratch *sc;     /* the worker's (the connection's), or own_sc */
    rlt__scratch *own_sc; /* without a connection: the session's own */
};
typedef rlt__grpc_session gconn;

/* ---- answers ---- */

static inline void count_status(gconn *g, int status)
{
    rlt__mslot *m = rlt__mslot_get(&g->s->metrics);
    rlt__mcount(&m->envoy.grpc_status[status < RLT__GRPC_STATUSES ? status : G_UNKNOWN], 1);
}

/* grpc-message is percent-encoded: bytes outside 0x20..0x7e and '%' as %XX. */
static inline bool grpc_message_plain(unsigned char c)
{
    return c >= 0x20 && c <= 0x7e && c != '%';
}

static inline void pct_encode(const char *in, char *out, size_t cap)
{
    rlt__pct_encode(in, out, cap, grpc_message_plain);
}

#define NV(n, v)                                                                                   \
    {                                                                                              \
        (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE             \
    }
/* Both literals: nghttp2 need not copy them. */
#define NVS(n, v)                                                                                  \
    {                                                                                              \
        (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, sizeof(v) - 1,                              \
            NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE                           \
    }

/* A trailers-only answer: HTTP 200 with grpc-status (and grpc-message) in one HEADERS frame. */
static inline void answer_error(gconn *g, gstream *st, int status, const char *msg)
{
    char enc[960];
    char code[8];
    snprintf(code, sizeof code, "%d", status);
    pct_encode(msg ? msg : "", enc, sizeof enc);
    nghttp2_nv nva[] = {NVS(":status", "200"), NVS("content-type", "application/grpc"),
                        NV("grpc-status", code), NV("grpc-message", enc)};
    nghttp2_submit_response(g->h2, st->id, nva, msg && msg[0] ? 4 : 3, NULL);
    count_status(g, status);
}

/* nghttp2's allocator counting the session's memory (h2mem.c): g is its user pointer. */
nghttp2_mem rlt__grpc_h2_mem(gconn *g);

#endif
