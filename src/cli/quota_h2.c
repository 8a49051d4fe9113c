/* `ratelimit quota`'s streams: one TCP connection and one StreamRateLimitQuotas call per
 * stream, as one Envoy each, over nghttp2's client session (h2c with prior knowledge, as
 * Envoy's gRPC client speaks to ratelimitd).  Non-blocking sockets; the caller polls and
 * pumps.  A server that does not answer HTTP/2 is recognised by its first bytes (a server's
 * connection preface is a SETTINGS frame on stream 0), a gRPC server that does not serve the
 * call by its grpc-status. */
#include "cli/quota_h2.h"
#include "proto/pbwire.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <netdb.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PATH "/envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas"
#define OUT_CAP 65536
#define IN_MAX (4u << 20) /* a response message larger than this is refused */

struct rlt__q_stream {
    const rlt__q_opts *o;
    int fd;
    nghttp2_session *h2;
    int32_t sid;
    uint8_t out[OUT_CAP]; /* gRPC messages not yet handed to nghttp2 */
    size_t olen, osent;
    uint8_t *in; /* response bytes not yet whole messages */
    size_t ilen, icap;
    uint8_t first[48]; /* the server's first bytes, to tell HTTP/2 from anything else */
    size_t nfirst;
    bool checked;    /* the first 9 bytes were a SETTINGS frame */
    int http_status; /* :status, 0 until seen */
    bool grpc_ctype, ready, closed, failed;
    int grpc_status; /* -1 until seen */
    char grpc_msg[200];
    char err[512];
    int64_t now;     /* the step's clock, for assignments that arrive in it */
    int64_t min_ttl; /* the shortest TTL received */
    rlt__qe_bucket qe[RLT__Q_MAX_BUCKETS];
    rlt__q_count cnt[RLT__Q_MAX_BUCKETS];
    uint64_t assigned[RLT__Q_MAX_BUCKETS];
};

/* The stream's first failure, in words (later ones are consequences). */
static void fail(rlt__q_stream *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(rlt__q_stream *s, const char *fmt, ...)
{
    if (s->failed) return;
    s->failed = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof s->err, fmt, ap);
    va_end(ap);
}

/* ---- nghttp2 callbacks -------------------------------------------------------------------- */

static ssize_t on_send(nghttp2_session *h2, const uint8_t *data, size_t len, int flags, void *u)
{
    (void)h2, (void)flags;
    rlt__q_stream *s = u;
    ssize_t n = send(s->fd, data, len, MSG_NOSIGNAL);
    if (n >= 0) return n;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return NGHTTP2_ERR_WOULDBLOCK;
    fail(s, "the server closed the connection (%s)", strerror(errno));
    return NGHTTP2_ERR_CALLBACK_FAILURE;
}

static ssize_t read_out(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t length,
                        uint32_t *flags, nghttp2_data_source *src, void *u)
{
    (void)h2, (void)id, (void)src, (void)flags;
    rlt__q_stream *s = u;
    size_t left = s->olen - s->osent;
    if (left == 0) return NGHTTP2_ERR_DEFERRED;
    size_t n = left < length ? left : length;
    memcpy(buf, s->out + s->osent, n);
    s->osent += n;
    if (s->osent == s->olen) s->olen = s->osent = 0;
    return (ssize_t)n;
}

static bool is(const uint8_t *a, size_t an, const char *b)
{
    return an == strlen(b) && memcmp(a, b, an) == 0;
}

static int on_header(nghttp2_session *h2, const nghttp2_frame *f, const uint8_t *name, size_t nl,
                     const uint8_t *value, size_t vl, uint8_t flags, void *u)
{
    (void)h2, (void)flags;
    rlt__q_stream *s = u;
    if (f->hd.stream_id != s->sid) return 0;
    char v[200];
    size_t n = vl < sizeof v - 1 ? vl : sizeof v - 1;
    memcpy(v, value, n);
    v[n] = '\0';
    if (is(name, nl, ":status")) s->http_status = atoi(v);
    if (is(name, nl, "content-type"))
        s->grpc_ctype = strncmp(v, "application/grpc", 16) == 0 &&
                        (v[16] == '\0' || v[16] == '+' || v[16] == ';');
    if (is(name, nl, "grpc-status")) s->grpc_status = atoi(v);
    if (is(name, nl, "grpc-message")) snprintf(s->grpc_msg, sizeof s->grpc_msg, "%s", v);
    return 0;
}

static void ended(rlt__q_stream *s, uint32_t code);

