/* Inputs of ratelimitd's HTTP endpoints, apart from the connection so that they can be
 * unit-tested and fuzzed: the /v1/check query string and envoyproxy/ratelimit's /json body
 * (parsed with jansson), and the envoy decision with its proto3-JSON reply. */
#include "server/httpin.h"

#include "server/decide.h"
#include "server/resp.h"
#include "server/srv.h"

#include <jansson.h>
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

/* Percent-decodes s[0..n) ('+' is a space) into out[0..cap).  Returns the length, -1 when it
 * does not fit, or -2 for a bad escape ('%' not followed by two hex digits).  out NULL:
 * only validates. */
static long url_decode(const char *s, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '+')
            c = ' ';
        else if (c == '%') {
            if (i + 2 >= n) return -2;
            int h = hexv(s[i + 1]), l = hexv(s[i + 2]);
            if (h < 0 || l < 0) return -2;
            c = (char)(h * 16 + l);
            i += 2;
        }
        if (out != NULL) { /* NULL: only validate */
            if (o == cap) return -1;
            out[o] = c;
        }
        o++;
    }
    return (long)o;
}

int rlt__check_parse(const char *q, size_t len, rlt__check_req *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    r->cost = 1;
    bool have_key = false, have_policy = false, have_cost = false;
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
        if (url_decode(name, nl, NULL, 0) == -2 || url_decode(val, vl, NULL, 0) == -2) {
            snprintf(err, errlen,
                     "bad percent-encoding in parameter '%.*s' (%% must be followed "
                     "by two hex digits)",
                     (int)(nl > 32 ? 32 : nl), name);
            return RLT_EINVAL;
        }
        if (nl == 0 && vl == 0 && end == eqp) {
            /* an empty piece ("a=1&&b=2", a trailing '&'): nothing */
        } else if (nl == 3 && memcmp(name, "key", 3) == 0) {
            long d = have_key ? -1 : url_decode(val, vl, r->key, RLT_KEY_MAX);
            if (d <= 0) {
                snprintf(err, errlen, "key must be given once, 1..%d bytes", RLT_KEY_MAX);
                return RLT_EINVAL;
            }
            r->klen = (size_t)d;
            have_key = true;
        } else if (nl == 6 && memcmp(name, "policy", 6) == 0) {
            long d = have_policy ? -1 : url_decode(val, vl, r->policy, sizeof r->policy - 1);
            if (d <= 0) {
                snprintf(err, errlen, "policy must be given once, 1..%zu bytes",
                         sizeof r->policy - 1);
                return RLT_EINVAL;
            }
            r->plen = (size_t)d;
            r->policy[r->plen] = '\0';
            have_policy = true;
        } else if (nl == 4 && memcmp(name, "cost", 4) == 0) {
            char num[32];
            long d = have_cost ? -1 : url_decode(val, vl, num, sizeof num);
            if (d <= 0 || !rlt__resp_parse_i64(num, (size_t)d, &r->cost) || r->cost < 0) {
                snprintf(err, errlen, "cost must be given once, an integer >= 0");
                return RLT_EINVAL;
            }
            have_cost = true;
        } else {
            snprintf(err, errlen, "unknown parameter '%.*s' (key, policy, cost)",
                     (int)(nl > 32 ? 32 : nl), name);
            return RLT_EINVAL;
        }
        i = end + 1;
    }
    if (!have_key) {
        snprintf(err, errlen, "missing key parameter");
        return RLT_EINVAL;
    }
    if (!have_policy) {
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

int rlt__envoy_parse(const char *body, size_t len, rlt__envoy_req *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    r->hits_addend = 1;
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
        r->nentries[i] = json_array_size(entries);
        for (size_t j = 0; j < r->nentries[i]; j++) {
            json_t *e = json_array_get(entries, j);
            json_t *k = json_is_object(e) ? json_object_get(e, "key") : NULL;
            json_t *v = json_is_object(e) ? json_object_get(e, "value") : NULL;
            if (!json_is_string(k) || json_string_length(k) == 0 ||
                (v != NULL && !json_is_string(v)))
                return bad(err, errlen, "each entry needs a string key (and a string value)");
            rlt__entry *en = &r->entries[i][j];
            en->key = json_string_value(k);
            en->klen = json_string_length(k);
            en->value = v ? json_string_value(v) : "";
            en->vlen = v ? json_string_length(v) : 0;
        }
    }
    return RLT_OK;
}

