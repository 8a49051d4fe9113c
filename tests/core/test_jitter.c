/* Jitter (jitter=P%): rlt_jitter's bounds, determinism, pass-through and spread, checked as
 * properties over random inputs against the contract [exact, exact + floor(exact x P / 100)]. */
#include "core_util.h"

#define GOLDEN_JITTER INT64_C(42503350902) /* rlt_jitter(10%, fnv("user:1"), 1000, 42 s) */

TEST(jitter_stays_within_exact_and_exact_plus_its_percent)
{
    uint64_t seed = test_seed(0x717);
    rng r = {seed};
    rlt_policy p = parse_policy("gcra:10/1s");
    for (int i = 0; i < 200000; i++) {
        int64_t pct = rng_range(&r, 1, 100);
        ASSERT_EQ(rlt_policy_set_jitter(&p, pct), RLT_OK);
        rlt_ns exact =
            rng_chance(&r, 1, 4) ? rng_range(&r, 1, 1000) : rng_range(&r, 1, INT64_MAX / 2);
        if (rng_chance(&r, 1, 50)) exact = INT64_MAX - rng_range(&r, 0, 5);
        rlt_ns now = (rlt_ns)rng_next(&r);
        uint64_t kh = rng_next(&r);
        rlt_ns j = rlt_jitter(&p, kh, now, exact);
        i128 hi = (i128)exact + (i128)exact * pct / 100;
        if (hi > INT64_MAX) hi = INT64_MAX;
        CHECK(seed, j >= exact);
        CHECK(seed, (i128)j <= hi);
        CHECK_EQ(seed, j, rlt_jitter(&p, kh, now, exact)); /* a pure function */
        if (rlt_test_failed_now) return;
    }
}

TEST(jitter_passes_allowed_never_and_unjittered_policies_through)
{
    rlt_policy p = parse_policy("gcra:10/1s,jitter=50%");
    rlt_policy q = parse_policy("gcra:10/1s");
    ASSERT_EQ(rlt_jitter(&p, 1, 2, 0), 0);
    ASSERT_EQ(rlt_jitter(&p, 1, 2, -1), -1);
    ASSERT_EQ(rlt_jitter(&q, 1, 2, 42 * S), 42 * S);
    ASSERT_EQ(rlt_jitter(NULL, 1, 2, 42 * S), 42 * S);
    ASSERT_EQ(rlt_jitter(&p, 1, 2, 1), 1); /* floor(1 x 50 / 100) = 0: nothing to spread */
}

TEST(jitter_is_deterministic_per_key_and_instant_and_differs_between_them)
{
    rlt_policy p = parse_policy("gcra:10/1s,jitter=10%");
    const rlt_ns exact = 42 * S;
    uint64_t k1 = rlt_hash_fnv1a("user:1", 6), k2 = rlt_hash_fnv1a("user:2", 6);
    ASSERT_EQ(rlt_jitter(&p, k1, 1000, exact), rlt_jitter(&p, k1, 1000, exact));
    ASSERT_NE(rlt_jitter(&p, k1, 1000, exact), rlt_jitter(&p, k2, 1000, exact));
    ASSERT_NE(rlt_jitter(&p, k1, 1000, exact), rlt_jitter(&p, k1, 1001, exact));
    /* A fixed value, so a change of the mix (which every backend must share) is noticed. */
    ASSERT_EQ(rlt_jitter(&p, k1, 1000, exact), GOLDEN_JITTER);
}

TEST(jitter_spreads_a_thousand_clients_over_the_whole_range_roughly_uniformly)
{
    /* 1000 clients told to retry in 42 s at the same instant, jitter=10%: the values cover
     * [42 s, 46.2 s] in 10 equal bins of about 100 each (a chi-square bound with 9 degrees
     * of freedom at p = 0.001 is 27.9). */
    rlt_policy p = parse_policy("gcra:10/1s,jitter=10%");
    const rlt_ns exact = 42 * S, span = exact / 10;
    int bins[10] = {0};
    rlt_ns lo = INT64_MAX, hi = 0;
    for (int k = 0; k < 1000; k++) {
        char key[32];
        int n = snprintf(key, sizeof key, "client:%d", k);
        rlt_ns j = rlt_jitter(&p, rlt_hash_fnv1a(key, (size_t)n), 77 * S, exact);
        ASSERT(j >= exact && j <= exact + span);
        bins[(j - exact) * 10 / (span + 1)]++;
        if (j < lo) lo = j;
        if (j > hi) hi = j;
    }
    double chi = 0;
    for (int b = 0; b < 10; b++)
        chi += (bins[b] - 100.0) * (bins[b] - 100.0) / 100.0;
    if (chi > 27.9) RLT_FAIL_("chi-square %.1f over 10 bins: not uniform", chi);
    ASSERT(lo - exact < span / 50); /* reaches both ends */
    ASSERT(exact + span - hi < span / 50);
    /* The Retry-After seconds spread too: 43..47 rather than 42 for everyone. */
    ASSERT_EQ(rlt_retry_after_seconds(lo), 43);
    ASSERT_EQ(rlt_retry_after_seconds(hi), 47);
}
