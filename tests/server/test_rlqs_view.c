/* Tests of the RLQS quota state's bounded snapshot (src/server/envoy/rlqs_view.c), time as a
 * parameter: with 10,001 buckets it shows the top 20 by demand and sums the rest, the sums
 * adding up to every bucket's; ties go to the oldest bucket; departed members' assignments
 * count until their TTL and not after; Redis mode's rows carry the claims; no state is an empty
 * view.  End to end (the Live page, /v1/stats and /metrics from grpcio streams):
 * tests/web/quotas.mjs. */
#include "rlqs_usage.h"
#include "test.h"

#include "server/config/config.h"
#include "server/config/load.h"
#include "server/envoy/rlqs.h"
#include "server/envoy/rlqs_redis.h"
#include "server/envoy/rlqs_view.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S RLT_NS_PER_S
#define MS RLT_NS_PER_MS

static const char *yaml = "domain: q\n"
                          "quota_buckets:\n"
                          "  - match: {name: web}\n"
                          "    policy: token_bucket:200/1s,burst=40\n"
                          "  - match: {user: \"*\"}\n"
                          "    policy: token_bucket:100/1s,burst=20\n"
                          "  - match: {name: closed}\n"
                          "    blanket: deny_all\n";

static rlt__config *config(void)
{
    char err[600];
    rlt__config *c = NULL;
    rlt__config_parse(yaml, strlen(yaml), "q.yaml", &c, err, sizeof err);
    if (c == NULL) fprintf(stderr, "%s\n", err);
    return c;
}

static rlt__rlqs_stream *stream(rlt__rlqs *q)
{
    rlt__rlqs_stream *st = NULL;
    return rlt__rlqs_stream_new(q, &st) == RLT_OK ? st : NULL;
}

static int64_t sum_demand(const rlt__rlqs_view *v)
{
    int64_t d = v->other.demand;
    for (size_t i = 0; i < v->nrows; i++)
        d += v->rows[i].demand;
    return d;
}

TEST(ten_thousand_buckets_show_the_top_twenty_and_sum_the_rest)
{
    rlt__config *c = config();
    rlt__rlqs *q;
    ASSERT(c != NULL);
    ASSERT_EQ(rlt__rlqs_open(&q), RLT_OK);
    rlt_ns now = 10 * S;
    rlt__rlqs_stream *web[3], *api[10];
    int64_t want = 0;
    for (int i = 0; i < 3; i++) {
        ASSERT((web[i] = stream(q)) != NULL);
        ASSERT_EQ(rlqs_usage(q, c, web[i], "name", "web", 10 * (i + 1), now).kind,
                  RLT__QA_TOKEN_BUCKET);
        want += 10 * (i + 1);
    }
    for (int i = 0; i < 10; i++) {
        ASSERT((api[i] = stream(q)) != NULL);
        for (int j = 0; j < 1000; j++) {
            char v[32];
            snprintf(v, sizeof v, "s%d-u%d", i, j);
            ASSERT_EQ(rlqs_usage(q, c, api[i], "user", v, j % 13, now).kind,
                      RLT__QA_TOKEN_BUCKET);
            want += j % 13;
        }
    }
    rlt__rlqs_view v;
    rlt__rlqs_view_get(q, now, &v);
    ASSERT_EQ(v.at, now);
    ASSERT_EQ(v.buckets, 10001);
    ASSERT_EQ(v.nrows, RLT__RLQS_VIEW_TOP);
    ASSERT_EQ(v.nother, 10001 - RLT__RLQS_VIEW_TOP);
    ASSERT_STR_EQ(v.rows[0].domain, "q");
    ASSERT_STR_EQ(v.rows[0].bucket, "name=web");
    ASSERT_EQ(v.rows[0].members, 3);
    ASSERT_EQ(v.rows[0].demand, 60);
    ASSERT_EQ(v.rows[0].budget_q, 200);
    ASSERT_EQ(v.rows[0].budget_b, 40);
    ASSERT_EQ(v.rows[0].left_q, 200 - v.rows[0].assigned_q);
    ASSERT_EQ(v.rows[0].left_b, 40 - v.rows[0].assigned_b);
    ASSERT_EQ(v.rows[0].fill_interval, S);
    ASSERT_STR_EQ(v.rows[0].policy, "token_bucket:200/1s,burst=40");
    for (size_t i = 1; i < v.nrows; i++) {
        ASSERT_EQ(v.rows[i].demand, 12);
        ASSERT_EQ(v.rows[i].rule, 1);
        ASSERT(v.rows[i].id > v.rows[i - 1].id || i == 1); /* ties: the oldest first */
    }
    ASSERT_EQ(sum_demand(&v), want);
    uint64_t members = v.other.members;
    int64_t budget = v.other.budget_q, assigned = v.other.assigned_q, left = v.other.left_q;
    for (size_t i = 0; i < v.nrows; i++) {
        members += v.rows[i].members;
        budget += v.rows[i].budget_q;
        assigned += v.rows[i].assigned_q;
        left += v.rows[i].left_q;
    }
    ASSERT_EQ(members, 3 + 10000);
    ASSERT_EQ(budget, 200 + 10000 * 100);
    ASSERT_EQ(left, budget - assigned);
    ASSERT_STR_EQ(v.other.bucket, "");
    for (int i = 0; i < 3; i++)
        rlt__rlqs_stream_end(q, web[i], now);
    for (int i = 0; i < 10; i++)
        rlt__rlqs_stream_end(q, api[i], now);
    rlt__rlqs_close(q);
    rlt__config_free(c);
}

