/* HTTP/1.1 on the connection layer: the strict parser (http1.h) and ratelimitd's endpoints.
 *   GET|HEAD|POST /v1/check   200 or 429 with Retry-After and the IETF RateLimit fields; a
 *                             JSON body.  HEAD answers the same headers without charging.
 *                             With reserve=1 a reservation: its id in the body.
 *   POST /v1/settle           settles a reservation at its real cost (charge after the
 *                             response): 200, 404 for an unknown reservation
 *   POST /json                envoyproxy/ratelimit's JSON API (httpin.h)
 *   GET|HEAD /metrics         Prometheus text
 *   GET|HEAD /v1/top          the top offenders (top.h) as JSON; ?n= bounds the list
 *   GET|HEAD /v1/stats        decisions per second per policy, the backend (ui.h)
 *   GET|HEAD /v1/peek         where a key stands, charging nothing (ui.h)
 *   GET|HEAD /v1/rules        the config's envoy rules (ui.h)
 *   GET|HEAD /, /ui/live ...  the playground and its live page (ui.h; server.ui)
 *   GET|HEAD /healthz         "OK" (also /healthcheck), never behind the bearer token
 * A password or tenants require "Authorization: Bearer <token>" or Basic with the token as the
 * password (the same check as RESP AUTH).
 * Keep-alive and pipelining as RFC 9112 says; /v1/check decisions are staged in the worker's
 * pipe like RESP's, so a turn's requests are decided in one batch.  Any framing error is
 * answered (400, 413, 414, 431, 501, 505) with "Connection: close" and the connection closed:
 * nothing after it is read as a request. */
#include "core/text.h"
#include "server/base/scratch.h"
#include "server/net/conn.h"
#include "server/request/decide.h"
#include "server/http/http1.h"
#include "server/http/httpin.h"
#include "server/http/limits.h"
#include "server/http/reply.h"
#include "server/http/ui.h"
#include "server/stats/metrics.h"
#include "server/net/protocol.h"
#include "server/request/srv.h"
#include "server/request/report.h"
#include "server/stats/top.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The per-connection state is only a flag: "100 Continue" was sent for the pending request. */
#define CONTINUED ((void *)(uintptr_t)1)

/* ---- /v1/check -------------------------------------------------------------------------- */

/* A policy name for the IETF fields: the named policy, or "inline" for policy text. */
static void field_name(const char *policy, size_t len, char *out, size_t cap)
{
    if (memchr(policy, ':', len) != NULL || len >= cap) len = 0;
    if (len == 0) {
        snprintf(out, cap, "inline");
        return;
    }
    memcpy(out, policy, len);
    out[len] = '\0';
}

/* /v1/check's response; `more` (may be NULL) is JSON members added to the body. */
static void render_check(rlt__srv *s, const rlt__pipe_reply *r, int id, int64_t cost, rlt_ns now,
                         int st, const rlt_decision *d, const char *more)
{
    char err[200];
    if (st != RLT_OK) {
        int code = st == RLT_EFULL ? 503 : 400;
        rlt__http_error(r->out, code, r->flags, NULL,
                        rlt__decide_strerror(s, id, now, st, err, sizeof err));
        return;
    }
    rlt_policy p;
    char hdr[1024];
    int hl = -1;
    if (rlt__registry_policy(&s->reg, id, &p) == RLT_OK)
        hl =
            rlt_format_headers(hdr, sizeof hdr, r->name, &p, d, RLT_HDR_RETRY_AFTER | RLT_HDR_IETF);
    if (hl < 0) hdr[0] = '\0';
    /* {"allowed":B,"limit":N,"remaining":N,"retry_after_ms":N,"reset_after_ms":N} */
    rlt__obuf body = {0};
    char bb[384];
    body.data = bb; /* a stack buffer that cannot grow: 5 numbers fit */
    body.cap = sizeof bb;
    body.max = sizeof bb;
    rlt__http_put_str(&body, d->allowed ? "{\"allowed\":true,\"limit\":"
                                        : "{\"allowed\":false,\"limit\":");
    rlt__http_put_num(&body, d->limit);
    rlt__http_put_str(&body, ",\"remaining\":");
    rlt__http_put_num(&body, d->remaining);
    rlt__http_put_str(&body, ",\"retry_after_ms\":");
    rlt__http_put_num(&body, d->allowed ? 0 : rlt_retry_after_ms(d->retry_after));
    rlt__http_put_str(&body, ",\"reset_after_ms\":");
    rlt__http_put_num(&body, rlt_retry_after_ms(d->reset_after));
    if (!d->allowed && d->retry_after < 0) {
        /* No wait can make this cost fit: a 429 without Retry-After, and the body says so. */
        rlt__http_put_str(&body, ",\"error\":\"cost ");
        rlt__http_put_num(&body, cost);
        rlt__http_put_str(&body, " can never be allowed: the policy allows at most ");
        rlt__http_put_num(&body, d->limit);
        rlt__http_put_str(&body, " at once\"");
    }
    if (more) rlt__http_put_str(&body, more);
    rlt__http_put_str(&body, "}\n");
    size_t n = body.len;
    rlt__http_respond(r->out, d->allowed ? 200 : (int)(r->arg ? r->arg : 429), r->flags,
                      "application/json", hdr, bb, n);
}

