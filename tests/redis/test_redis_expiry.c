/* Every key the library writes carries an expiry: positive, no longer than the state's
 * reset_after rounded up to the millisecond, and never shorter (the limiter is not reset early). */
#define RTEST_KIND "standalone"
#include "rtest.h"
#include "test.h"

static const char *const texts[] = {
    "fixed_window:5/1s", "sliding_log:5/2s", "sliding_window:5/3s",       "token_bucket:3/1s",
    "gcra:3/1s,burst=4", "gcra:1/1h",        "leaky_bucket:3/1s,queue=5", "concurrency:3/5s",
};

TEST(every_key_has_a_positive_bounded_ttl_of_its_reset_after)
{
    rlt_redis *r = rtest_open((rlt_redis_options){.timeout = 2 * RLT_NS_PER_S, .prefix = "exp:"});
    redisContext *raw = rtest_raw(0);
    uint64_t seed = 5;
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        rlt_policy p = rtest_policy(texts[i]);
        for (int step = 0; step < 60; step++) {
            char key[32];
            snprintf(key, sizeof key, "k%d", (int)rtest_below(&seed, 4));
            rlt_decision d;
            int64_t cost = p.algo == RLT_CONCURRENCY ? 1 : 1 + rtest_below(&seed, 2);
            const int64_t t0 = rtest_mono_ns();
            ASSERT_EQ(rlt_redis_decide(r, &p, 0, key, strlen(key), 0, cost, &d), RLT_OK);
            if (!d.allowed) continue;
            char name[1024];
            int n = rlt_redis_key_name(r, &p, key, strlen(key), name, sizeof name);
            ASSERT(n > 0);
            redisReply *rep = redisCommand(raw, "PTTL %b", name, (size_t)n);
            ASSERT(rep && rep->type == REDIS_REPLY_INTEGER);
            long long pttl = rep->integer;
            freeReplyObject(rep);
            long long bound = (d.reset_after + RLT_NS_PER_MS - 1) / RLT_NS_PER_MS;
            if (pttl == -2) {
                /* Gone already: only right, when its whole reset_after (a fixed window's end
                 * can be a millisecond away) has passed since before the decision. */
                const long long waited = (long long)((rtest_mono_ns() - t0) / RLT_NS_PER_MS) + 1;
                if (bound > waited)
                    RLT_FAIL_("%s key %s: expired after %lld ms, reset_after %lld ms", texts[i],
                              key, waited, bound);
                continue;
            }
            if (pttl <= 0)
                RLT_FAIL_("%s key %s: PTTL %lld after an allowed decision (reset_after %lld ms)",
                          texts[i], key, pttl, bound);
            ASSERT_LE(pttl, bound);
            /* Not rounded down: at most the time elapsed since the script ran (< 1 s here). */
            ASSERT(pttl >= bound - 1000);
        }
    }
    /* No key without an expiry anywhere. */
    redisReply *keys = redisCommand(raw, "KEYS exp:*");
    ASSERT(keys && keys->type == REDIS_REPLY_ARRAY && keys->elements > 0);
    for (size_t k = 0; k < keys->elements; k++) {
        redisReply *rep =
            redisCommand(raw, "PTTL %b", keys->element[k]->str, (size_t)keys->element[k]->len);
        ASSERT(rep && rep->type == REDIS_REPLY_INTEGER);
        ASSERT(rep->integer > 0 || rep->integer == -2); /* -2: expired since KEYS */
        freeReplyObject(rep);
    }
    freeReplyObject(keys);
    redisFree(raw);
    rlt_redis_close(r);
}

