/* Tests of the RLQS quota state's Redis mode (src/server/envoy/rlqs_redis.c), driven with
 * the exchanges' answers filled in by hand and time as a parameter: the walk a chunk at a time
 * over every bucket, a claim's deadline, fail: local within the last claim until it may be
 * taken, what a
 * retired bucket carries into its key's claim, and a reply the division refuses.  The
 * exchanges with a real Redis are tests/redis/test_redis_quota.c and server_rlqs_redis. */
#include "rlqs_usage.h"
#include "test.h"

#include "server/config/config.h"
#include "server/config/load.h"
#include "server/envoy/rlqs.h"
#include "server/envoy/rlqs_redis.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S RLT_NS_PER_S
#define MS RLT_NS_PER_MS
#define EXTRA (1000 * MS) /* rlqs_sync.c's: 2 x its 500 ms interval */

static rlt__config *parse(const char *y)
{
    char err[600];
    rlt__config *c = NULL;
    rlt__config_parse(y, strlen(y), "q.yaml", &c, err, sizeof err);
    if (c == NULL) fprintf(stderr, "%s\n", err);
    return c;
}

static const char *yaml = "domain: q\n"
                          "assignment_ttl: 3s\n"
                          "quota_buckets:\n"
                          "  - match: {name: web}\n"
                          "    policy: token_bucket:100/1s,burst=20\n"
                          "    fail: %s\n"
                          "  - match: {name: \"*\"}\n"
                          "    policy: token_bucket:100/1s,burst=20\n"
                          "    fail: closed\n"
                          "redis:\n"
                          "  address: \"127.0.0.1:1\"\n"
                          "  fleet_size: 2\n";

static rlt__config *config(const char *fail)
{
    char y[600];
    snprintf(y, sizeof y, yaml, fail);
    return parse(y);
}

static void nop(void *arg)
{
    (void)arg;
}

/* A quota state in Redis mode under config(fail), with one stream. */
typedef struct world {
    rlt__config *c;
    rlt__rlqs *q;
    rlt__rlqs_stream *st;
} world;

static world open_world(const char *fail)
{
    world w = {config(fail), NULL, NULL};
    if (w.c == NULL || rlt__rlqs_open(&w.q) != RLT_OK) abort();
    rlt__rlqs_redis_mode(w.q, nop, NULL);
    if (rlt__rlqs_stream_new(w.q, &w.st) != RLT_OK) abort();
    return w;
}

static void close_world(world *w, rlt_ns now)
{
    rlt__rlqs_stream_end(w->q, w->st, now);
    rlt__rlqs_redis_mode(w->q, NULL, NULL);
    rlt__rlqs_close(w->q);
    rlt__config_free(w->c);
}

/* One report of bucket {name: value} with a rate of `rate` requests per second. */
static rlt__rlqs_answer report_on(rlt__rlqs *q, const rlt__config *c, rlt__rlqs_stream *st,
                                    const char *value, int rate, rlt_ns now)
{
    return rlqs_usage(q, c, st, "name", value, rate, now);
}

static rlt__rlqs_answer report(const world *w, const char *value, int rate, rlt_ns now)
{
    return report_on(w->q, w->c, w->st, value, rate, now);
}

/* Every claim of the chunk answered as Redis would with these numbers. */
static void answer(rlt__rlqs_chunk *ch, int status, int64_t bq, int64_t bb, rlt_ns began)
{
    for (size_t i = 0; i < ch->n; i++) {
        rlt__quota_exchange *x = &ch->c[i].x;
        ch->c[i].began = began;
        x->status = status;
        x->budget_q = bq;
        x->budget_b = bb;
        x->claim_q = bq > x->held_q ? bq : x->held_q;
        x->claim_b = bb > x->held_b ? bb : x->held_b;
        x->servers = 2;
    }
}

