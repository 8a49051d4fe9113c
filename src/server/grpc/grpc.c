/* gRPC on the connection layer: Envoy's rate limit service and the standard health check over
 * cleartext HTTP/2 with prior knowledge (h2c), as Envoy's rate limit cluster speaks it.
 *   /envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit   rls.h's decision
 *   /grpc.health.v1.Health/Check                                  SERVING
 * HTTP/2 is nghttp2's (sans-I/O: the layer's input goes to nghttp2_session_mem_recv, what
 * nghttp2_session_mem_send produces goes to the connection's output), protobuf is pb.h's.
 * Unary calls only: a request is decided when its stream ends, synchronously, in the turn its
 * last byte arrived.  Bounds: 100 concurrent streams, 16 KiB of decoded headers per stream
 * (name + value + 32 per field, as SETTINGS_MAX_HEADER_LIST_SIZE counts them; more: the
 * stream is reset with ENHANCE_YOUR_CALM, so that a small HPACK entry referenced many times
 * cannot make a large header list), 64 KiB per message (more: RESOURCE_EXHAUSTED), 1 MiB of
 * request bodies buffered per connection.  Every byte this layer and nghttp2 hold counts in
 * the connections' share of max_memory (mem.h): a stream that would pass it is reset with
 * ENHANCE_YOUR_CALM, and nghttp2's own allocations are counted as they happen.
 * grpc-timeout: a call whose deadline has passed when it would be decided, or once it is
 * decided, is answered DEADLINE_EXCEEDED; a timeout past what int64 nanoseconds hold
 * (2562048H and up) is no deadline.  With a password or tenants configured, calls but
 * the health check need `authorization: Bearer <token>` (UNAUTHENTICATED otherwise).
 * Errors: a malformed message is INVALID_ARGUMENT; an empty domain or no descriptors UNKNOWN
 * with envoyproxy/ratelimit's message; a protocol error ends the connection with GOAWAY. */
#include "server/grpc/grpc.h"

#include "server/grpc/grpc_internal.h"
#include "server/grpc/rlqs.h"

#include "server/base/escape.h"

#include "server/net/conn.h"
#include "server/envoy/rls.h"
#include "server/stats/metrics.h"
#include "server/grpc/pb.h"
#include "server/net/protocol.h"
#include "server/request/request.h"
#include "server/request/srv.h"
#include "server/base/clock.h"
#include "server/base/mem.h"

#include <nghttp2/nghttp2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Streams and their bodies count in the connections' memory budget (mem.h). */
static gstream *stream_alloc(void)
{
    if (!rlt__mem_conn_take(sizeof(gstream))) return NULL;
    gstream *st = calloc(1, sizeof *st);
    if (st == NULL) {
        rlt__mem_conn_give(sizeof(gstream));
        return NULL;
    }
    st->resp.budgeted = true;
    return st;
}

static void stream_free(gstream *st)
{
    free(st->body);
    rlt__mem_conn_give(st->cap);
    rlt__obuf_free(&st->resp);
    free(st);
    rlt__mem_conn_give(sizeof(gstream));
}

/* Resets a stream whose headers or buffers would pass their bound (ENHANCE_YOUR_CALM, as
 * nghttp2 and the HTTP/2 servers patched after the 2023-2024 floods answer abuse), once; what
 * the stream buffered is let go at once, and its later frames are ignored. */
static void refuse_stream(gconn *g, gstream *st)
{
    if (st->refused) return;
    st->refused = true;
    g->buffered -= st->len;
    st->len = 0;
    nghttp2_submit_rst_stream(g->h2, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_ENHANCE_YOUR_CALM);
}

static nghttp2_session_callbacks *callbacks;
static pthread_once_t callbacks_once = PTHREAD_ONCE_INIT;

