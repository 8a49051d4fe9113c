/* POST /v1/mreserve and POST /v1/msettle (limits.h): one reservation over up to 16 limits.
 *
 *   /v1/mreserve {"estimate": {"in": 1200, "out": 4096}, "timeout_ms": 60000,
 *                 "limits": [{"key": "user:bob", "policy": "user-tokens", "cost": "in+out"}, ...]}
 *   -> {"allowed": true, "reservation": "<16 hex>", "refused": -1, "limit": .., "remaining": ..,
 *       "retry_after_ms": .., "reset_after_ms": .., "limits": [{"limit", "remaining",
 *       "reset_after_ms"}, ...]}   (429 when denied, "reservation": null)
 *   /v1/msettle {"reservation": "<16 hex>", "usage": {"in": 1000, "out": 350}, "partial": false,
 *                "limits": [{"key": .., "policy": ..}, ...]}
 *   -> the same fields after it, each limit with "charged".
 * A usage is a JSON object of counts or the text form ("in=1000,out=350"). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "ratelimit/budget.h"
#include "server/http/limits.h"
#include "server/http/reply.h"
#include "server/request/decide.h"
#include "server/request/limits.h"
#include "server/request/srv.h"

/* A usage from a JSON object of integer counts, or from its text form.  RLT_OK, or the code
 * with a message in err. */
static int usage_of(json_t *j, const char *what, rlt_usage *u, char *err, size_t errlen)
{
    if (json_is_string(j))
        return rlt__limit_usage(json_string_value(j), json_string_length(j), what, u, err, errlen);
    if (!json_is_object(j)) {
        snprintf(err, errlen, "%s must be an object of counts, e.g. {\"in\": 1200, \"out\": 4096}",
                 what);
        return RLT_EINVAL;
    }
    char text[RLT_USAGE_NAMES * (RLT_USAGE_NAME_MAX + 24) + 1];
    size_t n = 0;
    const char *name;
    json_t *v;
    json_object_foreach(j, name, v)
    {
        if (!json_is_integer(v) || strlen(name) >= RLT_USAGE_NAME_MAX ||
            json_object_size(j) > RLT_USAGE_NAMES) {
            snprintf(err, errlen,
                     "%s must be named counts like {\"in\": 1200} (counts >= 0, "
                     "names [a-z][a-z0-9_]*, at most 8)",
                     what);
            return RLT_EINVAL;
        }
        n += (size_t)snprintf(text + n, sizeof text - n, "%s%s=%lld", n ? "," : "", name,
                              (long long)json_integer_value(v));
    }
    if (n == 0) {
        memset(u, 0, sizeof *u);
        return RLT_OK;
    }
    return rlt__limit_usage(text, n, what, u, err, errlen);
}

static const char *str(json_t *o, const char *k, size_t *len)
{
    json_t *v = json_object_get(o, k);
    if (!json_is_string(v)) return NULL;
    *len = json_string_length(v);
    return json_string_value(v);
}

static void reply(rlt__obuf *o, unsigned flags, rlt__srv *s, const rlt_limit *l,
                  char (*names)[RLT_NAME_MAX + 1], size_t n, const rlt_decision *d,
                  const rlt_decision *each, const int64_t *charged, const char *rid, int refused)
{
    char hdr[4096];
    size_t hl = 0;
    json_t *body = json_object(), *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        rlt_policy p;
        if (hl < sizeof hdr && rlt__registry_policy(&s->reg, l[i].policy, &p) == RLT_OK) {
            int k =
                rlt_format_headers(hdr + hl, sizeof hdr - hl, names[i], &p, &each[i], RLT_HDR_IETF);
            if (k > 0) hl += (size_t)k;
        }
        json_t *e = json_object();
        json_object_set_new(e, "key", json_stringn((const char *)l[i].key, l[i].klen));
        json_object_set_new(e, "limit", json_integer(each[i].limit));
        json_object_set_new(e, "remaining", json_integer(each[i].remaining));
        json_object_set_new(e, "reset_after_ms",
                            json_integer(rlt_retry_after_ms(each[i].reset_after)));
        if (charged) json_object_set_new(e, "charged", json_integer(charged[i]));
        json_array_append_new(arr, e);
    }
    hdr[hl < sizeof hdr ? hl : 0] = '\0';
    json_object_set_new(body, "allowed", json_boolean(d->allowed));
    if (!charged) {
        json_object_set_new(body, "reservation", rid ? json_string(rid) : json_null());
        json_object_set_new(body, "refused", json_integer(refused));
    } else {
        json_object_set_new(body, "settled", json_true());
    }
    json_object_set_new(body, "limit", json_integer(d->limit));
    json_object_set_new(body, "remaining", json_integer(d->remaining));
    json_object_set_new(body, "retry_after_ms",
                        json_integer(d->allowed ? 0 : rlt_retry_after_ms(d->retry_after)));
    json_object_set_new(body, "reset_after_ms", json_integer(rlt_retry_after_ms(d->reset_after)));
    json_object_set_new(body, "limits", arr);
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    size_t tl = text ? strlen(text) : 0;
    int code = charged || d->allowed ? 200 : 429;
    rlt__http_respond(o, code, flags, "application/json", hdr, text ? text : "", tl);
    free(text);
}

static int status_of(const rlt__srv *s, int st)
{
    return !rlt__decide_can_reserve_limits(s)                             ? 501
           : st == RLT_ENOENT                                             ? 404
           : st == RLT_EFULL || st == RLT_EBACKEND || st == RLT_ETIMEDOUT ? 503
                                                                          : 400;
}