static void reply_check(rlt__srv *s, const rlt__pipe_reply *r, int id, int64_t cost, rlt_ns now,
                        int st, const rlt_decision *d)
{
    render_check(s, r, id, cost, now, st, d, NULL);
}

static void handle_reserve(rlt__conn *c, const rlt__session *ss, const rlt__check_req *cr,
                           const rlt__target *t, const rlt__pipe_reply *r, rlt_ns now);

/* /v1/check with class= below critical and a reserve (class_reserve= > 0, or the policy's): decided at once under the
 * class's ceiling (rlt__decide_class), after the staged checks; 501 in Redis mode. */
static void handle_class(rlt__conn *c, const rlt__check_req *cr, const rlt__target *t,
                         const rlt__pipe_reply *r, int64_t cost, rlt_ns now)
{
    rlt__srv *s = rlt__conn_srv(c);
    rlt__pipe_flush(rlt__conn_pipe(c), s);
    rlt_decision d;
    int st = rlt__decide_class(s, t->policy_id, t->shadow, t->key, t->klen, now, cost,
                               (rlt_class)cr->klass, cr->class_reserve, &d);
    if (st == RLT_EBACKEND)
        return rlt__http_error(r->out, 501, r->flags, NULL,
                               "class_reserve needs the local store (not Redis mode)");
    render_check(s, r, t->policy_id, cost, now, st, &d, NULL);
}

/* /v1/check with policy= repeated: every limit decided all or nothing in one call
 * (rlt__decide_multi), at once after the staged checks.  The answer is the most restrictive
 * values, with the refusing limit's IETF fields (else the first's) and "refused_index": the
 * refusing limit's place among the policies given, -1 when allowed.  HEAD charges nothing. */
static void nested_decide(rlt__srv *s, const rlt__session *ss, const rlt__check_req *cr,
                          const rlt__target *t0, rlt__pipe_reply *r, rlt_ns now,
                          char (*kbufs)[RLT_KEY_MAX])
{
    int64_t cost = r->flags & RLT__HF_HEAD ? 0 : cr->cost;
    rlt_check checks[RLT__CHECK_MAX_LIMITS];
    checks[0] = (rlt_check){.policy = t0->policy_id, .key = t0->key, .klen = t0->klen, .cost = cost};
    char err[300];
    for (size_t i = 1; i < cr->nlimits; i++) {
        const rlt__check_limit *l = &cr->more[i - 1];
        rlt__target t;
        if (rlt__target_resolve(s, ss, l->key, l->klen, l->policy, l->plen, false, now,
                                kbufs[i - 1], &t, err, sizeof err) != RLT_OK)
            return rlt__http_error(r->out, 400, r->flags, NULL, err);
        checks[i] = (rlt_check){.policy = t.policy_id, .key = t.key, .klen = t.klen, .cost = cost};
    }
    rlt_decision d;
    int refused = -1;
    int st = rlt__decide_multi(s, checks, cr->nlimits, now, &d, &refused);
    int which = refused > 0 ? refused : 0;
    if (which > 0)
        field_name(cr->more[which - 1].policy, cr->more[which - 1].plen, r->name, sizeof r->name);
    char more[40];
    snprintf(more, sizeof more, ",\"refused_index\":%d", st == RLT_OK ? refused : -1);
    render_check(s, r, checks[which].policy, cost, now, st, &d, more);
}