static ssize_t read_resp(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *src, void *user)
{
    (void)user;
    gstream *st = src->ptr;
    size_t left = st->resp.len - st->sent, n = left < length ? left : length;
    memcpy(buf, st->resp.data + st->sent, n);
    st->sent += n;
    if (st->sent == st->resp.len) {
        *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        nghttp2_nv tr[] = {NVS("grpc-status", "0")}; /* only OK answers carry a message */
        if (nghttp2_submit_trailer(h2, id, tr, 1) != 0) return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    return (ssize_t)n;
}

/* Answers with st->resp (the 5-byte prefix, then the message that follows it: the prefix is
 * filled in here) and grpc-status OK. */
static void answer_message(gconn *g, gstream *st)
{
    if (st->resp.overflow || st->resp.len < 5)
        return answer_error(g, st, G_INTERNAL, "out of memory");
    size_t n = st->resp.len - 5;
    uint8_t pre[5] = {0, (uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n};
    memcpy(st->resp.data, pre, 5);
    st->status = G_OK;
    nghttp2_nv nva[] = {NVS(":status", "200"), NVS("content-type", "application/grpc")};
    nghttp2_data_provider prd = {.source.ptr = st, .read_callback = read_resp};
    nghttp2_submit_response(g->h2, st->id, nva, 2, &prd);
    count_status(g, G_OK);
}

/* ---- calls ------------------------------------------------------------------------------ */

typedef struct hdrs {
    rlt__pb_header h[8];
    char store[8][320];
    size_t n;
} hdrs;

static void add_header(void *ctx, const char *name, const char *value)
{
    hdrs *hs = ctx;
    if (hs->n == 8) return;
    size_t n = strlen(value);
    if (n >= sizeof hs->store[0]) n = sizeof hs->store[0] - 1;
    memcpy(hs->store[hs->n], value, n);
    hs->store[hs->n][n] = '\0';
    hs->h[hs->n] = (rlt__pb_header){name, hs->store[hs->n]};
    hs->n++;
}

static bool past(const gstream *st)
{
    return st->deadline != 0 && rlt__now() >= st->deadline;
}

static void call_rls_in(gconn *g, gstream *st, const uint8_t *m, size_t len, rlt__envoy_req *req,
                        rlt__envoy_result *res)
{
    rlt__srv *s = g->s;
    char err[300];
    int pst = rlt__pb_decode_rls(m, len, req, err, sizeof err);
    if (pst != RLT__PB_OK)
        return answer_error(g, st, pst == RLT__PB_EMPTY ? G_UNKNOWN : G_INVALID_ARGUMENT, err);
    rlt__session ss;
    rlt__session_init(s, &ss);
    if (g->c != NULL) rlt__session_same_client(&ss, rlt__conn_session(g->c));
    if (ss.auth == RLT__AUTH_NONE &&
        (st->auth_len < 7 || strncasecmp(st->auth, "Bearer ", 7) != 0 ||
         rlt__session_auth(s, &ss, NULL, 0, st->auth + 7, st->auth_len - 7) == RLT__AUTH_NONE))
        return answer_error(g, st, G_UNAUTHENTICATED, "missing or wrong bearer token");
    if (past(st)) return answer_error(g, st, G_DEADLINE_EXCEEDED, "deadline exceeded");
    int e = rlt__envoy_decide(s, req, &ss, g->sc, g->now, res, err, sizeof err);
    /* A bad request, too many distinct limit overrides (the inline policy table), or a
     * backend that could not answer without a fail mode to apply. */
    if (e != RLT_OK)
        return answer_error(g, st,
                            e == RLT_EKEYLEN || e == RLT_EINVAL || e == RLT_ERANGE
                                ? G_INVALID_ARGUMENT
                            : e == RLT_ENOMEM ? G_RESOURCE_EXHAUSTED
                                              : G_UNAVAILABLE,
                            err);
    if (past(st)) return answer_error(g, st, G_DEADLINE_EXCEEDED, "deadline exceeded");
    hdrs hs;
    hs.n = 0;
    rlt__envoy_headers(s, res, add_header, &hs);
    rlt__obuf_put(&st->resp, "\0\0\0\0\0", 5);
    rlt__pb_encode_rls(res, hs.h, hs.n, &st->resp);
    answer_message(g, st);
}

/* ShouldRateLimit: the request and its result in the worker's scratch, released after. */
static void call_rls(gconn *g, gstream *st, const uint8_t *m, size_t len)
{
    size_t mark = rlt__scratch_mark(g->sc);
    rlt__envoy_req *req = rlt__scratch_alloc(g->sc, sizeof *req);
    rlt__envoy_result *res = rlt__scratch_alloc(g->sc, sizeof *res);
    if (req == NULL || res == NULL)
        answer_error(g, st, G_RESOURCE_EXHAUSTED, "out of scratch space for the request");
    else
        call_rls_in(g, st, m, len, req, res);
    rlt__scratch_release(g->sc, mark);
}

static void call_health(gconn *g, gstream *st, const uint8_t *m, size_t len)
{
    const char *svc;
    size_t sl;
    if (rlt__pb_decode_health(m, len, &svc, &sl) != RLT__PB_OK)
        return answer_error(g, st, G_INVALID_ARGUMENT, "malformed HealthCheckRequest");
    static const char rls[] = "envoy.service.ratelimit.v3.RateLimitService";
    if (sl != 0 && !(sl == sizeof rls - 1 && memcmp(svc, rls, sl) == 0))
        return answer_error(g, st, G_NOT_FOUND, "unknown service");
    rlt__obuf_put(&st->resp, "\0\0\0\0\0", 5);
    rlt__pb_encode_health(1, &st->resp); /* SERVING */
    answer_message(g, st);
}

/* A whole request arrived (END_STREAM). */
static void call(gconn *g, gstream *st)
{
    if (g->c != NULL) rlt__conn_request_done(g->c);
    rlt__mslot *ms = rlt__mslot_get(&g->s->metrics);
    rlt__mcount(&ms->envoy.grpc_calls[st->method == M_RLS ? 0 : st->method == M_HEALTH ? 1 : 2], 1);
    if (!st->post || !st->grpc_ctype) {
        /* Not gRPC at all: plain HTTP answers. */
        const char *code = !st->post ? "405" : "415";
        nghttp2_nv nva[] = {NV(":status", code), NV("content-type", "text/plain")};
        nghttp2_submit_response(g->h2, st->id, nva, 2, NULL);
        return;
    }
    if (st->method == M_OTHER) return answer_error(g, st, G_UNIMPLEMENTED, "unknown method");
    if (st->too_large)
        return answer_error(g, st, G_RESOURCE_EXHAUSTED, "request message larger than 65536 bytes");
    if (st->len < 5) return answer_error(g, st, G_INVALID_ARGUMENT, "no request message");
    uint32_t n = (uint32_t)st->body[1] << 24 | (uint32_t)st->body[2] << 16 |
                 (uint32_t)st->body[3] << 8 | st->body[4];
    if (st->body[0] > 1 || (size_t)n != st->len - 5)
        return answer_error(g, st, G_INVALID_ARGUMENT, "not one length-prefixed message");
    if (st->body[0] == 1)
        return answer_error(g, st, G_UNIMPLEMENTED, "compressed messages are not supported");
    if (past(st)) return answer_error(g, st, G_DEADLINE_EXCEEDED, "deadline exceeded");
    if (st->method == M_RLS)
        call_rls(g, st, st->body + 5, n);
    else
        call_health(g, st, st->body + 5, n);
}

/* ---- nghttp2 callbacks ------------------------------------------------------------------- */

static int on_begin_headers(nghttp2_session *h2, const nghttp2_frame *f, void *user)
{
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    gconn *g = user;
    gstream *st = g->free_list;
    if (st != NULL) {
        g->free_list = st->next_free;
        g->nfree--;
    } else if ((st = stream_alloc()) == NULL) {
        /* The connections' share of max_memory is spent: refuse this stream, keep the rest. */
        nghttp2_submit_rst_stream(h2, NGHTTP2_FLAG_NONE, f->hd.stream_id,
                                  NGHTTP2_ENHANCE_YOUR_CALM);
        return 0;
    }
    st->id = f->hd.stream_id;
    st->method = M_NONE;
    st->post = st->grpc_ctype = st->too_large = st->refused = false;
    st->hdr_bytes = 0;
    st->auth_len = 0;
    st->deadline = 0;
    st->len = st->sent = 0;
    st->status = 0;
    st->next_free = NULL;
    st->rq = NULL;
    st->resp.len = 0;
    st->resp.overflow = false;
    st->resp.max = MAX_MESSAGE + 5 + 4096;
    st->prev = NULL;
    st->next = g->live;
    if (g->live) g->live->prev = st;
    g->live = st;
    nghttp2_session_set_stream_user_data(h2, st->id, st);
    return 0;
}

/* grpc-timeout: 1..8 digits and a unit (H M S m u n).  Returns the timeout in ns, saturated
 * at INT64_MAX (99999999H is about 3.6e20 ns), or -1 when the value is not one. */
static rlt_ns parse_timeout(const uint8_t *v, size_t n)
{
    if (n < 2 || n > 9) return -1;
    int64_t x = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        if (v[i] < '0' || v[i] > '9') return -1;
        x = x * 10 + (v[i] - '0'); /* 8 digits: no overflow */
    }
    int64_t unit;
    switch (v[n - 1]) {
    case 'H':
        unit = 3600 * RLT_NS_PER_S;
        break;
    case 'M':
        unit = 60 * RLT_NS_PER_S;
        break;
    case 'S':
        unit = RLT_NS_PER_S;
        break;
    case 'm':
        unit = RLT_NS_PER_MS;
        break;
    case 'u':
        unit = RLT_NS_PER_US;
        break;
    case 'n':
        unit = 1;
        break;
    default:
        return -1;
    }
    rlt_ns t;
    return __builtin_mul_overflow(x, unit, &t) ? INT64_MAX : t;
}

static bool is(const uint8_t *s, size_t n, const char *z)
{
    return n == strlen(z) && memcmp(s, z, n) == 0;
}

static int on_header(nghttp2_session *h2, const nghttp2_frame *f, const uint8_t *name, size_t nl,
                     const uint8_t *value, size_t vl, uint8_t flags, void *user)
{
    (void)flags;
    gconn *g = user;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    gstream *st = nghttp2_session_get_stream_user_data(h2, f->hd.stream_id);
    if (st == NULL || st->refused) return 0;
    st->hdr_bytes += nl + vl + 32;
    if (st->hdr_bytes > MAX_HEADER_LIST) {
        refuse_stream(g, st);
        return 0;
    }
    if (is(name, nl, ":path")) {
        st->method = is(value, vl, PATH_RLS)      ? M_RLS
                     : is(value, vl, PATH_HEALTH) ? M_HEALTH
                     : is(value, vl, PATH_RLQS)   ? M_RLQS
                                                  : M_OTHER;
    } else if (is(name, nl, ":method")) {
        st->post = is(value, vl, "POST");
    } else if (is(name, nl, "content-type")) {
        st->grpc_ctype = vl >= 16 && memcmp(value, "application/grpc", 16) == 0 &&
                         (vl == 16 || value[16] == '+' || value[16] == ';');
    } else if (is(name, nl, "authorization")) {
        if (vl < sizeof st->auth) {
            memcpy(st->auth, value, vl);
            st->auth_len = vl;
        }
    } else if (is(name, nl, "grpc-timeout")) {
        rlt_ns t = parse_timeout(value, vl), d;
        /* A deadline int64 cannot hold is no deadline (0), never one in the past. */
        if (t >= 0) st->deadline = __builtin_add_overflow(g->now, t > 0 ? t : 1, &d) ? 0 : d;
    }
    return 0;
}

static int on_data(nghttp2_session *h2, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                   void *user)
{
    (void)flags;
    gconn *g = user;
    gstream *st = nghttp2_session_get_stream_user_data(h2, id);
    if (st == NULL || st->too_large || st->refused) return 0;
    if (st->method == M_RLQS) {
        rlt__rlqs_data(g, st, data, len);
        return 0;
    }
    if (st->len + len > MAX_MESSAGE + 5 || g->buffered + len > MAX_BUFFERED) {
        st->too_large = true;
        g->buffered -= st->len;
        st->len = 0;
        return 0;
    }
    if (st->len + len > st->cap) {
        size_t cap = st->cap ? st->cap * 2 : 256;
        while (cap < st->len + len)
            cap *= 2;
        if (!rlt__mem_conn_take(cap - st->cap)) { /* the connections' share is spent */
            refuse_stream(g, st);
            return 0;
        }
        uint8_t *b = realloc(st->body, cap);
        if (b == NULL) {
            rlt__mem_conn_give(cap - st->cap);
            return NGHTTP2_ERR_CALLBACK_FAILURE;
        }
        st->body = b;
        st->cap = cap;
    }
    memcpy(st->body + st->len, data, len);
    st->len += len;
    g->buffered += len;
    return 0;
}

static int on_frame(nghttp2_session *h2, const nghttp2_frame *f, void *user)
{
    gconn *g = user;
    if (f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA) return 0;
    gstream *st = nghttp2_session_get_stream_user_data(h2, f->hd.stream_id);
    if (st == NULL || st->method == M_NONE || st->refused) return 0;
    if (st->method == M_RLQS) { /* a stream: begun at its headers, answered as reports come */
        if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST)
            rlt__rlqs_begin(g, st);
        if (f->hd.flags & NGHTTP2_FLAG_END_STREAM) rlt__rlqs_end(g, st);
        return 0;
    }
    if (!(f->hd.flags & NGHTTP2_FLAG_END_STREAM)) return 0;
    call(g, st);
    g->buffered -= st->len;
    st->len = 0;
    return 0;
}

