/* The playground and its live page on ratelimitd's HTTP port (ui.h): the embedded files,
 * /v1/stats, /v1/peek and /v1/rules. */
#include "server/http/ui.h"
#include "server/http/httpin.h"
#include "server/http/reply.h"
#include "server/request/decide.h"
#include "server/envoy/rls.h"
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
    rlt__http_respond(o, 200, flags, "application/json", NULL, body.data ? body.data : "",
                      body.len);
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

/* A name's bytes as /v1/top and /v1/stats write them: printable ASCII as it is, every other
 * byte and '%', '"', '\\' as %XX (upper-case hex), so that any key is valid JSON and renders
 * losslessly. */
static void json_pct(rlt__obuf *o, const char *p, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c >= 0x20 && c < 0x7f && c != '%' && c != '"' && c != '\\') {
            rlt__obuf_put(o, p + i, 1);
        } else {
            char e[3] = {'%', hex[c >> 4], hex[c & 15]};
            rlt__obuf_put(o, e, 3);
        }
    }
}

/* Where target t stands, as RL.PEEK answers it: 200 with its JSON (`key`, `policy` and, when an
 * envoy rule was named, `rule` percent-encoded as /v1/top writes them), or the decision's
 * error. */
static void answer(rlt__srv *s, rlt__obuf *o, unsigned flags, rlt_ns now, const rlt__target *t,
                   const char *key, size_t klen, const char *policy, size_t plen, const char *rule)
{
    char err[300];
    rlt_decision d;
    int st = rlt__decide_peek(s, t->policy_id, t->key, t->klen, now, &d);
    if (st != RLT_OK)
        return rlt__http_error(o, st == RLT_EFULL ? 503 : 400, flags, NULL,
                               rlt__decide_strerror(s, t->policy_id, now, st, err, sizeof err));
    rlt_policy p;
    char text[512] = "";
    if (rlt__registry_policy(&s->reg, t->policy_id, &p) != RLT_OK ||
        rlt_policy_format(&p, text, sizeof text) < 0)
        text[0] = '\0';
    rlt__obuf body = {0};
    rlt__http_put_str(&body, "{\"key\":\"");
    json_pct(&body, key, klen);
    rlt__http_put_str(&body, "\",\"policy\":\"");
    json_pct(&body, policy, plen);
    if (rule != NULL) {
        rlt__http_put_str(&body, "\",\"rule\":\"");
        json_pct(&body, rule, strlen(rule));
    }
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
    rlt__http_respond(o, 200, flags, "application/json", NULL, body.data ? body.data : "",
                      body.len);
    rlt__obuf_free(&body);
}

/* The envoy forms: the rule named by its path, or the one a descriptor matches (as
 * ShouldRateLimit matches it), and the store key (the descriptor's, as rls.c builds it);
 * then "r:PATH" is resolved as RL.PEEK resolves it.  An unknown rule, or a descriptor no rule
 * matches: 404. */
static void peek_rule(rlt__srv *s, rlt__obuf *o, rlt__peek_req *pr, const rlt__session *ss,
                      unsigned flags, rlt_ns now)
{
    char err[400], kbuf[RLT_KEY_MAX], policy[RLT__STR_MAX + 2];
    const char *path = pr->rule;
    if (pr->desclen > 0) {
        const rlt__config *c = rlt__srv_config(s);
        int ri = rlt__config_match(c, pr->domain, pr->dlen, pr->entries, pr->nentries);
        if (ri < 0) {
            snprintf(err, sizeof err,
                     "no rule of domain '%.64s' matches descriptor '%.128s' (GET /v1/rules "
                     "lists the envoy rules)",
                     pr->domain, pr->desc);
            return rlt__http_error(o, 404, flags, NULL, err);
        }
        path = c->rules[ri].path;
        if (pr->rlen > 0 && strcmp(path, pr->rule) != 0) {
            snprintf(err, sizeof err, "descriptor '%.128s' matches rule '%.100s', not '%.64s'",
                     pr->desc, path, pr->rule);
            return rlt__http_error(o, 400, flags, NULL, err);
        }
        const rlt__session bare = {0}; /* the key as RL.PEEK takes it: no tenant prefix yet */
        if (rlt__envoy_key(pr->domain, pr->dlen, pr->entries, pr->nentries, &bare, pr->key,
                           &pr->klen) != RLT_OK)
            return rlt__http_error(o, 400, flags, NULL,
                                   "the descriptor makes a key longer than the store takes");
    }
    int plen = snprintf(policy, sizeof policy, "r:%s", path);
    rlt__target t;
    int st = rlt__target_resolve(s, ss, pr->key, pr->klen, policy, (size_t)plen, false, now, kbuf,
                                 &t, err, sizeof err);
    if (st != RLT_OK) return rlt__http_error(o, st == RLT_ENOENT ? 404 : 400, flags, NULL, err);
    answer(s, o, flags, now, &t, pr->key, pr->klen, policy, (size_t)plen, path);
}