static void budget(rlt__conn *c, rlt__scratch *sc, const rlt__http_req *req,
                   const rlt__session *ss, unsigned flags, rlt_ns now, bool settle)
{
    rlt__srv *s = rlt__conn_srv(c);
    rlt__obuf *o = rlt__conn_out(c);
    char err[300];
    json_error_t jerr;
    json_t *root = json_loadb(req->body ? req->body : "", req->body_len, 0, &jerr);
    json_t *lims = root ? json_object_get(root, "limits") : NULL;
    const char *what = settle ? "POST /v1/msettle takes a JSON object: reservation, usage, "
                                "limits [{key, policy}] in the reservation's order, partial"
                              : "POST /v1/mreserve takes a JSON object: estimate, limits "
                                "[{key, policy, cost}] (1 to 16), timeout_ms";
    if (!json_is_object(root) || !json_is_array(lims) || json_array_size(lims) == 0 ||
        json_array_size(lims) > RLT_BUDGET_LIMITS) {
        json_decref(root);
        return rlt__http_error(o, 400, flags, NULL, what);
    }
    size_t n = json_array_size(lims);
    char(*keys)[RLT_KEY_MAX] = rlt__scratch_alloc(sc, n * RLT_KEY_MAX);
    if (keys == NULL) {
        json_decref(root);
        return rlt__http_error(o, 503, flags, NULL, "out of scratch space for the keys");
    }
    rlt_limit l[RLT_BUDGET_LIMITS];
    char names[RLT_BUDGET_LIMITS][RLT_NAME_MAX + 1];
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(lims, i);
        size_t kl = 0, pl = 0, wl = 0;
        const char *k = str(e, "key", &kl), *p = str(e, "policy", &pl),
                   *w = settle ? "" : str(e, "cost", &wl);
        char msg[240];
        if (!k || !p || !w) {
            json_decref(root);
            return rlt__http_error(o, 400, flags, NULL, what);
        }
        if (rlt__limit_resolve(s, ss, k, kl, p, pl, settle ? NULL : w, wl, now, keys[i], &l[i], msg,
                               sizeof msg) != RLT_OK) {
            snprintf(err, sizeof err, "limit %zu: %s", i + 1, msg);
            json_decref(root);
            return rlt__http_error(o, 400, flags, NULL, err);
        }
        if (l[i].key != keys[i]) { /* it points into the JSON, freed before the decision */
            memcpy(keys[i], l[i].key, l[i].klen);
            l[i].key = keys[i];
        }
        if (memchr(p, ':', pl) != NULL || pl > RLT_NAME_MAX) pl = 0;
        snprintf(names[i], sizeof names[i], "%.*s", (int)(pl ? pl : 6), pl ? p : "inline");
    }
    rlt_usage u;
    memset(&u, 0, sizeof u);
    json_t *uj = json_object_get(root, settle ? "usage" : "estimate");
    if ((uj || !settle) &&
        usage_of(uj, settle ? "usage" : "estimate", &u, err, sizeof err) != RLT_OK) {
        json_decref(root);
        return rlt__http_error(o, 400, flags, NULL, err);
    }
    rlt_decision d, each[RLT_BUDGET_LIMITS];
    int st;
    if (!settle) {
        json_t *tj = json_object_get(root, "timeout_ms");
        int64_t ms = json_is_integer(tj) ? json_integer_value(tj) : 0;
        rlt_ns timeout = (tj && !json_is_integer(tj)) || ms < 0
                             ? -1
                             : rlt__decide_reserve_timeout(s, ms, err, sizeof err);
        json_decref(root);
        if (timeout < 0) return rlt__http_error(o, 400, flags, NULL, "timeout_ms out of range");
        uint64_t rid = 0;
        int refused = -1;
        st = rlt__decide_reserve_limits(s, rlt__session_holder(ss), l, n, &u, now, timeout, &d,
                                        each, &refused, &rid);
        if (st != RLT_OK)
            return rlt__http_error(o, status_of(s, st), flags, NULL,
                                   rlt__limits_strerror(s, st, false));
        char hex[RLT__RESERVATION_HEX + 1];
        if (rid) rlt__reservation_format(rid, hex);
        return reply(o, flags, s, l, names, n, &d, each, NULL, rid ? hex : NULL, refused);
    }
    size_t rl = 0;
    const char *rs = str(root, "reservation", &rl);
    uint64_t rid;
    json_t *pj = json_object_get(root, "partial");
    bool partial = json_is_true(pj);
    if (!rs || !rlt__reservation_parse(rs, rl, &rid) || (pj && !json_is_boolean(pj))) {
        json_decref(root);
        return rlt__http_error(o, 400, flags, NULL, what);
    }
    json_decref(root);
    rlt_check k[RLT_BUDGET_LIMITS];
    for (size_t i = 0; i < n; i++)
        k[i] = (rlt_check){l[i].policy, l[i].key, l[i].klen, 0};
    int64_t charged[RLT_BUDGET_LIMITS];
    st = rlt__decide_settle_limits(s, rid, k, n, &u, !partial, now, &d, each, charged);
    if (st != RLT_OK)
        return rlt__http_error(o, status_of(s, st), flags, NULL, rlt__limits_strerror(s, st, true));
    reply(o, flags, s, l, names, n, &d, each, charged, NULL, -1);
}

void rlt__http_budget(rlt__conn *c, const rlt__http_req *req, const rlt__session *ss,
                      unsigned flags, rlt_ns now, bool settle)
{
    rlt__scratch *sc = rlt__conn_scratch(c);
    size_t mark = rlt__scratch_mark(sc);
    budget(c, sc, req, ss, flags, now, settle);
    rlt__scratch_release(sc, mark);
}
