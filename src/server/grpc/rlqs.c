/* The StreamRateLimitQuotas call (Envoy's RLQS): reports in, bucket actions out, on one open
 * HTTP/2 stream.  A call binds the identity of its bearer token (a tenant's buckets are its
 * own; its streams and buckets count in its share, the admin's in its connection's) and the
 * domain of its first report; every report is answered with the actions the quota state gives
 * (envoy/rlqs.h), in one response message, or nothing when every Envoy keeps what it
 * holds.  Errors end the call with trailers: a malformed report INVALID_ARGUMENT, a bucket
 * past the table's or the stream's cap, a client's streams past its share or a report too
 * large RESOURCE_EXHAUSTED, an identity a reload changed UNAUTHENTICATED. */
#include "server/grpc/rlqs.h"

#include "server/base/mem.h"
#include "server/envoy/rlqs_pb.h"
#include "server/envoy/rlqs_srv.h"
#include "server/envoy/rlqs.h"
#include "server/request/request.h"

#include <stdlib.h>
#include <strings.h>

struct rlt__rlqs_call {
    rlt__rlqs_stream *qs;
    const rlt__config *cfg; /* the config its identity was checked under */
    uint64_t holder;        /* that identity (rlt__session_holder: a tenant, or the connection) */
    char domain[RLT__STR_MAX];
    size_t dlen;   /* 0: not bound yet */
    rlt__obuf out; /* response bytes queued for nghttp2 */
    size_t sent;   /* of out, handed to nghttp2 */
    bool finished; /* the status is decided: trailers follow the queued bytes */
    int status;
    char msg[200];
};

static void resume(gconn *g, gstream *st)
{
    nghttp2_session_resume_data(g->h2, st->id);
}

/* The call's end: `status` (and msg) in the trailers once the queued messages are out. */
static void finish(gconn *g, gstream *st, int status, const char *msg)
{
    rlt__rlqs_call *c = st->rq;
    if (c->finished) return;
    c->finished = true;
    c->status = status;
    snprintf(c->msg, sizeof c->msg, "%s", msg ? msg : "");
    count_status(g, status);
    resume(g, st);
}

static ssize_t read_out(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t length,
                        uint32_t *flags, nghttp2_data_source *src, void *user)
{
    (void)user;
    gstream *st = src->ptr;
    rlt__rlqs_call *c = st->rq;
    if (c == NULL) return NGHTTP2_ERR_CALLBACK_FAILURE;
    size_t left = c->out.len - c->sent;
    if (left == 0) {
        if (!c->finished) return NGHTTP2_ERR_DEFERRED;
        *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        char code[8], enc[640];
        snprintf(code, sizeof code, "%d", c->status);
        pct_encode(c->msg, enc, sizeof enc);
        nghttp2_nv tr[] = {NV("grpc-status", code), NV("grpc-message", enc)};
        if (nghttp2_submit_trailer(h2, id, tr, c->msg[0] ? 2 : 1) != 0)
            return NGHTTP2_ERR_CALLBACK_FAILURE;
        return 0;
    }
    size_t n = left < length ? left : length;
    memcpy(buf, c->out.data + c->sent, n);
    c->sent += n;
    if (c->sent == c->out.len) c->out.len = c->sent = 0; /* all handed over: reuse the room */
    return (ssize_t)n;
}

/* Who calls: *ss authenticated as the admin or a tenant (its key prefix), or false. */
static bool authorized(gconn *g, const gstream *st, rlt__session *ss)
{
    rlt__session_init(g->s, ss);
    ss->id = g->client_id; /* the connection, not this call, holds what an admin's call holds */
    return ss->auth != RLT__AUTH_NONE ||
           (st->auth_len >= 7 && strncasecmp(st->auth, "Bearer ", 7) == 0 &&
            rlt__session_auth(g->s, ss, NULL, 0, st->auth + 7, st->auth_len - 7) != RLT__AUTH_NONE);
}

