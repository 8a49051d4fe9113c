/* The protobuf codec of Envoy's Rate Limit Quota Service (proto/rlqs.proto): the usage
 * report reader and the response writer over pbwire.h.  Field numbers are the upstream ones:
 *   RateLimitQuotaUsageReports   1 domain, 2 bucket_quota_usages
 *     BucketQuotaUsage           1 bucket_id, 2 time_elapsed, 3 num_requests_allowed,
 *                                4 num_requests_denied
 *   BucketId                     1 bucket (map<string, string>: entries of 1 key, 2 value)
 *   RateLimitQuotaResponse       1 bucket_action
 *     BucketAction               1 bucket_id, 2 quota_assignment_action, 3 abandon_action
 *     QuotaAssignmentAction      2 assignment_time_to_live, 3 rate_limit_strategy
 *   RateLimitStrategy            1 blanket_rule (ALLOW_ALL 0, DENY_ALL 1), 3 token_bucket
 *   TokenBucket                  1 max_tokens, 2 tokens_per_fill (UInt32Value), 3 fill_interval
 *   Duration                     1 seconds, 2 nanos */
#include "server/envoy/rlqs_pb.h"

#include "proto/pbwire.h"

#include <stdio.h>
#include <string.h>

static int bad(char *err, size_t errlen, int code, const char *what)
{
    snprintf(err, errlen, "%s RateLimitQuotaUsageReports: %s",
             code == RLT__RLQS_MALFORMED ? "malformed" : "refused", what);
    return code;
}

static int pair_cmp(const rlt__entry *a, const rlt__entry *b)
{
    size_t n = a->klen < b->klen ? a->klen : b->klen;
    int c = memcmp(a->key, b->key, n);
    return c != 0 ? c : a->klen < b->klen ? -1 : a->klen > b->klen ? 1 : 0;
}

/* One map entry of BucketId.bucket into id, kept sorted and unique (insertion: at most
 * RLT__RLQS_MAX_PAIRS of them). */
static int add_pair(rd m, rlt__rlqs_bucket_id *id, size_t *bytes, char *err, size_t errlen)
{
    rlt__entry e = {"", 0, "", 0};
    while (m.p < m.end) {
        uint32_t num;
        int wt;
        if (!rd_tag(&m, &num, &wt))
            return bad(err, errlen, RLT__RLQS_MALFORMED, "bad tag in BucketId");
        if (num == 1 || num == 2) {
            if (wt != WT_LEN ||
                !rd_str(&m, num == 1 ? &e.key : &e.value, num == 1 ? &e.klen : &e.vlen))
                return bad(err, errlen, RLT__RLQS_MALFORMED, "bad BucketId string");
        } else if (!rd_skip(&m, wt)) {
            return bad(err, errlen, RLT__RLQS_MALFORMED, "bad field in BucketId");
        }
    }
    if (e.klen == 0 || e.vlen == 0)
        return bad(err, errlen, RLT__RLQS_MALFORMED, "a BucketId key or value is empty");
    *bytes += e.klen + e.vlen;
    if (*bytes > RLT__RLQS_MAX_ID)
        return bad(err, errlen, RLT__RLQS_TOO_LARGE, "a BucketId is longer than 1024 bytes");
    size_t i = 0;
    while (i < id->n && pair_cmp(&id->pairs[i], &e) < 0)
        i++;
    if (i < id->n && pair_cmp(&id->pairs[i], &e) == 0) {
        id->pairs[i] = e; /* a map keeps the last value of a key */
        return RLT__RLQS_OK;
    }
    if (id->n == RLT__RLQS_MAX_PAIRS)
        return bad(err, errlen, RLT__RLQS_TOO_LARGE, "a BucketId has more than 16 pairs");
    memmove(&id->pairs[i + 1], &id->pairs[i], (id->n - i) * sizeof id->pairs[0]);
    id->pairs[i] = e;
    id->n++;
    return RLT__RLQS_OK;
}

static int decode_id(rd m, rlt__rlqs_bucket_id *id, char *err, size_t errlen)
{
    size_t bytes = 0;
    id->n = 0;
    while (m.p < m.end) {
        uint32_t num;
        int wt;
        rd sub;
        if (!rd_tag(&m, &num, &wt))
            return bad(err, errlen, RLT__RLQS_MALFORMED, "bad tag in BucketId");
        if (num == 1) {
            if (wt != WT_LEN || !rd_len(&m, &sub))
                return bad(err, errlen, RLT__RLQS_MALFORMED, "BucketId.bucket must be a map");
            int st = add_pair(sub, id, &bytes, err, errlen);
            if (st != RLT__RLQS_OK) return st;
        } else if (!rd_skip(&m, wt)) {
            return bad(err, errlen, RLT__RLQS_MALFORMED, "bad field in BucketId");
        }
    }
    return RLT__RLQS_OK; /* n == 0: an empty BucketId, skipped by the caller */
}

