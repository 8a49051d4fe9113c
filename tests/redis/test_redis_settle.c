/* Charge after the response in Redis (rlt_redis_reserve / rlt_redis_settle, lua/settle.lua)
 * against the C core: seeded random traces of decisions, reservations and settles (caller
 * time, whole microseconds, the clock stepping back at times) replayed through rlt_decide +
 * rlt_settle in C, with an exact table of outstanding reservations, and through Redis must give
 * identical decisions and statuses, for every algorithm that can settle.  Then: a settle at
 * most once, expiry (an unsettled reservation stays charged; its key goes) and the fail modes
 * without Redis.  test_redis_settle_module runs it all again with the module loaded: its
 * RL.DECIDE and the settle script on the same values (debts included). */
#define RTEST_KIND "standalone"
#include "rtest.h"
#include "test.h"

/* Prints the first difference and fails. */
#define SAME(c, r, what)                                                                           \
    do {                                                                                           \
        if ((c) != (r))                                                                            \
            RLT_FAIL_("%s seed %llu step %d t=%lldus op %d: %s: C %lld, Redis %lld", text,         \
                      (unsigned long long)seed, step, (long long)(t / 1000), op, what,             \
                      (long long)(c), (long long)(r));                                             \
    } while (0)

static const char *const settle_policies[] = {
    "fixed_window:5/1s",   "fixed_window:100/1m",         "fixed_window:3/7ms",
    "sliding_log:5/1s",    "sliding_log:20/10s",          "sliding_log:3/7ms",
    "sliding_window:5/1s", "sliding_window:7/3s",         "sliding_window:3/7ms",
    "token_bucket:3/1s",   "token_bucket:10/7s,burst=25", "token_bucket:13/997us,burst=4",
    "gcra:3/1s",           "gcra:7/3s,burst=2",           "gcra:13/997us,burst=4",
};
#define NSP (sizeof settle_policies / sizeof settle_policies[0])

/* An outstanding reservation on both sides. */
typedef struct res {
    bool live;
    int64_t at, estimate; /* the C side's reserved_at (ns) and estimate */
    uint64_t id;          /* Redis's id */
} res;

static void replay(rlt_redis *r, const char *text, uint64_t seed, int steps, int *compared)
{
    rlt_policy p = rtest_policy(text);
    void *st = calloc(1, rlt_state_size(&p));
    char key[64];
    snprintf(key, sizeof key, "settle:%llu", (unsigned long long)seed);
    ASSERT_EQ(rlt_redis_reset(r, &p, key, strlen(key)), RLT_OK);
    int64_t W = p.period / 1000, gap = W / p.limit + 1;
    int64_t t = 1000000 * INT64_C(1000);
    res tab[6] = {{0}};
    uint64_t s = seed;
    for (int step = 0; step < steps; step++) {
        int64_t dt = rtest_trace_dt(&s, W, gap);
        t += dt * 1000;
        int op = (int)rtest_below(&s, 3); /* 0 decide, 1 reserve, 2 settle */
        int k = (int)rtest_below(&s, 6);
        int64_t amount = rtest_below(&s, 10) < 2 ? 0 : rtest_below(&s, p.limit + 3);
        int rc_c, rc_r;
        rlt_decision dc, dr;
        if (op == 0) {
            rc_c = rlt_decide(&p, st, t, amount, &dc);
            rc_r = rlt_redis_decide(r, &p, RLT_REDIS_CALLER_TIME, key, strlen(key), t, amount, &dr);
        } else if (op == 1) {
            if (tab[k].live)
                op = 2; /* settle it instead */
            else {
                uint64_t id = 0;
                rc_c = rlt_decide(&p, st, t, amount, &dc);
                rc_r = rlt_redis_reserve(r, &p, RLT_REDIS_CALLER_TIME, key, strlen(key), t, amount,
                                         60 * RLT_NS_PER_S, &dr, &id);
                SAME(rc_c, rc_r, "reserve status");
                /* Allowed, or an estimate of 0 (charges nothing: always recorded). */
                SAME(dc.allowed || amount == 0, id != 0, "reservation id given");
                if (!rc_c && (dc.allowed || amount == 0)) tab[k] = (res){true, t, amount, id};
            }
        }
        if (op == 2) {
            if (tab[k].live) {
                rc_c = rlt_settle(&p, st, t, tab[k].at, tab[k].estimate, amount, &dc);
                rc_r = rlt_redis_settle(r, &p, RLT_REDIS_CALLER_TIME, key, strlen(key), t,
                                        tab[k].id, amount, &dr);
                tab[k].live = false;
            } else { /* an id never made, or settled before: unknown on both sides */
                rc_c = RLT_ENOENT;
                rc_r = rlt_redis_settle(r, &p, RLT_REDIS_CALLER_TIME, key, strlen(key), t,
                                        tab[k].id ? tab[k].id : 12345, amount, &dr);
            }
        }
        if (getenv("RLT_TEST_TRACE"))
            fprintf(stderr,
                    "%s step %d t=%lldus op %d amount %lld: C %d/%d rem %lld retry %lld reset "
                    "%lld | Redis %d/%d rem %lld retry %lld reset %lld\n",
                    text, step, (long long)(t / 1000), op, (long long)amount, rc_c, dc.allowed,
                    (long long)dc.remaining, (long long)dc.retry_after, (long long)dc.reset_after,
                    rc_r, dr.allowed, (long long)dr.remaining, (long long)dr.retry_after,
                    (long long)dr.reset_after);
        SAME(rc_c, rc_r, "status");
        if (rc_c) continue;
        SAME(dc.allowed, dr.allowed, "allowed");
        SAME(dc.limit, dr.limit, "limit");
        SAME(dc.remaining, dr.remaining, "remaining");
        SAME(dc.retry_after, dr.retry_after, "retry_after");
        SAME(dc.reset_after, dr.reset_after, "reset_after");
        (*compared)++;
    }
    free(st);
}

