/* The protobuf wire format, shared by the codecs of ratelimitd's gRPC messages
 * (src/server/grpc: pb.c, RLS and the health check; rlqs_pb.c, the rate limit quota service)
 * and of the `ratelimit quota` client (rlqs_client.c here): a bounded reader over a
 * caller buffer (varints of at most 10 bytes, lengths checked against the bytes left, no
 * groups) and a bounded writer into a caller buffer.  Static inline: each codec is one file
 * and nothing here is state. */
#ifndef RLT_PROTO_PBWIRE_H
#define RLT_PROTO_PBWIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

/* A reader over [p, end). */
typedef struct rd {
    const uint8_t *p, *end;
} rd;

/* A varint of at most 64 bits; false when truncated or longer. */
static inline bool rd_varint(rd *r, uint64_t *out)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < 10; i++) {
        if (r->p == r->end) return false;
        uint8_t b = *r->p++;
        if (i == 9 && b > 1) return false; /* past 64 bits */
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

/* The next field's number and wire type; false at a bad tag. */
static inline bool rd_tag(rd *r, uint32_t *num, int *wt)
{
    uint64_t t;
    if (!rd_varint(r, &t) || t >> 3 == 0 || t >> 3 > 0x1fffffff) return false;
    *num = (uint32_t)(t >> 3);
    *wt = (int)(t & 7);
    return true;
}

/* A length-delimited field's bytes as *sub. */
static inline bool rd_len(rd *r, rd *sub)
{
    uint64_t n;
    if (!rd_varint(r, &n) || n > (uint64_t)(r->end - r->p)) return false;
    sub->p = r->p;
    sub->end = r->p + n;
    r->p += n;
    return true;
}

/* Skips an unknown field.  Groups (wire types 3 and 4) and 6, 7 are malformed. */
static inline bool rd_skip(rd *r, int wt)
{
    uint64_t v;
    rd sub;
    switch (wt) {
    case WT_VARINT:
        return rd_varint(r, &v);
    case WT_LEN:
        return rd_len(r, &sub);
    case WT_I64:
        if (r->end - r->p < 8) return false;
        r->p += 8;
        return true;
    case WT_I32:
        if (r->end - r->p < 4) return false;
        r->p += 4;
        return true;
    default:
        return false;
    }
}

/* A string field: no NUL inside (keys and values become C-visible names and metrics). */
static inline bool rd_str(rd *r, const char **s, size_t *n)
{
    rd sub;
    if (!rd_len(r, &sub)) return false;
    *s = (const char *)sub.p;
    *n = (size_t)(sub.end - sub.p);
    return memchr(*s, '\0', *n) == NULL;
}

/* A google.protobuf.Duration message (seconds, nanos) in nanoseconds, saturated to int64;
 * false when malformed (its nanos, an int32, taken from the varint's low 32 bits). */
static inline bool rd_duration(rd m, int64_t *out)
{
    int64_t sec = 0, nanos = 0, ns;
    while (m.p < m.end) {
        uint32_t num;
        int wt;
        uint64_t v;
        if (!rd_tag(&m, &num, &wt)) return false;
        if (num == 1 || num == 2) {
            if (wt != WT_VARINT || !rd_varint(&m, &v)) return false;
            if (num == 1)
                sec = (int64_t)v;
            else
                nanos = (int32_t)(uint32_t)v;
        } else if (!rd_skip(&m, wt)) {
            return false;
        }
    }
    if (__builtin_mul_overflow(sec, (int64_t)1000000000, &ns) ||
        __builtin_add_overflow(ns, nanos, &ns))
        ns = sec < 0 ? INT64_MIN : INT64_MAX;
    *out = ns;
    return true;
}

/* The names of gRPC's status codes 0 (OK) .. 16 (UNAUTHENTICATED); "?" for any other. */
static inline const char *pb_grpc_status_name(int code)
{
    static const char *const n[] = {"OK",
                                    "CANCELLED",
                                    "UNKNOWN",
                                    "INVALID_ARGUMENT",
                                    "DEADLINE_EXCEEDED",
                                    "NOT_FOUND",
                                    "ALREADY_EXISTS",
                                    "PERMISSION_DENIED",
                                    "RESOURCE_EXHAUSTED",
                                    "FAILED_PRECONDITION",
                                    "ABORTED",
                                    "OUT_OF_RANGE",
                                    "UNIMPLEMENTED",
                                    "INTERNAL",
                                    "UNAVAILABLE",
                                    "DATA_LOSS",
                                    "UNAUTHENTICATED"};
    return code >= 0 && code < (int)(sizeof n / sizeof n[0]) ? n[code] : "?";
}

/* A bounded writer over a caller buffer; `ok` false once something did not fit. */
typedef struct wr {
    uint8_t *p, *end;
    bool ok;
} wr;

static inline void w_bytes(wr *w, const void *s, size_t n)
{
    if (!w->ok || (size_t)(w->end - w->p) < n) {
        w->ok = false;
        return;
    }
    memcpy(w->p, s, n);
    w->p += n;
}

static inline void w_varint(wr *w, uint64_t v)
{
    uint8_t b[10];
    size_t n = 0;
    do {
        b[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) b[n] |= 0x80;
        n++;
    } while (v);
    w_bytes(w, b, n);
}

static inline void w_tag(wr *w, uint32_t num, int wt)
{
    w_varint(w, (uint64_t)num << 3 | (uint64_t)wt);
}

/* A varint field, omitted when 0 (proto3). */
static inline void w_uint(wr *w, uint32_t num, uint64_t v)
{
    if (v == 0) return;
    w_tag(w, num, WT_VARINT);
    w_varint(w, v);
}

static inline void w_len(wr *w, uint32_t num, const void *s, size_t n)
{
    w_tag(w, num, WT_LEN);
    w_varint(w, n);
    w_bytes(w, s, n);
}

static inline void w_str(wr *w, uint32_t num, const char *s)
{
    size_t n = strlen(s);
    if (n > 0) w_len(w, num, s, n);
}

#endif
