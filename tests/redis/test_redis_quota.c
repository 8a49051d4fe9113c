/* RLQS claims in Redis (src/redis/quota.c, lua/quota.lua) driven directly: fake servers with
 * shifting demands exchange in random order, and after every exchange the claims stored in
 * the bucket's hash sum to at most Q and B and no claim is below the held value passed in;
 * demand-proportional targets, a joiner given room as the others lower, expired fields
 * dropped, and the key's name.  Replay a failure with the seed printed. */
#define RTEST_KIND "standalone"
#include "rtest.h"
#include "test.h"

#include "redis/quota.h"

#define NS 6 /* fake servers */

static rlt__redis_quota ask(int64_t demand, int64_t held_q, int64_t held_b, int64_t Q, int64_t B)
{
    return (rlt__redis_quota){.key = "q\0web",
                              .klen = 5,
                              .demand = demand,
                              .held_q = held_q,
                              .held_b = held_b,
                              .cap_q = Q,
                              .cap_b = B,
                              .ttl = 60 * RLT_NS_PER_S};
}

/* The claims stored in the bucket's hash, summed (fields "demand claim_q claim_b expires"). */
static void stored_sums(redisContext *raw, const char *name, int64_t *sq, int64_t *sb, int *n)
{
    redisReply *rep = redisCommand(raw, "HGETALL %s", name);
    *sq = *sb = 0;
    *n = 0;
    for (size_t i = 1; rep && i < rep->elements; i += 2) {
        long long d, cq, cb, ex;
        if (strcmp(rep->element[i - 1]->str, "!lost") == 0) continue; /* the lost state's mark */
        if (sscanf(rep->element[i]->str, "%lld %lld %lld %lld", &d, &cq, &cb, &ex) != 4) abort();
        *sq += cq;
        *sb += cb;
        (*n)++;
    }
    freeReplyObject(rep);
}

/* Redis's clock (TIME) in ms. */
static long long redis_ms(redisContext *raw)
{
    redisReply *t = redisCommand(raw, "TIME");
    long long ms = atoll(t->element[0]->str) * 1000 + atoll(t->element[1]->str) / 1000;
    freeReplyObject(t);
    return ms;
}

/* A handle, a plain connection and the test bucket's key name, emptied. */
typedef struct fixture {
    rlt_redis *r;
    redisContext *raw;
    char name[256];
} fixture;

static fixture setup(void)
{
    fixture f = {rtest_open((rlt_redis_options){.timeout = RLT_NS_PER_S}), rtest_raw(0), ""};
    int len = rlt__redis_quota_key(f.r, "q\0web", 5, f.name, sizeof f.name - 1);
    if (len < 0) abort();
    f.name[len] = '\0';
    freeReplyObject(redisCommand(f.raw, "DEL %s", f.name));
    return f;
}

static void teardown(fixture *f)
{
    freeReplyObject(redisCommand(f->raw, "DEL %s", f->name));
    redisFree(f->raw);
    rlt_redis_close(f->r);
}

/* Whether the claims stored in f's bucket sum to at most Q and B. */
static bool stored_within(const fixture *f, int64_t Q, int64_t B)
{
    int64_t sq, sb;
    int n;
    stored_sums(f->raw, f->name, &sq, &sb, &n);
    return sq <= Q && sb <= B;
}

TEST(stored_claims_never_pass_q_or_b_and_never_drop_below_what_is_held)
{
    fixture f = setup();
    rlt_redis *r = f.r;
    redisContext *raw = f.raw;
    const char *name = f.name;
    static const int64_t demands[] = {0, 1, 7, 50, 500, 5000, 1000000};
    for (uint64_t seed = 1; seed <= 4; seed++) {
        freeReplyObject(redisCommand(raw, "DEL %s", name));
        uint64_t s = seed * 7919;
        int64_t Q = 1 + rtest_below(&s, 2000), B = 1 + rtest_below(&s, 300);
        int64_t claim_q[NS] = {0}, claim_b[NS] = {0}, demand[NS] = {0};
        for (int step = 0; step < 1500; step++) {
            int i = (int)rtest_below(&s, NS);
            if (rtest_below(&s, 4) == 0) demand[i] = demands[rtest_below(&s, 7)];
            /* the caller's contract: held is at most its last stored claim */
            int64_t hq = rtest_below(&s, claim_q[i] + 1), hb = rtest_below(&s, claim_b[i] + 1);
            if (rtest_below(&s, 3) == 0) hq = claim_q[i], hb = claim_b[i];
            rlt__redis_quota x = ask(demand[i], hq, hb, Q, B);
            ASSERT_EQ(rlt__redis_quota_exchange(r, (uint64_t)i + 1, &x), RLT_OK);
            ASSERT_LE(hq, x.claim_q);
            ASSERT_LE(hb, x.claim_b);
            ASSERT_EQ(x.claim_q, x.budget_q > hq ? x.budget_q : hq);
            ASSERT_EQ(x.claim_b, x.budget_b > hb ? x.budget_b : hb);
            claim_q[i] = x.claim_q;
            claim_b[i] = x.claim_b;
            int64_t sq, sb;
            int n;
            stored_sums(raw, name, &sq, &sb, &n);
            if (sq > Q || sb > B)
                RLT_FAIL_("seed %llu step %d: stored %lld / %lld over Q %lld B %lld",
                          (unsigned long long)seed, step, (long long)sq, (long long)sb,
                          (long long)Q, (long long)B);
            ASSERT_EQ(x.servers, n);
        }
    }
    teardown(&f);
}

