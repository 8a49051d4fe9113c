/* `ratelimit quota`'s local enforcement (src/cli/quota_enforce.c), as Envoy's rate limit
 * quota filter enforces an assignment: a pure function of now, so every test sets the time.
 * A random trace is checked against a simple model: a token bucket admits at most
 * max_tokens + elapsed x tokens_per_fill / fill_interval from any instant on. */
#include "cli/quota_enforce.h"
#include "test.h"

#include <stdlib.h>

#define S 1000000000LL
#define MS 1000000LL

static rlt__qe_assignment tb(uint32_t max, uint32_t per_fill, int64_t fill, int64_t ttl)
{
    return (rlt__qe_assignment){RLT__QE_TOKEN_BUCKET, max, per_fill, fill, ttl};
}

static int admit_n(rlt__qe_bucket *b, int n, int64_t now)
{
    int got = 0;
    for (int i = 0; i < n; i++)
        got += rlt__qe_admit(b, now);
    return got;
}

TEST(before_any_assignment_the_no_assignment_behaviour_decides)
{
    rlt__qe_bucket b = {0};
    ASSERT_EQ(admit_n(&b, 1000, 0), 1000); /* default allow-all, like the shipped example */
    b.no_assignment_deny = true;
    ASSERT_EQ(admit_n(&b, 10, 5 * S), 0);
}

TEST(a_new_token_bucket_starts_full_and_refills_continuously)
{
    rlt__qe_bucket b = {0};
    rlt__qe_assignment a = tb(10, 5, 1 * S, 60 * S);
    ASSERT(rlt__qe_assign(&b, &a, 100 * S));
    ASSERT_EQ(rlt__qe_tokens(&b, 100 * S), 10);
    ASSERT_EQ(admit_n(&b, 20, 100 * S), 10);
    /* 5 per second: one token every 200 ms, exactly. */
    ASSERT_EQ(admit_n(&b, 5, 100 * S + 199 * MS), 0);
    ASSERT_EQ(admit_n(&b, 5, 100 * S + 200 * MS), 1);
    ASSERT_EQ(admit_n(&b, 5, 101 * S), 4);
    /* Never more than max_tokens, however long the wait. */
    ASSERT_EQ(admit_n(&b, 100, 130 * S), 10);
}

TEST(the_same_token_bucket_while_live_keeps_its_tokens_another_one_starts_full)
{
    rlt__qe_bucket b = {0};
    rlt__qe_assignment a = tb(10, 10, 1 * S, 2 * S);
    ASSERT(rlt__qe_assign(&b, &a, 0));
    ASSERT_EQ(admit_n(&b, 10, 0), 10);
    ASSERT(rlt__qe_assign(&b, &a, 0)); /* resent: extends, no new burst */
    ASSERT_EQ(admit_n(&b, 10, 0), 0);
    rlt__qe_assignment c = tb(12, 10, 1 * S, 2 * S);
    ASSERT(rlt__qe_assign(&b, &c, 0)); /* another strategy: Envoy's new bucket is full */
    ASSERT_EQ(admit_n(&b, 20, 0), 12);
}

TEST(an_assignment_expires_after_its_ttl_into_the_expired_behaviour)
{
    rlt__qe_bucket b = {0};
    rlt__qe_assignment a = tb(100, 100, 1 * S, 2 * S);
    ASSERT(rlt__qe_assign(&b, &a, 10 * S));
    ASSERT_EQ(admit_n(&b, 1, 12 * S - 1), 1);
    bool expired;
    ASSERT_EQ(rlt__qe_state(&b, 12 * S, &expired), RLT__QE_DENY_ALL);
    ASSERT(expired);
    ASSERT_EQ(admit_n(&b, 5, 12 * S), 0); /* default expired behaviour: deny-all */
    b.expired_allow = true;
    ASSERT_EQ(admit_n(&b, 5, 12 * S), 5);
    /* A same-looking assignment after expiry is new: it starts full. */
    b.expired_allow = false;
    ASSERT(rlt__qe_assign(&b, &a, 13 * S));
    ASSERT_EQ(admit_n(&b, 200, 13 * S), 100);
}