/* One BucketQuotaUsage, or (the newer upstream form) a map entry {1: uint64, 2: usage}. */
static int decode_usage(rd m, rlt__rlqs_usage *u, bool nested, char *err, size_t errlen)
{
    u->id.n = 0;
    u->elapsed = 0;
    u->allowed = u->denied = 0;
    while (m.p < m.end) {
        uint32_t num;
        int wt;
        rd sub;
        uint64_t v;
        if (!rd_tag(&m, &num, &wt))
            return bad(err, errlen, RLT__RLQS_MALFORMED, "bad tag in a usage");
        if (num == 1 && wt == WT_VARINT && !nested) {
            /* A map entry's key: the usage is its field 2. */
            if (!rd_varint(&m, &v)) return bad(err, errlen, RLT__RLQS_MALFORMED, "bad map key");
            rd rest = m;
            while (rest.p < rest.end) {
                if (!rd_tag(&rest, &num, &wt))
                    return bad(err, errlen, RLT__RLQS_MALFORMED, "bad tag in a usage");
                if (num == 2 && wt == WT_LEN) {
                    if (!rd_len(&rest, &sub))
                        return bad(err, errlen, RLT__RLQS_MALFORMED, "bad usage");
                    return decode_usage(sub, u, true, err, errlen);
                }
                if (!rd_skip(&rest, wt)) return bad(err, errlen, RLT__RLQS_MALFORMED, "bad usage");
            }
            u->id.n = 0; /* a map entry without its usage: no bucket_id */
            return RLT__RLQS_OK;
        }
        if (num == 1 || num == 2) {
            if (wt != WT_LEN || !rd_len(&m, &sub))
                return bad(err, errlen, RLT__RLQS_MALFORMED,
                           "bucket_id and time_elapsed are messages");
            if (num == 1) {
                int st = decode_id(sub, &u->id, err, errlen);
                if (st != RLT__RLQS_OK) return st;
            } else if (!rd_duration(sub, &u->elapsed)) {
                return bad(err, errlen, RLT__RLQS_MALFORMED, "bad time_elapsed");
            }
        } else if (num == 3 || num == 4) {
            if (wt != WT_VARINT || !rd_varint(&m, &v))
                return bad(err, errlen, RLT__RLQS_MALFORMED, "request counts are varints");
            *(num == 3 ? &u->allowed : &u->denied) = v;
        } else if (!rd_skip(&m, wt)) {
            return bad(err, errlen, RLT__RLQS_MALFORMED, "bad field in a usage");
        }
    }
    return RLT__RLQS_OK; /* without bucket_id: id.n == 0, as an empty one */
}

int rlt__rlqs_next_usage(rlt__rlqs_reader *it, rlt__rlqs_usage *u, char *err, size_t errlen)
{
    rd m = {it->p, it->end};
    while (m.p < m.end) {
        uint32_t num;
        int wt;
        rd sub;
        if (!rd_tag(&m, &num, &wt)) return bad(err, errlen, RLT__RLQS_MALFORMED, "bad tag");
        if (num == 2) {
            if (wt != WT_LEN || !rd_len(&m, &sub))
                return bad(err, errlen, RLT__RLQS_MALFORMED,
                           "bucket_quota_usages must be messages");
            it->p = m.p;
            return decode_usage(sub, u, false, err, errlen);
        }
        if (num == 1) {
            const char *s;
            size_t n;
            if (wt != WT_LEN || !rd_str(&m, &s, &n))
                return bad(err, errlen, RLT__RLQS_MALFORMED, "domain must be a string");
        } else if (!rd_skip(&m, wt)) {
            return bad(err, errlen, RLT__RLQS_MALFORMED, "bad field");
        }
    }
    it->p = m.p;
    return RLT__RLQS_END;
}

