/* Inputs of ratelimitd's HTTP endpoints, apart from the connection so that they can be
 * unit-tested and fuzzed: the /v1/check query string and envoyproxy/ratelimit's /json body
 * (parsed with jansson; rls.c decides it and renders the proto3-JSON reply). */
#include "server/http/httpin.h"
#include "core/text.h"

#include "server/request/srv.h"

#include "ratelimit/adaptive.h"

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int hexv(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int rlt__url_decode(const char *s, size_t n, char *out, size_t cap, size_t *len)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '+')
            c = ' ';
        else if (c == '%') {
            if (i + 2 >= n) return RLT_EPARSE;
            int h = hexv(s[i + 1]), l = hexv(s[i + 2]);
            if (h < 0 || l < 0) return RLT_EPARSE;
            c = (char)(h * 16 + l);
            i += 2;
        }
        if (out != NULL) { /* NULL: only validate */
            if (o == cap) return RLT_ENOSPC;
            out[o] = c;
        }
        o++;
    }
    *len = o;
    return RLT_OK;
}

/* A parameter that may be given once: decodes val[0..vl) into out[0..cap) unless `given`.
 * True when it was not given before and decodes to 1..cap bytes (*len). */
static bool decode_once(bool given, const char *val, size_t vl, char *out, size_t cap, size_t *len)
{
    return !given && rlt__url_decode(val, vl, out, cap, len) == RLT_OK && *len > 0;
}

/* Splits "K=V,K=V" (r->desc) into r->entries. */
static int split_entries(rlt__peek_req *r, char *err, size_t errlen)
{
    for (size_t i = 0; i <= r->desclen;) {
        size_t end = i;
        while (end < r->desclen && r->desc[end] != ',')
            end++;
        const char *eq = memchr(r->desc + i, '=', end - i);
        if (eq == NULL || eq == r->desc + i || r->nentries == RLT__ENVOY_MAX_ENTRIES) {
            snprintf(err, errlen,
                     "descriptor: KEY=VALUE entries separated by ',' (at most %d), each with a "
                     "key",
                     RLT__ENVOY_MAX_ENTRIES);
            return RLT_EINVAL;
        }
        r->entries[r->nentries++] = (rlt__entry){.key = r->desc + i,
                                                 .klen = (size_t)(eq - (r->desc + i)),
                                                 .value = eq + 1,
                                                 .vlen = (size_t)(r->desc + end - (eq + 1))};
        i = end + 1;
    }
    return RLT_OK;
}

