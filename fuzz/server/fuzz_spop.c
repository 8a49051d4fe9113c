/* libFuzzer target: the SPOP v2 frame parser (src/server/spop/spop.c) over arbitrary bytes,
 * pipelined, checking its contract: consumed <= len and > 4, the payload inside the frame,
 * errors with a status of the DISCONNECT list and a message, every prefix of a whole frame
 * PARTIAL (the length alone decides TOO_BIG), the typed-data reader never past a payload, and
 * the writers' frames parsed back to what was written. */
#include "server/spop/spop.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) abort();                                                                         \
    } while (0)

/* Walks a payload as NOTIFY's messages and as HELLO's KV list: the reader stays inside. */
static void walk(const unsigned char *p, size_t n)
{
    rlt__spop_reader r = {p, p + n};
    while (r.p < r.end) {
        const unsigned char *s;
        size_t len;
        rlt__spop_value v;
        if (!rlt__spop_read_bytes(&r, &s, &len)) break;
        CHECK(s >= p && len <= n && (size_t)(s - p) <= n - len);
        if (!rlt__spop_read_value(&r, &v)) break;
        CHECK(r.p <= r.end);
        if (v.s) CHECK(v.s >= p && (size_t)(v.s - p) + v.n <= n);
    }
    rlt__spop_hello h;
    rlt__spop_status st = rlt__spop_hello_parse(p, n, &h);
    CHECK(st == RLT__SPOP_ST_NORMAL ||
          (st >= RLT__SPOP_ST_INVALID && st <= RLT__SPOP_ST_BAD_FRAME_SIZE));
    if (st == RLT__SPOP_ST_NORMAL) CHECK(h.v2 && h.max_frame >= RLT__SPOP_MIN_FRAME);
}

static void roundtrip(uint64_t sid, uint64_t fid, int64_t v)
{
    rlt__obuf o = {0};
    size_t st = rlt__spop_ack_begin(&o, sid, fid);
    rlt__spop_ack_set_int(&o, "n", v);
    rlt__spop_ack_end(&o, st);
    rlt__spop_frame f;
    rlt__spop_status status;
    const char *err;
    CHECK(rlt__spop_frame_parse(o.data, o.len, RLT__SPOP_MAX_FRAME, &f, &status, &err) ==
          (ssize_t)o.len);
    CHECK(f.type == RLT__SPOP_ACK && f.stream_id == sid && f.frame_id == fid);
    /* action SET-VAR, 3 args, scope txn, "n", int64 v */
    CHECK(f.plen >= 5 && f.payload[0] == 1 && f.payload[1] == 3 && f.payload[2] == 2);
    rlt__spop_reader r = {f.payload + 3, f.payload + f.plen};
    const unsigned char *name;
    size_t nlen;
    rlt__spop_value val;
    CHECK(rlt__spop_read_bytes(&r, &name, &nlen) && nlen == 1 && name[0] == 'n');
    CHECK(rlt__spop_read_value(&r, &val) && val.type == RLT__SPOP_T_INT64 && (int64_t)val.u == v);
    CHECK(r.p == r.end);
    rlt__obuf_free(&o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size >= 24) {
        uint64_t a, b, c;
        memcpy(&a, data, 8);
        memcpy(&b, data + 8, 8);
        memcpy(&c, data + 16, 8);
        roundtrip(a, b, (int64_t)c);
    }
    size_t max_frame = size > 0 && (data[0] & 1) ? RLT__SPOP_MIN_FRAME : RLT__SPOP_MAX_FRAME;
    char *buf = malloc(size ? size : 1);
    CHECK(buf != NULL);
    memcpy(buf, data, size);
    size_t off = 0;
    while (off < size) {
        rlt__spop_frame f;
        rlt__spop_status st = RLT__SPOP_ST_UNKNOWN;
        const char *err = NULL;
        ssize_t n = rlt__spop_frame_parse(buf + off, size - off, max_frame, &f, &st, &err);
        if (n == RLT__SPOP_PARTIAL) break;
        if (n == RLT__SPOP_ERROR) {
            CHECK(err != NULL && (st == RLT__SPOP_ST_TOO_BIG || st == RLT__SPOP_ST_INVALID ||
                                  st == RLT__SPOP_ST_NO_FRAGMENTATION));
            break;
        }
        CHECK(n > 4 && (size_t)n <= size - off && (size_t)n - 4 <= max_frame);
        const unsigned char *lo = (const unsigned char *)buf + off;
        CHECK(f.payload >= lo && (size_t)(f.payload - lo) + f.plen == (size_t)n);
        CHECK(f.flags & RLT__SPOP_FIN);
        /* Every strict prefix of a whole frame is PARTIAL. */
        for (size_t k = 0; k < (size_t)n; k += 1 + (size_t)n / 16) {
            rlt__spop_frame g;
            CHECK(rlt__spop_frame_parse(buf + off, k, max_frame, &g, &st, &err) ==
                  RLT__SPOP_PARTIAL);
        }
        walk(f.payload, f.plen);
        off += (size_t)n;
    }
    free(buf);
    return 0;
}