void rlt__rlqs_begin(gconn *g, gstream *st)
{
    if (!st->post || !st->grpc_ctype) {
        nghttp2_nv nva[] = {NV(":status", !st->post ? "405" : "415"),
                            NVS("content-type", "text/plain")};
        nghttp2_submit_response(g->h2, st->id, nva, 2, NULL);
        return;
    }
    if (g->s->rlqs == NULL) /* a context without the quota service (envoy/rlqs_srv.h) */
        return answer_error(g, st, G_UNIMPLEMENTED, "the quota service is not attached");
    rlt__session ss; /* about 1 KB, on the stack as call_rls has it */
    if (!authorized(g, st, &ss))
        return answer_error(g, st, G_UNAUTHENTICATED, "missing or wrong bearer token");
    rlt__rlqs_call *c = NULL;
    if (rlt__mem_conn_take(sizeof *c) && (c = calloc(1, sizeof *c)) == NULL)
        rlt__mem_conn_give(sizeof *c);
    if (c == NULL) return answer_error(g, st, G_RESOURCE_EXHAUSTED, "out of memory");
    /* A tenant's buckets are its own (its key prefix), and its streams and buckets count
     * together over its connections; the admin's per connection. */
    c->cfg = rlt__srv_config(g->s);
    c->holder = rlt__session_holder(&ss);
    size_t cap = c->cfg->set.rlqs_max_streams_per_client;
    rlt__rlqs_client who = {c->holder, ss.prefix, ss.prefix_len, cap};
    int e = rlt__rlqs_stream_new_for(g->s->rlqs, &who, &c->qs);
    if (e != RLT_OK) {
        free(c);
        rlt__mem_conn_give(sizeof *c);
        char msg[160];
        snprintf(msg, sizeof msg,
                 "too many quota streams: %zu per client (server.rlqs_max_streams_per_client)",
                 cap);
        return answer_error(g, st, G_RESOURCE_EXHAUSTED, e == RLT_EFULL ? msg : "out of memory");
    }
    c->out.budgeted = true;
    c->out.max = RLT__RLQS_MAX_QUEUED;
    st->rq = c;
    nghttp2_nv nva[] = {NVS(":status", "200"), NVS("content-type", "application/grpc")};
    nghttp2_data_provider prd = {.source.ptr = st, .read_callback = read_out};
    nghttp2_submit_response(g->h2, st->id, nva, 2, &prd);
}

void rlt__rlqs_release(gconn *g, gstream *st)
{
    rlt__rlqs_call *c = st->rq;
    if (c == NULL) return;
    rlt__rlqs_stream_end(g->s->rlqs, c->qs, g->now);
    rlt__obuf_free(&c->out);
    free(c);
    rlt__mem_conn_give(sizeof *c);
    st->rq = NULL;
}

void rlt__rlqs_end(gconn *g, gstream *st)
{
    if (st->rq != NULL) finish(g, st, G_OK, NULL);
}

/* ---- reports ---------------------------------------------------------------------------- */

/* Binds the call's domain at its first report; later reports may omit it or repeat it. */
static const char *bind_domain(rlt__rlqs_call *c, const char *d, size_t dl)
{
    if (dl == 0) return c->dlen > 0 ? NULL : "the first report must name its domain";
    if (c->dlen == 0) {
        if (dl >= sizeof c->domain) return "domain longer than 255 bytes";
        memcpy(c->domain, d, dl);
        c->dlen = dl;
        return NULL;
    }
    return dl == c->dlen && memcmp(d, c->domain, dl) == 0
               ? NULL
               : "a stream reports one domain (open another stream for another)";
}

/* One report message: every usage fed to the quota state under one lock, the actions that
 * come back appended as one response message. */