static void handle_nested(rlt__conn *c, const rlt__session *ss, const rlt__check_req *cr,
                          const rlt__target *t0, rlt__pipe_reply *r, rlt_ns now)
{
    rlt__srv *s = rlt__conn_srv(c);
    rlt__pipe_flush(rlt__conn_pipe(c), s);
    if (cr->reserve || cr->reservation || cr->timeout_ms)
        return rlt__http_error(r->out, 400, r->flags, NULL,
                               "reserve=1 takes one policy (POST /v1/mreserve takes several)");
    if (cr->class_reserve > 0)
        return rlt__http_error(r->out, 400, r->flags, NULL, "class_reserve takes one policy");
    /* The other limits' keys, in the worker's scratch for this request only. */
    rlt__scratch *sc = rlt__conn_scratch(c);
    size_t mark = rlt__scratch_mark(sc);
    char(*kbufs)[RLT_KEY_MAX] = rlt__scratch_alloc(sc, (RLT__CHECK_MAX_LIMITS - 1) * RLT_KEY_MAX);
    if (!kbufs)
        return rlt__http_error(r->out, 503, r->flags, NULL, "out of scratch space for the keys");
    nested_decide(s, ss, cr, t0, r, now, kbufs);
    rlt__scratch_release(sc, mark);
}

static void handle_check(rlt__conn *c, const rlt__http_req *req, const rlt__session *ss,
                         unsigned flags, rlt_ns now)
{
    rlt__srv *s = rlt__conn_srv(c);
    rlt__obuf *o = rlt__conn_out(c);
    const char *q = req->query ? req->query : "";
    size_t qlen = req->query_len;
    if (req->method == RLT__HTTP_POST && req->body_len > 0) {
        q = req->body;
        qlen = req->body_len;
    }
    rlt__check_req cr;
    char err[300], kbuf[RLT_KEY_MAX];
    rlt__target t;
    if (rlt__check_parse(q, qlen, &cr, err, sizeof err) != RLT_OK ||
        rlt__target_resolve(s, ss, cr.key, cr.klen, cr.policy, cr.plen, false, now, kbuf, &t, err,
                            sizeof err) != RLT_OK) {
        rlt__pipe_flush(rlt__conn_pipe(c), s);
        return rlt__http_error(o, 400, flags, NULL, err);
    }
    rlt__pipe_reply r = {.out = o, .fn = reply_check, .flags = flags, .arg = cr.deny_status};
    field_name(cr.policy, cr.plen, r.name, sizeof r.name);
    if (cr.nlimits > 1) return handle_nested(c, ss, &cr, &t, &r, now);
    if (cr.reserve || cr.reservation || cr.timeout_ms)
        return handle_reserve(c, ss, &cr, &t, &r, now);
    if (cr.class_reserve != 0 && cr.klass != RLT_CLASS_CRITICAL)
        return handle_class(c, &cr, &t, &r, flags & RLT__HF_HEAD ? 0 : cr.cost, now);
    /* HEAD shows where the key stands and charges nothing. */
    rlt__pipe_add(rlt__conn_pipe(c), s, now, &t, flags & RLT__HF_HEAD ? 0 : cr.cost, &r);
}

/* ---- charge after the response: reserve=1 on /v1/check, and /v1/settle ------------------- */

/* /v1/check with reserve=1: decided at once (a reservation is not a batch item), after the
 * staged checks; the body adds "reservation": its id in hex, or null when denied. */
