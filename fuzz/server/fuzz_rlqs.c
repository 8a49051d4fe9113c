/* libFuzzer target: the Rate Limit Quota Service codec (envoy/rlqs_pb.h).  Any input is read
 * as a RateLimitQuotaUsageReports; every usage of an accepted report is checked (BucketIds
 * sorted, unique, within their bounds, inside the input), written back as a response and read
 * again, which must give the same BucketId. */
#include "server/envoy/rlqs_pb.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool inside(const char *s, size_t n, const uint8_t *data, size_t size)
{
    return n == 0 || ((const uint8_t *)s >= data && (const uint8_t *)s + n <= data + size);
}

static void check_id(const rlt__rlqs_bucket_id *id, const uint8_t *data, size_t size)
{
    size_t bytes = 0;
    if (id->n > RLT__RLQS_MAX_PAIRS) abort(); /* 0: no BucketId, or an empty one (skipped) */
    for (size_t i = 0; i < id->n; i++) {
        const rlt__entry *e = &id->pairs[i];
        if (e->klen == 0 || e->vlen == 0) abort();
        if (!inside(e->key, e->klen, data, size) || !inside(e->value, e->vlen, data, size)) abort();
        if (memchr(e->key, 0, e->klen) || memchr(e->value, 0, e->vlen)) abort();
        bytes += e->klen + e->vlen;
        if (i > 0) {
            const rlt__entry *p = &id->pairs[i - 1];
            size_t n = p->klen < e->klen ? p->klen : e->klen;
            int c = memcmp(p->key, e->key, n);
            if (c > 0 || (c == 0 && p->klen >= e->klen)) abort(); /* sorted, unique */
        }
    }
    if (bytes > RLT__RLQS_MAX_ID) abort();
}

/* The id written in a response, then read back through a usage: the same pairs. */
static void round_trip(const rlt__rlqs_bucket_id *id)
{
    char k1[RLT__RLQS_MAX_ID + 2 * RLT__RLQS_MAX_PAIRS], k2[sizeof k1];
    size_t n1 = rlt__rlqs_id_key(id, k1, sizeof k1);
    rlt__rlqs_action a = {id, RLT__RLQS_DENY_ALL, 0, 0, 0, RLT_NS_PER_S};
    rlt__obuf o = {.max = 1 << 16};
    rlt__rlqs_encode_response(&a, 1, &o);
    if (o.overflow || o.len < 4) abort();
    /* Response {1: action {1: id, ...}}: the id's tag, length and bytes become a usage's
     * bucket_id, in a report {2: usage}. */
    const uint8_t *p = (const uint8_t *)o.data;
    size_t i = 1, at, idlen = 0;
    while (p[i] & 0x80)
        i++;
    i++; /* past the action's length: its field 1 */
    at = i + 1;
    for (int sh = 0;; sh += 7) {
        idlen |= (size_t)(p[at] & 0x7f) << sh;
        if (!(p[at++] & 0x80)) break;
    }
    size_t body = at - i + idlen;
    static uint8_t rep[1 << 16];
    rep[0] = 0x12;
    rep[1] = (uint8_t)(0x80 | (body & 0x7f));
    rep[2] = (uint8_t)(body >> 7);
    memcpy(rep + 3, p + i, body);
    const char *d;
    size_t dl, cnt;
    rlt__rlqs_reader it;
    char err[200];
    if (rlt__rlqs_decode_reports(rep, 3 + body, &d, &dl, &cnt, &it, err, sizeof err) !=
            RLT__RLQS_OK ||
        cnt != 1)
        abort();
    static rlt__rlqs_usage u;
    if (rlt__rlqs_next_usage(&it, &u, err, sizeof err) != RLT__RLQS_OK) abort();
    size_t n2 = rlt__rlqs_id_key(&u.id, k2, sizeof k2);
    if (n1 != n2 || memcmp(k1, k2, n1) != 0) abort();
    rlt__obuf_free(&o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1 << 20)) return 0;
    const char *d;
    size_t dl, n, seen = 0;
    rlt__rlqs_reader it;
    char err[300];
    int st = rlt__rlqs_decode_reports(data, size, &d, &dl, &n, &it, err, sizeof err);
    if (st != RLT__RLQS_OK) {
        if (st != RLT__RLQS_MALFORMED && st != RLT__RLQS_TOO_LARGE) abort();
        return 0;
    }
    if (!inside(d, dl, data, size) || memchr(d, 0, dl)) abort();
    static rlt__rlqs_usage u;
    while ((st = rlt__rlqs_next_usage(&it, &u, err, sizeof err)) == RLT__RLQS_OK) {
        check_id(&u.id, data, size);
        round_trip(&u.id);
        seen++;
    }
    if (st != RLT__RLQS_END || seen != n) abort();
    return 0;
}