TEST(claims_follow_the_demands_and_a_joiner_gets_room_as_the_others_lower)
{
    fixture f = setup();
    rlt_redis *r = f.r;
    redisContext *raw = f.raw;
    const char *name = f.name;
    /* alone: the whole budget */
    rlt__redis_quota a = ask(400, 0, 0, 1000, 100);
    ASSERT_EQ(rlt__redis_quota_exchange(r, 1, &a), RLT_OK);
    ASSERT_EQ(a.budget_q, 1000);
    ASSERT_EQ(a.budget_b, 100);
    ASSERT_EQ(a.servers, 1);
    /* a joiner asking 4 x less: its target is 200, but nothing is free yet */
    rlt__redis_quota b = ask(100, 0, 0, 1000, 100);
    ASSERT_EQ(rlt__redis_quota_exchange(r, 2, &b), RLT_OK);
    ASSERT_EQ(b.budget_q, 0);
    ASSERT_EQ(b.servers, 2);
    ASSERT_EQ(b.total_demand, 500);
    /* the first lowers its budget to 800 but still holds 1000 (its budget until now) ... */
    a = ask(400, 1000, 100, 1000, 100);
    ASSERT_EQ(rlt__redis_quota_exchange(r, 1, &a), RLT_OK);
    ASSERT_EQ(a.budget_q, 800);
    ASSERT_EQ(a.budget_b, 80);
    ASSERT_EQ(a.claim_q, 1000);
    /* ... and its claim follows at its next exchange, once its ledger is under 800 */
    a = ask(400, 800, 80, 1000, 100);
    ASSERT_EQ(rlt__redis_quota_exchange(r, 1, &a), RLT_OK);
    ASSERT_EQ(a.claim_q, 800);
    b = ask(100, 0, 0, 1000, 100);
    ASSERT_EQ(rlt__redis_quota_exchange(r, 2, &b), RLT_OK);
    ASSERT_EQ(b.budget_q, 200);
    ASSERT_EQ(b.budget_b, 20);
    /* no demand anywhere: equal shares of the live servers */
    a = ask(0, 800, 80, 1000, 100);
    ASSERT_EQ(rlt__redis_quota_exchange(r, 1, &a), RLT_OK);
    b = ask(0, 200, 20, 1000, 100);
    ASSERT_EQ(rlt__redis_quota_exchange(r, 2, &b), RLT_OK);
    ASSERT_EQ(b.budget_q, 200); /* its target 500, but the first still claims 800 */
    a = ask(0, 500, 50, 1000, 100);
    ASSERT_EQ(rlt__redis_quota_exchange(r, 1, &a), RLT_OK);
    ASSERT_EQ(a.claim_q, 500);
    b = ask(0, 200, 20, 1000, 100);
    ASSERT_EQ(rlt__redis_quota_exchange(r, 2, &b), RLT_OK);
    ASSERT_EQ(b.budget_q, 500);
    redisReply *ttl = redisCommand(raw, "PTTL %s", name);
    ASSERT(ttl->integer > 0 && ttl->integer <= 60000); /* the key lives as long as its fields */
    freeReplyObject(ttl);
    teardown(&f);
}

TEST(expired_fields_are_dropped_and_their_claims_freed)
{
    fixture f = setup();
    /* a server that stopped exchanging long ago (expiry 1 ms after the epoch) */
    freeReplyObject(redisCommand(f.raw, "HSET %s dead %s", f.name, "10 1000 100 1"));
    rlt__redis_quota a = ask(5, 0, 0, 1000, 100);
    ASSERT_EQ(rlt__redis_quota_exchange(f.r, 1, &a), RLT_OK);
    ASSERT_EQ(a.servers, 1);
    ASSERT_EQ(a.budget_q, 1000);
    int64_t sq, sb;
    int n;
    stored_sums(f.raw, f.name, &sq, &sb, &n);
    ASSERT_EQ(n, 1);
    teardown(&f);
}

