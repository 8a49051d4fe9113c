/* Tests of the Rate Limit Quota Service codec (envoy/rlqs_pb.c) against bytes that protobuf's
 * own encoder wrote from proto/rlqs.proto (python3-protobuf, deterministic), and against
 * hostile input: bad wire types, huge BucketIds, counts near 2^64, negative durations. */
#include "test.h"

#include "server/envoy/rlqs_pb.h"

#include <stdio.h>
#include <string.h>

/* Reports{domain "dom", usages [{bucket {name: web, env: prod}, time_elapsed 1.5 s,
 * allowed 7, denied 2^64 - 1}, {bucket {a: b}, time_elapsed -2 s -1 ns}]}. */
static const uint8_t report[] =
    "\x0a\x03\x64\x6f\x6d\x12\x33\x0a\x1a\x0a\x0b\x0a\x03\x65\x6e\x76\x12\x04\x70\x72\x6f\x64"
    "\x0a\x0b\x0a\x04\x6e\x61\x6d\x65\x12\x03\x77\x65\x62\x12\x08\x08\x01\x10\x80\xca\xb5\xee"
    "\x01\x18\x07\x20\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x12\x22\x0a\x08\x0a\x06\x0a\x01"
    "\x61\x12\x01\x62\x12\x16\x08\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01\x10\xff\xff\xff\xff"
    "\xff\xff\xff\xff\xff\x01";

static char err[300];

static bool pair_is(const rlt__entry *e, const char *k, const char *v)
{
    return e->klen == strlen(k) && memcmp(e->key, k, e->klen) == 0 && e->vlen == strlen(v) &&
           memcmp(e->value, v, e->vlen) == 0;
}

/* Checks m[0..len) and starts *it at its first usage; *count gets the usages. */
static int start(const uint8_t *m, size_t len, size_t *count, rlt__rlqs_reader *it)
{
    const char *d;
    size_t dl;
    return rlt__rlqs_decode_reports(m, len, &d, &dl, count, it, err, sizeof err);
}

TEST(a_report_written_by_protobuf_decodes_with_sorted_bucket_ids)
{
    const char *d;
    size_t dl, n;
    rlt__rlqs_reader it;
    ASSERT_EQ(
        rlt__rlqs_decode_reports(report, sizeof report - 1, &d, &dl, &n, &it, err, sizeof err),
        RLT__RLQS_OK);
    ASSERT(dl == 3 && memcmp(d, "dom", 3) == 0);
    ASSERT_EQ(n, 2);
    rlt__rlqs_usage u;
    ASSERT_EQ(rlt__rlqs_next_usage(&it, &u, err, sizeof err), RLT__RLQS_OK);
    ASSERT_EQ(u.id.n, 2);
    ASSERT(pair_is(&u.id.pairs[0], "env", "prod") && pair_is(&u.id.pairs[1], "name", "web"));
    ASSERT_EQ(u.elapsed, 1500000000);
    ASSERT_EQ(u.allowed, 7);
    ASSERT(u.denied == UINT64_MAX);
    ASSERT_EQ(rlt__rlqs_next_usage(&it, &u, err, sizeof err), RLT__RLQS_OK);
    ASSERT(u.id.n == 1 && pair_is(&u.id.pairs[0], "a", "b"));
    ASSERT_EQ(u.elapsed, -2000000001);
    ASSERT(u.allowed == 0 && u.denied == 0);
    ASSERT_EQ(rlt__rlqs_next_usage(&it, &u, err, sizeof err), RLT__RLQS_END);
    char key[64];
    ASSERT_EQ(rlt__rlqs_id_key(&u.id, key, sizeof key), 4);
    ASSERT(memcmp(key, "a\0b\0", 4) == 0);
}

/* The same message written with bucket_quota_usages as upstream's newer map<uint64, usage>:
 * each entry is {1: key, 2: usage}. */
TEST(the_map_form_of_bucket_quota_usages_reads_as_the_list)
{
    static const uint8_t m[] = "\x12\x0e\x08\x2a\x12\x0a\x0a\x08\x0a\x06\x0a\x01\x78\x12\x01\x79"
                               "\x12\x0c\x0a\x08\x0a\x06\x0a\x01\x78\x12\x01\x7a\x18\x05";
    size_t n;
    rlt__rlqs_reader it;
    ASSERT_EQ(start(m, sizeof m - 1, &n, &it), RLT__RLQS_OK);
    ASSERT_EQ(n, 2);
    rlt__rlqs_usage u;
    ASSERT_EQ(rlt__rlqs_next_usage(&it, &u, err, sizeof err), RLT__RLQS_OK);
    ASSERT(u.id.n == 1 && pair_is(&u.id.pairs[0], "x", "y"));
    ASSERT_EQ(rlt__rlqs_next_usage(&it, &u, err, sizeof err), RLT__RLQS_OK);
    ASSERT(u.id.n == 1 && pair_is(&u.id.pairs[0], "x", "z") && u.allowed == 5);
}

