/* The playground and its live page on ratelimitd's HTTP port (ui.h): the embedded files,
 * /v1/stats and /v1/peek. */
#include "server/http/ui.h"
#include "server/http/httpin.h"
#include "server/http/reply.h"
#include "server/request/decide.h"
#include "server/request/report.h"
#include "server/request/srv.h"

#include <stdio.h>
#include <string.h>

const rlt__webasset *rlt__ui_find(rlt__srv *s, const rlt__http_req *req)
{
    if (!rlt__srv_config(s)->set.ui) return NULL;
    return rlt__webasset_find(req->path, req->path_len);
}

void rlt__ui_asset(rlt__obuf *o, const rlt__http_req *req, const rlt__webasset *a, unsigned flags)
{
    char hdr[RLT__WEBASSET_HEADERS];
    rlt__webasset_headers(a, hdr, sizeof hdr);
    const rlt__http_header *inm = rlt__http_find(req, "If-None-Match");
    bool fresh = inm != NULL && rlt__webasset_fresh(a, inm->value, inm->vlen);
    rlt__http_respond(o, fresh ? 304 : 200, fresh ? flags | RLT__HF_HEAD : flags, a->type, hdr,
                      (const char *)a->data, a->len);
}

void rlt__ui_stats(rlt__srv *s, rlt__obuf *o, unsigned flags, rlt_ns now)
{
    rlt__obuf body = {0};
    rlt__report_stats_json(s, now, &body);
    rlt__http_respond(o, 200, flags, "application/json", "Cache-Control: no-store\r\n",
                      body.data ? body.data : "", body.len);
    rlt__obuf_free(&body);
}

/* A JSON string's contents: quotes, backslashes and control bytes escaped (other bytes as
 * they are: keys are the client's own bytes, and the page shows them). */
static void json_str(rlt__obuf *o, const char *p, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            rlt__obuf_put(o, e, 2);
        } else if (c < 0x20 || c == 0x7f) {
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            rlt__obuf_put(o, e, 6);
        } else {
            rlt__obuf_put(o, p + i, 1);
        }
    }
}

void rlt__ui_peek(rlt__srv *s, rlt__obuf *o, const rlt__http_req *req, const rlt__session *ss,
                  unsigned flags, rlt_ns now)
{
    rlt__check_req cr;
    char err[300], kbuf[RLT_KEY_MAX];
    rlt__target t;
    if (rlt__check_parse(req->query ? req->query : "", req->query_len, &cr, err, sizeof err) !=
        RLT_OK)
        return rlt__http_error(o, 400, flags, NULL, err);
    if (cr.has_cost || cr.reserve || cr.reservation || cr.timeout_ms || cr.deny_status)
        return rlt__http_error(o, 400, flags, NULL,
                               "GET /v1/peek takes key and policy only: a peek charges nothing");
    if (rlt__target_resolve(s, ss, cr.key, cr.klen, cr.policy, cr.plen, false, now, kbuf, &t, err,
                            sizeof err) != RLT_OK)
        return rlt__http_error(o, 400, flags, NULL, err);
    rlt_decision d;
    int st = rlt__decide_peek(s, t.policy_id, t.key, t.klen, now, &d);
    if (st != RLT_OK)
        return rlt__http_error(o, st == RLT_EFULL ? 503 : 400, flags, NULL,
                               rlt__decide_strerror(s, t.policy_id, now, st, err, sizeof err));
    rlt_policy p;
    char text[512] = "";
    if (rlt__registry_policy(&s->reg, t.policy_id, &p) != RLT_OK ||
        rlt_policy_format(&p, text, sizeof text) < 0)
        text[0] = '\0';
    rlt__obuf body = {0};
    rlt__http_put_str(&body, "{\"key\":\"");
    json_str(&body, cr.key, cr.klen);
    rlt__http_put_str(&body, "\",\"policy\":\"");
    json_str(&body, cr.policy, cr.plen);
    rlt__http_put_str(&body, "\",\"policy_text\":\"");
    json_str(&body, text, strlen(text));
    rlt__http_put_str(&body, d.allowed ? "\",\"allowed\":true" : "\",\"allowed\":false");
    const char *names[] = {"limit", "remaining", "retry_after_ms", "reset_after_ms", "delay_ms"};
    int64_t v[] = {d.limit, d.remaining, d.allowed ? 0 : rlt_retry_after_ms(d.retry_after),
                   rlt_retry_after_ms(d.reset_after), rlt_retry_after_ms(d.delay)};
    for (size_t i = 0; i < 5; i++) {
        rlt__http_put_str(&body, ",\"");
        rlt__http_put_str(&body, names[i]);
        rlt__http_put_str(&body, "\":");
        rlt__http_put_num(&body, v[i]);
    }
    rlt__http_put_str(&body, "}\n");
    rlt__http_respond(o, 200, flags, "application/json", "Cache-Control: no-store\r\n",
                      body.data ? body.data : "", body.len);
    rlt__obuf_free(&body);
}