TEST(blanket_rules_allow_or_deny_everything_for_their_ttl)
{
    rlt__qe_bucket b = {.no_assignment_deny = true};
    rlt__qe_assignment allow = {RLT__QE_ALLOW_ALL, 0, 0, 0, 5 * S};
    rlt__qe_assignment deny = {RLT__QE_DENY_ALL, 0, 0, 0, 5 * S};
    ASSERT(rlt__qe_assign(&b, &allow, 0));
    ASSERT_EQ(admit_n(&b, 1000, 1 * S), 1000);
    ASSERT(rlt__qe_assign(&b, &deny, 1 * S));
    ASSERT_EQ(admit_n(&b, 10, 2 * S), 0);
    ASSERT_EQ(admit_n(&b, 10, 6 * S), 0); /* expired: deny by default */
    rlt__qe_assignment abandon = {RLT__QE_NONE, 0, 0, 0, 0};
    ASSERT(rlt__qe_assign(&b, &abandon, 6 * S)); /* abandoned: back to no assignment */
    bool expired;
    ASSERT_EQ(rlt__qe_state(&b, 6 * S, &expired), RLT__QE_NONE);
}

TEST(invalid_token_buckets_are_refused_and_change_nothing)
{
    rlt__qe_bucket b = {0};
    rlt__qe_assignment ok = tb(3, 1, 1 * S, 9 * S);
    ASSERT(rlt__qe_assign(&b, &ok, 0));
    rlt__qe_assignment bad[] = {tb(0, 1, S, S), tb(1, 0, S, S), tb(1, 1, 0, S), tb(1, 1, -S, S),
                                tb(1, 1, S, -1)};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ASSERT(!rlt__qe_assign(&b, &bad[i], 0));
    ASSERT_EQ(admit_n(&b, 5, 0), 3);
}

TEST(a_clock_that_steps_back_refills_nothing)
{
    rlt__qe_bucket b = {0};
    rlt__qe_assignment a = tb(2, 1, 1 * S, 100 * S);
    ASSERT(rlt__qe_assign(&b, &a, 10 * S));
    ASSERT_EQ(admit_n(&b, 2, 10 * S), 2);
    ASSERT_EQ(admit_n(&b, 1, 5 * S), 0);
    ASSERT_EQ(admit_n(&b, 1, 11 * S), 1); /* one second after the last step forward */
}

TEST(extreme_fill_intervals_and_token_counts_do_not_overflow)
{
    rlt__qe_bucket b = {0};
    rlt__qe_assignment a = tb(UINT32_MAX, UINT32_MAX, INT64_MAX, INT64_MAX);
    ASSERT(rlt__qe_assign(&b, &a, 0));
    ASSERT_EQ(rlt__qe_tokens(&b, INT64_MAX - 1), (int64_t)UINT32_MAX);
    ASSERT(rlt__qe_admit(&b, INT64_MAX - 1));
    ASSERT_EQ(rlt__qe_tokens(&b, INT64_MAX - 1), (int64_t)UINT32_MAX - 1);
}

TEST(random_traces_never_admit_more_than_burst_plus_refill_from_any_instant)
{
    uint64_t seed = 12345;
    for (int run = 0; run < 200; run++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        uint32_t max = (uint32_t)(seed >> 33) % 50 + 1, per = (uint32_t)(seed >> 40) % 20 + 1;
        int64_t fill = ((int64_t)(seed >> 20) % 3 + 1) * S;
        rlt__qe_bucket b = {0};
        rlt__qe_assignment a = tb(max, per, fill, INT64_MAX / 2);
        ASSERT(rlt__qe_assign(&b, &a, 0));
        int64_t t[400];
        int n = 0;
        int64_t now = 0;
        for (int i = 0; i < 2000 && n < 400; i++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            now += (int64_t)(seed >> 40) % (50 * MS);
            if (rlt__qe_admit(&b, now)) t[n++] = now;
        }
        /* From the i-th admission to the j-th, at most max + elapsed x per / fill. */
        for (int i = 0; i < n; i++)
            for (int j = i; j < n; j++) {
                __int128 allowed = (__int128)max + (__int128)(t[j] - t[i]) * per / fill;
                ASSERT((__int128)(j - i + 1) <= allowed);
            }
    }
}