static void peek(rlt__srv *s, rlt__obuf *o, rlt__peek_req *pr, const rlt__http_req *req,
                 const rlt__session *ss, unsigned flags, rlt_ns now)
{
    rlt__check_req cr;
    char err[300], kbuf[RLT_KEY_MAX];
    const char *q = req->query ? req->query : "";
    if (rlt__peek_parse(q, req->query_len, pr, err, sizeof err) != RLT_OK)
        return rlt__http_error(o, 400, flags, NULL, err);
    if (pr->envoy) return peek_rule(s, o, pr, ss, flags, now);
    if (rlt__check_parse(q, req->query_len, &cr, err, sizeof err) != RLT_OK)
        return rlt__http_error(o, 400, flags, NULL, err);
    if (cr.has_cost || cr.reserve || cr.reservation || cr.timeout_ms || cr.deny_status ||
        cr.nlimits > 1)
        return rlt__http_error(o, 400, flags, NULL,
                               "GET /v1/peek takes key and policy only: a peek charges nothing");
    rlt__target t;
    if (rlt__target_resolve(s, ss, cr.key, cr.klen, cr.policy, cr.plen, false, now, kbuf, &t, err,
                            sizeof err) != RLT_OK)
        return rlt__http_error(o, 400, flags, NULL, err);
    answer(s, o, flags, now, &t, cr.key, cr.klen, cr.policy, cr.plen, NULL);
}

void rlt__ui_peek(rlt__srv *s, rlt__obuf *o, rlt__scratch *sc, const rlt__http_req *req,
                  const rlt__session *ss, unsigned flags, rlt_ns now)
{
    size_t mark = rlt__scratch_mark(sc);
    rlt__peek_req *pr = rlt__scratch_alloc(sc, sizeof *pr);
    if (pr == NULL)
        rlt__http_error(o, 503, flags, NULL, "out of scratch space for the request");
    else
        peek(s, o, pr, req, ss, flags, now);
    rlt__scratch_release(sc, mark);
}

/* One descriptor level: every rule under it, with the entries that lead to it. */
static void rules_of(rlt__obuf *o, const rlt__config *c, const char *domain, const rlt__desc *d,
                     size_t n, const rlt__desc **path, size_t depth, size_t *k)
{
    for (size_t i = 0; i < n && depth < 64; i++) {
        path[depth] = &d[i];
        if (d[i].rule >= 0) {
            const rlt__rule *r = &c->rules[d[i].rule];
            char text[512] = "";
            if (!r->unlimited && !r->block_all &&
                rlt_policy_format(&r->policy, text, sizeof text) < 0)
                text[0] = '\0';
            rlt__http_put_str(o, (*k)++ ? ",{\"rule\":\"" : "{\"rule\":\"");
            json_str(o, r->path, strlen(r->path));
            rlt__http_put_str(o, "\",\"policy\":\"r:");
            json_str(o, r->path, strlen(r->path));
            rlt__http_put_str(o, "\",\"domain\":\"");
            json_str(o, domain, strlen(domain));
            rlt__http_put_str(o, "\",\"descriptor\":[");
            for (size_t j = 0; j <= depth; j++) {
                rlt__http_put_str(o, j ? ",{\"key\":\"" : "{\"key\":\"");
                json_str(o, path[j]->key, strlen(path[j]->key));
                if (path[j]->value == NULL) {
                    rlt__http_put_str(o, "\",\"value\":null}");
                } else {
                    rlt__http_put_str(o, "\",\"value\":\"");
                    json_str(o, path[j]->value, strlen(path[j]->value));
                    rlt__http_put_str(o, "\"}");
                }
            }
            rlt__http_put_str(o, "],\"policy_text\":\"");
            json_str(o, text, strlen(text));
            rlt__http_put_str(o, r->unlimited   ? "\",\"kind\":\"unlimited\"}"
                                 : r->block_all ? "\",\"kind\":\"deny_all\"}"
                                 : r->shadow    ? "\",\"kind\":\"shadow\"}"
                                                : "\",\"kind\":\"limit\"}");
        }
        rules_of(o, c, domain, d[i].children, d[i].nchildren, path, depth + 1, k);
    }
}