/* Whatever was in a field that does not parse may be a live server's claim: it counts as the
 * whole Q and B for one claim's life (rewritten so), then it is dropped like any expired one. */
TEST(a_field_that_does_not_parse_reserves_the_whole_budget_for_one_claims_life)
{
    static const char *junk[] = {"x",
                                 "",
                                 "-1 50 10 99999999999",
                                 "5 5 5",
                                 "1 100 20 1e30",
                                 "1 9999999999999999 5 99999999999",
                                 "0x10 0 0 0",
                                 "99999999999999 1 1 99999999999"};
    for (size_t i = 0; i < sizeof junk / sizeof *junk; i++) {
        fixture f = setup();
        freeReplyObject(redisCommand(f.raw, "HSET %s other %s", f.name, junk[i]));
        rlt__redis_quota a = ask(5, 3, 1, 1000, 100);
        a.ttl = 200 * RLT_NS_PER_MS;
        ASSERT_EQ(rlt__redis_quota_exchange(f.r, 1, &a), RLT_OK);
        ASSERT_EQ(a.budget_q, 0); /* nothing beyond what it holds */
        ASSERT_EQ(a.claim_q, 3);
        ASSERT_EQ(a.claim_b, 1);
        long long ex = 0, now = redis_ms(f.raw);
        redisReply *v = redisCommand(f.raw, "HGET %s other", f.name);
        ASSERT(v && v->type == REDIS_REPLY_STRING && sscanf(v->str, "0 1000 100 %lld", &ex) == 1);
        freeReplyObject(v);
        ASSERT(ex > now && ex <= now + 200); /* until one claim's life from the call */
        /* once that has passed (set by hand: no waiting on Redis's clock) it is dropped */
        freeReplyObject(redisCommand(f.raw, "HSET %s other %s", f.name, "0 1000 100 1"));
        a = ask(5, 3, 1, 1000, 100);
        ASSERT_EQ(rlt__redis_quota_exchange(f.r, 1, &a), RLT_OK);
        ASSERT_EQ(a.budget_q, 1000);
        teardown(&f);
    }
}

/* A server that expects its field (its claim has not expired) and finds it gone: the fleet's
 * claims were lost (a restart, a flush).  Every server keeps at most what it holds for one
 * claim's life, a newcomer too; a server after a gap without its field as well. */
TEST(a_lost_state_caps_every_budget_at_what_is_held_for_one_claims_life)
{
    fixture f = setup();
    rlt__redis_quota a = ask(100, 60, 12, 100, 20);
    a.flags = RLT__REDIS_QUOTA_EXPECT;
    a.ttl = 300 * RLT_NS_PER_MS;
    ASSERT_EQ(rlt__redis_quota_exchange(f.r, 1, &a), RLT_OK);
    ASSERT_EQ(a.budget_q, 60); /* its target is the whole 100: capped at held */
    ASSERT_EQ(a.budget_b, 12);
    rlt__redis_quota b = ask(100, 0, 0, 100, 20); /* a newcomer: nothing while it is marked */
    ASSERT_EQ(rlt__redis_quota_exchange(f.r, 2, &b), RLT_OK);
    ASSERT_EQ(b.budget_q, 0);
    rlt__redis_quota c = ask(100, 30, 6, 100, 20); /* the other old one, after a gap */
    c.flags = RLT__REDIS_QUOTA_GAP;
    ASSERT_EQ(rlt__redis_quota_exchange(f.r, 3, &c), RLT_OK);
    ASSERT_EQ(c.budget_q, 30);
    ASSERT(stored_within(&f, 100, 20));
    /* its field there again: a gap alone caps nothing */
    c = ask(100, 30, 6, 100, 20);
    c.flags = RLT__REDIS_QUOTA_GAP | RLT__REDIS_QUOTA_EXPECT;
    ASSERT_EQ(rlt__redis_quota_exchange(f.r, 3, &c), RLT_OK);
    ASSERT_EQ(c.budget_q, 30); /* still the mark: 30 of its target 33 */
    long long ex = 0, now = redis_ms(f.raw);
    redisReply *v = redisCommand(f.raw, "HGET %s !lost", f.name);
    ASSERT(v && v->type == REDIS_REPLY_STRING && sscanf(v->str, "%lld", &ex) == 1);
    freeReplyObject(v);
    ASSERT(ex > now && ex <= now + 300); /* one claim's life from the call that found it */
    /* once every field and the mark have expired (set by hand) */
    freeReplyObject(redisCommand(f.raw, "DEL %s", f.name));
    freeReplyObject(
        redisCommand(f.raw, "HSET %s !lost 1 0000000000000001 %s", f.name, "1 60 12 1"));
    c = ask(100, 0, 0, 100, 20);
    c.flags = RLT__REDIS_QUOTA_GAP;
    ASSERT_EQ(rlt__redis_quota_exchange(f.r, 3, &c), RLT_OK);
    ASSERT_EQ(c.budget_q, 0); /* a gap and no field of its own: nothing beyond held */
    b = ask(100, 0, 0, 100, 20);
    ASSERT_EQ(rlt__redis_quota_exchange(f.r, 2, &b), RLT_OK);
    ASSERT_EQ(b.budget_q, 50); /* no mark, no gap: its target, half (3 asks as much) */
    teardown(&f);
}

