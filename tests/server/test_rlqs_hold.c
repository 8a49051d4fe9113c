/* Tests of the RLQS quota state's shares and tenants (src/server/envoy/rlqs.c with
 * rlqs_hold.c and rlqs_unmatched.c), time as a parameter: BucketIds that match no rule
 * take no place in the table (issue 42's attack: 65 streams x 1,024 of them), a client's new
 * buckets past its cap are not kept while the other clients' are, its buckets stay charged
 * until freed, its streams past its cap are refused, and tenants reporting the same BucketId
 * each have their own bucket, budget and Redis key.  End to end with grpcio streams:
 * rlqs_integration.py (one_client_filling_its_share_locks_no_other_envoy_out,
 * tenants_reporting_one_bucket_id_each_get_the_whole_budget). */
#include "rlqs_usage.h"
#include "test.h"

#include "server/config/config.h"
#include "server/config/load.h"
#include "server/envoy/rlqs.h"
#include "server/envoy/rlqs_redis.h"
#include "server/envoy/rlqs_unmatched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S RLT_NS_PER_S
#define MS RLT_NS_PER_MS

static const char *yaml = "domain: q\n"
                          "quota_buckets:\n"
                          "  - match: {name: web}\n"
                          "    policy: token_bucket:200/1s,burst=40\n"
                          "  - match: {flood: \"*\"}\n"
                          "    policy: token_bucket:1000/1s\n"
                          "server:\n"
                          "  rlqs_max_buckets_per_client: 100\n";

static rlt__config *config(void)
{
    char err[600];
    rlt__config *c = NULL;
    rlt__config_parse(yaml, strlen(yaml), "q.yaml", &c, err, sizeof err);
    if (c == NULL) fprintf(stderr, "%s\n", err);
    return c;
}

/* A stream of holder `holder` (0: none) with tenant prefix `prefix` ("" none). */
static rlt__rlqs_stream *stream(rlt__rlqs *q, uint64_t holder, const char *prefix,
                                  size_t max_streams)
{
    rlt__rlqs_client who = {holder, prefix, strlen(prefix), max_streams};
    rlt__rlqs_stream *st = NULL;
    return rlt__rlqs_stream_new_for(q, &who, &st) == RLT_OK ? st : NULL;
}

static rlt__rlqs_stats stats(rlt__rlqs *q)
{
    rlt__rlqs_stats s;
    rlt__rlqs_stats_get(q, &s);
    return s;
}

TEST(bucket_ids_that_match_no_rule_take_no_place_in_the_table)
{
    rlt__config *c = config();
    rlt__rlqs *q;
    ASSERT(c != NULL);
    ASSERT_EQ(rlt__rlqs_open(&q), RLT_OK);
    rlt_ns now = 10 * S;
    /* issue 42: one client's 65 streams x 1,024 BucketIds that match no rule filled the
     * 65,536-bucket table and every later stream ended RESOURCE_EXHAUSTED */
    rlt__rlqs_stream *att[65];
    for (int i = 0; i < 65; i++) {
        ASSERT((att[i] = stream(q, 2, "", 256)) != NULL);
        for (int j = 0; j < 1024; j++) {
            char v[32];
            snprintf(v, sizeof v, "%d-%d", i, j);
            rlt__rlqs_answer a = rlqs_usage(q, c, att[i], "junk", v, 10, now);
            ASSERT_EQ(a.kind, RLT__QA_ALLOW_ALL); /* quota_default */
            ASSERT_EQ(a.ttl, 3 * S);              /* 3 x the 1 s interval */
        }
    }
    ASSERT_EQ(stats(q).buckets, 0);
    ASSERT_EQ(stats(q).members, 0);
    /* sent again only when a third of its TTL has passed */
    ASSERT_EQ(rlqs_usage(q, c, att[0], "junk", "0-0", 10, now + 500 * MS).kind, RLT__QA_NONE);
    ASSERT_EQ(rlqs_usage(q, c, att[0], "junk", "0-0", 10, now + S).kind, RLT__QA_ALLOW_ALL);
    /* past the 1,024 a stream remembers: answered at every report, still no bucket */
    ASSERT_EQ(rlqs_usage(q, c, att[0], "junk", "extra", 10, now).kind, RLT__QA_ALLOW_ALL);
    ASSERT_EQ(rlqs_usage(q, c, att[0], "junk", "extra", 10, now + 100 * MS).kind,
              RLT__QA_ALLOW_ALL);
    /* another Envoy gets its assignment; so does the attacker's own matched bucket */
    rlt__rlqs_stream *honest = stream(q, 4, "", 256);
    ASSERT_EQ(rlqs_usage(q, c, honest, "name", "web", 10, now).kind, RLT__QA_TOKEN_BUCKET);
    ASSERT_EQ(rlqs_usage(q, c, att[1], "flood", "x", 10, now).kind, RLT__QA_TOKEN_BUCKET);
    ASSERT_EQ(stats(q).buckets, 2);
    for (int i = 0; i < 65; i++)
        rlt__rlqs_stream_end(q, att[i], now);
    rlt__rlqs_stream_end(q, honest, now);
    rlt__rlqs_close(q);
    rlt__config_free(c);
}

