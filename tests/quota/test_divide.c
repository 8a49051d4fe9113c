/* The division alone (src/quota/divide.c): water-filling is max-min fair in whole tokens on
 * random wants, and the demand and want arithmetic holds at its edges (zero time, counts near
 * 2^64).  Replay a failure with RLT_TEST_SEED=<seed printed>. */
#include "core/core_util.h"

#include "quota/divide.h"

#define ROUNDS 3000

/* The integer max-min fairness of an allocation: within the cap and the wants, nothing left
 * over while someone is short, and no member more than one token above a member that is
 * short (else that token could move to it and raise the minimum). */
static int check_fair(const rlt__quota_share *s, size_t n, int64_t cap)
{
    int64_t sum = 0, short_min = INT64_MAX, max_got = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i].got < 1 || s[i].got > s[i].want) return 1;
        sum += s[i].got;
        if (s[i].got < s[i].want && s[i].got < short_min) short_min = s[i].got;
        if (s[i].got > max_got) max_got = s[i].got;
    }
    if (sum > cap) return 2;
    if (short_min != INT64_MAX && sum < cap) return 3;
    if (short_min != INT64_MAX && max_got > short_min + 1) return 4;
    return 0;
}

TEST(water_filling_is_max_min_fair_on_random_wants)
{
    uint64_t base = test_seed(0x9a00);
    rlt__quota_share s[64];
    for (int round = 0; round < ROUNDS; round++) {
        uint64_t seed = base + (uint64_t)round;
        rng r = {seed};
        size_t n = (size_t)rng_range(&r, 1, 64);
        int64_t cap = rng_range(&r, (int64_t)n, 5000);
        for (size_t i = 0; i < n; i++)
            s[i] = (rlt__quota_share){rng_chance(&r, 1, 3) ? rng_range(&r, 1, 10)
                                                           : rng_range(&r, 1, 2 * cap),
                                      -1, (uint32_t)i};
        rlt__quota_fill(s, n, cap);
        CHECK_EQ(seed, check_fair(s, n, cap), 0);
        /* the indices survive the reordering: each once */
        uint64_t seen = 0;
        for (size_t i = 0; i < n; i++)
            seen |= UINT64_C(1) << s[i].idx;
        CHECK_EQ(seed, seen, n == 64 ? UINT64_MAX : (UINT64_C(1) << n) - 1);
    }
}

TEST(light_members_get_their_want_and_heavy_ones_share_the_rest_equally)
{
    rlt__quota_share s[5] = {{10, 0, 0}, {1000, 0, 1}, {20, 0, 2}, {1000, 0, 3}, {1000, 0, 4}};
    rlt__quota_fill(s, 5, 331); /* 301 left for three heavy members: 101, 100, 100 */
    int64_t got[5];
    for (int i = 0; i < 5; i++)
        got[s[i].idx] = s[i].got;
    ASSERT_EQ(got[0], 10);
    ASSERT_EQ(got[2], 20);
    ASSERT_EQ(got[1], 101);
    ASSERT_EQ(got[3], 100);
    ASSERT_EQ(got[4], 100);
}

TEST(fewer_tokens_than_members_gives_one_each_to_the_first_by_index)
{
    rlt__quota_share s[4] = {{5, 0, 3}, {5, 0, 1}, {5, 0, 0}, {5, 0, 2}};
    rlt__quota_fill(s, 4, 2);
    for (int i = 0; i < 4; i++)
        ASSERT_EQ(s[i].got, s[i].idx < 2 ? 1 : 0);
    rlt__quota_fill(s, 4, 0);
    for (int i = 0; i < 4; i++)
        ASSERT_EQ(s[i].got, 0);
}

TEST(demand_is_counts_over_elapsed_in_tokens_per_fill_rounded_up)
{
    uint64_t c[3] = {10, 20, 0};
    rlt_ns e[3] = {S, S, 0};
    /* 30 requests over 2 s = 15/s; per 100 ms fill: 1.5, rounded up to 2 */
    ASSERT_EQ(rlt__quota_demand(c, e, 3, 100 * MS, 1000), 2);
    ASSERT_EQ(rlt__quota_demand(c, e, 3, S, 1000), 15);
    ASSERT_EQ(rlt__quota_demand(c, e, 3, S, 7), 7); /* capped */
    rlt_ns z[3] = {0, 0, -5};
    ASSERT_EQ(rlt__quota_demand(c, z, 3, S, 1000), -1); /* no time: no rate */
    ASSERT_EQ(rlt__quota_demand(c, e, 0, S, 1000), -1);
}

TEST(demand_of_counts_near_2_to_the_64_saturates_without_overflow)
{
    uint64_t c[3] = {UINT64_MAX, UINT64_MAX, UINT64_MAX};
    rlt_ns e[3] = {1, 1, 1};
    ASSERT_EQ(rlt__quota_demand(c, e, 3, INT64_MAX, INT64_MAX), INT64_MAX);
    rlt_ns big[3] = {INT64_MAX, INT64_MAX, INT64_MAX};
    ASSERT_EQ(rlt__quota_demand(c, big, 3, INT64_MAX, 100), 100);
    uint64_t one[1] = {1};
    rlt_ns longest[1] = {INT64_MAX};
    ASSERT_EQ(rlt__quota_demand(one, longest, 1, 1, 100), 1); /* rounds up, never to 0 */
}

TEST(want_is_demand_plus_headroom_at_least_one_token_and_capped)
{
    ASSERT_EQ(rlt__quota_want(100, 250, 1000), 125);
    ASSERT_EQ(rlt__quota_want(2, 250, 1000), 3); /* headroom at least one token */
    ASSERT_EQ(rlt__quota_want(0, 250, 1000), 1);
    ASSERT_EQ(rlt__quota_want(900, 250, 1000), 1000);
    ASSERT_EQ(rlt__quota_want(-1, 250, 1000), 1000); /* unknown: heavy */
    ASSERT_EQ(rlt__quota_want(INT64_MAX - 1, 100000, INT64_MAX), INT64_MAX);
}