void rlt__envoy_free(rlt__envoy_req *r)
{
    json_decref((json_t *)r->json);
    r->json = NULL;
}

static void putj(rlt__obuf *o, const char *s)
{
    rlt__obuf_put(o, s, strlen(s));
}

static void put_json_str(rlt__obuf *o, const char *s)
{
    json_t *j = json_string(s);
    char *enc = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
    json_decref(j);
    /* json_string() of invalid UTF-8 is NULL: fall back to an empty string. */
    if (enc == NULL) {
        putj(o, "\"\"");
        return;
    }
    putj(o, enc);
    free(enc);
}

static const char *unit_of(const rlt__rule *r, int64_t *per_unit)
{
    if (r->unit != NULL) {
        *per_unit = r->requests_per_unit;
        return r->unit;
    }
    *per_unit = r->policy.limit;
    switch (r->policy.period) {
    case RLT_NS_PER_S:
        return "SECOND";
    case 60 * RLT_NS_PER_S:
        return "MINUTE";
    case 3600 * RLT_NS_PER_S:
        return "HOUR";
    case 86400 * RLT_NS_PER_S:
        return "DAY";
    default:
        return "UNKNOWN";
    }
}

/* The fixed window of rule r (envoy's own semantics: windows aligned to the clock's origin,
 * UTC in the daemon), or 0 when its limiter has no windows. */
static rlt_ns window_of(const rlt__rule *r)
{
    if (r->block_all && r->unit != NULL) {
        static const struct {
            const char *unit;
            rlt_ns ns;
        } units[] = {{"SECOND", RLT_NS_PER_S},
                     {"MINUTE", 60 * RLT_NS_PER_S},
                     {"HOUR", 3600 * RLT_NS_PER_S},
                     {"DAY", 86400 * RLT_NS_PER_S}};
        for (size_t i = 0; i < 4; i++)
            if (strcmp(r->unit, units[i].unit) == 0) return units[i].ns;
        return 0;
    }
    return !r->block_all && r->policy.algo == RLT_FIXED_WINDOW ? r->policy.period : 0;
}

typedef struct status {
    int rule; /* -1: no limit */
    bool over;
    int64_t remaining;
    rlt_ns reset;
} status;

/* Builds the store key: tenant prefix, then domain and every entry, length-prefixed so that
 * no two descriptors collide. */
static int envoy_key(const rlt__envoy_req *r, size_t i, const rlt__session *ss, char *out,
                     size_t *len)
{
    char tmp[RLT_KEY_MAX];
    int n = snprintf(tmp, sizeof tmp, "%zu:%.*s", r->dlen, (int)r->dlen, r->domain);
    if (n < 0 || (size_t)n >= sizeof tmp) return RLT_EKEYLEN;
    size_t o = (size_t)n;
    for (size_t j = 0; j < r->nentries[i]; j++) {
        const rlt__entry *e = &r->entries[i][j];
        n = snprintf(tmp + o, sizeof tmp - o, "|%zu:%.*s=%.*s", e->klen, (int)e->klen, e->key,
                     (int)e->vlen, e->value);
        if (n < 0 || (size_t)n >= sizeof tmp - o) return RLT_EKEYLEN;
        o += (size_t)n;
    }
    return rlt__session_key(ss, tmp, o, out, len);
}

/* The matching rule of every descriptor, after `replaces` (a matched rule that replaces
 * name N drops every matched rule named N: reported OK, not counted). */