static int on_frame(nghttp2_session *h2, const nghttp2_frame *f, void *u)
{
    (void)h2;
    rlt__q_stream *s = u;
    if (f->hd.type == NGHTTP2_HEADERS && f->hd.stream_id == s->sid &&
        f->headers.cat == NGHTTP2_HCAT_RESPONSE && !(f->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
        s->http_status == 200 && s->grpc_ctype && s->grpc_status < 0)
        s->ready = true;
    if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) &&
        f->hd.stream_id == s->sid && (f->hd.flags & NGHTTP2_FLAG_END_STREAM))
        ended(s, NGHTTP2_NO_ERROR);
    if (f->hd.type == NGHTTP2_GOAWAY && f->goaway.error_code != NGHTTP2_NO_ERROR)
        fail(s, "the server ended the connection (HTTP/2 GOAWAY %s)",
             nghttp2_http2_strerror(f->goaway.error_code));
    return 0;
}

/* One whole RateLimitQuotaResponse: each action applied to its bucket at the step's time. */
static void response(rlt__q_stream *s, const uint8_t *m, size_t n)
{
    rlt__rlqsc_reader r;
    rlt__rlqsc_action a;
    const char *why;
    int rc;
    rlt__rlqsc_reader_init(&r, m, n);
    while ((rc = rlt__rlqsc_next_action(&r, &a, &why)) == 1) {
        size_t b = 0;
        while (b < s->o->nb && !rlt__rlqsc_same_id(&a, s->o->bucket[b].pairs, s->o->bucket[b].n))
            b++;
        if (b == s->o->nb) continue; /* not ours: Envoy ignores it too */
        static const rlt__qe_kind kinds[] = {RLT__QE_TOKEN_BUCKET, RLT__QE_ALLOW_ALL,
                                             RLT__QE_DENY_ALL, RLT__QE_NONE};
        rlt__qe_assignment qa = {kinds[a.kind], a.max_tokens, a.tokens_per_fill, a.fill_interval_ns,
                                 a.ttl_ns};
        if (!rlt__qe_assign(&s->qe[b], &qa, s->now)) {
            fail(s, "the server sent an invalid token bucket for %s", s->o->bucket[b].text);
            return;
        }
        if (a.kind != RLT__RLQSC_ABANDON) {
            s->cnt[b].answers++;
            s->assigned[b]++;
            if (s->min_ttl == 0 || a.ttl_ns < s->min_ttl) s->min_ttl = a.ttl_ns;
        }
    }
    if (rc < 0) fail(s, "malformed RateLimitQuotaResponse: %s", why);
}

static int on_data(nghttp2_session *h2, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                   void *u)
{
    (void)h2, (void)flags;
    rlt__q_stream *s = u;
    if (id != s->sid || s->failed) return 0;
    if (s->ilen + len > s->icap) {
        size_t cap = s->icap ? s->icap : 4096;
        while (cap < s->ilen + len)
            cap *= 2;
        uint8_t *p = cap > IN_MAX + 5 ? NULL : realloc(s->in, cap);
        if (p == NULL) {
            fail(s, "a response larger than 4 MiB");
            return 0;
        }
        s->in = p;
        s->icap = cap;
    }
    memcpy(s->in + s->ilen, data, len);
    s->ilen += len;
    size_t at = 0;
    while (!s->failed && s->ilen - at >= 5) {
        const uint8_t *p = s->in + at;
        size_t n = (size_t)p[1] << 24 | (size_t)p[2] << 16 | (size_t)p[3] << 8 | p[4];
        if (p[0] != 0) {
            fail(s, "a compressed or malformed gRPC message");
            break;
        }
        if (s->ilen - at < 5 + n) break;
        response(s, p + 5, n);
        at += 5 + n;
    }
    memmove(s->in, s->in + at, s->ilen - at);
    s->ilen -= at;
    return 0;
}

/* The call is over: the server ended its side (trailers, or a trailers-only answer; the
 * stream itself may stay half-open) or the stream closed with HTTP/2 error `code`.  An RLQS
 * call lasts as long as its client: any end is a failure, worded after what the server said. */
static void ended(rlt__q_stream *s, uint32_t code)
{
    s->closed = true;
    char st[300];
    if (s->grpc_status > 0) {
        snprintf(st, sizeof st, "grpc-status %d %s%s%s", s->grpc_status, pb_grpc_status_name(s->grpc_status),
                 s->grpc_msg[0] ? ": " : "", s->grpc_msg);
        fail(s,
             s->grpc_status == 12 ? "the server does not serve RLQS (%s)"
                                  : "the server ended the stream (%s)",
             st);
    } else if (s->http_status != 0 && s->http_status != 200) {
        snprintf(st, sizeof st, "%d", s->http_status);
        fail(s, "the server answered HTTP status %s to the RLQS call: not a gRPC server", st);
    } else if (!s->grpc_ctype && s->http_status == 200) {
        fail(s, "the server answered without application/grpc: not a gRPC server");
    } else if (code != NGHTTP2_NO_ERROR) {
        fail(s, "the server reset the stream (%s)", nghttp2_http2_strerror(code));
    } else {
        fail(s, "the server ended the stream");
    }
}