static int on_close(nghttp2_session *h2, int32_t id, uint32_t code, void *user)
{
    (void)code;
    gconn *g = user;
    gstream *st = nghttp2_session_get_stream_user_data(h2, id);
    if (st == NULL) return 0;
    rlt__rlqs_release(g, st);
    nghttp2_session_set_stream_user_data(h2, id, NULL);
    if (st->prev)
        st->prev->next = st->next;
    else
        g->live = st->next;
    if (st->next) st->next->prev = st->prev;
    g->buffered -= st->len;
    st->len = 0;
    /* Kept for the connection's next call unless its buffers grew large. */
    if (g->nfree < FREE_STREAMS && st->cap <= 4096 && st->resp.cap <= 8192) {
        st->next_free = g->free_list;
        g->free_list = st;
        g->nfree++;
        return 0;
    }
    stream_free(st);
    return 0;
}

static void callbacks_init(void)
{
    if (nghttp2_session_callbacks_new(&callbacks) != 0) return;
    nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(callbacks, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, on_frame);
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, on_close);
}

/* ---- the protocol ------------------------------------------------------------------------ */

static void drain(gconn *g, rlt__obuf *out)
{
    for (;;) {
        const uint8_t *data;
        ssize_t n = nghttp2_session_mem_send(g->h2, &data);
        if (n <= 0) break;
        rlt__obuf_put(out, data, (size_t)n);
        if (out->overflow) break;
    }
}