static void handle_reserve(rlt__conn *c, const rlt__session *ss, const rlt__check_req *cr,
                           const rlt__target *t, const rlt__pipe_reply *r, rlt_ns now)
{
    rlt__srv *s = rlt__conn_srv(c);
    rlt__pipe_flush(rlt__conn_pipe(c), s);
    char err[200];
    if (!cr->reserve || cr->reservation)
        return rlt__http_error(r->out, 400, r->flags, NULL,
                               cr->reservation ? "reservation belongs to POST /v1/settle"
                                               : "timeout_ms needs reserve=1");
    if (r->flags & RLT__HF_HEAD)
        return rlt__http_error(r->out, 400, r->flags, NULL, "reserve=1 takes GET or POST");
    rlt_ns timeout = rlt__decide_reserve_timeout(s, cr->timeout_ms, err, sizeof err);
    if (timeout < 0) return rlt__http_error(r->out, 400, r->flags, NULL, err);
    /* A tenant's reservations count together; the admin's per connection (a request's own
     * session is new each time). */
    uint64_t holder = rlt__session_holder(ss->auth == RLT__AUTH_TENANT ? ss : rlt__conn_session(c));
    rlt_decision d;
    uint64_t rid;
    int st = rlt__decide_reserve(s, holder, t->policy_id, t->shadow, t->key, t->klen, now, cr->cost,
                                 timeout, &d, &rid);
    if (st != RLT_OK) {
        int code = !rlt__decide_can_reserve(s) ? 501 : st == RLT_EFULL ? 503 : 400;
        return rlt__http_error(
            r->out, code, r->flags, NULL,
            rlt__decide_reserve_strerror(s, t->policy_id, now, st, false, err, sizeof err));
    }
    char more[48] = ",\"reservation\":null";
    if (rid != 0) {
        char hex[RLT__RESERVATION_HEX + 1];
        rlt__reservation_format(rid, hex);
        snprintf(more, sizeof more, ",\"reservation\":\"%s\"", hex);
    }
    render_check(s, r, t->policy_id, cr->cost, now, RLT_OK, &d, more);
}

/* POST /v1/settle key=K&policy=P&reservation=HEX&cost=REAL: 200 with where the key stands
 * after the settle (a peek: would a cost-1 request pass) and the IETF RateLimit fields; 404
 * for an unknown reservation. */
static void handle_settle(rlt__conn *c, const rlt__http_req *req, const rlt__session *ss,
                          unsigned flags, rlt_ns now)
{
    rlt__srv *s = rlt__conn_srv(c);
    rlt__obuf *o = rlt__conn_out(c);
    const char *q = req->body_len > 0 ? req->body : req->query ? req->query : "";
    size_t qlen = req->body_len > 0 ? req->body_len : req->query_len;
    rlt__check_req cr;
    char err[300], kbuf[RLT_KEY_MAX];
    rlt__target t;
    if (rlt__check_parse(q, qlen, &cr, err, sizeof err) != RLT_OK ||
        rlt__target_resolve(s, ss, cr.key, cr.klen, cr.policy, cr.plen, false, now, kbuf, &t, err,
                            sizeof err) != RLT_OK)
        return rlt__http_error(o, 400, flags, NULL, err);
    if (!cr.reservation || !cr.has_cost || cr.reserve || cr.timeout_ms || cr.deny_status ||
        cr.nlimits > 1)
        return rlt__http_error(o, 400, flags, NULL,
                               "POST /v1/settle takes key, policy, reservation (the id the "
                               "reservation returned) and cost (the real cost)");
    rlt_decision d;
    int st = rlt__decide_settle(s, t.policy_id, t.key, t.klen, now, cr.reservation, cr.cost, &d);
    if (st != RLT_OK) {
        int code = !rlt__decide_can_reserve(s) ? 501
                   : st == RLT_ENOENT          ? 404
                   : st == RLT_EFULL           ? 503
                   : st == RLT_EBACKEND        ? 503 /* Redis could not answer */
                   : st == RLT_ETIMEDOUT       ? 503
                                               : 400;
        return rlt__http_error(
            o, code, flags, NULL,
            rlt__decide_reserve_strerror(s, t.policy_id, now, st, true, err, sizeof err));
    }
    char name[RLT_NAME_MAX + 1], hdr[1024];
    field_name(cr.policy, cr.plen, name, sizeof name);
    rlt_policy p;
    int hl = -1;
    if (rlt__registry_policy(&s->reg, t.policy_id, &p) == RLT_OK)
        hl = rlt_format_headers(hdr, sizeof hdr, name, &p, &d, RLT_HDR_IETF);
    if (hl < 0) hdr[0] = '\0';
    char body[256];
    int n = snprintf(body, sizeof body,
                     "{\"settled\":true,\"allowed\":%s,\"limit\":%lld,\"remaining\":%lld,"
                     "\"retry_after_ms\":%lld,\"reset_after_ms\":%lld}\n",
                     d.allowed ? "true" : "false", (long long)d.limit, (long long)d.remaining,
                     (long long)(d.allowed ? 0 : rlt_retry_after_ms(d.retry_after)),
                     (long long)rlt_retry_after_ms(d.reset_after));
    rlt__http_respond(o, 200, flags, "application/json", hdr, body, (size_t)n);
}