TEST(departed_members_assignments_count_until_their_ttl_and_not_after)
{
    rlt__config *c = config();
    rlt__rlqs *q;
    ASSERT(c != NULL);
    ASSERT_EQ(rlt__rlqs_open(&q), RLT_OK);
    rlt_ns now = 10 * S;
    rlt__rlqs_stream *a = stream(q), *b = stream(q);
    rlt__rlqs_answer x = rlqs_usage(q, c, a, "name", "web", 50, now);
    rlt__rlqs_answer y = rlqs_usage(q, c, b, "name", "web", 50, now);
    ASSERT_EQ(x.kind, RLT__QA_TOKEN_BUCKET);
    ASSERT_EQ(y.kind, RLT__QA_TOKEN_BUCKET);
    rlt__rlqs_view v;
    rlt__rlqs_view_get(q, now, &v);
    ASSERT_EQ(v.nrows, 1);
    ASSERT_EQ(v.rows[0].members, 2);
    ASSERT_EQ(v.rows[0].assigned_q, (int64_t)x.tokens_per_fill + y.tokens_per_fill);
    ASSERT_EQ(v.rows[0].assigned_b, (int64_t)x.max_tokens + y.max_tokens);
    rlt__rlqs_stream_end(q, a, now);
    rlt__rlqs_stream_end(q, b, now);
    rlt__rlqs_view_get(q, now + 1 * MS, &v);
    ASSERT_EQ(v.rows[0].members, 0);
    ASSERT_EQ(v.rows[0].departed, 2);
    ASSERT_EQ(v.rows[0].demand, 0); /* demand is the open streams' */
    ASSERT_EQ(v.rows[0].assigned_q, (int64_t)x.tokens_per_fill + y.tokens_per_fill);
    rlt__rlqs_view_get(q, now + x.ttl, &v); /* the TTL has run out: nothing is held */
    ASSERT_EQ(v.rows[0].assigned_q, 0);
    ASSERT_EQ(v.rows[0].assigned_b, 0);
    ASSERT_EQ(v.rows[0].left_q, 200);
    ASSERT_EQ(v.rows[0].left_b, 40);
    rlt__rlqs_close(q);
    rlt__config_free(c);
}