int rlt__grpc_session_new(gconn **out, rlt__srv *s, rlt__conn *c)
{
    pthread_once(&callbacks_once, callbacks_init);
    if (callbacks == NULL) return RLT_ENOMEM;
    gconn *g = calloc(1, sizeof *g);
    if (g == NULL) return RLT_ENOMEM;
    g->s = s;
    g->c = c;
    g->sc = c != NULL ? rlt__conn_scratch(c) : (g->own_sc = rlt__scratch_new(RLT__SCRATCH_CAP));
    if (g->sc == NULL) {
        free(g);
        return RLT_ENOMEM;
    }
    rlt__session ss;
    rlt__session_init(s, &ss); /* for its id alone: who holds this connection's RLQS streams */
    g->client_id = ss.id;
    nghttp2_option *opt;
    if (nghttp2_option_new(&opt) != 0) {
        rlt__scratch_free(g->own_sc);
        free(g);
        return RLT_ENOMEM;
    }
    nghttp2_option_set_max_deflate_dynamic_table_size(opt, 4096);
    nghttp2_mem mem = rlt__grpc_h2_mem(g);
    int e = nghttp2_session_server_new3(&g->h2, callbacks, g, opt, &mem);
    nghttp2_option_del(opt);
    if (e != 0) {
        rlt__scratch_free(g->own_sc);
        free(g);
        return RLT_ENOMEM;
    }
    /* RFC 9218 instead of RFC 7540's priority tree: every answer is one small DATA frame and
     * the tree's bookkeeping was a large part of nghttp2's time per call. */
    nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, MAX_STREAMS},
                                   {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, MAX_HEADER_LIST},
                                   {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1}};
    nghttp2_submit_settings(g->h2, NGHTTP2_FLAG_NONE, iv, 3);
    *out = g;
    return RLT_OK;
}