static int decode(const uint8_t *m, size_t len)
{
    size_t n;
    rlt__rlqs_reader it;
    return start(m, len, &n, &it);
}

TEST(hostile_reports_are_refused_without_reading_past_the_end)
{
    /* Truncated at every length: never OK except the empty prefix and whole fields. */
    for (size_t i = 1; i < sizeof report - 1; i++) {
        int st = decode(report, i);
        ASSERT(st == RLT__RLQS_OK || st == RLT__RLQS_MALFORMED);
    }
    /* An empty BucketId, or none: read as a usage of 0 pairs (the service skips it and answers
     * the report's other buckets, as Envoy skips such an action), not the report's refusal. */
    static const char *const noid[] = {"\x12\x02\x0a\x00", "\x12\x02\x18\x01"};
    for (size_t k = 0; k < 2; k++) {
        size_t n;
        rlt__rlqs_reader it;
        static rlt__rlqs_usage u;
        ASSERT_EQ(start((const uint8_t *)noid[k], 4, &n, &it), RLT__RLQS_OK);
        ASSERT_EQ(n, 1);
        ASSERT_EQ(rlt__rlqs_next_usage(&it, &u, err, sizeof err), RLT__RLQS_OK);
        ASSERT_EQ(u.id.n, 0);
    }
    ASSERT_EQ(decode((const uint8_t *)"\x0a\x01\x00", 3), RLT__RLQS_MALFORMED); /* NUL */
    ASSERT_EQ(decode((const uint8_t *)"\x12\x01\x1b", 3), RLT__RLQS_MALFORMED); /* group */
    /* An empty value in a pair. */
    ASSERT_EQ(decode((const uint8_t *)"\x12\x07\x0a\x05\x0a\x03\x0a\x01\x61", 9),
              RLT__RLQS_MALFORMED);
    ASSERT(strstr(err, "empty") != NULL);
}

/* A BucketId of `pairs` distinct pairs of `vlen`-byte values. */
static size_t big_id(uint8_t *out, int pairs, size_t vlen)
{
    uint8_t id[8192];
    size_t o = 0;
    for (int i = 0; i < pairs; i++) {
        char k[8];
        int kl = snprintf(k, sizeof k, "k%d", i);
        id[o++] = 0x0a;
        id[o++] = (uint8_t)(4 + kl + vlen);
        id[o++] = 0x0a;
        id[o++] = (uint8_t)kl;
        memcpy(id + o, k, (size_t)kl);
        o += (size_t)kl;
        id[o++] = 0x12;
        id[o++] = (uint8_t)vlen;
        memset(id + o, 'v', vlen);
        o += vlen;
    }
    size_t n = 0;
    out[n++] = 0x12; /* usage */
    out[n++] = (uint8_t)(0x80 | ((o + 3) & 0x7f));
    out[n++] = (uint8_t)((o + 3) >> 7);
    out[n++] = 0x0a; /* bucket_id */
    out[n++] = (uint8_t)(0x80 | (o & 0x7f));
    out[n++] = (uint8_t)(o >> 7);
    memcpy(out + n, id, o);
    return n + o;
}

TEST(bucket_ids_past_their_bounds_are_refused_as_too_large)
{
    uint8_t m[9000];
    ASSERT_EQ(decode(m, big_id(m, 16, 20)), RLT__RLQS_OK);
    ASSERT_EQ(decode(m, big_id(m, 17, 20)), RLT__RLQS_TOO_LARGE);
    ASSERT(strstr(err, "16 pairs") != NULL);
    ASSERT_EQ(decode(m, big_id(m, 9, 120)), RLT__RLQS_TOO_LARGE);
    ASSERT(strstr(err, "1024 bytes") != NULL);
}

TEST(a_repeated_key_keeps_its_last_value)
{
    /* bucket {x: 1}, {x: 2}: a map keeps the last value. */
    static const uint8_t ok[] = "\x12\x12\x0a\x10\x0a\x06\x0a\x01\x78\x12\x01\x31\x0a\x06\x0a\x01"
                                "\x78\x12\x01\x32";
    size_t n;
    rlt__rlqs_reader it;
    ASSERT_EQ(start(ok, sizeof ok - 1, &n, &it), RLT__RLQS_OK);
    rlt__rlqs_usage u;
    ASSERT_EQ(rlt__rlqs_next_usage(&it, &u, err, sizeof err), RLT__RLQS_OK);
    ASSERT(u.id.n == 1 && pair_is(&u.id.pairs[0], "x", "2"));
}

/* RateLimitQuotaResponse as protobuf writes it: a token bucket {10, 3 per 1 s} with TTL
 * 2.0000005 s, an allow-all (ALLOW_ALL is 0 and still written: a oneof member) with 4 s, a
 * deny-all with 1 s, and an abandon. */
