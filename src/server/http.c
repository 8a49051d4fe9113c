/* ratelimitd's HTTP/1.1 front end on libevent's evhttp: /v1/check (200 or 429 with
 * Retry-After and the IETF RateLimit fields), envoyproxy/ratelimit's POST /json, /metrics
 * (Prometheus text) and /healthz.  Bearer-token auth when a password or tenants are set. */
#include "server/srv.h"

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <string.h>

#define MAX_BODY 65536

typedef struct http_ctx {
    rlt__srv *s;
} http_ctx;

static void reply(struct evhttp_request *req, int code, const char *reason, const char *ctype,
                  const char *body, size_t len)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", ctype);
    struct evbuffer *b = evbuffer_new();
    if (b != NULL) evbuffer_add(b, body, len);
    evhttp_send_reply(req, code, reason, b);
    if (b != NULL) evbuffer_free(b);
}

static void reply_error(struct evhttp_request *req, int code, const char *reason, const char *msg)
{
    char body[600];
    size_t o = 0;
    o += (size_t)snprintf(body, sizeof body, "{\"error\":\"");
    for (const char *p = msg; *p && o + 8 < sizeof body; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\') body[o++] = '\\';
        body[o++] = c < 32 ? ' ' : (char)c;
    }
    o += (size_t)snprintf(body + o, sizeof body - o, "\"}\n");
    if (o > sizeof body - 1) o = sizeof body - 1;
    reply(req, code, reason, "application/json", body, o);
}

/* Reads the request body (bounded by evhttp's max body size) into buf; returns its length. */
static size_t body_of(struct evhttp_request *req, char *buf, size_t cap)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t n = evbuffer_get_length(in);
    if (n > cap) n = cap;
    evbuffer_copyout(in, buf, n);
    return n;
}

/* Authorization: Bearer <token>.  Returns false after replying 401. */
static bool authorize(struct evhttp_request *req, rlt__srv *s, char *prefix, size_t *plen)
{
    rlt__config *c = rlt__srv_config(s);
    *plen = 0;
    if (c->set.password[0] == '\0' && c->ntenants == 0) return true;
    const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
    if (h != NULL && strncasecmp(h, "Bearer ", 7) == 0) {
        const char *tok = h + 7;
        if (rlt__auth_check(s, NULL, 0, tok, strlen(tok), prefix, plen) != 0) return true;
    }
    evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate",
                      "Bearer realm=\"ratelimitd\"");
    reply_error(req, 401, "Unauthorized", "missing or wrong bearer token");
    return false;
}

/* A policy name for the IETF fields: the named policy, or "inline" for policy text. */
static const char *field_name(const char *policy, size_t len)
{
    return memchr(policy, ':', len) ? "inline" : policy;
}

static void add_header_lines(struct evhttp_request *req, char *lines)
{
    struct evkeyvalq *out = evhttp_request_get_output_headers(req);
    char *save = NULL;
    for (char *line = strtok_r(lines, "\r\n", &save); line; line = strtok_r(NULL, "\r\n", &save)) {
        char *colon = strchr(line, ':');
        if (colon == NULL) continue;
        *colon = '\0';
        const char *v = colon + 1;
        while (*v == ' ')
            v++;
        evhttp_add_header(out, line, v);
    }
}

static void handle_check(struct evhttp_request *req, rlt__srv *s, const char *prefix, size_t plen)
{
    char qbuf[4096], err[300];
    const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    size_t qlen;
    if (evhttp_request_get_command(req) == EVHTTP_REQ_POST &&
        evbuffer_get_length(evhttp_request_get_input_buffer(req)) > 0) {
        if (evbuffer_get_length(evhttp_request_get_input_buffer(req)) > sizeof qbuf)
            return reply_error(req, 413, "Payload Too Large", "form body too large");
        qlen = body_of(req, qbuf, sizeof qbuf);
        q = qbuf;
    } else {
        if (q == NULL) q = "";
        qlen = strlen(q);
    }
    rlt__check_req cr;
    if (rlt__check_parse(q, qlen, &cr, err, sizeof err) < 0)
        return reply_error(req, 400, "Bad Request", err);
    char key[RLT_KEY_MAX];
    int klen = rlt__make_key(prefix, plen, cr.key, cr.klen, key);
    if (klen < 0) return reply_error(req, 400, "Bad Request", "key too long");
    bool shadow;
    int id = rlt__srv_resolve(s, cr.policy, cr.plen, &shadow, err, sizeof err);
    if (id < 0) return reply_error(req, 400, "Bad Request", err);
    rlt_decision d;
    rlt_ns now = rlt__now();
    int st = rlt__decide(s, id, shadow, key, (size_t)klen, now, cr.cost, &d);
    if (st != RLT_OK)
        return reply_error(req, st == RLT_EFULL ? 503 : 400,
                           st == RLT_EFULL ? "Service Unavailable" : "Bad Request",
                           rlt__decide_strerror(s, id, now, st, err, sizeof err));
    rlt_policy p;
    char hdr[1024];
    if (rlt_store_get_policy(s->store, id, &p) == RLT_OK &&
        rlt_format_headers(hdr, sizeof hdr, field_name(cr.policy, cr.plen), &p, &d,
                           RLT_HDR_RETRY_AFTER | RLT_HDR_IETF) >= 0)
        add_header_lines(req, hdr);
    char body[300];
    int64_t retry = d.allowed ? 0 : d.retry_after < 0 ? -1 : (d.retry_after + 999999) / 1000000;
    int n = snprintf(body, sizeof body,
                     "{\"allowed\":%s,\"limit\":%lld,\"remaining\":%lld,\"retry_after_ms\":%lld,"
                     "\"reset_after_ms\":%lld}\n",
                     d.allowed ? "true" : "false", (long long)d.limit, (long long)d.remaining,
                     (long long)retry, (long long)((d.reset_after + 999999) / 1000000));
    if (d.allowed)
        reply(req, 200, "OK", "application/json", body, (size_t)n);
    else
        reply(req, 429, "Too Many Requests", "application/json", body, (size_t)n);
}

