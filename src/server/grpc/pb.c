/* A small protobuf codec for ratelimitd's gRPC messages (proto/rls.proto): a bounded reader
 * of the wire format (pbwire.h), the RateLimitRequest decoder over it, and encoders that size each
 * nested message before writing it.  Field numbers are the upstream ones: RateLimitRequest      1
 * domain, 2 descriptors, 3 hits_addend (uint32) RateLimitDescriptor   1 entries, 2 limit, 3
 * hits_addend (google.protobuf.UInt64Value) Entry               1 key, 2 value RateLimitOverride 1
 * requests_per_unit (uint32), 2 unit (enum) RateLimitResponse     1 overall_code, 2 statuses, 3
 * response_headers_to_add DescriptorStatus    1 code, 2 current_limit, 3 limit_remaining, 4
 * duration_until_reset RateLimit           1 requests_per_unit, 2 unit, 3 name HeaderValue 1 key, 2
 * value;  Duration 1 seconds, 2 nanos;  UInt64Value 1 value HealthCheckRequest    1 service;
 * HealthCheckResponse 1 status */
#include "server/grpc/pb.h"

#include "proto/pbwire.h"

#include <stdio.h>
#include <string.h>

static int malformed(char *err, size_t errlen, const char *what)
{
    snprintf(err, errlen, "malformed RateLimitRequest: %s", what);
    return RLT__PB_MALFORMED;
}

static int decode_entry(rd m, rlt__entry *e, char *err, size_t errlen)
{
    e->key = e->value = "";
    e->klen = e->vlen = 0;
    while (m.p < m.end) {
        uint32_t num;
        int wt;
        if (!rd_tag(&m, &num, &wt)) return malformed(err, errlen, "bad tag in an entry");
        if (num == 1 || num == 2) {
            if (wt != WT_LEN) return malformed(err, errlen, "entry key/value must be strings");
            if (!rd_str(&m, num == 1 ? &e->key : &e->value, num == 1 ? &e->klen : &e->vlen))
                return malformed(err, errlen, "bad entry string");
        } else if (!rd_skip(&m, wt)) {
            return malformed(err, errlen, "bad field in an entry");
        }
    }
    return RLT__PB_OK;
}

static int decode_override(rd m, rlt__envoy_desc *d, char *err, size_t errlen)
{
    d->limit_rpu = 0;
    d->limit_unit = 0;
    while (m.p < m.end) {
        uint32_t num;
        int wt;
        uint64_t v;
        if (!rd_tag(&m, &num, &wt)) return malformed(err, errlen, "bad tag in a limit");
        if (num == 1 || num == 2) {
            if (wt != WT_VARINT || !rd_varint(&m, &v))
                return malformed(err, errlen, "limit fields must be varints");
            if (num == 1 && v > UINT32_MAX)
                return malformed(err, errlen, "requests_per_unit past uint32");
            if (num == 1)
                d->limit_rpu = (int64_t)v;
            else
                d->limit_unit = v <= 7 ? (int)v : -1; /* -1: an unknown unit, refused later */
        } else if (!rd_skip(&m, wt)) {
            return malformed(err, errlen, "bad field in a limit");
        }
    }
    return RLT__PB_OK;
}

static int decode_u64value(rd m, int64_t *out, char *err, size_t errlen)
{
    *out = 0;
    while (m.p < m.end) {
        uint32_t num;
        int wt;
        uint64_t v;
        if (!rd_tag(&m, &num, &wt)) return malformed(err, errlen, "bad tag in hits_addend");
        if (num == 1) {
            if (wt != WT_VARINT || !rd_varint(&m, &v))
                return malformed(err, errlen, "bad descriptor hits_addend");
            /* A uint64 past int64 is a charge no limit can tell from INT64_MAX: saturated,
             * as the debt it makes is (rlt_settle), never refused. */
            *out = v > INT64_MAX ? INT64_MAX : (int64_t)v;
        } else if (!rd_skip(&m, wt)) {
            return malformed(err, errlen, "bad field in hits_addend");
        }
    }
    return RLT__PB_OK;
}

static int decode_descriptor(rd m, rlt__envoy_desc *d, char *err, size_t errlen)
{
    while (m.p < m.end) {
        uint32_t num;
        int wt;
        rd sub;
        if (!rd_tag(&m, &num, &wt)) return malformed(err, errlen, "bad tag in a descriptor");
        if (num >= 1 && num <= 3) {
            if (wt != WT_LEN || !rd_len(&m, &sub))
                return malformed(err, errlen, "descriptor fields must be messages");
            int st;
            if (num == 1) {
                if (d->nentries == RLT__ENVOY_MAX_ENTRIES) {
                    snprintf(err, errlen, "a descriptor has more than %d entries",
                             RLT__ENVOY_MAX_ENTRIES);
                    return RLT__PB_TOO_MANY;
                }
                st = decode_entry(sub, &d->entries[d->nentries++], err, errlen);
            } else if (num == 2) {
                st = decode_override(sub, d, err, errlen);
            } else {
                st = decode_u64value(sub, &d->hits_addend, err, errlen);
            }
            if (st != RLT__PB_OK) return st;
        } else if (!rd_skip(&m, wt)) {
            return malformed(err, errlen, "bad field in a descriptor");
        }
    }
    return RLT__PB_OK;
}

