/* The worked examples of the problem statement, checked through the public API. */
#include "test.h"

#include "ratelimit/ratelimit.h"

#define S RLT_NS_PER_S
#define MS RLT_NS_PER_MS

static rlt_policy policy(const char *text)
{
    rlt_policy p;
    char err[200];
    int rc = rlt_policy_parse(&p, text, strlen(text), err, sizeof err);
    if (rc) {
        fprintf(stderr, "parse %s: %s\n", text, err);
        abort();
    }
    return p;
}

/* Capacity 5, 2 per second: empty the bucket at t=0, then look at t=1.5 s. */
TEST(token_bucket_refill_from_empty_over_1_5s_gives_3)
{
    rlt_policy p = policy("token_bucket:2/1s,burst=5");
    uint64_t st[2] = {0};
    rlt_decision d;
    ASSERT_EQ(rlt_decide(&p, st, 0, 5, &d), RLT_OK);
    ASSERT(d.allowed);
    ASSERT_EQ(d.remaining, 0);
    ASSERT_EQ(rlt_decide(&p, st, 1500 * MS, 0, &d), RLT_OK);
    ASSERT_EQ(d.remaining, 3);
}

TEST(token_bucket_idle_time_is_capped_at_capacity)
{
    rlt_policy p = policy("token_bucket:2/1s,burst=5");
    uint64_t st[2] = {0};
    rlt_decision d;
    ASSERT_EQ(rlt_decide(&p, st, 0, 5, &d), RLT_OK);
    ASSERT_EQ(rlt_decide(&p, st, 100 * S, 0, &d), RLT_OK);
    ASSERT_EQ(d.remaining, 5);
    ASSERT_EQ(rlt_decide(&p, st, 100 * S, 6, &d), RLT_OK);
    ASSERT(!d.allowed);
    ASSERT_EQ(d.retry_after, -1);
}

TEST(token_bucket_backwards_clock_changes_nothing)
{
    rlt_policy p = policy("token_bucket:2/1s,burst=5");
    uint64_t st[2] = {0};
    rlt_decision d;
    ASSERT_EQ(rlt_decide(&p, st, 0, 5, &d), RLT_OK);
    ASSERT_EQ(rlt_decide(&p, st, 1500 * MS, 1, &d), RLT_OK); /* 3 tokens, spend 1 */
    ASSERT_EQ(d.remaining, 2);
    ASSERT_EQ(rlt_decide(&p, st, 1000 * MS, 0, &d), RLT_OK); /* clock back 0.5 s */
    ASSERT_EQ(d.remaining, 2);
    ASSERT_EQ(rlt_decide(&p, st, 1500 * MS, 0, &d), RLT_OK); /* and forward again */
    ASSERT_EQ(d.remaining, 2);
}

/* 0.5 tokens left: a cost-1 take is denied, costs nothing, and retry is 0.25 s at 2/s. */
TEST(token_bucket_denied_take_costs_nothing_and_retry_is_0_25s)
{
    rlt_policy p = policy("token_bucket:2/1s,burst=5");
    uint64_t st[2] = {0};
    rlt_decision d;
    ASSERT_EQ(rlt_decide(&p, st, 0, 5, &d), RLT_OK);
    ASSERT_EQ(rlt_decide(&p, st, 250 * MS, 1, &d), RLT_OK); /* 0.5 tokens */
    ASSERT(!d.allowed);
    ASSERT_EQ(d.retry_after, 250 * MS);
    ASSERT_EQ(rlt_decide(&p, st, 250 * MS, 1, &d), RLT_OK); /* still 0.5: nothing was taken */
    ASSERT_EQ(d.retry_after, 250 * MS);
    ASSERT_EQ(rlt_decide(&p, st, 500 * MS, 1, &d), RLT_OK);
    ASSERT(d.allowed);
}

/* 42 in the previous minute, 18 in this one, 15 s in: 42 x 45/60 + 18 = 49.5; limit 50
 * rejects the next request (50.5 > 50) and at 30 s in (21 + 18 + 1 = 40) allows it. */
TEST(sliding_window_estimate_49_5_rejects_at_limit_50)
{
    rlt_policy p = policy("sliding_window:50/1m");
    uint64_t st[3] = {0};
    rlt_decision d;
    for (int i = 0; i < 42; i++) {
        ASSERT_EQ(rlt_decide(&p, st, 59 * S, 1, &d), RLT_OK);
        ASSERT(d.allowed);
    }
    for (int i = 0; i < 18; i++) {
        ASSERT_EQ(rlt_decide(&p, st, 60 * S, 1, &d), RLT_OK); /* estimate 42 + i < 50? */
        if (i < 8) ASSERT(d.allowed);   /* 42 + 8 = 50 fit at the boundary ... */
        if (i >= 8) ASSERT(!d.allowed); /* ... and the old window still weighs fully */
    }
    /* 8 fit at 60 s (42 + 8 = 50); add the other 10 just before 75 s. */
    uint64_t st2[3] = {0};
    for (int i = 0; i < 42; i++)
        ASSERT_EQ(rlt_decide(&p, st2, 30 * S, 1, &d), RLT_OK);
    for (int i = 0; i < 18; i++) {
        ASSERT_EQ(rlt_decide(&p, st2, 74900 * MS, 1, &d), RLT_OK); /* 42 x 45.1/60 + 18 <= 50 */
        ASSERT(d.allowed);
    }
    ASSERT_EQ(rlt_decide(&p, st2, 75 * S, 1, &d), RLT_OK); /* 49.5 + 1 > 50 */
    ASSERT(!d.allowed);
    ASSERT_EQ(rlt_decide(&p, st2, 75 * S, 0, &d), RLT_OK);
    ASSERT_EQ(d.remaining, 0);                             /* floor(50 - 49.5) */
    ASSERT_EQ(rlt_decide(&p, st2, 90 * S, 1, &d), RLT_OK); /* 21 + 18 + 1 = 40 */
    ASSERT(d.allowed);
}

TEST(sliding_window_retry_after_is_exact)
{
    rlt_policy p = policy("sliding_window:50/1m");
    uint64_t st[3] = {0};
    rlt_decision d;
    for (int i = 0; i < 42; i++)
        ASSERT_EQ(rlt_decide(&p, st, 30 * S, 1, &d), RLT_OK);
    for (int i = 0; i < 18; i++)
        ASSERT_EQ(rlt_decide(&p, st, 74900 * MS, 1, &d), RLT_OK);
    ASSERT_EQ(rlt_decide(&p, st, 75 * S, 1, &d), RLT_OK);
    ASSERT(!d.allowed);
    /* need 42 x (60 - e)/60 <= 31, e >= 60 - 31 x 60 / 42 = 15.714285714.. s */
    rlt_ns at = 60 * S + (60 * S - (31 * 60 * S) / 42);
    ASSERT_EQ(d.retry_after, at - 75 * S);
    ASSERT_EQ(rlt_decide(&p, st, at - 1, 1, &d), RLT_OK);
    ASSERT(!d.allowed);
    ASSERT_EQ(rlt_decide(&p, st, at, 1, &d), RLT_OK);
    ASSERT(d.allowed);
}