TEST(redis_reserve_and_settle_match_c_on_random_traces)
{
    rlt_redis *r = rtest_open(
        (rlt_redis_options){.timeout = 2 * RLT_NS_PER_S, .ttl_floor = 60 * RLT_NS_PER_S});
    int compared = 0;
    for (size_t i = 0; i < NSP; i++) {
        for (uint64_t seed = 1; seed <= 4; seed++) {
            replay(r, settle_policies[i], seed * 7919 + i, 300, &compared);
            if (rlt_test_failed_now) break;
        }
        if (rlt_test_failed_now) break;
    }
    rlt_redis_stats st;
    rlt_redis_stats_get(r, &st);
    ASSERT_EQ(st.fail_open + st.fail_closed, 0);
    ASSERT(compared > 12000);
    /* test_redis_settle_module: the decisions ran on the module, the settles on the script */
    const char *extra = getenv("RLT_REDIS_EXTRA_ARGS");
    if (extra && strstr(extra, "--loadmodule")) ASSERT(st.module_calls > 1000);
    rlt_redis_close(r);
}

TEST(redis_settle_happens_at_most_once)
{
    rlt_redis *r = rtest_open((rlt_redis_options){.timeout = 2 * RLT_NS_PER_S});
    rlt_policy p = rtest_policy("token_bucket:10/1s");
    const char *key = "once";
    ASSERT_EQ(rlt_redis_reset(r, &p, key, 4), RLT_OK);
    rlt_decision d;
    uint64_t id = 0;
    int64_t t = 5 * RLT_NS_PER_S;
    ASSERT_EQ(rlt_redis_reserve(r, &p, RLT_REDIS_CALLER_TIME, key, 4, t, 8, 0, &d, &id), RLT_OK);
    ASSERT(d.allowed && id != 0);
    ASSERT_EQ(d.remaining, 2);
    ASSERT_EQ(rlt_redis_settle(r, &p, RLT_REDIS_CALLER_TIME, key, 4, t, id, 1, &d), RLT_OK);
    ASSERT_EQ(d.remaining, 9); /* 7 refunded */
    /* The second settle finds nothing and refunds nothing more. */
    ASSERT_EQ(rlt_redis_settle(r, &p, RLT_REDIS_CALLER_TIME, key, 4, t, id, 0, &d), RLT_ENOENT);
    ASSERT_EQ(rlt_redis_decide(r, &p, RLT_REDIS_CALLER_TIME, key, 4, t, 0, &d), RLT_OK);
    ASSERT_EQ(d.remaining, 9);
    /* Another key's or another policy's reservation with the same id is not this one. */
    uint64_t id2 = 0;
    ASSERT_EQ(rlt_redis_reserve(r, &p, RLT_REDIS_CALLER_TIME, key, 4, t, 3, 0, &d, &id2), RLT_OK);
    ASSERT(id2 != 0 && id2 != id);
    rlt_policy q = rtest_policy("token_bucket:11/1s");
    ASSERT_EQ(rlt_redis_settle(r, &q, RLT_REDIS_CALLER_TIME, key, 4, t, id2, 0, &d), RLT_ENOENT);
    ASSERT_EQ(rlt_redis_settle(r, &p, RLT_REDIS_CALLER_TIME, "twice", 5, t, id2, 0, &d),
              RLT_ENOENT);
    /* A debt: the real cost past the limit is charged, the next request waits. */
    ASSERT_EQ(rlt_redis_settle(r, &p, RLT_REDIS_CALLER_TIME, key, 4, t, id2, 20, &d), RLT_OK);
    ASSERT(!d.allowed);
    ASSERT_EQ(d.remaining, 0);
    ASSERT_EQ(rlt_redis_decide(r, &p, RLT_REDIS_CALLER_TIME, key, 4, t + RLT_NS_PER_S, 1, &d),
              RLT_OK);
    ASSERT(!d.allowed); /* 1 + 20 units used, 10 repaid in a second */
    /* Arguments refused before Redis. */
    ASSERT_EQ(rlt_redis_settle(r, &p, RLT_REDIS_CALLER_TIME, key, 4, t, id2, -1, &d), RLT_EINVAL);
    rlt_policy lb = rtest_policy("leaky_bucket:3/1s,queue=2");
    ASSERT_EQ(rlt_redis_reserve(r, &lb, RLT_REDIS_CALLER_TIME, key, 4, t, 1, 0, &d, &id),
              RLT_EINVAL);
    ASSERT_EQ(id, 0);
    rlt_redis_close(r);
}