/* The domains' quota bucket rules (RLQS), in the config's order, and each domain's answer to
 * a BucketId none matches. */
static void quota_rules(rlt__obuf *o, const rlt__config *c)
{
    static const char *const fails[] = {"default", "closed", "open", "local"};
    size_t k = 0;
    rlt__http_put_str(o, "],\"quota_buckets\":[");
    for (size_t i = 0; i < c->ndomains; i++) {
        const rlt__domain *d = &c->domains[i];
        for (size_t j = 0; j < d->nqrules; j++) {
            const rlt__qrule *r = &d->qrules[j];
            rlt__http_put_str(o, k++ ? ",{\"domain\":\"" : "{\"domain\":\"");
            json_str(o, d->name, strlen(d->name));
            rlt__http_put_str(o, "\",\"rule\":");
            rlt__http_put_num(o, (int64_t)j);
            rlt__http_put_str(o, ",\"match\":[");
            for (size_t m = 0; m < r->nmatch; m++) {
                rlt__http_put_str(o, m ? ",{\"key\":\"" : "{\"key\":\"");
                json_str(o, r->keys[m], strlen(r->keys[m]));
                rlt__http_put_str(o, "\",\"value\":\"");
                json_str(o, r->values[m], strlen(r->values[m]));
                rlt__http_put_str(o, "\"}");
            }
            rlt__http_put_str(o, "],\"kind\":\"");
            rlt__http_put_str(o, r->kind == RLT__QUOTA_ALLOW_ALL  ? "allow_all"
                                 : r->kind == RLT__QUOTA_DENY_ALL ? "deny_all"
                                                                  : "policy");
            rlt__http_put_str(o, "\",\"policy_text\":\"");
            json_str(o, r->text, strlen(r->text));
            rlt__http_put_str(o, r->shadow ? "\",\"shadow\":true,\"fail\":\""
                                           : "\",\"shadow\":false,\"fail\":\"");
            rlt__http_put_str(o, fails[r->fail >= 0 && r->fail <= 3 ? r->fail : 0]);
            rlt__http_put_str(o, "\",\"ttl_ms\":");
            rlt__http_put_num(o, (r->ttl ? r->ttl : d->quota_ttl) / RLT_NS_PER_MS);
            rlt__http_put_str(o, ",\"line\":");
            rlt__http_put_num(o, r->line);
            rlt__http_put_str(o, "}");
        }
    }
    rlt__http_put_str(o, "],\"quota_defaults\":[");
    k = 0;
    for (size_t i = 0; i < c->ndomains; i++) {
        const rlt__domain *d = &c->domains[i];
        if (d->nqrules == 0 && d->quota_default == RLT__QUOTA_ALLOW_ALL && d->quota_ttl == 0)
            continue;
        rlt__http_put_str(o, k++ ? ",{\"domain\":\"" : "{\"domain\":\"");
        json_str(o, d->name, strlen(d->name));
        rlt__http_put_str(o, d->quota_default == RLT__QUOTA_DENY_ALL
                                 ? "\",\"kind\":\"deny_all\",\"ttl_ms\":"
                                 : "\",\"kind\":\"allow_all\",\"ttl_ms\":");
        rlt__http_put_num(o, d->quota_ttl / RLT_NS_PER_MS);
        rlt__http_put_str(o, "}");
    }
}

void rlt__ui_rules(rlt__srv *s, rlt__obuf *o, unsigned flags)
{
    const rlt__config *c = rlt__srv_config(s);
    const rlt__desc *path[64];
    size_t k = 0;
    rlt__obuf body = {0};
    rlt__http_put_str(&body, "{\"rules\":[");
    for (size_t i = 0; i < c->ndomains; i++)
        rules_of(&body, c, c->domains[i].name, c->domains[i].descs, c->domains[i].ndescs, path, 0,
                 &k);
    quota_rules(&body, c);
    rlt__http_put_str(&body, "]}\n");
    rlt__http_respond(o, 200, flags, "application/json", NULL, body.data, body.len);
    rlt__obuf_free(&body);
}