int rlt__rlqs_decode_reports(const uint8_t *buf, size_t len, const char **domain, size_t *dlen,
                             size_t *count, rlt__rlqs_reader *it, char *err, size_t errlen)
{
    *domain = "";
    *dlen = 0;
    *count = 0;
    rd m = {buf, buf + len};
    /* The domain (the last one, as protobuf reads a repeated scalar field). */
    while (m.p < m.end) {
        uint32_t num;
        int wt;
        if (!rd_tag(&m, &num, &wt)) return bad(err, errlen, RLT__RLQS_MALFORMED, "bad tag");
        if (num == 1) {
            if (wt != WT_LEN || !rd_str(&m, domain, dlen))
                return bad(err, errlen, RLT__RLQS_MALFORMED, "domain must be a string");
        } else if (!rd_skip(&m, wt)) {
            return bad(err, errlen, RLT__RLQS_MALFORMED, "bad field");
        }
    }
    rlt__rlqs_reader r = {buf, buf + len};
    rlt__rlqs_usage u; /* about 550 bytes: on the stack */
    int st;
    while ((st = rlt__rlqs_next_usage(&r, &u, err, errlen)) == RLT__RLQS_OK)
        (*count)++;
    if (st != RLT__RLQS_END) return st;
    it->p = buf;
    it->end = buf + len;
    return RLT__RLQS_OK;
}

size_t rlt__rlqs_id_key(const rlt__rlqs_bucket_id *id, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < id->n; i++) {
        const rlt__entry *e = &id->pairs[i];
        if (o + e->klen + e->vlen + 2 > cap) break;
        memcpy(out + o, e->key, e->klen);
        o += e->klen;
        out[o++] = '\0';
        memcpy(out + o, e->value, e->vlen);
        o += e->vlen;
        out[o++] = '\0';
    }
    return o;
}

/* ---- the response ------------------------------------------------------------------------ */

/* A Duration message's bytes (seconds, nanos) into w as field `num`; omitted fields are 0. */
static void w_duration(wr *w, uint32_t num, rlt_ns ns)
{
    uint8_t b[24];
    wr d = {b, b + sizeof b, true};
    int64_t sec = ns / RLT_NS_PER_S, nanos = ns % RLT_NS_PER_S;
    w_uint(&d, 1, (uint64_t)sec);
    w_uint(&d, 2, (uint64_t)nanos);
    w_len(w, num, b, (size_t)(d.p - b));
}

/* The largest BucketId message: each pair an entry of tag, length, and two strings. */
#define ID_MAX (RLT__RLQS_MAX_ID + RLT__RLQS_MAX_PAIRS * 12 + 16)

static void w_action(wr *w, const rlt__rlqs_action *a)
{
    uint8_t idb[ID_MAX], ent[RLT__RLQS_MAX_ID + 16], qa[96], strat[64], tb[48], u32[8];
    wr id = {idb, idb + sizeof idb, true};
    for (size_t i = 0; i < a->id->n; i++) {
        const rlt__entry *e = &a->id->pairs[i];
        wr en = {ent, ent + sizeof ent, true};
        w_len(&en, 1, e->key, e->klen);
        w_len(&en, 2, e->value, e->vlen);
        w_len(&id, 1, ent, en.ok ? (size_t)(en.p - ent) : 0);
    }
    w_len(w, 1, idb, id.ok ? (size_t)(id.p - idb) : 0);
    if (a->kind == RLT__RLQS_ABANDON) {
        w_len(w, 3, "", 0);
        return;
    }
    wr s = {strat, strat + sizeof strat, true};
    if (a->kind == RLT__RLQS_TOKEN_BUCKET) {
        wr t = {tb, tb + sizeof tb, true}, v = {u32, u32 + sizeof u32, true};
        w_uint(&t, 1, a->max_tokens);
        w_uint(&v, 1, a->tokens_per_fill);
        w_len(&t, 2, u32, (size_t)(v.p - u32));
        w_duration(&t, 3, a->fill_interval);
        w_len(&s, 3, tb, (size_t)(t.p - tb));
    } else {
        /* A oneof member is written even when it is 0 (ALLOW_ALL): its presence is the
         * choice. */
        w_tag(&s, 1, WT_VARINT);
        w_varint(&s, a->kind == RLT__RLQS_DENY_ALL ? 1 : 0);
    }
    wr q = {qa, qa + sizeof qa, true};
    w_duration(&q, 2, a->ttl);
    w_len(&q, 3, strat, (size_t)(s.p - strat));
    w_len(w, 2, qa, (size_t)(q.p - qa));
}

void rlt__rlqs_encode_response(const rlt__rlqs_action *a, size_t n, rlt__obuf *out)
{
    uint8_t ab[ID_MAX + 160];
    for (size_t i = 0; i < n; i++) {
        wr w = {ab, ab + sizeof ab, true};
        w_action(&w, &a[i]);
        uint8_t hdr[12];
        wr h = {hdr, hdr + sizeof hdr, true};
        w_tag(&h, 1, WT_LEN);
        w_varint(&h, (uint64_t)(w.p - ab));
        rlt__obuf_put(out, hdr, (size_t)(h.p - hdr));
        rlt__obuf_put(out, ab, (size_t)(w.p - ab));
    }
}