static void report(gconn *g, gstream *st, const uint8_t *m, size_t n)
{
    rlt__rlqs_call *c = st->rq;
    char err[300];
    const char *d;
    size_t dl, count;
    rlt__rlqs_reader it;
    int pst = rlt__rlqs_decode_reports(m, n, &d, &dl, &count, &it, err, sizeof err);
    if (pst != RLT__RLQS_OK)
        return finish(g, st, pst == RLT__RLQS_TOO_LARGE ? G_RESOURCE_EXHAUSTED : G_INVALID_ARGUMENT,
                      err);
    const char *why = bind_domain(c, d, dl);
    if (why != NULL) return finish(g, st, G_INVALID_ARGUMENT, why);
    if (count == 0) return; /* nothing reported, nothing to answer */
    const rlt__config *cfg = rlt__srv_config(g->s);
    if (cfg != c->cfg) {
        /* A reload that removed the stream's tenant, changed its prefix or password, or set a
         * password where there was none ends the stream, as the other doors refuse the next
         * request: the Envoy opens another, under the identity its token now has. */
        rlt__session ss; /* about 1 KB, on the stack as call_rls has it */
        if (!authorized(g, st, &ss) || rlt__session_holder(&ss) != c->holder)
            return finish(g, st, G_UNAUTHENTICATED,
                          "the stream's credentials changed with a reload: open another");
        c->cfg = cfg;
    }
    size_t mark = c->out.len, actions = 0;
    int e = rlt__rlqs_feed_report(g->s->rlqs, cfg, c->qs, c->domain, c->dlen, &it, g->now, &c->out,
                                  &actions);
    if (c->out.overflow) {
        /* A client that does not read its answers: nothing more can be queued. */
        nghttp2_submit_rst_stream(g->h2, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_ENHANCE_YOUR_CALM);
        c->finished = true;
        return;
    }
    if (c->out.len > mark) resume(g, st);
    if (e != RLT_OK)
        finish(g, st, G_RESOURCE_EXHAUSTED,
               e == RLT_EFULL ? "too many buckets: 1024 per stream, 65536 in all"
                              : "out of memory");
}

void rlt__rlqs_data(gconn *g, gstream *st, const uint8_t *data, size_t len)
{
    rlt__rlqs_call *c = st->rq;
    if (c == NULL || c->finished) return;
    if (st->len + len > st->cap) {
        if (st->len + len > RLT__RLQS_MAX_MESSAGE + 5 || g->buffered + len > MAX_BUFFERED)
            return finish(g, st, G_RESOURCE_EXHAUSTED, "report larger than 524288 bytes");
        size_t cap = st->cap ? st->cap * 2 : 256;
        while (cap < st->len + len)
            cap *= 2;
        uint8_t *b = NULL;
        if (rlt__mem_conn_take(cap - st->cap) && (b = realloc(st->body, cap)) == NULL)
            rlt__mem_conn_give(cap - st->cap);
        if (b == NULL) return finish(g, st, G_RESOURCE_EXHAUSTED, "out of memory");
        st->body = b;
        st->cap = cap;
    }
    memcpy(st->body + st->len, data, len);
    st->len += len;
    g->buffered += len;
    size_t at = 0;
    while (!c->finished && st->len - at >= 5) {
        const uint8_t *p = st->body + at;
        size_t n = (size_t)p[1] << 24 | (size_t)p[2] << 16 | (size_t)p[3] << 8 | p[4];
        if (p[0] > 1) return finish(g, st, G_INVALID_ARGUMENT, "not a length-prefixed message");
        if (p[0] == 1)
            return finish(g, st, G_UNIMPLEMENTED, "compressed messages are not supported");
        if (n > RLT__RLQS_MAX_MESSAGE)
            return finish(g, st, G_RESOURCE_EXHAUSTED, "report larger than 524288 bytes");
        if (st->len - at < 5 + n) break;
        report(g, st, p + 5, n);
        at += 5 + n;
    }
    memmove(st->body, st->body + at, st->len - at);
    st->len -= at;
    g->buffered -= at;
}