int rlt__peek_parse(const char *q, size_t len, rlt__peek_req *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    bool policy = false, bad_key = false;
    const char *other = NULL; /* the first other parameter: the policy form's to judge */
    size_t olen = 0;
    for (size_t i = 0; i < len;) {
        size_t end = i, eqp;
        while (end < len && q[end] != '&')
            end++;
        for (eqp = i; eqp < end && q[eqp] != '=';)
            eqp++;
        const char *name = q + i, *val = eqp < end ? q + eqp + 1 : q + end;
        size_t nl = eqp - i, vl = eqp < end ? end - eqp - 1 : 0;
        struct {
            const char *name;
            char *out;
            size_t cap, *len;
        } const ps[] = {{"key", r->key, RLT_KEY_MAX, &r->klen},
                        {"rule", r->rule, sizeof r->rule - 1, &r->rlen},
                        {"domain", r->domain, sizeof r->domain - 1, &r->dlen},
                        {"descriptor", r->desc, RLT_KEY_MAX, &r->desclen}};
        size_t k = 0;
        while (k < 4 && (strlen(ps[k].name) != nl || memcmp(ps[k].name, name, nl) != 0))
            k++;
        if (nl == 6 && memcmp(name, "policy", 6) == 0) {
            policy = true;
        } else if (k == 4 && end > i) {
            if (other == NULL) other = name, olen = nl;
        } else if (k < 4 &&
                   !decode_once(*ps[k].len > 0, val, vl, ps[k].out, ps[k].cap, ps[k].len)) {
            snprintf(err, errlen, "%s must be given once, 1..%zu bytes (percent-encoded)",
                     ps[k].name, ps[k].cap);
            if (k > 0) return RLT_EINVAL;
            bad_key = true; /* the policy form's key is rlt__check_parse's to judge */
        }
        if (k > 0 && k < 4) r->envoy = true;
        i = end + 1;
    }
    r->key[r->klen] = r->rule[r->rlen] = r->domain[r->dlen] = r->desc[r->desclen] = '\0';
    if (!r->envoy && other != NULL) {
        snprintf(err, errlen,
                 "unknown parameter '%.*s': a peek takes key and policy, or an envoy rule's "
                 "rule, key, domain and descriptor (a peek charges nothing)",
                 (int)(olen > 32 ? 32 : olen), other);
        return RLT_EINVAL;
    }
    if (!r->envoy) return RLT_OK;
    if (bad_key) return RLT_EINVAL;
    if (other != NULL) {
        snprintf(err, errlen,
                 "unknown parameter '%.*s': an envoy rule's peek takes rule, key, domain and "
                 "descriptor (a peek charges nothing)",
                 (int)(olen > 32 ? 32 : olen), other);
        return RLT_EINVAL;
    }
    const char *why =
        policy ? "policy= names no rule: give rule= or a descriptor, not both"
        : r->desclen > 0 && r->dlen == 0 ? "descriptor needs its domain="
        : r->desclen > 0 && r->klen > 0
            ? "descriptor makes the key: give key= or descriptor=, not both"
        : r->desclen == 0 && r->dlen > 0 ? "domain needs a descriptor=K=V[,K=V...]"
        : r->desclen == 0 && r->klen == 0
            ? "rule needs key= (the store's key, as RL.PEEK takes it) or domain= and descriptor="
            : NULL;
    if (why != NULL) {
        snprintf(err, errlen, "%s", why);
        return RLT_EINVAL;
    }
    return r->desclen > 0 ? split_entries(r, err, errlen) : RLT_OK;
}