/* A sliding log of 2500 runs (more than one RPUSH chunk of the settle's rewrite) settles as
 * the core does, refund and debt alike. */
TEST(redis_sliding_log_settle_keeps_a_long_log_exact)
{
    rlt_redis *r = rtest_open(
        (rlt_redis_options){.timeout = 2 * RLT_NS_PER_S, .ttl_floor = 60 * RLT_NS_PER_S});
    rlt_policy p = rtest_policy("sliding_log:3000/10s");
    void *st = calloc(1, rlt_state_size(&p));
    const char *key = "longlog";
    ASSERT_EQ(rlt_redis_reset(r, &p, key, strlen(key)), RLT_OK);
    rlt_decision dc, dr;
    int64_t t = RLT_NS_PER_S;
    for (int i = 0; i < 2500; i++, t += 1000) {
        ASSERT_EQ(rlt_decide(&p, st, t, 1, &dc), RLT_OK);
        ASSERT_EQ(rlt_redis_decide(r, &p, RLT_REDIS_CALLER_TIME, key, strlen(key), t, 1, &dr),
                  RLT_OK);
    }
    uint64_t id = 0;
    int64_t at = t;
    ASSERT_EQ(rlt_decide(&p, st, at, 400, &dc), RLT_OK);
    ASSERT_EQ(
        rlt_redis_reserve(r, &p, RLT_REDIS_CALLER_TIME, key, strlen(key), at, 400, 0, &dr, &id),
        RLT_OK);
    ASSERT(dr.allowed && id != 0);
    t += 5000;
    ASSERT_EQ(rlt_settle(&p, st, t, at, 400, 1000, &dc), RLT_OK); /* debt: 600 more */
    ASSERT_EQ(rlt_redis_settle(r, &p, RLT_REDIS_CALLER_TIME, key, strlen(key), t, id, 1000, &dr),
              RLT_OK);
    ASSERT_EQ(dc.remaining, dr.remaining);
    ASSERT_EQ(dc.retry_after, dr.retry_after);
    ASSERT_EQ(dc.reset_after, dr.reset_after);
    ASSERT_EQ(rlt_decide(&p, st, t, 300, &dc), RLT_OK);
    ASSERT_EQ(
        rlt_redis_reserve(r, &p, RLT_REDIS_CALLER_TIME, key, strlen(key), t, 300, 0, &dr, &id),
        RLT_OK);
    ASSERT_EQ(dc.allowed, dr.allowed);
    for (int64_t probe = t; probe < t + 11 * RLT_NS_PER_S; probe += 997 * RLT_NS_PER_MS) {
        ASSERT_EQ(rlt_decide(&p, st, probe, 0, &dc), RLT_OK);
        ASSERT_EQ(rlt_redis_decide(r, &p, RLT_REDIS_CALLER_TIME, key, strlen(key), probe, 0, &dr),
                  RLT_OK);
        ASSERT_EQ(dc.remaining, dr.remaining);
        ASSERT_EQ(dc.retry_after, dr.retry_after);
    }
    free(st);
    rlt_redis_close(r);
}