void rlt__grpc_session_free(gconn *g)
{
    if (g == NULL) return;
    nghttp2_session_del(g->h2);
    while (g->live != NULL) {
        gstream *st = g->live;
        g->live = st->next;
        rlt__rlqs_release(g, st);
        stream_free(st);
    }
    while (g->free_list != NULL) {
        gstream *st = g->free_list;
        g->free_list = st->next_free;
        stream_free(st);
    }
    rlt__scratch_free(g->own_sc);
    free(g);
}

bool rlt__grpc_session_feed(gconn *g, const uint8_t *in, size_t len, rlt_ns now, rlt__obuf *out)
{
    g->now = now;
    ssize_t r = nghttp2_session_mem_recv(g->h2, in, len);
    if (r < 0) {
        /* A protocol error: nghttp2 has queued GOAWAY where it could; send it and close.
         * Bad client magic queues nothing: end the session ourselves. */
        nghttp2_session_terminate_session(g->h2, NGHTTP2_PROTOCOL_ERROR);
        drain(g, out);
        return false;
    }
    drain(g, out);
    return nghttp2_session_want_read(g->h2) || nghttp2_session_want_write(g->h2);
}

static int grpc_open(rlt__conn *c)
{
    gconn *g;
    int e = rlt__grpc_session_new(&g, rlt__conn_srv(c), c);
    if (e != RLT_OK) return e;
    rlt__conn_set_state(c, g);
    return RLT_OK;
}

static void grpc_close(rlt__conn *c)
{
    rlt__grpc_session_free(rlt__conn_state(c));
    rlt__conn_set_state(c, NULL);
}

static size_t grpc_feed(rlt__conn *c, char *in, size_t len, rlt_ns now)
{
    gconn *g = rlt__conn_state(c);
    if (!rlt__grpc_session_feed(g, (const uint8_t *)in, len, now, rlt__conn_out(c)))
        rlt__conn_close_after(c);
    return len;
}

static void grpc_refuse(rlt__conn *c, rlt__refusal why, rlt__obuf *out)
{
    gconn *g = rlt__conn_state(c);
    if (g == NULL) return;
    nghttp2_session_terminate_session(g->h2, why == RLT__REFUSE_FULL ? NGHTTP2_REFUSED_STREAM
                                             : why == RLT__REFUSE_TIMEOUT
                                                 ? NGHTTP2_SETTINGS_TIMEOUT
                                                 : NGHTTP2_ENHANCE_YOUR_CALM);
    drain(g, out);
}

const rlt__proto rlt__proto_grpc = {
    .name = "grpc",
    .open = grpc_open,
    .close = grpc_close,
    .feed = grpc_feed,
    .refuse = grpc_refuse,
};