TEST(the_key_escapes_every_byte_that_could_break_its_hash_tag)
{
    rlt_redis *r = rtest_open((rlt_redis_options){.prefix = "p:"});
    char buf[64];
    int len = rlt__redis_quota_key(r, "d\0{a} %b", 8, buf, sizeof buf);
    ASSERT_EQ(len, 27);
    buf[len] = '\0';
    ASSERT_STR_EQ(buf, "p:rlqs:{d%00%7Ba%7D%20%25b}");
    ASSERT_EQ(rlt__redis_quota_key(r, "abc", 3, buf, 10), RLT_ENOSPC);
    ASSERT_EQ(rlt__redis_quota_key(r, "", 0, buf, sizeof buf), RLT_EINVAL);
    rlt__redis_quota x = ask(1, 0, 0, INT64_C(1) << 32, 1); /* Q over 2^32 - 1 */
    ASSERT_EQ(rlt__redis_quota_exchange(r, 1, &x), RLT_EINVAL);
    rlt_redis_close(r);
}

/* The review's reproduction: Q = 200, B = 40, a heavy server (demand 100) holding 198 / 39;
 * a light one (demand 1) was answered 1 / 0, a budget that admits nothing, for good. */
TEST(a_light_server_next_to_a_heavy_one_gets_a_token_of_each_part)
{
    fixture f = setup();
    freeReplyObject(
        redisCommand(f.raw, "HSET %s 0000000000000002 %s", f.name, "100 198 39 99999999999999"));
    rlt__redis_quota a = ask(1, 0, 0, 200, 40);
    ASSERT_EQ(rlt__redis_quota_exchange(f.r, 1, &a), RLT_OK);
    printf("    light next to heavy (198/39 of 200/40): budget %lld / %lld\n",
           (long long)a.budget_q, (long long)a.budget_b);
    ASSERT_EQ(a.budget_q, 1);
    ASSERT_EQ(a.budget_b, 1);
    ASSERT(stored_within(&f, 200, 40));
    /* the heavy one's own target leaves that token: floor((40 - 1) x 100 / 100) = 39 */
    rlt__redis_quota h = ask(100, 198, 39, 200, 40);
    ASSERT_EQ(rlt__redis_quota_exchange(f.r, 2, &h), RLT_OK);
    ASSERT_EQ(h.budget_q, 198);
    ASSERT_EQ(h.budget_b, 39);
    teardown(&f);
}

TEST(a_part_without_the_other_is_not_claimed)
{
    fixture f = setup();
    /* the whole burst is taken, the rate is not: a budget of 1 / 0 would admit nothing */
    freeReplyObject(redisCommand(f.raw, "HSET %s other %s", f.name, "100 100 40 99999999999999"));
    rlt__redis_quota a = ask(100, 0, 0, 200, 40);
    ASSERT_EQ(rlt__redis_quota_exchange(f.r, 1, &a), RLT_OK);
    ASSERT_EQ(a.budget_q, 0);
    ASSERT_EQ(a.budget_b, 0);
    ASSERT_EQ(a.claim_q, 0); /* nothing stranded: the rate stays free for the others */
    teardown(&f);
}

TEST(with_a_burst_of_one_one_of_two_light_servers_gets_it_and_the_other_nothing)
{
    fixture f = setup();
    rlt__redis_quota a = ask(1, 0, 0, 10, 1), b = ask(1, 0, 0, 10, 1);
    ASSERT_EQ(rlt__redis_quota_exchange(f.r, 1, &a), RLT_OK);
    ASSERT_EQ(rlt__redis_quota_exchange(f.r, 2, &b), RLT_OK);
    ASSERT_EQ(b.servers, 2);
    a = ask(1, a.claim_q, a.claim_b, 10, 1);
    ASSERT_EQ(rlt__redis_quota_exchange(f.r, 1, &a), RLT_OK);
    ASSERT(a.budget_q >= 1 && a.budget_b == 1); /* the first holds a working pair */
    ASSERT_EQ(b.budget_q, 0);                   /* the second: not X / 0 */
    ASSERT_EQ(b.budget_b, 0);
    ASSERT(stored_within(&f, 10, 1));
    teardown(&f);
}