static int on_close(nghttp2_session *h2, int32_t id, uint32_t code, void *u)
{
    (void)h2;
    rlt__q_stream *s = u;
    if (id == s->sid) ended(s, code);
    return 0;
}

/* ---- the stream --------------------------------------------------------------------------- */

/* A blocking connect to HOST:PORT (the daemon is local or near: no deadline of our own
 * beyond the system's), then non-blocking.  -1 with a message. */
static int dial(const char *addr, char *err, size_t errlen)
{
    char host[256];
    const char *colon = strrchr(addr, ':');
    size_t hl = colon ? (size_t)(colon - addr) : 0;
    if (colon == NULL || hl == 0 || hl >= sizeof host || colon[1] == '\0') {
        snprintf(err, errlen, "--connect '%s': expected HOST:PORT", addr);
        return -1;
    }
    memcpy(host, addr, hl);
    host[hl] = '\0';
    if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') { /* [::1]:8081 */
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = '\0';
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
    int rc = getaddrinfo(host, colon + 1, &hints, &ai);
    if (rc != 0) {
        snprintf(err, errlen, "cannot resolve %s: %s", addr, gai_strerror(rc));
        return -1;
    }
    int fd = -1, e = 0;
    for (struct addrinfo *x = ai; x != NULL && fd < 0; x = x->ai_next) {
        fd = socket(x->ai_family, x->ai_socktype | SOCK_CLOEXEC, x->ai_protocol);
        if (fd < 0) continue;
        if (connect(fd, x->ai_addr, x->ai_addrlen) != 0) {
            e = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    if (fd < 0) {
        snprintf(err, errlen, "cannot connect to %s: %s", addr, strerror(e));
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

rlt__q_stream *rlt__q_open(const rlt__q_opts *o, int index, char *err, size_t errlen)
{
    (void)index;
    rlt__q_stream *s = calloc(1, sizeof *s);
    if (s == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->o = o;
    s->grpc_status = -1;
    for (size_t b = 0; b < o->nb; b++) {
        s->qe[b].no_assignment_deny = o->no_assignment_deny;
        s->qe[b].expired_allow = o->expired_allow;
    }
    if ((s->fd = dial(o->connect, err, errlen)) < 0) {
        free(s);
        return NULL;
    }
    nghttp2_session_callbacks *cb;
    if (nghttp2_session_callbacks_new(&cb) != 0) {
        snprintf(err, errlen, "out of memory");
        rlt__q_close(s);
        return NULL;
    }
    nghttp2_session_callbacks_set_send_callback(cb, on_send);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
    int rc = nghttp2_session_client_new(&s->h2, cb, s);
    nghttp2_session_callbacks_del(cb);
    if (rc != 0) {
        s->h2 = NULL;
        snprintf(err, errlen, "out of memory");
        rlt__q_close(s);
        return NULL;
    }
    char auth[300];
    snprintf(auth, sizeof auth, "Bearer %s", o->token ? o->token : "");
#define NV(n, v) {(uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v), NGHTTP2_NV_FLAG_NONE}
    nghttp2_nv nva[] = {NV(":method", "POST"),
                        NV(":scheme", "http"),
                        NV(":path", PATH),
                        NV(":authority", o->connect),
                        NV("content-type", "application/grpc"),
                        NV("te", "trailers"),
                        NV("user-agent", "ratelimit-quota"),
                        NV("authorization", auth)};
#undef NV
    nghttp2_data_provider prd = {.source.ptr = s, .read_callback = read_out};
    nghttp2_submit_settings(s->h2, NGHTTP2_FLAG_NONE, NULL, 0);
    s->sid = nghttp2_submit_request(s->h2, NULL, nva, o->token ? 8 : 7, &prd, s);
    if (s->sid < 0) {
        snprintf(err, errlen, "cannot start the call: %s", nghttp2_strerror(s->sid));
        rlt__q_close(s);
        return NULL;
    }
    return s;
}

void rlt__q_close(rlt__q_stream *s)
{
    if (s == NULL) return;
    if (s->h2) nghttp2_session_del(s->h2);
    if (s->fd >= 0) close(s->fd);
    free(s->in);
    free(s);
}

int rlt__q_fd(const rlt__q_stream *s)
{
    return s->fd;
}

short rlt__q_events(const rlt__q_stream *s)
{
    return (short)(POLLIN | (nghttp2_session_want_write(s->h2) ? POLLOUT : 0));
}

bool rlt__q_ready(const rlt__q_stream *s)
{
    return s->ready && !s->failed;
}

/* What the server said instead of HTTP/2, printable, for the message. */
static void not_h2(rlt__q_stream *s, const uint8_t *b, size_t n)
{
    char shown[48];
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < sizeof shown && b[i] != '\r' && b[i] != '\n'; i++)
        shown[k++] = b[i] >= 0x20 && b[i] < 0x7f ? (char)b[i] : '.';
    shown[k] = '\0';
    fail(s, "not an HTTP/2 (gRPC) server: it answered '%s'", shown);
}

int rlt__q_pump(rlt__q_stream *s, int64_t now, char *err, size_t errlen)
{
    s->now = now;
    uint8_t buf[16384];
    while (!s->failed) {
        ssize_t n = recv(s->fd, buf, sizeof buf, 0);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            if (!s->checked && s->nfirst > 0)
                not_h2(s, s->first, s->nfirst);
            else if (n == 0 && s->nfirst == 0)
                fail(s, "the server closed the connection without answering HTTP/2");
            else
                fail(s, "the server closed the connection (%s)",
                     n == 0 ? "end of stream" : strerror(errno));
            break;
        }
        size_t take =
            sizeof s->first - s->nfirst < (size_t)n ? sizeof s->first - s->nfirst : (size_t)n;
        memcpy(s->first + s->nfirst, buf, take);
        s->nfirst += take;
        ssize_t rc = 0;
        if (!s->checked) {
            if (s->nfirst < 9) continue; /* all of it is kept in first[] */
            /* A server's connection preface is a SETTINGS frame (type 4) on stream 0. */
            const uint8_t *f = s->first;
            if (f[3] != NGHTTP2_SETTINGS || (f[5] & 0x7f) || f[6] || f[7] || f[8]) {
                not_h2(s, s->first, s->nfirst);
                break;
            }
            s->checked = true;
            rc = nghttp2_session_mem_recv(s->h2, s->first, s->nfirst - take);
        }
        if (rc >= 0) rc = nghttp2_session_mem_recv(s->h2, buf, (size_t)n);
        if (rc < 0) fail(s, "HTTP/2 error: %s", nghttp2_strerror((int)rc));
    }
    if (!s->failed && nghttp2_session_send(s->h2) != 0) fail(s, "the server closed the connection");
    if (s->failed) {
        snprintf(err, errlen, "%s", s->err);
        return -1;
    }
    return 0;
}

int rlt__q_report(rlt__q_stream *s, int64_t elapsed_ns, char *err, size_t errlen)
{
    rlt__rlqsc_usage u[RLT__Q_MAX_BUCKETS];
    for (size_t b = 0; b < s->o->nb; b++) {
        u[b] = (rlt__rlqsc_usage){s->o->bucket[b].pairs, s->o->bucket[b].n, elapsed_ns,
                                  s->cnt[b].allowed, s->cnt[b].denied};
        s->cnt[b] = (rlt__q_count){0, 0, 0};
    }
    if (OUT_CAP - s->olen < 5) {
        snprintf(err, errlen, "the server does not read the reports");
        return -1;
    }
    size_t n = rlt__rlqsc_encode_reports(s->o->domain, u, s->o->nb, s->out + s->olen + 5,
                                         OUT_CAP - s->olen - 5);
    if (n == 0) {
        snprintf(err, errlen,
                 "a report does not fit in %d bytes (or the server does not read "
                 "the reports)",
                 OUT_CAP);
        return -1;
    }
    uint8_t *p = s->out + s->olen;
    p[0] = 0;
    p[1] = (uint8_t)(n >> 24);
    p[2] = (uint8_t)(n >> 16);
    p[3] = (uint8_t)(n >> 8);
    p[4] = (uint8_t)n;
    s->olen += 5 + n;
    nghttp2_session_resume_data(s->h2, s->sid);
    return 0;
}

rlt__qe_bucket *rlt__q_qe(rlt__q_stream *s, size_t b)
{
    return &s->qe[b];
}

rlt__q_count *rlt__q_counts(rlt__q_stream *s, size_t b)
{
    return &s->cnt[b];
}

uint64_t rlt__q_assignments(const rlt__q_stream *s, size_t b)
{
    return s->assigned[b];
}

int64_t rlt__q_min_ttl(const rlt__q_stream *s)
{
    return s->min_ttl;
}