static void handle_envoy(struct evhttp_request *req, rlt__srv *s, const char *prefix, size_t plen)
{
    if (evhttp_request_get_command(req) != EVHTTP_REQ_POST)
        return reply_error(req, 405, "Method Not Allowed", "POST a JSON body");
    static __thread char body[MAX_BODY];
    size_t n = body_of(req, body, sizeof body);
    rlt__envoy_req er;
    char err[300];
    if (rlt__envoy_parse(body, n, &er, err, sizeof err) < 0) {
        rlt__envoy_free(&er);
        return reply_error(req, 400, "Bad Request", err);
    }
    rlt__obuf out = {.max = 1 << 20};
    int code = rlt__envoy_decide(s, &er, prefix, plen, rlt__now(), &out, err, sizeof err);
    rlt__envoy_free(&er);
    if (code < 0)
        reply_error(req, 400, "Bad Request", err);
    else
        reply(req, code, code == 200 ? "OK" : "Too Many Requests", "application/json",
              out.data ? out.data : "", out.len);
    rlt__obuf_free(&out);
}

static void on_request(struct evhttp_request *req, void *arg)
{
    http_ctx *hc = arg;
    rlt__srv *s = hc->s;
    rlt_ns t0 = rlt__now();
    rlt__mslot *ms = rlt__mslot_get(&s->metrics);
    rlt__mcount(&ms->http_requests, 1);
    const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
    if (path == NULL) path = "/";
    char prefix[RLT__STR_MAX];
    size_t plen = 0;
    if (strcmp(path, "/healthz") == 0 || strcmp(path, "/healthcheck") == 0) {
        reply(req, 200, "OK", "text/plain", "OK\n", 3);
    } else if (!authorize(req, s, prefix, &plen)) {
        /* replied 401 */
    } else if (strcmp(path, "/v1/check") == 0) {
        handle_check(req, s, prefix, plen);
    } else if (strcmp(path, "/json") == 0) {
        handle_envoy(req, s, prefix, plen);
    } else if (strcmp(path, "/metrics") == 0) {
        rlt__obuf out = {0};
        rlt__metrics_prometheus(s, &out);
        reply(req, 200, "OK", "text/plain; version=0.0.4", out.data ? out.data : "", out.len);
        rlt__obuf_free(&out);
    } else {
        reply_error(req, 404, "Not Found",
                    "no such endpoint (/v1/check, /json, /metrics, /healthz)");
    }
    rlt__metrics_latency(ms, rlt__now() - t0);
}

struct evhttp *rlt__http_attach(struct event_base *base, rlt__srv *s, int fd)
{
    struct evhttp *h = evhttp_new(base);
    if (h == NULL) return NULL;
    /* One context per server; it lives as long as the process (a few bytes). */
    static http_ctx ctx;
    ctx.s = s;
    rlt__settings *set = &rlt__srv_config(s)->set;
    evhttp_set_max_headers_size(h, 8192);
    evhttp_set_max_body_size(h, MAX_BODY);
    int secs = (int)(set->client_timeout / RLT_NS_PER_S);
    evhttp_set_timeout(h, secs > 0 ? secs : 10);
    evhttp_set_allowed_methods(h, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD);
    evhttp_set_gencb(h, on_request, &ctx);
    if (evhttp_accept_socket(h, fd) != 0) {
        evhttp_free(h);
        return NULL;
    }
    return h;
}