/* One round at `now`, every claim answered so. */
static size_t round_at(rlt__rlqs *q, rlt_ns now, int status, int64_t bq, int64_t bb)
{
    rlt__rlqs_chunk ch = {0};
    rlt__rlqs_chunk_begin(&ch);
    size_t failing = 0;
    while (rlt__rlqs_claims(q, now, EXTRA, &ch) == RLT_OK && ch.n > 0) {
        answer(&ch, status, bq, bb, now);
        failing += rlt__rlqs_claims_apply(q, ch.c, ch.n, now);
    }
    rlt__rlqs_chunk_free(&ch);
    return failing;
}

TEST(a_round_walks_every_bucket_a_chunk_at_a_time)
{
    world w = open_world("closed");
    rlt_ns now = 10 * S;
    for (int i = 0; i < 3 * RLT__RLQS_CHUNK + 5; i++) {
        char v[16];
        snprintf(v, sizeof v, "b%d", i);
        ASSERT_EQ(report(&w, v, 10, now).kind, RLT__QA_DENY_ALL); /* no claim yet */
    }
    rlt__rlqs_chunk ch = {0};
    rlt__rlqs_chunk_begin(&ch);
    size_t total = 0, chunks = 0;
    while (rlt__rlqs_claims(w.q, now, EXTRA, &ch) == RLT_OK && ch.n > 0) {
        ASSERT_LE(ch.n, RLT__RLQS_CHUNK + 8); /* whole hash slots: a chunk may pass 64 a little */
        total += ch.n;
        chunks++;
        answer(&ch, RLT_OK, 50, 10, now);
        ASSERT_EQ(rlt__rlqs_claims_apply(w.q, ch.c, ch.n, now), 0);
    }
    ASSERT_EQ(total, 3 * RLT__RLQS_CHUNK + 5);
    ASSERT(chunks >= 4);
    ASSERT_EQ(report(&w, "b7", 10, now + MS).kind, RLT__QA_TOKEN_BUCKET);
    rlt__rlqs_chunk_free(&ch);
    close_world(&w, now);
}

TEST(a_claim_is_divided_until_its_deadline_then_the_bucket_follows_its_fail_mode)
{
    world w = open_world("closed");
    rlt_ns now = 10 * S;
    ASSERT_EQ(report(&w, "web", 10, now).kind, RLT__QA_DENY_ALL);
    ASSERT_EQ(round_at(w.q, now, RLT_OK, 50, 10), 0);
    ASSERT_EQ(report(&w, "web", 10, now + 100 * MS).kind, RLT__QA_TOKEN_BUCKET);
    /* the claim lives TTL + 1 s in Redis: an assignment made 900 ms on expires before it */
    rlt__rlqs_answer a = report(&w, "web", 10, now + 899 * MS);
    ASSERT(a.kind == RLT__QA_NONE || a.kind == RLT__QA_TOKEN_BUCKET);
    /* no answer since: past the deadline the rule's fail mode (closed) */
    ASSERT_EQ(report(&w, "web", 10, now + 900 * MS).kind, RLT__QA_DENY_ALL);
    /* an answer again: claimed again */
    ASSERT_EQ(round_at(w.q, now + S, RLT_OK, 50, 10), 0);
    ASSERT_EQ(report(&w, "web", 10, now + S + MS).kind, RLT__QA_TOKEN_BUCKET);
    close_world(&w, now + 2 * S);
}

/* fail: local keeps a claim reserved in Redis two assignment TTLs longer (3 + 1 + 6 s here),
 * and while cut from Redis divides that claim, never Q / N, until the reservation's end less
 * one TTL and the margin (now + 6.9 s), then nothing: every assignment made from it has
 * expired when another daemon may take it. */