int rlt__check_parse(const char *q, size_t len, rlt__check_req *r, char *err, size_t errlen)
{
    memset(r, 0, offsetof(rlt__check_req, more)); /* more[] is written as it is used */
    r->cost = 1;
    r->klass = RLT_CLASS_DEFAULT;
    r->class_reserve = -1; /* none given: the policy's reserve= if class= is (below) */
    bool have_key = false, have_cost = false, have_addr = false, seen_class = false,
         seen_reserve = false;
    char addr[64];
    size_t alen = 0, np = 0; /* np: policies given */
    int64_t prefix = 0;      /* before any policy: every policy's */
    int64_t pfx[RLT__CHECK_MAX_LIMITS] = {0};
    size_t i = 0;
    while (i < len) {
        size_t end = i;
        while (end < len && q[end] != '&')
            end++;
        size_t eqp = i;
        while (eqp < end && q[eqp] != '=')
            eqp++;
        const char *name = q + i;
        size_t nl = eqp - i;
        const char *val = eqp < end ? q + eqp + 1 : q + end;
        size_t vl = eqp < end ? end - eqp - 1 : 0;
        size_t ignored;
        if (rlt__url_decode(name, nl, NULL, 0, &ignored) == RLT_EPARSE ||
            rlt__url_decode(val, vl, NULL, 0, &ignored) == RLT_EPARSE) {
            snprintf(err, errlen,
                     "bad percent-encoding in parameter '%.*s' (%% must be followed "
                     "by two hex digits)",
                     (int)(nl > 32 ? 32 : nl), name);
            return RLT_EINVAL;
        }
        if (nl == 0 && vl == 0 && end == eqp) {
            /* an empty piece ("a=1&&b=2", a trailing '&'): nothing */
        } else if (nl == 3 && memcmp(name, "key", 3) == 0) {
            if (!decode_once(have_key, val, vl, r->key, RLT_KEY_MAX, &r->klen)) {
                snprintf(err, errlen, "key must be given once, 1..%d bytes", RLT_KEY_MAX);
                return RLT_EINVAL;
            }
            have_key = true;
        } else if (nl == 4 && memcmp(name, "addr", 4) == 0) {
            if (!decode_once(have_addr, val, vl, addr, sizeof addr - 1, &alen)) {
                snprintf(err, errlen, "addr must be given once, an IPv4 or IPv6 address");
                return RLT_EINVAL;
            }
            have_addr = true;
        } else if (nl == 6 && memcmp(name, "prefix", 6) == 0) {
            char num[8];
            size_t d;
            int64_t *to = np == 0 ? &prefix : &pfx[np - 1];
            if (!decode_once(*to != 0, val, vl, num, sizeof num, &d) ||
                !rlt__parse_i64(num, d, to) || *to < 32 || *to > 128) {
                snprintf(err, errlen,
                         "prefix must be 32..128, given once before any policy (every "
                         "policy's) and once after each policy (that policy's)");
                return RLT_EINVAL;
            }
        } else if (nl == 6 && memcmp(name, "policy", 6) == 0) {
            /* the count first: more[np - 1] exists only below the maximum */
            char *pol = np == 0 || np == RLT__CHECK_MAX_LIMITS ? r->policy : r->more[np - 1].policy;
            size_t *plen = np == 0 || np == RLT__CHECK_MAX_LIMITS ? &r->plen : &r->more[np - 1].plen;
            if (np == RLT__CHECK_MAX_LIMITS ||
                !decode_once(false, val, vl, pol, sizeof r->policy - 1, plen)) {
                snprintf(err, errlen, "policy must be 1..%zu bytes, at most %d policies",
                         sizeof r->policy - 1, RLT__CHECK_MAX_LIMITS);
                return RLT_EINVAL;
            }
            pol[*plen] = '\0';
            np++;
        } else if (nl == 4 && memcmp(name, "cost", 4) == 0) {
            char num[32];
            size_t d;
            if (!decode_once(have_cost, val, vl, num, sizeof num, &d) ||
                !rlt__parse_i64(num, d, &r->cost) || r->cost < 0) {
                snprintf(err, errlen, "cost must be given once, an integer >= 0");
                return RLT_EINVAL;
            }
            have_cost = true;
            r->has_cost = true;
        } else if (nl == 7 && memcmp(name, "reserve", 7) == 0) {
            if (vl != 1 || (val[0] != '0' && val[0] != '1')) {
                snprintf(err, errlen, "reserve must be 0 or 1");
                return RLT_EINVAL;
            }
            r->reserve = val[0] == '1';
        } else if (nl == 10 && memcmp(name, "timeout_ms", 10) == 0) {
            char num[32];
            size_t d;
            if (!decode_once(r->timeout_ms != 0, val, vl, num, sizeof num, &d) ||
                !rlt__parse_i64(num, d, &r->timeout_ms) || r->timeout_ms < 1 ||
                r->timeout_ms > 86400000) {
                snprintf(err, errlen, "timeout_ms must be given once, 1..86400000");
                return RLT_EINVAL;
            }
        } else if (nl == 11 && memcmp(name, "reservation", 11) == 0) {
            if (r->reservation != 0 || !rlt__reservation_parse(val, vl, &r->reservation)) {
                snprintf(err, errlen,
                         "reservation must be given once: the id a reservation "
                         "returned (1 to 16 hex digits)");
                return RLT_EINVAL;
            }
        } else if (nl == 5 && memcmp(name, "class", 5) == 0) {
            rlt_class c;
            if (seen_class || rlt_class_parse(val, vl, &c) != RLT_OK) {
                snprintf(err, errlen, "class must be given once: critical, default or sheddable");
                return RLT_EINVAL;
            }
            seen_class = true;
            r->klass = (int)c;
        } else if (nl == 13 && memcmp(name, "class_reserve", 13) == 0) {
            char num[8];
            size_t d;
            int64_t v = -1;
            if (!decode_once(seen_reserve, val, vl, num, sizeof num, &d) ||
                !rlt__parse_i64(num, d, &v) || v < 0 || v > 100) {
                snprintf(err, errlen, "class_reserve must be given once, a percentage 0..100");
                return RLT_EINVAL;
            }
            seen_reserve = true;
            r->class_reserve = (int)v;
        } else if (nl == 11 && memcmp(name, "deny_status", 11) == 0) {
            /* nginx's auth_request denies only on 401/403: a proxy in front asks for 403. */
            char num[8];
            size_t d;
            int64_t v = 0;
            if (!decode_once(r->deny_status != 0, val, vl, num, sizeof num, &d) ||
                !rlt__parse_i64(num, d, &v) || (v != 403 && v != 429)) {
                snprintf(err, errlen, "deny_status must be given once, 403 or 429");
                return RLT_EINVAL;
            }
            r->deny_status = (int)v;
        } else {
            snprintf(err, errlen,
                     "unknown parameter '%.*s' (key, addr, prefix, policy, cost, deny_status, "
                     "reserve, timeout_ms, reservation, class, class_reserve)",
                     (int)(nl > 32 ? 32 : nl), name);
            return RLT_EINVAL;
        }
        i = end + 1;
    }
    if (r->class_reserve < 0 && !seen_class) r->class_reserve = 0;
    bool any_prefix = prefix != 0;
    for (size_t j = 0; j < np; j++)
        any_prefix |= pfx[j] != 0;
    if (any_prefix && !have_addr) {
        snprintf(err, errlen, "prefix needs addr");
        return RLT_EINVAL;
    }
    if (!have_key && !have_addr) {
        snprintf(err, errlen, "missing key parameter (or addr)");
        return RLT_EINVAL;
    }
    r->nlimits = np > 1 ? np : 1;
    /* The others' keys first: the first limit's is made in place of the key given. */
    for (size_t j = 1; j < r->nlimits; j++) {
        rlt__check_limit *l = &r->more[j - 1];
        if (!have_addr) {
            memcpy(l->key, r->key, r->klen);
            l->klen = r->klen;
        } else if (rlt__key_with_addr(r->key, r->klen, addr, alen,
                                      (int)(pfx[j] ? pfx[j] : prefix), l->key, &l->klen, err,
                                      errlen) != RLT_OK) {
            return RLT_EINVAL;
        }
        l->key[l->klen] = '\0';
    }
    if (have_addr) {
        char k[RLT_KEY_MAX];
        size_t kl;
        if (rlt__key_with_addr(r->key, r->klen, addr, alen, (int)(pfx[0] ? pfx[0] : prefix), k,
                               &kl, err, errlen) != RLT_OK)
            return RLT_EINVAL;
        memcpy(r->key, k, kl);
        r->klen = kl;
        r->key[kl] = '\0';
    }
    if (np == 0) {
        strcpy(r->policy, "default");
        r->plen = 7;
    }
    return RLT_OK;
}