/* The per-stream set of unmatched BucketIds against a plain array: hashes drawn from a small
 * range whose low bits collide (long probe runs, one wrapping past the last slot), answered
 * and forgotten in a seeded order; at one instant, an id is sent exactly when the model does
 * not hold it. */
TEST(the_unmatched_set_matches_a_naive_model_through_collisions_and_deletions)
{
    rlt__config *c = config();
    const rlt__domain *d = rlt__config_domain(c, "q", 1);
    ASSERT(d != NULL);
    rlt__rlqs_unmatched s = {0};
    static bool held[300];
    uint64_t x = 88172645463325252u;
    for (int i = 0; i < 200000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        uint64_t k = x % 300;
        /* half the hashes' low bits all 0, half all 1: two long probe runs, one that wraps */
        uint64_t h = k << 20 | (k & 1 ? 0xfffff : 0);
        if ((x >> 32) % 3 == 0) {
            rlt__rlqs_unmatched_forget(&s, h);
            held[k] = false;
            continue;
        }
        int kind = -1;
        rlt_ns ttl = 0;
        bool sent = rlt__rlqs_unmatched_answer(&s, d, h, S, 2 * S, 10 * S, &kind, &ttl);
        if (sent != !held[k])
            RLT_FAIL_("step %d, id %d: sent %d, model %d", i, (int)k, sent, held[k]);
        held[k] = true;
        if (sent) ASSERT_EQ(kind, RLT__QUOTA_ALLOW_ALL);
        if (sent) ASSERT_EQ(ttl, 3 * S);
    }
    size_t n = 0;
    for (int k = 0; k < 300; k++)
        n += held[k];
    ASSERT_EQ(s.n, n);
    rlt__rlqs_unmatched_free(&s);
    rlt__config_free(c);
}

TEST(a_clients_new_buckets_past_its_cap_get_no_answer_and_others_are_served)
{
    rlt__config *c = config(); /* rlqs_max_buckets_per_client: 100 */
    rlt__rlqs *q;
    ASSERT_EQ(rlt__rlqs_open(&q), RLT_OK);
    rlt_ns now = 10 * S;
    rlt__rlqs_stream *a1 = stream(q, 2, "", 256), *a2 = stream(q, 2, "", 256);
    rlt__rlqs_stream *b = stream(q, 4, "", 256);
    for (int i = 0; i < 150; i++) {
        char v[16];
        snprintf(v, sizeof v, "%d", i);
        int want = i < 100 ? RLT__QA_TOKEN_BUCKET : RLT__QA_NONE;
        ASSERT_EQ(rlqs_usage(q, c, a1, "flood", v, 10, now).kind, want);
    }
    ASSERT_EQ(stats(q).buckets, 100);
    ASSERT_EQ(stats(q).c.over_cap, 50);
    /* the same client's other stream: its share is spent too; its known buckets still answer */
    ASSERT_EQ(rlqs_usage(q, c, a2, "flood", "new", 10, now).kind, RLT__QA_NONE);
    ASSERT_EQ(rlqs_usage(q, c, a2, "flood", "7", 10, now).kind, RLT__QA_TOKEN_BUCKET);
    /* another client is served, and joining its bucket costs the first one nothing */
    ASSERT_EQ(rlqs_usage(q, c, b, "flood", "b", 10, now).kind, RLT__QA_TOKEN_BUCKET);
    ASSERT_EQ(rlqs_usage(q, c, b, "name", "web", 10, now).kind, RLT__QA_TOKEN_BUCKET);
    ASSERT_EQ(rlqs_usage(q, c, a1, "name", "web", 10, now).kind, RLT__QA_TOKEN_BUCKET);
    ASSERT_EQ(stats(q).buckets, 102);
    rlt__rlqs_stream_end(q, a1, now);
    rlt__rlqs_stream_end(q, a2, now);
    rlt__rlqs_stream_end(q, b, now);
    rlt__rlqs_close(q);
    rlt__config_free(c);
}