int rlt__pb_decode_rls(const uint8_t *buf, size_t len, rlt__envoy_req *r, char *err, size_t errlen)
{
    rlt__envoy_req_init(r);
    rd m = {buf, buf + len};
    uint64_t hits = 0;
    while (m.p < m.end) {
        uint32_t num;
        int wt;
        rd sub;
        if (!rd_tag(&m, &num, &wt)) return malformed(err, errlen, "bad tag");
        if (num == 1) {
            if (wt != WT_LEN || !rd_str(&m, &r->domain, &r->dlen))
                return malformed(err, errlen, "domain must be a string");
        } else if (num == 2) {
            if (wt != WT_LEN || !rd_len(&m, &sub))
                return malformed(err, errlen, "descriptors must be messages");
            if (r->ndesc == RLT__ENVOY_MAX_DESCRIPTORS) {
                snprintf(err, errlen, "more than %d descriptors", RLT__ENVOY_MAX_DESCRIPTORS);
                return RLT__PB_TOO_MANY;
            }
            rlt__envoy_desc_init(&r->desc[r->ndesc]);
            int st = decode_descriptor(sub, &r->desc[r->ndesc++], err, errlen);
            if (st != RLT__PB_OK) return st;
        } else if (num == 3) {
            if (wt != WT_VARINT || !rd_varint(&m, &hits) || hits > UINT32_MAX)
                return malformed(err, errlen, "hits_addend must be a uint32");
        } else if (!rd_skip(&m, wt)) {
            return malformed(err, errlen, "bad field");
        }
    }
    /* envoyproxy/ratelimit: 0 (unset) means 1. */
    r->hits_addend = hits == 0 ? 1 : (int64_t)hits;
    /* envoyproxy/ratelimit's own messages for these two. */
    if (r->dlen == 0) {
        snprintf(err, errlen, "rate limit domain must not be empty");
        return RLT__PB_EMPTY;
    }
    if (r->ndesc == 0) {
        snprintf(err, errlen, "rate limit descriptor list must not be empty");
        return RLT__PB_EMPTY;
    }
    return RLT__PB_OK;
}

int rlt__pb_decode_health(const uint8_t *buf, size_t len, const char **service, size_t *slen)
{
    rd m = {buf, buf + len};
    *service = "";
    *slen = 0;
    while (m.p < m.end) {
        uint32_t num;
        int wt;
        if (!rd_tag(&m, &num, &wt)) return RLT__PB_MALFORMED;
        if (num == 1) {
            if (wt != WT_LEN || !rd_str(&m, service, slen)) return RLT__PB_MALFORMED;
        } else if (!rd_skip(&m, wt)) {
            return RLT__PB_MALFORMED;
        }
    }
    return RLT__PB_OK;
}

/* ---- encoding ---------------------------------------------------------------------------- */

/* One DescriptorStatus into w. */
static void w_status(wr *w, const rlt__envoy_status *st)
{
    uint8_t lim[600], dur[24];
    w_uint(w, 1, (uint64_t)st->code);
    if (st->has_limit) {
        wr l = {lim, lim + sizeof lim, true};
        w_uint(&l, 1, st->requests_per_unit > 0 ? (uint64_t)st->requests_per_unit : 0);
        w_uint(&l, 2, st->unit > 0 ? (uint64_t)st->unit : 0);
        w_str(&l, 3, l.ok && strlen(st->name) < 512 ? st->name : "");
        w_len(w, 2, lim, l.ok ? (size_t)(l.p - lim) : 0);
    }
    int64_t rem = st->remaining < 0 ? 0 : st->remaining > UINT32_MAX ? UINT32_MAX : st->remaining;
    w_uint(w, 3, (uint64_t)rem);
    if (st->reset_s > 0 && st->has_limit) {
        wr d = {dur, dur + sizeof dur, true};
        w_uint(&d, 1, (uint64_t)st->reset_s);
        w_len(w, 4, dur, (size_t)(d.p - dur));
    }
}

void rlt__pb_encode_rls(const rlt__envoy_result *res, const rlt__pb_header *h, size_t nh,
                        rlt__obuf *out)
{
    uint8_t sb[800];
    wr top = {0};
    /* Two passes over one writer shape: first sized with a scratch buffer per part, then
     * written straight into the obuf. */
    size_t need = 16;
    for (size_t i = 0; i < res->n; i++)
        need += sizeof sb + 16;
    for (size_t i = 0; i < nh; i++)
        need += strlen(h[i].key) + strlen(h[i].value) + 24;
    uint8_t *dst = (uint8_t *)rlt__obuf_room(out, need);
    if (dst == NULL) return;
    top = (wr){dst, dst + need, true};
    w_uint(&top, 1, res->over ? RLT__CODE_OVER_LIMIT : RLT__CODE_OK);
    for (size_t i = 0; i < res->n; i++) {
        wr s = {sb, sb + sizeof sb, true};
        w_status(&s, &res->st[i]);
        w_len(&top, 2, sb, s.ok ? (size_t)(s.p - sb) : 0);
    }
    for (size_t i = 0; i < nh; i++) {
        uint8_t hb[600];
        wr hv = {hb, hb + sizeof hb, true};
        w_str(&hv, 1, h[i].key);
        w_str(&hv, 2, h[i].value);
        if (hv.ok) w_len(&top, 3, hb, (size_t)(hv.p - hb));
    }
    if (top.ok) out->len += (size_t)(top.p - dst);
}

void rlt__pb_encode_health(int status, rlt__obuf *out)
{
    uint8_t b[4];
    wr w = {b, b + sizeof b, true};
    w_uint(&w, 1, (uint64_t)status);
    rlt__obuf_put(out, b, (size_t)(w.p - b));
}