/* ---- the other endpoints ---------------------------------------------------------------- */

static void handle_envoy(rlt__conn *c, const rlt__http_req *req, const rlt__session *ss,
                         unsigned flags, rlt_ns now)
{
    rlt__srv *s = rlt__conn_srv(c);
    rlt__obuf *o = rlt__conn_out(c);
    rlt__envoy_req er;
    char err[300];
    if (rlt__envoy_parse(req->body ? req->body : "", req->body_len, &er, err, sizeof err) !=
        RLT_OK) {
        rlt__envoy_free(&er);
        return rlt__http_error(o, 400, flags, NULL, err);
    }
    rlt__obuf body = {.max = 1 << 20};
    int code = 0;
    int st = rlt__envoy_decide_json(s, &er, ss, rlt__conn_scratch(c), now, &body, &code, err,
                                    sizeof err);
    rlt__envoy_free(&er);
    if (st != RLT_OK)
        rlt__http_error(o, 400, flags, NULL, err);
    else
        rlt__http_respond(o, code, flags, "application/json", NULL, body.data ? body.data : "",
                          body.len);
    rlt__obuf_free(&body);
}

/* /v1/top[?n=N]: 404 when server.top_keys is 0. */
static void handle_top(rlt__conn *c, const rlt__http_req *req, const rlt__session *ss,
                       unsigned flags)
{
    rlt__srv *s = rlt__conn_srv(c);
    rlt__obuf *o = rlt__conn_out(c);
    if (s->top == NULL)
        return rlt__http_error(o, 404, flags, NULL, "top offenders are off (server.top_keys: 0)");
    size_t n, qlen;
    char err[128], q[64];
    /* Decoded first, as /v1/peek decodes its parameters (n=%31 is n=1). */
    const char *query = req->query;
    if (rlt__url_decode(req->query, req->query_len, q, sizeof q, &qlen) == RLT_OK)
        query = q;
    else
        qlen = req->query_len;
    if (rlt__top_query(query, qlen, rlt__top_k(s->top), &n, err, sizeof err) != RLT_OK)
        return rlt__http_error(o, 400, flags, NULL, err);
    rlt__obuf body = {0};
    rlt__report_top_json(s, ss, n, &body);
    rlt__http_respond(o, 200, flags, "application/json", NULL, body.data ? body.data : "",
                      body.len);
    rlt__obuf_free(&body);
}

/* Standard base64 (RFC 4648, padding optional) of in[0..n) into out (cap bytes).  Returns the
 * decoded length, or -1 on a character outside the alphabet or an output too long. */
static ssize_t base64_decode(const char *in, size_t n, char *out, size_t cap)
{
    uint32_t acc = 0;
    int bits = 0;
    size_t len = 0;
    while (n > 0 && in[n - 1] == '=')
        n--;
    for (size_t i = 0; i < n; i++) {
        char ch = in[i];
        int v = ch >= 'A' && ch <= 'Z'   ? ch - 'A'
                : ch >= 'a' && ch <= 'z' ? ch - 'a' + 26
                : ch >= '0' && ch <= '9' ? ch - '0' + 52
                : ch == '+'              ? 62
                : ch == '/'              ? 63
                                         : -1;
        if (v < 0) return -1;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (len == cap) return -1;
            out[len++] = (char)((acc >> bits) & 0xff);
        }
    }
    return (ssize_t)len;
}

/* Authorization: Bearer <token>, or Basic base64(user:password) with the token as the password
 * and any user name (a browser can send Basic when it navigates, never Bearer), when a password
 * or tenants are configured.  Both are checked by rlt__session_auth (constant-time).  A session
 * lasts one request; its client is the connection's (what per-client budgets count). */