static void envoy_match(const rlt__config *c, const rlt__envoy_req *r, status *st)
{
    for (size_t i = 0; i < r->ndesc; i++) {
        st[i] = (status){
            .rule = rlt__config_match(c, r->domain, r->dlen, r->entries[i], r->nentries[i])};
    }
    for (size_t i = 0; i < r->ndesc; i++) {
        if (st[i].rule < 0) continue;
        const rlt__rule *ri = &c->rules[st[i].rule];
        for (size_t k = 0; k < ri->nreplaces; k++)
            for (size_t j = 0; j < r->ndesc; j++)
                if (j != i && st[j].rule >= 0 &&
                    strcmp(c->rules[st[j].rule].rl_name, ri->replaces[k]) == 0)
                    st[j].rule = -2;
    }
}

static int envoy_fail(rlt__srv *s, int policy, rlt_ns now, int e, long desc, char *err,
                      size_t errlen)
{
    char b[160];
    const char *msg = rlt__decide_strerror(s, policy, now, e, b, sizeof b);
    if (desc >= 0)
        snprintf(err, errlen, "descriptor %ld: %s", desc, msg);
    else
        snprintf(err, errlen, "%s", msg);
    return e;
}

/* The limits to charge: every matched rule but unlimited, block-all (sets *over) and shadow
 * ones (decided here, one by one, never denying).  Fills checks/map and their keys. */
static int envoy_collect(rlt__srv *s, const rlt__config *c, const rlt__envoy_req *r,
                         const rlt__session *ss, rlt_ns now, status *st, rlt_check *checks,
                         size_t *map, size_t *nchecks, bool *over, char *err, size_t errlen)
{
    static __thread char keys[RLT__ENVOY_MAX_DESCRIPTORS][RLT_KEY_MAX];
    *nchecks = 0;
    *over = false;
    for (size_t i = 0; i < r->ndesc; i++) {
        if (st[i].rule < 0) continue;
        const rlt__rule *ru = &c->rules[st[i].rule];
        if (ru->unlimited) continue;
        if (ru->block_all) {
            st[i].over = true;
            *over = true;
            continue;
        }
        size_t klen;
        if (envoy_key(r, i, ss, keys[i], &klen) != RLT_OK) {
            snprintf(err, errlen, "descriptor %zu is longer than %d bytes", i, RLT_KEY_MAX);
            return RLT_EKEYLEN;
        }
        if (ru->shadow || c->set.shadow_mode) {
            rlt_decision d;
            int e = rlt__decide(s, ru->policy_id, true, keys[i], klen, now, r->hits_addend, &d);
            if (e != RLT_OK) return envoy_fail(s, ru->policy_id, now, e, (long)i, err, errlen);
            st[i].remaining = d.remaining;
            st[i].reset = d.reset_after;
            continue;
        }
        map[*nchecks] = i;
        checks[(*nchecks)++] = (rlt_check){
            .policy = ru->policy_id, .key = keys[i], .klen = klen, .cost = r->hits_addend};
    }
    return RLT_OK;
}

/* Charges the collected limits, all or nothing; fills each status. */
static int envoy_charge(rlt__srv *s, rlt_ns now, status *st, const rlt_check *checks,
                        const size_t *map, size_t nchecks, bool *over, char *err, size_t errlen)
{
    /* A block-all rule matched: nothing else is charged; every limit reported as it stands. */
    bool peek_all = *over;
    if (!*over && nchecks == 1) {
        rlt_decision d;
        size_t i = map[0];
        int e = rlt__decide(s, checks[0].policy, false, checks[0].key, checks[0].klen, now,
                            checks[0].cost, &d);
        if (e != RLT_OK) return envoy_fail(s, checks[0].policy, now, e, (long)i, err, errlen);
        st[i].over = !d.allowed;
        *over = !d.allowed;
        st[i].remaining = d.remaining;
        st[i].reset = d.reset_after;
    } else if (!*over && nchecks > 1) {
        rlt_decision d;
        int refused = -1;
        int e = rlt__decide_multi(s, checks, nchecks, now, &d, &refused);
        if (e != RLT_OK) return envoy_fail(s, -1, now, e, -1, err, errlen);
        *over = !d.allowed;
        peek_all = true;
        for (size_t k = 0; k < nchecks; k++)
            st[map[k]].over = !d.allowed && refused == (int)k;
    }
    if (peek_all) {
        /* Per-descriptor details: each limit's real remaining and reset as it now stands
         * (charged when the request was allowed, untouched when refused). */
        for (size_t k = 0; k < nchecks; k++) {
            rlt_decision pd;
            size_t i = map[k];
            if (rlt__decide_peek(s, checks[k].policy, checks[k].key, checks[k].klen, now, &pd) ==
                RLT_OK) {
                st[i].remaining = pd.remaining;
                st[i].reset = pd.reset_after;
            }
        }
    }
    return RLT_OK;
}

