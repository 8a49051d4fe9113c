/* SPOP v2's frames, sans I/O: cutting frames, reading typed data and HELLO's KV list, writing
 * the agent's HELLO, DISCONNECT and ACK frames.  Every length is checked against the frame
 * before it is followed; nothing here allocates. */
#include "server/spop/spop.h"

#include <string.h>

/* A varint is at most 10 bytes: 4 bits in the first, 7 in each of the others, 64 in all. */
#define VARINT_MAX 10

bool rlt__spop_read_varint(rlt__spop_reader *r, uint64_t *v)
{
    if (r->p >= r->end) return false;
    uint64_t x = *r->p++;
    if (x >= 240) {
        unsigned shift = 4;
        for (int i = 1;; i++) {
            if (i >= VARINT_MAX || r->p >= r->end) return false;
            unsigned char b = *r->p++;
            x += (uint64_t)b << shift;
            if (b < 128) break;
            shift += 7;
        }
    }
    *v = x;
    return true;
}

bool rlt__spop_read_bytes(rlt__spop_reader *r, const unsigned char **s, size_t *n)
{
    uint64_t len;
    if (!rlt__spop_read_varint(r, &len) || len > (uint64_t)(r->end - r->p)) return false;
    *s = r->p;
    *n = (size_t)len;
    r->p += len;
    return true;
}

bool rlt__spop_read_value(rlt__spop_reader *r, rlt__spop_value *v)
{
    if (r->p >= r->end) return false;
    unsigned char t = *r->p++;
    v->type = t & 15u;
    v->u = 0;
    v->s = NULL;
    v->n = 0;
    switch (v->type) {
    case RLT__SPOP_T_NULL:
        return true;
    case RLT__SPOP_T_BOOL:
        v->u = (t >> 4) & 1u;
        return true;
    case RLT__SPOP_T_INT32:
    case RLT__SPOP_T_UINT32:
    case RLT__SPOP_T_INT64:
    case RLT__SPOP_T_UINT64:
        return rlt__spop_read_varint(r, &v->u);
    case RLT__SPOP_T_IPV4:
    case RLT__SPOP_T_IPV6:
        v->n = v->type == RLT__SPOP_T_IPV4 ? 4 : 16;
        if ((size_t)(r->end - r->p) < v->n) return false;
        v->s = r->p;
        r->p += v->n;
        return true;
    case RLT__SPOP_T_STRING:
    case RLT__SPOP_T_BINARY:
        return rlt__spop_read_bytes(r, &v->s, &v->n);
    default:
        return false;
    }
}

ssize_t rlt__spop_frame_parse(const char *in, size_t len, size_t max_frame, rlt__spop_frame *f,
                              rlt__spop_status *status, const char **err)
{
    const unsigned char *p = (const unsigned char *)in;
    if (len < 4) return RLT__SPOP_PARTIAL;
    uint32_t flen = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
    if (flen > max_frame) {
        *status = RLT__SPOP_ST_TOO_BIG;
        *err = "frame longer than the agreed max-frame-size";
        return RLT__SPOP_ERROR;
    }
    if (len - 4 < flen) return RLT__SPOP_PARTIAL;
    rlt__spop_reader r = {p + 4, p + 4 + flen};
    *status = RLT__SPOP_ST_INVALID;
    if (flen < 7) { /* type, 4 flag bytes, two 1-byte varints at least */
        *err = "frame shorter than its metadata";
        return RLT__SPOP_ERROR;
    }
    f->type = *r.p++;
    switch (f->type) {
    case RLT__SPOP_HAPROXY_HELLO:
    case RLT__SPOP_HAPROXY_DISCONNECT:
    case RLT__SPOP_NOTIFY:
    case RLT__SPOP_AGENT_HELLO:
    case RLT__SPOP_AGENT_DISCONNECT:
    case RLT__SPOP_ACK:
        break;
    default:
        *err = "unknown frame type";
        return RLT__SPOP_ERROR;
    }
    f->flags = (uint32_t)r.p[0] << 24 | (uint32_t)r.p[1] << 16 | (uint32_t)r.p[2] << 8 | r.p[3];
    r.p += 4;
    if (!rlt__spop_read_varint(&r, &f->stream_id) || !rlt__spop_read_varint(&r, &f->frame_id)) {
        *err = "stream-id or frame-id past the frame, or longer than 10 bytes";
        return RLT__SPOP_ERROR;
    }
    if (!(f->flags & RLT__SPOP_FIN)) {
        *status = RLT__SPOP_ST_NO_FRAGMENTATION;
        *err = "fragmented frame: this agent does not offer fragmentation";
        return RLT__SPOP_ERROR;
    }
    f->payload = r.p;
    f->plen = (size_t)(r.end - r.p);
    return (ssize_t)(4 + flen);
}