static bool authorize(rlt__conn *c, const rlt__http_req *req, rlt__session *ss)
{
    rlt__srv *s = rlt__conn_srv(c);
    rlt__session_init(s, ss);
    rlt__session_same_client(ss, rlt__conn_session(c));
    if (ss->auth != RLT__AUTH_NONE) return true;
    const rlt__http_header *h = rlt__http_find(req, "Authorization");
    if (h == NULL) return false;
    if (h->vlen >= 7 && strncasecmp(h->value, "Bearer ", 7) == 0)
        return rlt__session_auth(s, ss, NULL, 0, h->value + 7, h->vlen - 7) != RLT__AUTH_NONE;
    if (h->vlen < 6 || strncasecmp(h->value, "Basic ", 6) != 0) return false;
    char cred[2 * RLT__STR_MAX];
    const char *b = h->value + 6;
    size_t blen = h->vlen - 6;
    while (blen > 0 && *b == ' ')
        b++, blen--;
    ssize_t n = base64_decode(b, blen, cred, sizeof cred);
    const char *colon = n < 0 ? NULL : memchr(cred, ':', (size_t)n);
    if (colon == NULL) return false;
    size_t off = (size_t)(colon + 1 - cred);
    return rlt__session_auth(s, ss, NULL, 0, colon + 1, (size_t)n - off) != RLT__AUTH_NONE;
}

/* The 401's challenges: Basic first, so a browser prompts for the password. */
#define CHALLENGE                                                                                  \
    "WWW-Authenticate: Basic realm=\"ratelimitd\", charset=\"UTF-8\"\r\n"                          \
    "WWW-Authenticate: Bearer realm=\"ratelimitd\"\r\n"

static bool path_is(const rlt__http_req *req, const char *p)
{
    size_t n = strlen(p);
    return req->path_len == n && memcmp(req->path, p, n) == 0;
}

/* Routes one parsed request. */
static void route(rlt__conn *c, const rlt__http_req *req, unsigned flags, rlt_ns now)
{
    rlt__srv *s = rlt__conn_srv(c);
    rlt__obuf *o = rlt__conn_out(c);
    rlt__mslot *ms = rlt__mslot_get(&s->metrics);
    rlt__mcount(&ms->http_requests, 1);
    rlt__conn_request_done(c);
    bool get = req->method == RLT__HTTP_GET || req->method == RLT__HTTP_HEAD;
    bool post = req->method == RLT__HTTP_POST;
    bool check = path_is(req, "/v1/check"), envoy = path_is(req, "/json");
    bool metrics = path_is(req, "/metrics") || path_is(req, "/v1/top") ||
                   path_is(req, "/v1/stats") || path_is(req, "/v1/peek") ||
                   path_is(req, "/v1/rules");
    bool settle = path_is(req, "/v1/settle");
    bool mreserve = path_is(req, "/v1/mreserve"), msettle = path_is(req, "/v1/msettle");
    bool health = path_is(req, "/healthz") || path_is(req, "/healthcheck");
    const rlt__webasset *page = check || envoy || metrics || settle || health || mreserve || msettle
                                    ? NULL
                                    : rlt__ui_find(s, req);
    rlt__session ss;
    if (check && (get || post) && authorize(c, req, &ss))
        return handle_check(c, req, &ss, flags, now); /* staged: no flush */
    /* Everything else answers at once: what is staged goes first, in order. */
    rlt__pipe_flush(rlt__conn_pipe(c), s);
    if (mreserve || msettle) {
        if (!post) return rlt__http_error(o, 405, flags, "Allow: POST\r\n", "POST a JSON body");
        if (authorize(c, req, &ss)) return rlt__http_budget(c, req, &ss, flags, now, msettle);
        rlt__mcount(&ms->errors, 1);
        return rlt__http_error(o, 401, flags, CHALLENGE,
                               "missing or wrong password (Bearer token or Basic)");
    }
    if (settle) {
        if (!post)
            return rlt__http_error(o, 405, flags, "Allow: POST\r\n",
                                   "POST the settle's parameters");
        if (authorize(c, req, &ss)) return handle_settle(c, req, &ss, flags, now);
        rlt__mcount(&ms->errors, 1);
        return rlt__http_error(o, 401, flags, CHALLENGE,
                               "missing or wrong password (Bearer token or Basic)");
    }
    if (!check && !envoy && !metrics && !health && page == NULL)
        return rlt__http_error(o, 404, flags, NULL,
                               "no such endpoint (/v1/check, /v1/settle, /v1/mreserve, "
                               "/v1/msettle, /json, /metrics, /v1/top, "
                               "/v1/stats, /v1/peek, /v1/rules, /healthz, and / unless "
                               "server.ui is off)");
    if (check ? !(get || post) : envoy ? !post : !get)
        return rlt__http_error(o, 405, flags,
                               check   ? "Allow: GET, HEAD, POST\r\n"
                               : envoy ? "Allow: POST\r\n"
                                       : "Allow: GET, HEAD\r\n",
                               envoy ? "POST a JSON body" : "method not allowed");
    if (health) return rlt__http_respond(o, 200, flags, "text/plain", NULL, "OK\n", 3);
    if (!check && authorize(c, req, &ss)) {
        if (page != NULL) return rlt__ui_asset(o, req, page, flags);
        if (envoy) return handle_envoy(c, req, &ss, flags, now);
        if (path_is(req, "/v1/top")) return handle_top(c, req, &ss, flags);
        if ((path_is(req, "/v1/stats") || path_is(req, "/v1/rules")) && req->query_len > 0)
            return rlt__http_error(o, 400, flags, NULL,
                                   path_is(req, "/v1/stats") ? "GET /v1/stats takes no parameters"
                                                             : "GET /v1/rules takes no parameters");
        if (path_is(req, "/v1/stats")) return rlt__ui_stats(s, o, flags, now);
        if (path_is(req, "/v1/peek")) return rlt__ui_peek(s, o, rlt__conn_scratch(c), req, &ss, flags, now);
        if (path_is(req, "/v1/rules")) return rlt__ui_rules(s, o, flags);
        rlt__obuf text = {0};
        rlt__report_prometheus(s, &text);
        rlt__report_top_prometheus(s, &ss, &text);
        rlt__http_respond(o, 200, flags, "text/plain; version=0.0.4", NULL,
                          text.data ? text.data : "", text.len);
        rlt__obuf_free(&text);
        return;
    }
    rlt__mcount(&ms->errors, 1);
    rlt__http_error(o, 401, flags, CHALLENGE, "missing or wrong password (Bearer token or Basic)");
}