static const uint8_t response[] =
    "\x0a\x33\x0a\x1a\x0a\x0b\x0a\x03\x65\x6e\x76\x12\x04\x70\x72\x6f\x64\x0a\x0b\x0a\x04\x6e"
    "\x61\x6d\x65\x12\x03\x77\x65\x62\x12\x15\x12\x05\x08\x02\x10\xf4\x03\x1a\x0c\x1a\x0a\x08"
    "\x0a\x12\x02\x08\x03\x1a\x02\x08\x01\x0a\x14\x0a\x08\x0a\x06\x0a\x01\x61\x12\x01\x62\x12"
    "\x08\x12\x02\x08\x04\x1a\x02\x08\x00\x0a\x14\x0a\x08\x0a\x06\x0a\x01\x61\x12\x01\x62\x12"
    "\x08\x12\x02\x08\x01\x1a\x02\x08\x01\x0a\x0c\x0a\x08\x0a\x06\x0a\x01\x61\x12\x01\x62\x1a"
    "\x00";

TEST(a_response_is_written_as_protobuf_writes_it)
{
    rlt__rlqs_bucket_id web = {2, {{"env", 3, "prod", 4}, {"name", 4, "web", 3}}};
    rlt__rlqs_bucket_id ab = {1, {{"a", 1, "b", 1}}};
    rlt__rlqs_action a[] = {
        {&web, RLT__RLQS_TOKEN_BUCKET, 10, 3, RLT_NS_PER_S, 2 * RLT_NS_PER_S + 500},
        {&ab, RLT__RLQS_ALLOW_ALL, 0, 0, 0, 4 * RLT_NS_PER_S},
        {&ab, RLT__RLQS_DENY_ALL, 0, 0, 0, RLT_NS_PER_S},
        {&ab, RLT__RLQS_ABANDON, 0, 0, 0, 0},
    };
    rlt__obuf o = {.max = 1 << 20};
    rlt__rlqs_encode_response(a, 4, &o);
    ASSERT_EQ(o.len, sizeof response - 1);
    ASSERT(memcmp(o.data, response, o.len) == 0);
    rlt__obuf_free(&o);
}

TEST(the_largest_bucket_id_is_written_whole)
{
    rlt__rlqs_bucket_id id = {RLT__RLQS_MAX_PAIRS, {{0}}};
    static char keys[RLT__RLQS_MAX_PAIRS][4], val[64];
    memset(val, 'v', sizeof val);
    for (int i = 0; i < RLT__RLQS_MAX_PAIRS; i++) {
        snprintf(keys[i], sizeof keys[i], "%02d", i);
        id.pairs[i] = (rlt__entry){keys[i], 2, val, 62};
    }
    rlt__rlqs_action a = {&id,      RLT__RLQS_TOKEN_BUCKET, UINT32_MAX, UINT32_MAX, INT64_MAX,
                          INT64_MAX};
    rlt__obuf o = {.max = 1 << 20};
    rlt__rlqs_encode_response(&a, 1, &o);
    /* 16 entries of 2 + (2 + 2) + (2 + 62) bytes, inside the action and the message. */
    ASSERT(o.len > 16 * 70);
    /* The action's BucketId (its field 1) read back as a usage's bucket_id. */
    const uint8_t *p = (const uint8_t *)o.data;
    size_t i = 1;
    while (p[i] & 0x80) /* the action's length */
        i++;
    i++;
    ASSERT_EQ(p[i], 0x0a);
    size_t idlen = 0, at = i + 1;
    for (int sh = 0;; sh += 7) {
        idlen |= (size_t)(p[at] & 0x7f) << sh;
        if (!(p[at++] & 0x80)) break;
    }
    uint8_t rep[4096];
    size_t hdr = at - i; /* tag and length of bucket_id, copied as they are */
    rep[0] = 0x12;
    rep[1] = (uint8_t)(0x80 | ((hdr + idlen) & 0x7f));
    rep[2] = (uint8_t)((hdr + idlen) >> 7);
    memcpy(rep + 3, p + i, hdr + idlen);
    size_t n;
    rlt__rlqs_reader it;
    ASSERT_EQ(start(rep, 3 + hdr + idlen, &n, &it), RLT__RLQS_OK);
    rlt__rlqs_usage u;
    ASSERT_EQ(rlt__rlqs_next_usage(&it, &u, err, sizeof err), RLT__RLQS_OK);
    ASSERT_EQ(u.id.n, RLT__RLQS_MAX_PAIRS);
    for (int k = 0; k < RLT__RLQS_MAX_PAIRS; k++)
        ASSERT(u.id.pairs[k].klen == 2 && memcmp(u.id.pairs[k].key, keys[k], 2) == 0 &&
               u.id.pairs[k].vlen == 62);
    rlt__obuf_free(&o);
}