TEST(fail_local_divides_its_last_claim_until_its_reservation_ends_less_one_ttl_then_nothing)
{
    world w = open_world("local");
    rlt_ns now = 10 * S;
    report(&w, "web", 200, now);
    ASSERT_EQ(round_at(w.q, now, RLT_OK, 10, 4), 0); /* a small claim: 10 / 4 of 100 / 20 */
    rlt__rlqs_answer a = report(&w, "web", 200, now + 500 * MS);
    ASSERT_EQ(a.kind, RLT__QA_TOKEN_BUCKET);
    ASSERT_LE(a.tokens_per_fill, 10);
    ASSERT_LE(a.max_tokens, 4);
    /* the next exchange asks for the longer reservation and expects its field */
    rlt__rlqs_chunk ch = {0};
    rlt__rlqs_chunk_begin(&ch);
    ASSERT_EQ(rlt__rlqs_claims(w.q, now + 500 * MS, EXTRA, &ch), RLT_OK);
    ASSERT_EQ(ch.n, 1);
    ASSERT_EQ(ch.c[0].x.ttl, 10 * S);
    ASSERT_EQ(ch.c[0].x.flags, RLT__QUOTA_X_EXPECT);
    rlt__rlqs_chunk_free(&ch);
    /* Redis unreachable from 600 ms on: the claim, not Q / N = 50 / 10 */
    uint32_t most = 0;
    for (rlt_ns t = now + 600 * MS; t < now + 6800 * MS; t += 500 * MS) {
        ASSERT_EQ(round_at(w.q, t, RLT_ETIMEDOUT, 0, 0), 1);
        a = report(&w, "web", 200, t + MS);
        ASSERT(a.kind == RLT__QA_NONE || a.kind == RLT__QA_TOKEN_BUCKET);
        if (a.kind == RLT__QA_TOKEN_BUCKET && a.max_tokens > most) most = a.max_tokens;
    }
    ASSERT(most > 0 && most <= 4);
    /* from now + 6.9 s: nothing more is assigned (reports alone end it, no round needed) */
    a = report(&w, "web", 200, now + 6900 * MS);
    ASSERT_NE(a.kind, RLT__QA_TOKEN_BUCKET);
    for (rlt_ns t = now + 7 * S; t < now + 12 * S; t += 500 * MS) {
        ASSERT_EQ(round_at(w.q, t, RLT_ETIMEDOUT, 0, 0), 1);
        a = report(&w, "web", 200, t + MS);
        ASSERT_NE(a.kind, RLT__QA_TOKEN_BUCKET);
    }
    /* its field long expired: the next exchange expects nothing */
    rlt__rlqs_chunk_begin(&ch);
    ASSERT_EQ(rlt__rlqs_claims(w.q, now + 12 * S, EXTRA, &ch), RLT_OK);
    ASSERT_EQ(ch.c[0].x.flags, 0u);
    ASSERT_EQ(ch.c[0].x.held_q, 0);
    rlt__rlqs_chunk_free(&ch);
    close_world(&w, now + 13 * S);
}