/* An unsettled reservation stays charged as estimated; its key is gone after the timeout and
 * a late settle is unknown. */
TEST(redis_reservation_expires_charged_as_estimated)
{
    rlt_redis *r = rtest_open((rlt_redis_options){.timeout = 2 * RLT_NS_PER_S});
    rlt_policy p = rtest_policy("fixed_window:10/1m");
    char key[64];
    snprintf(key, sizeof key, "expiry:%lld", (long long)rtest_mono_ns());
    rlt_decision d;
    uint64_t id = 0;
    /* On the caller's clock, 1 s into the first minute for every call: on Redis's own clock
     * the 300 ms below could cross a minute boundary and start a new window. */
    const unsigned ct = RLT_REDIS_CALLER_TIME;
    const rlt_ns t = RLT_NS_PER_S;
    ASSERT_EQ(rlt_redis_reserve(r, &p, ct, key, strlen(key), t, 6, 200 * RLT_NS_PER_MS, &d, &id),
              RLT_OK);
    ASSERT(d.allowed && id != 0);
    char name[4096];
    int len = rlt_redis_key_name(r, &p, key, strlen(key), name, sizeof name);
    ASSERT(len > 0);
    snprintf(name + len, sizeof name - (size_t)len, ":r:%016llx", (unsigned long long)id);
    redisContext *raw = rtest_raw(0);
    redisReply *rep = redisCommand(raw, "PTTL %s", name);
    ASSERT(rep && rep->type == REDIS_REPLY_INTEGER && rep->integer > 0 && rep->integer <= 200);
    freeReplyObject(rep);
    struct timespec ts = {0, 300 * 1000 * 1000};
    nanosleep(&ts, NULL);
    rep = redisCommand(raw, "EXISTS %s", name);
    ASSERT(rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == 0);
    freeReplyObject(rep);
    ASSERT_EQ(rlt_redis_settle(r, &p, ct, key, strlen(key), t + 300 * RLT_NS_PER_MS, id, 0, &d),
              RLT_ENOENT);
    ASSERT_EQ(rlt_redis_decide(r, &p, ct, key, strlen(key), t + 300 * RLT_NS_PER_MS, 0, &d),
              RLT_OK);
    ASSERT_EQ(d.remaining, 4); /* still charged at its estimate */
    redisFree(raw);
    rlt_redis_close(r);
}

/* Without Redis: a reserve takes the fail mode and gives no id; a settle is RLT_EBACKEND. */
TEST(redis_reserve_without_redis_follows_the_fail_mode)
{
    rlt_redis *r = NULL;
    ASSERT_EQ(rlt_redis_open(&r, &(rlt_redis_options){.servers = "127.0.0.1:1",
                                                      .timeout = 50 * RLT_NS_PER_MS}),
              RLT_OK);
    rlt_policy p = rtest_policy("gcra:5/1s");
    rlt_decision d;
    uint64_t id = 99;
    int rc = rlt_redis_reserve(r, &p, RLT_REDIS_FAIL_OPEN, "k", 1, 0, 1, 0, &d, &id);
    ASSERT(rc == RLT_EBACKEND || rc == RLT_ETIMEDOUT);
    ASSERT(d.allowed);
    ASSERT_EQ(id, 0);
    rc = rlt_redis_reserve(r, &p, 0, "k", 1, 0, 1, 0, &d, &id);
    ASSERT(rc == RLT_EBACKEND || rc == RLT_ETIMEDOUT);
    ASSERT(!d.allowed);
    ASSERT(d.retry_after > 0);
    ASSERT_EQ(id, 0);
    rc = rlt_redis_settle(r, &p, 0, "k", 1, 0, 1234, 1, &d);
    ASSERT(rc == RLT_EBACKEND || rc == RLT_ETIMEDOUT);
    ASSERT(!d.allowed);
    rlt_redis_close(r);
}