/* One descriptor's status in proto3 JSON. */
static void envoy_status(const rlt__config *c, const status *st, rlt_ns now, rlt__obuf *out)
{
    char buf[256];
    if (st->rule < 0) return putj(out, "{\"code\":\"OK\"}");
    const rlt__rule *ru = &c->rules[st->rule];
    if (ru->unlimited) return putj(out, "{\"code\":\"OK\",\"limitRemaining\":4294967295}");
    int64_t per_unit;
    const char *unit = unit_of(ru, &per_unit);
    snprintf(buf, sizeof buf, "{\"code\":\"%s\",\"currentLimit\":{",
             st->over ? "OVER_LIMIT" : "OK");
    putj(out, buf);
    if (ru->rl_name[0] != '\0') {
        putj(out, "\"name\":");
        put_json_str(out, ru->rl_name);
        putj(out, ",");
    }
    snprintf(buf, sizeof buf, "\"requestsPerUnit\":%lld,\"unit\":\"%s\"}", (long long)per_unit,
             unit);
    putj(out, buf);
    /* proto3 JSON omits zero values. */
    if (st->remaining > 0) {
        snprintf(buf, sizeof buf, ",\"limitRemaining\":%lld", (long long)st->remaining);
        putj(out, buf);
    }
    /* envoyproxy/ratelimit reports the time to the end of the current window on every
     * status, OK or OVER_LIMIT, even when nothing was counted in it yet. */
    rlt_ns reset = st->reset, win = window_of(ru);
    if (win > 0 && reset <= 0) reset = win - ((now % win) + win) % win;
    int64_t secs = rlt_retry_after_seconds(reset);
    if (secs > 0) {
        snprintf(buf, sizeof buf, ",\"durationUntilReset\":\"%llds\"", (long long)secs);
        putj(out, buf);
    }
    putj(out, "}");
}

int rlt__envoy_decide(rlt__srv *s, const rlt__envoy_req *r, const rlt__session *ss, rlt_ns now,
                      rlt__obuf *out, int *http_status, char *err, size_t errlen)
{
    rlt__config *c = rlt__srv_config(s);
    status st[RLT__ENVOY_MAX_DESCRIPTORS];
    rlt_check checks[RLT__ENVOY_MAX_DESCRIPTORS];
    size_t map[RLT__ENVOY_MAX_DESCRIPTORS], nchecks;
    bool over;
    envoy_match(c, r, st);
    int e = envoy_collect(s, c, r, ss, now, st, checks, map, &nchecks, &over, err, errlen);
    if (e == RLT_OK) e = envoy_charge(s, now, st, checks, map, nchecks, &over, err, errlen);
    if (e != RLT_OK) return e;
    putj(out, over ? "{\"overallCode\":\"OVER_LIMIT\",\"statuses\":["
                   : "{\"overallCode\":\"OK\",\"statuses\":[");
    for (size_t i = 0; i < r->ndesc; i++) {
        if (i > 0) putj(out, ",");
        envoy_status(c, &st[i], now, out);
    }
    putj(out, "]}");
    *http_status = over ? 429 : 200;
    return RLT_OK;
}