static bool name_is(const unsigned char *s, size_t n, const char *lit)
{
    return n == strlen(lit) && memcmp(s, lit, n) == 0;
}

/* Whether the comma-separated version list holds a 2.x ("2.0", " 2.0 "). */
static bool has_v2(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        while (i < n && (s[i] == ' ' || s[i] == ','))
            i++;
        size_t j = i;
        while (j < n && s[j] != ',')
            j++;
        size_t e = j;
        while (e > i && s[e - 1] == ' ')
            e--;
        if (e - i >= 2 && s[i] == '2' && s[i + 1] == '.') return true;
        i = j;
    }
    return false;
}

rlt__spop_status rlt__spop_hello_parse(const unsigned char *p, size_t n, rlt__spop_hello *h)
{
    rlt__spop_reader r = {p, p + n};
    bool version = false, frame = false, caps = false;
    memset(h, 0, sizeof *h);
    while (r.p < r.end) {
        const unsigned char *name;
        size_t nlen;
        rlt__spop_value v;
        if (!rlt__spop_read_bytes(&r, &name, &nlen) || !rlt__spop_read_value(&r, &v))
            return RLT__SPOP_ST_INVALID;
        if (name_is(name, nlen, "supported-versions")) {
            if (v.type != RLT__SPOP_T_STRING) return RLT__SPOP_ST_INVALID;
            version = true;
            h->v2 = has_v2(v.s, v.n);
        } else if (name_is(name, nlen, "max-frame-size")) {
            if (v.type != RLT__SPOP_T_UINT32 && v.type != RLT__SPOP_T_INT32)
                return RLT__SPOP_ST_INVALID;
            frame = true;
            h->max_frame = v.u > UINT32_MAX ? UINT32_MAX : (uint32_t)v.u;
        } else if (name_is(name, nlen, "capabilities")) {
            if (v.type != RLT__SPOP_T_STRING) return RLT__SPOP_ST_INVALID;
            caps = true;
        } else if (name_is(name, nlen, "healthcheck")) {
            h->healthcheck = v.type == RLT__SPOP_T_BOOL && v.u;
        }
    }
    if (!version) return RLT__SPOP_ST_NO_VERSION;
    if (!frame) return RLT__SPOP_ST_NO_FRAME_SIZE;
    if (!caps) return RLT__SPOP_ST_NO_CAPABILITIES;
    if (!h->v2) return RLT__SPOP_ST_BAD_VERSION;
    if (h->max_frame < RLT__SPOP_MIN_FRAME) return RLT__SPOP_ST_BAD_FRAME_SIZE;
    return RLT__SPOP_ST_NORMAL;
}

/* ---- writers ---------------------------------------------------------------------------- */

static void put_varint(rlt__obuf *out, uint64_t v)
{
    unsigned char b[VARINT_MAX];
    size_t n = 0;
    if (v < 240) {
        b[n++] = (unsigned char)v;
    } else {
        b[n++] = (unsigned char)(v | 240);
        v = (v - 240) >> 4;
        while (v >= 128) {
            b[n++] = (unsigned char)(v | 128);
            v = (v - 128) >> 7;
        }
        b[n++] = (unsigned char)v;
    }
    rlt__obuf_put(out, b, n);
}

static void put_bytes(rlt__obuf *out, const void *s, size_t n)
{
    put_varint(out, n);
    rlt__obuf_put(out, s, n);
}

static void put_byte(rlt__obuf *out, unsigned v)
{
    unsigned char b = (unsigned char)v;
    rlt__obuf_put(out, &b, 1);
}

/* The length, type, flags (FIN) and ids; returns where the length goes. */
static size_t frame_begin(rlt__obuf *out, unsigned type, uint64_t stream_id, uint64_t frame_id)
{
    size_t start = out->len;
    static const unsigned char fin[8] = {0, 0, 0, 0, 0, 0, 0, 1};
    rlt__obuf_put(out, fin, 4); /* the length, written by frame_end */
    put_byte(out, type);
    rlt__obuf_put(out, fin + 4, 4);
    put_varint(out, stream_id);
    put_varint(out, frame_id);
    return start;
}