TEST(a_clients_buckets_stay_charged_until_they_are_freed)
{
    rlt__config *c = config();
    rlt__rlqs *q;
    ASSERT_EQ(rlt__rlqs_open(&q), RLT_OK);
    rlt_ns now = 10 * S;
    rlt__rlqs_stream *a = stream(q, 2, "", 256);
    for (int i = 0; i < 100; i++) {
        char v[16];
        snprintf(v, sizeof v, "%d", i);
        ASSERT_EQ(rlqs_usage(q, c, a, "flood", v, 10, now).kind, RLT__QA_TOKEN_BUCKET);
    }
    /* ending the stream and opening another gives nothing back while the buckets idle */
    rlt__rlqs_stream_end(q, a, now);
    a = stream(q, 2, "", 256);
    ASSERT_EQ(rlqs_usage(q, c, a, "flood", "new", 10, now + S).kind, RLT__QA_NONE);
    ASSERT_EQ(stats(q).buckets, 100);
    /* a TTL (3 s) after their last member left they are freed, and the share with them */
    ASSERT_EQ(rlqs_usage(q, c, a, "flood", "new", 10, now + 3 * S).kind, RLT__QA_TOKEN_BUCKET);
    ASSERT_EQ(stats(q).buckets, 1);
    rlt__rlqs_stream_end(q, a, now + 3 * S);
    rlt__rlqs_close(q);
    rlt__config_free(c);
}

TEST(a_clients_streams_past_its_cap_are_refused)
{
    rlt__rlqs *q;
    ASSERT_EQ(rlt__rlqs_open(&q), RLT_OK);
    rlt__rlqs_client who = {2, NULL, 0, 2}, other = {4, NULL, 0, 2};
    rlt__rlqs_stream *s1, *s2, *s3, *o;
    ASSERT_EQ(rlt__rlqs_stream_new_for(q, &who, &s1), RLT_OK);
    ASSERT_EQ(rlt__rlqs_stream_new_for(q, &who, &s2), RLT_OK);
    ASSERT_EQ(rlt__rlqs_stream_new_for(q, &who, &s3), RLT_EFULL);
    ASSERT_EQ(rlt__rlqs_stream_new_for(q, &other, &o), RLT_OK);
    ASSERT_EQ(stats(q).streams, 3);
    rlt__rlqs_stream_end(q, s1, 0);
    ASSERT_EQ(rlt__rlqs_stream_new_for(q, &who, &s3), RLT_OK);
    rlt__rlqs_stream_end(q, s2, 0);
    rlt__rlqs_stream_end(q, s3, 0);
    rlt__rlqs_stream_end(q, o, 0);
    ASSERT_EQ(stats(q).streams, 0);
    rlt__rlqs_close(q);
}

/* The token rate (per second) of the last token bucket sent to each of two streams that both
 * report bucket {name: web} at 400/s for 5 s. */
