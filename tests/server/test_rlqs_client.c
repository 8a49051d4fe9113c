/* The client side of the RLQS codec (src/proto/rlqs_client.c, `ratelimit quota`'s) against
 * the daemon's (src/server/envoy/rlqs_pb.c) and against bytes protobuf's own encoder wrote:
 * reports the client writes are what the daemon reads, responses the daemon (and protobuf)
 * write are what the client reads, and malformed responses are refused. */
#include "test.h"

#include "proto/rlqs_client.h"
#include "server/envoy/rlqs_pb.h"

#include <stdio.h>
#include <string.h>

static char err[300];

static bool pair_is(const rlt__entry *e, const char *k, const char *v)
{
    return e->klen == strlen(k) && memcmp(e->key, k, e->klen) == 0 && e->vlen == strlen(v) &&
           memcmp(e->value, v, e->vlen) == 0;
}

static bool cpair_is(const rlt__rlqsc_pair *e, const char *k, const char *v)
{
    return e->klen == strlen(k) && memcmp(e->key, k, e->klen) == 0 && e->vlen == strlen(v) &&
           memcmp(e->value, v, e->vlen) == 0;
}

TEST(a_report_the_client_writes_is_what_the_daemon_reads)
{
    rlt__rlqsc_pair web[] = {{"name", 4, "web", 3}, {"env", 3, "prod", 4}};
    rlt__rlqsc_pair ab[] = {{"a", 1, "b", 1}};
    rlt__rlqsc_usage u[] = {{web, 2, 1500 * RLT_NS_PER_MS, 7, UINT64_MAX}, {ab, 1, 0, 0, 0}};
    uint8_t buf[512];
    size_t n = rlt__rlqsc_encode_reports("dom", u, 2, buf, sizeof buf);
    ASSERT(n > 0);
    const char *d;
    size_t dl, count;
    rlt__rlqs_reader it;
    ASSERT_EQ(rlt__rlqs_decode_reports(buf, n, &d, &dl, &count, &it, err, sizeof err),
              RLT__RLQS_OK);
    ASSERT(dl == 3 && memcmp(d, "dom", 3) == 0);
    ASSERT_EQ(count, 2);
    rlt__rlqs_usage got;
    ASSERT_EQ(rlt__rlqs_next_usage(&it, &got, err, sizeof err), RLT__RLQS_OK);
    ASSERT_EQ(got.id.n, 2);
    ASSERT(pair_is(&got.id.pairs[0], "env", "prod") && pair_is(&got.id.pairs[1], "name", "web"));
    ASSERT_EQ(got.elapsed, 1500 * RLT_NS_PER_MS);
    ASSERT_EQ(got.allowed, 7);
    ASSERT(got.denied == UINT64_MAX);
    ASSERT_EQ(rlt__rlqs_next_usage(&it, &got, err, sizeof err), RLT__RLQS_OK);
    ASSERT(got.id.n == 1 && pair_is(&got.id.pairs[0], "a", "b"));
    ASSERT(got.elapsed == 0 && got.allowed == 0 && got.denied == 0);
    ASSERT_EQ(rlt__rlqs_next_usage(&it, &got, err, sizeof err), RLT__RLQS_END);
}

TEST(a_report_that_does_not_fit_is_not_written)
{
    rlt__rlqsc_pair web[] = {{"name", 4, "web", 3}};
    rlt__rlqsc_usage u = {web, 1, RLT_NS_PER_S, 1, 1};
    uint8_t buf[512];
    size_t n = rlt__rlqsc_encode_reports("dom", &u, 1, buf, sizeof buf);
    ASSERT(n > 0);
    for (size_t cap = 0; cap < n; cap++)
        ASSERT_EQ(rlt__rlqsc_encode_reports("dom", &u, 1, buf, cap), 0);
}

/* RateLimitQuotaResponse as protobuf writes it (the bytes of tests/server/test_rlqs_pb.c): a
 * token bucket {10, 3 per 1 s} with TTL 2.0000005 s for {env: prod, name: web}, then for
 * {a: b} an allow-all with 4 s, a deny-all with 1 s, and an abandon. */