static size_t http_feed(rlt__conn *c, char *in, size_t len, rlt_ns now)
{
    rlt__srv *s = rlt__conn_srv(c);
    rlt__obuf *o = rlt__conn_out(c);
    size_t off = 0;
    while (off < len) {
        rlt__http_req req;
        int status = 400;
        const char *err = "bad request";
        ssize_t n = rlt__http_parse(in + off, len - off, NULL, &req, &status, &err);
        if (n == RLT__HTTP_PARTIAL) {
            /* A client waiting for "100 Continue" before it sends the body gets it once. */
            if (req.header_len > 0 && req.expect_continue && rlt__conn_state(c) != CONTINUED) {
                rlt__pipe_flush(rlt__conn_pipe(c), s);
                rlt__obuf_put(o, "HTTP/1.1 100 Continue\r\n\r\n", 25);
                rlt__conn_set_state(c, CONTINUED);
            }
            break;
        }
        if (n == RLT__HTTP_ERROR) {
            rlt__pipe_flush(rlt__conn_pipe(c), s);
            rlt__mslot *ms = rlt__mslot_get(&s->metrics);
            rlt__mcount(&ms->errors, 1);
            rlt__http_error(o, status, RLT__HF_CLOSE, NULL, err);
            rlt__conn_close_after(c);
            return len;
        }
        off += (size_t)n;
        rlt__conn_set_state(c, NULL);
        unsigned flags = (req.method == RLT__HTTP_HEAD ? RLT__HF_HEAD : 0) |
                         (!req.keep_alive  ? RLT__HF_CLOSE
                          : req.minor == 0 ? RLT__HF_KEEPALIVE
                                           : 0);
        route(c, &req, flags, now);
        if (!req.keep_alive) {
            rlt__conn_close_after(c);
            return len;
        }
        if (o->overflow) break;
    }
    return off;
}

static void http_refuse(rlt__conn *c, rlt__refusal why, rlt__obuf *out)
{
    (void)c;
    switch (why) {
    case RLT__REFUSE_FULL:
        return rlt__http_error(out, 503, RLT__HF_CLOSE, "Retry-After: 1\r\n",
                               "max number of clients reached");
    case RLT__REFUSE_TIMEOUT:
        return rlt__http_error(out, 408, RLT__HF_CLOSE, NULL, "request not completed in time");
    case RLT__REFUSE_TOO_LARGE:
        return rlt__http_error(out, 413, RLT__HF_CLOSE, NULL, "request too large");
    }
}

const rlt__proto rlt__proto_http = {
    .name = "http",
    .open = NULL,
    .close = NULL,
    .feed = http_feed,
    .refuse = http_refuse,
};