static void both_heavy(rlt__rlqs *q, const rlt__config *c, rlt__rlqs_stream *x,
                       rlt__rlqs_stream *y, rlt_ns now, int64_t *rx, int64_t *ry)
{
    *rx = *ry = -1;
    for (int i = 0; i < 10; i++) {
        rlt_ns t = now + i * 500 * MS;
        rlt__rlqs_answer a = rlqs_usage(q, c, x, "name", "web", 400, t);
        rlt__rlqs_answer b = rlqs_usage(q, c, y, "name", "web", 400, t);
        if (a.kind == RLT__QA_TOKEN_BUCKET) *rx = (int64_t)a.tokens_per_fill * S / a.fill_interval;
        if (b.kind == RLT__QA_TOKEN_BUCKET) *ry = (int64_t)b.tokens_per_fill * S / b.fill_interval;
    }
}

TEST(tenants_reporting_one_bucket_id_each_get_the_whole_budget)
{
    rlt__config *c = config(); /* web: 200/s */
    rlt__rlqs *q;
    ASSERT_EQ(rlt__rlqs_open(&q), RLT_OK);
    rlt_ns now = 10 * S;
    rlt__rlqs_stream *acme = stream(q, 3, "acme:", 256), *umb = stream(q, 5, "umbrella:", 256);
    int64_t ra, ru;
    both_heavy(q, c, acme, umb, now, &ra, &ru);
    printf("    tenants: %lld/s and %lld/s of 200/s\n", (long long)ra, (long long)ru);
    ASSERT_EQ(stats(q).buckets, 2);
    ASSERT(ra >= 150 && ru >= 150); /* each alone in its bucket */
    /* without tenants, unchanged: one bucket, its budget shared */
    rlt__rlqs_stream *x = stream(q, 2, "", 256), *y = stream(q, 4, "", 256);
    int64_t rx, ry;
    both_heavy(q, c, x, y, now + 10 * S, &rx, &ry);
    printf("    admins: %lld/s and %lld/s of 200/s\n", (long long)rx, (long long)ry);
    ASSERT_EQ(stats(q).buckets, 3);
    ASSERT(rx > 0 && ry > 0 && rx + ry <= 200);
    rlt__rlqs_stream_end(q, acme, now);
    rlt__rlqs_stream_end(q, umb, now);
    rlt__rlqs_stream_end(q, x, now);
    rlt__rlqs_stream_end(q, y, now);
    rlt__rlqs_close(q);
    rlt__config_free(c);
}

static void nop(void *arg)
{
    (void)arg;
}

TEST(a_tenants_bucket_is_claimed_in_redis_under_its_prefix)
{
    rlt__config *c = config();
    rlt__rlqs *q;
    ASSERT_EQ(rlt__rlqs_open(&q), RLT_OK);
    rlt__rlqs_redis_mode(q, nop, NULL);
    rlt_ns now = 10 * S;
    rlt__rlqs_stream *acme = stream(q, 3, "acme:", 256), *admin = stream(q, 2, "", 256);
    rlqs_usage(q, c, acme, "name", "web", 10, now);
    rlqs_usage(q, c, admin, "name", "web", 10, now);
    rlt__rlqs_chunk ch = {0};
    rlt__rlqs_chunk_begin(&ch);
    ASSERT_EQ(rlt__rlqs_claims(q, now, S, &ch), RLT_OK);
    ASSERT_EQ(ch.n, 2);
    /* the per-request doors' habit: the tenant's prefix before the key (<prefix>rlqs:{...}) */
    static const char want_acme[] = "acme:q\0name=web", want_admin[] = "q\0name=web";
    int seen = 0;
    for (size_t i = 0; i < ch.n; i++) {
        const rlt__quota_exchange *x = &ch.c[i].x;
        if (x->klen == sizeof want_acme - 1 && memcmp(x->key, want_acme, x->klen) == 0) seen |= 1;
        if (x->klen == sizeof want_admin - 1 && memcmp(x->key, want_admin, x->klen) == 0) seen |= 2;
    }
    ASSERT_EQ(seen, 3);
    rlt__rlqs_chunk_free(&ch);
    rlt__rlqs_stream_end(q, acme, now);
    rlt__rlqs_stream_end(q, admin, now);
    rlt__rlqs_redis_mode(q, NULL, NULL);
    rlt__rlqs_close(q);
    rlt__config_free(c);
}