/* ---- envoy /json --------------------------------------------------------------------- */

static int bad(char *err, size_t errlen, const char *msg)
{
    snprintf(err, errlen, "%s", msg);
    return RLT_EINVAL;
}

/* An integer field of proto3 JSON: a number, or (uint64) a string of digits. */
static bool json_u64(json_t *j, int64_t max, int64_t *out)
{
    if (json_is_integer(j)) {
        *out = json_integer_value(j);
        return *out >= 0 && *out <= max;
    }
    if (!json_is_string(j)) return false;
    return rlt__parse_i64(json_string_value(j), json_string_length(j), out) && *out >= 0 &&
           *out <= max;
}

/* A descriptor's optional hits_addend and limit override, as envoyproxy/ratelimit's /json
 * reads them (it unmarshals the same RateLimitRequest message as gRPC). */
static int envoy_desc_extras(json_t *d, rlt__envoy_desc *dd)
{
    json_t *h = json_object_get(d, "hits_addend");
    if (h == NULL) h = json_object_get(d, "hitsAddend");
    if (h != NULL && !json_u64(h, INT64_MAX, &dd->hits_addend)) return RLT_EINVAL;
    json_t *l = json_object_get(d, "limit");
    if (l == NULL) return RLT_OK;
    if (!json_is_object(l)) return RLT_EINVAL;
    json_t *n = json_object_get(l, "requests_per_unit");
    if (n == NULL) n = json_object_get(l, "requestsPerUnit");
    json_t *u = json_object_get(l, "unit");
    dd->limit_rpu = 0;
    if (n != NULL && !json_u64(n, UINT32_MAX, &dd->limit_rpu)) return RLT_EINVAL;
    if (u == NULL || !json_is_string(u)) return RLT_EINVAL;
    dd->limit_unit = rlt__unit_from_name(json_string_value(u), json_string_length(u));
    return dd->limit_unit == RLT__UNIT_UNKNOWN ? RLT_EINVAL : RLT_OK;
}