TEST(a_blanket_rules_bucket_shows_its_streams_and_no_budget)
{
    rlt__config *c = config();
    rlt__rlqs *q;
    ASSERT(c != NULL);
    ASSERT_EQ(rlt__rlqs_open(&q), RLT_OK);
    rlt__rlqs_stream *a = stream(q), *b = stream(q);
    ASSERT_EQ(rlqs_usage(q, c, a, "name", "closed", 5, S).kind, RLT__QA_DENY_ALL);
    ASSERT_EQ(rlqs_usage(q, c, b, "name", "closed", 5, S).kind, RLT__QA_DENY_ALL);
    rlt__rlqs_view v;
    rlt__rlqs_view_get(q, S, &v);
    ASSERT_EQ(v.nrows, 1);
    ASSERT_EQ(v.rows[0].kind, RLT__QUOTA_DENY_ALL);
    ASSERT_STR_EQ(rlt__rlqs_view_kind(v.rows[0].kind), "deny_all");
    ASSERT_EQ(v.rows[0].rule, 2);
    ASSERT_STR_EQ(v.rows[0].policy, "");
    ASSERT_EQ(v.rows[0].members, 2);
    ASSERT_EQ(v.rows[0].budget_q, 0);
    ASSERT_EQ(v.rows[0].assigned_q, 0);
    ASSERT_EQ(v.rows[0].claim, RLT__QV_CLAIM_NONE);
    rlt__rlqs_stream_end(q, a, S);
    rlt__rlqs_stream_end(q, b, S);
    rlt__rlqs_close(q);
    rlt__config_free(c);
}

static void nop(void *arg)
{
    (void)arg;
}

TEST(redis_mode_rows_carry_the_claims)
{
    rlt__config *c = config();
    rlt__rlqs *q;
    ASSERT(c != NULL);
    ASSERT_EQ(rlt__rlqs_open(&q), RLT_OK);
    rlt__rlqs_redis_mode(q, nop, NULL);
    rlt_ns now = 10 * S;
    rlt__rlqs_stream *a = stream(q);
    rlqs_usage(q, c, a, "name", "web", 50, now);
    rlt__rlqs_view v;
    rlt__rlqs_view_get(q, now, &v);
    ASSERT(v.redis);
    ASSERT_EQ(v.rows[0].claim, RLT__QV_CLAIM_UNCLAIMED);
    ASSERT_EQ(v.rows[0].budget_q, 0); /* divides nothing before its first claim */
    rlt__rlqs_chunk ch = {0};
    rlt__rlqs_chunk_begin(&ch);
    ASSERT_EQ(rlt__rlqs_claims(q, now, S, &ch), RLT_OK);
    ASSERT_EQ(ch.n, 1);
    rlt__quota_exchange *x = &ch.c[0].x;
    ch.c[0].began = now;
    x->status = RLT_OK;
    x->budget_q = x->claim_q = 120;
    x->budget_b = x->claim_b = 24;
    ASSERT_EQ(rlt__rlqs_claims_apply(q, ch.c, ch.n, now), 0);
    rlt__rlqs_chunk_free(&ch);
    rlt__rlqs_view_get(q, now, &v);
    ASSERT_EQ(v.rows[0].claim, RLT__QV_CLAIM_CLAIMED);
    ASSERT_STR_EQ(rlt__rlqs_view_claim_name(v.rows[0].claim), "claimed");
    ASSERT_EQ(v.rows[0].claim_q, 120);
    ASSERT_EQ(v.rows[0].claim_b, 24);
    ASSERT_EQ(v.rows[0].budget_q, 120);
    ASSERT_EQ(v.other.claim_q, 0);
    rlt__rlqs_stream_end(q, a, now);
    rlt__rlqs_redis_mode(q, NULL, NULL);
    rlt__rlqs_close(q);
    rlt__config_free(c);
}

TEST(a_view_of_no_state_is_empty)
{
    rlt__rlqs_view v;
    memset(&v, 0xab, sizeof v);
    rlt__rlqs_view_get(NULL, 5 * S, &v);
    ASSERT_EQ(v.at, 5 * S);
    ASSERT_EQ(v.buckets, 0);
    ASSERT_EQ(v.nrows, 0);
    ASSERT_EQ(v.nother, 0);
    ASSERT_EQ(v.other.demand, 0);
}