static const uint8_t response[] =
    "\x0a\x33\x0a\x1a\x0a\x0b\x0a\x03\x65\x6e\x76\x12\x04\x70\x72\x6f\x64\x0a\x0b\x0a\x04\x6e"
    "\x61\x6d\x65\x12\x03\x77\x65\x62\x12\x15\x12\x05\x08\x02\x10\xf4\x03\x1a\x0c\x1a\x0a\x08"
    "\x0a\x12\x02\x08\x03\x1a\x02\x08\x01\x0a\x14\x0a\x08\x0a\x06\x0a\x01\x61\x12\x01\x62\x12"
    "\x08\x12\x02\x08\x04\x1a\x02\x08\x00\x0a\x14\x0a\x08\x0a\x06\x0a\x01\x61\x12\x01\x62\x12"
    "\x08\x12\x02\x08\x01\x1a\x02\x08\x01\x0a\x0c\x0a\x08\x0a\x06\x0a\x01\x61\x12\x01\x62\x1a"
    "\x00";

static void read_the_four_actions(const uint8_t *m, size_t len)
{
    rlt__rlqsc_reader r;
    rlt__rlqsc_action a;
    const char *why;
    rlt__rlqsc_reader_init(&r, m, len);
    rlt__rlqsc_pair web[] = {{"name", 4, "web", 3}, {"env", 3, "prod", 4}};
    rlt__rlqsc_pair ab[] = {{"a", 1, "b", 1}};
    ASSERT_EQ(rlt__rlqsc_next_action(&r, &a, &why), 1);
    ASSERT(a.kind == RLT__RLQSC_TOKEN_BUCKET && a.max_tokens == 10 && a.tokens_per_fill == 3);
    ASSERT_EQ(a.fill_interval_ns, RLT_NS_PER_S);
    ASSERT_EQ(a.ttl_ns, 2 * RLT_NS_PER_S + 500);
    ASSERT(a.n == 2 && cpair_is(&a.pairs[0], "env", "prod"));
    ASSERT(rlt__rlqsc_same_id(&a, web, 2)); /* in another order */
    ASSERT(!rlt__rlqsc_same_id(&a, web, 1) && !rlt__rlqsc_same_id(&a, ab, 1));
    ASSERT_EQ(rlt__rlqsc_next_action(&r, &a, &why), 1);
    ASSERT(a.kind == RLT__RLQSC_ALLOW_ALL && a.ttl_ns == 4 * RLT_NS_PER_S);
    ASSERT(rlt__rlqsc_same_id(&a, ab, 1));
    ASSERT_EQ(rlt__rlqsc_next_action(&r, &a, &why), 1);
    ASSERT(a.kind == RLT__RLQSC_DENY_ALL && a.ttl_ns == RLT_NS_PER_S);
    ASSERT_EQ(rlt__rlqsc_next_action(&r, &a, &why), 1);
    ASSERT(a.kind == RLT__RLQSC_ABANDON && rlt__rlqsc_same_id(&a, ab, 1));
    ASSERT_EQ(rlt__rlqsc_next_action(&r, &a, &why), 0);
}

TEST(a_response_protobuf_wrote_reads_back_action_by_action)
{
    read_the_four_actions(response, sizeof response - 1);
}

TEST(a_response_the_daemon_writes_is_what_the_client_reads)
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
    read_the_four_actions((const uint8_t *)o.data, o.len);
    rlt__obuf_free(&o);
}

TEST(malformed_or_unsupported_responses_are_refused_with_a_reason)
{
    rlt__rlqsc_reader r;
    rlt__rlqsc_action a;
    const char *why;
    /* Every truncation of the first action's bytes. */
    for (size_t cut = 1; cut < 0x35; cut++) {
        rlt__rlqsc_reader_init(&r, response, cut);
        ASSERT_EQ(rlt__rlqsc_next_action(&r, &a, &why), -1);
        ASSERT(why != NULL);
    }
    /* requests_per_time_unit (strategy field 2), an action without a BucketId, an action with
     * neither an assignment nor an abandon, an assignment whose strategy holds nothing. */
#define AB "\x0a\x08\x0a\x06\x0a\x01\x61\x12\x01\x62" /* bucket_id {a: b} */
    static const struct {
        const char *bytes;
        size_t len;
        const char *why;
    } bad[] = {
        {"\x0a\x10" AB "\x12\x04\x1a\x02\x12\x00", 18, "requests_per_time_unit"},
        {"\x0a\x02\x1a\x00", 4, "without a BucketId"},
        {"\x0a\x0a" AB, 12, "neither"},
        {"\x0a\x0e" AB "\x12\x02\x1a\x00", 16, "without a rate_limit_strategy"},
    };
#undef AB
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rlt__rlqsc_reader_init(&r, (const uint8_t *)bad[i].bytes, bad[i].len);
        ASSERT_EQ(rlt__rlqsc_next_action(&r, &a, &why), -1);
        ASSERT(why != NULL && strstr(why, bad[i].why) != NULL);
    }
}