static void frame_end(rlt__obuf *out, size_t start)
{
    if (out->overflow || out->len < start + 4) return;
    size_t n = out->len - start - 4;
    unsigned char *p = (unsigned char *)out->data + start;
    p[0] = (unsigned char)(n >> 24);
    p[1] = (unsigned char)(n >> 16);
    p[2] = (unsigned char)(n >> 8);
    p[3] = (unsigned char)n;
}

static void kv_str(rlt__obuf *out, const char *name, const char *s, size_t n)
{
    put_bytes(out, name, strlen(name));
    put_byte(out, RLT__SPOP_T_STRING);
    put_bytes(out, s, n);
}

static void kv_u32(rlt__obuf *out, const char *name, uint32_t v)
{
    put_bytes(out, name, strlen(name));
    put_byte(out, RLT__SPOP_T_UINT32);
    put_varint(out, v);
}

void rlt__spop_put_agent_hello(rlt__obuf *out, uint32_t max_frame)
{
    size_t st = frame_begin(out, RLT__SPOP_AGENT_HELLO, 0, 0);
    kv_str(out, "version", "2.0", 3);
    kv_u32(out, "max-frame-size", max_frame);
    kv_str(out, "capabilities", "pipelining", 10);
    frame_end(out, st);
}

void rlt__spop_put_disconnect(rlt__obuf *out, rlt__spop_status status, const char *message)
{
    size_t st = frame_begin(out, RLT__SPOP_AGENT_DISCONNECT, 0, 0);
    kv_u32(out, "status-code", (uint32_t)status);
    kv_str(out, "message", message, strlen(message));
    frame_end(out, st);
}

size_t rlt__spop_ack_begin(rlt__obuf *out, uint64_t stream_id, uint64_t frame_id)
{
    return frame_begin(out, RLT__SPOP_ACK, stream_id, frame_id);
}

/* SET-VAR (action 1) with 3 arguments, in the transaction's scope (2). */
static void set_var_head(rlt__obuf *out, const char *name)
{
    static const unsigned char head[3] = {1, 3, 2};
    rlt__obuf_put(out, head, 3);
    put_bytes(out, name, strlen(name));
}

void rlt__spop_ack_set_int(rlt__obuf *out, const char *name, int64_t v)
{
    set_var_head(out, name);
    put_byte(out, RLT__SPOP_T_INT64);
    put_varint(out, (uint64_t)v);
}

void rlt__spop_ack_set_bool(rlt__obuf *out, const char *name, bool v)
{
    set_var_head(out, name);
    put_byte(out, RLT__SPOP_T_BOOL | (v ? 16u : 0u));
}

void rlt__spop_ack_set_str(rlt__obuf *out, const char *name, const char *s, size_t n)
{
    set_var_head(out, name);
    put_byte(out, RLT__SPOP_T_STRING);
    put_bytes(out, s, n);
}

void rlt__spop_ack_end(rlt__obuf *out, size_t start)
{
    frame_end(out, start);
}

const char *rlt__spop_status_text(rlt__spop_status st)
{
    switch (st) {
    case RLT__SPOP_ST_NORMAL:
        return "normal";
    case RLT__SPOP_ST_IO:
        return "I/O error";
    case RLT__SPOP_ST_TIMEOUT:
        return "a timeout occurred";
    case RLT__SPOP_ST_TOO_BIG:
        return "frame is too big";
    case RLT__SPOP_ST_INVALID:
        return "invalid frame received";
    case RLT__SPOP_ST_NO_VERSION:
        return "version value not found";
    case RLT__SPOP_ST_NO_FRAME_SIZE:
        return "max-frame-size value not found";
    case RLT__SPOP_ST_NO_CAPABILITIES:
        return "capabilities value not found";
    case RLT__SPOP_ST_BAD_VERSION:
        return "unsupported version";
    case RLT__SPOP_ST_BAD_FRAME_SIZE:
        return "max-frame-size too big or too small";
    case RLT__SPOP_ST_NO_FRAGMENTATION:
        return "payload fragmentation is not supported";
    case RLT__SPOP_ST_INTERLACED:
        return "invalid interlaced frames";
    case RLT__SPOP_ST_NO_FRAME_ID:
        return "frame-id not found";
    case RLT__SPOP_ST_RESOURCE:
        return "resource allocation error";
    case RLT__SPOP_ST_UNKNOWN:
        break;
    }
    return "an unknown error occurred";
}