TEST(a_key_expires_only_when_its_state_is_fresh_again)
{
    /* GCRA 1 per 200 ms: after one request the key lives ~200 ms; right after it expires, a
     * full burst is available again, exactly as the C state would be fresh. */
    rlt_redis *r = rtest_open((rlt_redis_options){0});
    rlt_policy p = rtest_policy("gcra:1/200ms,burst=1");
    rlt_decision d;
    ASSERT_EQ(rlt_redis_decide(r, &p, 0, "fresh", 5, 0, 1, &d), RLT_OK);
    ASSERT(d.allowed);
    ASSERT_EQ(rlt_redis_decide(r, &p, 0, "fresh", 5, 0, 1, &d), RLT_OK);
    ASSERT(!d.allowed);
    ASSERT(d.retry_after > 0 && d.retry_after <= 200 * RLT_NS_PER_MS);
    redisContext *raw = rtest_raw(0);
    char name[256];
    int n = rlt_redis_key_name(r, &p, "fresh", 5, name, sizeof name);
    redisReply *rep = redisCommand(raw, "PTTL %b", name, (size_t)n);
    ASSERT(rep->integer > 0 && rep->integer <= 200);
    freeReplyObject(rep);
    redisFree(raw);
    rlt_redis_close(r);
}

/* block=: the companion key of a breach lives exactly as long as the block can still matter:
 * to the block's end plus W when it escalates (the next breach within W doubles it), to the
 * end alone without a factor; after that the next breach starts over at the first length. */
TEST(a_penalty_box_key_lives_to_the_block_end_plus_its_escalation_window)
{
    rlt_redis *r = rtest_open((rlt_redis_options){.timeout = 2 * RLT_NS_PER_S, .prefix = "bx:"});
    redisContext *raw = rtest_raw(0);
    const char *boxes[] = {"gcra:1/200ms,block=300ms*2..1s", "gcra:1/200ms,block=300ms"};
    const long long want[] = {500, 300};
    for (int i = 0; i < 2; i++) {
        rlt_policy p = rtest_policy(boxes[i]);
        char key[8];
        snprintf(key, sizeof key, "b%d", i);
        rlt_decision d;
        ASSERT_EQ(rlt_redis_reset(r, &p, key, strlen(key)), RLT_OK);
        ASSERT_EQ(rlt_redis_decide(r, &p, 0, key, strlen(key), 0, 1, &d), RLT_OK);
        ASSERT(d.allowed);
        ASSERT_EQ(rlt_redis_decide(r, &p, 0, key, strlen(key), 0, 1, &d), RLT_OK);
        ASSERT(!d.allowed);
        ASSERT_EQ(d.retry_after, 300 * RLT_NS_PER_MS);
        ASSERT_EQ(d.reset_after, want[i] * RLT_NS_PER_MS);
        char name[1024];
        int n = rlt_redis_key_name(r, &p, key, strlen(key), name, sizeof name);
        ASSERT(n > 0);
        /* the companion's documented name: the key's + ":blk:B:F:M" (ns) */
        snprintf(name + n, sizeof name - (size_t)n, ":blk:%lld:%lld:%lld", (long long)p.block,
                 (long long)p.block_factor, (long long)p.block_max);
        redisReply *rep = redisCommand(raw, "PTTL %s", name);
        ASSERT(rep && rep->type == REDIS_REPLY_INTEGER);
        ASSERT_LE(rep->integer, want[i]);
        ASSERT(rep->integer >= want[i] - 100);
        freeReplyObject(rep);
        usleep((useconds_t)(want[i] + 30) * 1000);
        rep = redisCommand(raw, "EXISTS %s", name);
        ASSERT(rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == 0);
        freeReplyObject(rep);
        /* A breach now is no escalation: the first length again. */
        ASSERT_EQ(rlt_redis_decide(r, &p, 0, key, strlen(key), 0, 1, &d), RLT_OK);
        ASSERT(d.allowed);
        ASSERT_EQ(rlt_redis_decide(r, &p, 0, key, strlen(key), 0, 1, &d), RLT_OK);
        ASSERT(!d.allowed);
        ASSERT_EQ(d.retry_after, 300 * RLT_NS_PER_MS);
    }
    redisFree(raw);
    rlt_redis_close(r);
}