TEST(a_retired_bucket_carries_its_live_assignments_into_its_keys_claim)
{
    rlt__config *c = config("closed"), *c2 = config("open"); /* the rule changed */
    rlt__rlqs *q;
    rlt__rlqs_stream *s1, *s2;
    ASSERT_EQ(rlt__rlqs_open(&q), RLT_OK);
    rlt__rlqs_redis_mode(q, nop, NULL);
    ASSERT_EQ(rlt__rlqs_stream_new(q, &s1), RLT_OK);
    ASSERT_EQ(rlt__rlqs_stream_new(q, &s2), RLT_OK);
    rlt_ns now = 10 * S;
    report_on(q, c, s1, "web", 200, now);
    report_on(q, c, s2, "web", 200, now);
    ASSERT_EQ(round_at(q, now, RLT_OK, 60, 12), 0);
    rlt__rlqs_answer a1 = report_on(q, c, s1, "web", 200, now + 100 * MS);
    rlt__rlqs_answer a2 = report_on(q, c, s2, "web", 200, now + 100 * MS);
    ASSERT_EQ(a1.kind, RLT__QA_TOKEN_BUCKET);
    ASSERT_EQ(a2.kind, RLT__QA_TOKEN_BUCKET);
    int64_t live_b = (int64_t)a1.max_tokens + a2.max_tokens;
    /* the reload: s1 is abandoned and subscribes again; s2 still enforces its assignment */
    ASSERT_EQ(report_on(q, c2, s1, "web", 200, now + 200 * MS).kind, RLT__QA_ABANDON);
    /* only the retired bucket holds the key: still exchanged (id 0), no demand, held = what
     * it carries */
    rlt__rlqs_chunk ch = {0};
    rlt__rlqs_chunk_begin(&ch);
    ASSERT_EQ(rlt__rlqs_claims(q, now + 250 * MS, EXTRA, &ch), RLT_OK);
    ASSERT_EQ(ch.n, 1);
    ASSERT_EQ(ch.c[0].id, 0);
    ASSERT_EQ(ch.c[0].x.demand, 0);
    ASSERT_EQ(ch.c[0].x.held_b, live_b);
    answer(&ch, RLT_OK, 0, 0, now + 250 * MS);
    ASSERT_EQ(rlt__rlqs_claims_apply(q, ch.c, ch.n, now + 250 * MS), 0);
    ASSERT_EQ(report_on(q, c2, s1, "web", 200, now + 300 * MS).kind, RLT__QA_DENY_ALL);
    rlt__rlqs_chunk_begin(&ch);
    ASSERT_EQ(rlt__rlqs_claims(q, now + 400 * MS, EXTRA, &ch), RLT_OK);
    ASSERT_EQ(ch.n, 1); /* the new bucket: the carried amount joins its claim */
    ASSERT_EQ(ch.c[0].carried_b, live_b);
    ASSERT(ch.c[0].x.held_b >= live_b);
    /* Redis gives it 12: it divides 12 minus what is carried */
    answer(&ch, RLT_OK, 60, 12, now + 400 * MS);
    ASSERT_EQ(rlt__rlqs_claims_apply(q, ch.c, ch.n, now + 400 * MS), 0);
    rlt__rlqs_answer a = report_on(q, c2, s1, "web", 200, now + 500 * MS);
    ASSERT(a.kind == RLT__QA_DENY_ALL || (int64_t)a.max_tokens <= 12 - live_b);
    rlt__rlqs_chunk_free(&ch);
    rlt__rlqs_stream_end(q, s1, now + 600 * MS);
    rlt__rlqs_stream_end(q, s2, now + 600 * MS);
    /* one TTL (3 s) on, the carried amount has expired */
    rlt__rlqs_chunk_begin(&ch);
    ASSERT_EQ(rlt__rlqs_claims(q, now + 3400 * MS, EXTRA, &ch), RLT_OK);
    for (size_t i = 0; i < ch.n; i++)
        ASSERT_EQ(ch.c[i].carried_b, 0);
    rlt__rlqs_chunk_free(&ch);
    rlt__rlqs_redis_mode(q, NULL, NULL);
    rlt__rlqs_close(q);
    rlt__config_free(c);
    rlt__config_free(c2);
}

TEST(a_budget_the_division_refuses_puts_the_bucket_in_its_fail_mode)
{
    world w = open_world("closed");
    rlt_ns now = 10 * S;
    report(&w, "web", 10, now);
    ASSERT_EQ(round_at(w.q, now, RLT_OK, 50, 10), 0);
    ASSERT_EQ(report(&w, "web", 10, now + MS).kind, RLT__QA_TOKEN_BUCKET);
    /* 2^33 tokens per fill: past what an RLQS TokenBucket can carry (RLT_ERANGE) */
    ASSERT_EQ(round_at(w.q, now + 2 * MS, RLT_OK, INT64_C(1) << 33, 10), 1);
    ASSERT_EQ(report(&w, "web", 10, now + 3 * MS).kind, RLT__QA_DENY_ALL);
    close_world(&w, now + S);
}