int rlt__envoy_parse(const char *body, size_t len, rlt__envoy_req *r, char *err, size_t errlen)
{
    rlt__envoy_req_init(r);
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        snprintf(err, errlen, "invalid JSON at line %d column %d: %s", jerr.line, jerr.column,
                 jerr.text);
        return RLT_EINVAL;
    }
    r->json = root;
    if (!json_is_object(root)) return bad(err, errlen, "body must be a JSON object");
    json_t *domain = json_object_get(root, "domain");
    if (!json_is_string(domain) || json_string_length(domain) == 0)
        return bad(err, errlen, "domain must be a non-empty string");
    r->domain = json_string_value(domain);
    r->dlen = json_string_length(domain);
    json_t *hits = json_object_get(root, "hits_addend");
    if (hits == NULL) hits = json_object_get(root, "hitsAddend");
    if (hits != NULL) {
        if (!json_is_integer(hits) || json_integer_value(hits) < 0 ||
            json_integer_value(hits) > UINT32_MAX)
            return bad(err, errlen, "hits_addend must be an integer in [0, 4294967295]");
        /* envoyproxy/ratelimit treats 0 as 1. */
        r->hits_addend = json_integer_value(hits) == 0 ? 1 : (int64_t)json_integer_value(hits);
    }
    json_t *descs = json_object_get(root, "descriptors");
    if (!json_is_array(descs) || json_array_size(descs) == 0 ||
        json_array_size(descs) > RLT__ENVOY_MAX_DESCRIPTORS)
        return bad(err, errlen, "descriptors must be an array of 1..32 descriptors");
    r->ndesc = json_array_size(descs);
    for (size_t i = 0; i < r->ndesc; i++) {
        json_t *d = json_array_get(descs, i);
        json_t *entries = json_is_object(d) ? json_object_get(d, "entries") : NULL;
        if (!json_is_array(entries) || json_array_size(entries) == 0 ||
            json_array_size(entries) > RLT__ENVOY_MAX_ENTRIES)
            return bad(err, errlen, "each descriptor needs entries: an array of 1..16");
        rlt__envoy_desc *dd = &r->desc[i];
        rlt__envoy_desc_init(dd);
        dd->nentries = json_array_size(entries);
        for (size_t j = 0; j < dd->nentries; j++) {
            json_t *e = json_array_get(entries, j);
            json_t *k = json_is_object(e) ? json_object_get(e, "key") : NULL;
            json_t *v = json_is_object(e) ? json_object_get(e, "value") : NULL;
            if (!json_is_string(k) || json_string_length(k) == 0 ||
                (v != NULL && !json_is_string(v)))
                return bad(err, errlen, "each entry needs a string key (and a string value)");
            rlt__entry *en = &dd->entries[j];
            en->key = json_string_value(k);
            en->klen = json_string_length(k);
            en->value = v ? json_string_value(v) : "";
            en->vlen = v ? json_string_length(v) : 0;
        }
        if (envoy_desc_extras(d, dd) != RLT_OK)
            return bad(err, errlen,
                       "a descriptor's hits_addend must be an integer >= 0 and its limit "
                       "{requests_per_unit: 0..4294967295, unit: SECOND..YEAR}");
    }
    return RLT_OK;
}

void rlt__envoy_free(rlt__envoy_req *r)
{
    json_decref((json_t *)r->json);
    r->json = NULL;
}
