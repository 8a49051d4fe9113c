/* Local lease mode: each handle takes lease_units at once from Redis and spends them locally
 * for at most lease_ttl.  It saves round trips, and over-admits by a bounded amount: in any
 * fixed window at most N + S x (k - 1) (S handles, lease size k), because each handle can carry
 * at most k - 1 units granted in an earlier window into a later one. */
#define RTEST_KIND "standalone"
#include "rtest.h"
#include "test.h"

enum { S = 4, K = 10 };

TEST(lease_mode_saves_round_trips_and_over_admits_within_the_bound)
{
    rlt_redis *h[S];
    for (int i = 0; i < S; i++)
        h[i] = rtest_open((rlt_redis_options){.timeout = 2 * RLT_NS_PER_S,
                                              .ttl_floor = 60 * RLT_NS_PER_S,
                                              .lease_units = K,
                                              .lease_ttl = 300 * RLT_NS_PER_MS});
    rlt_policy p = rtest_policy("fixed_window:100/1s");
    ASSERT_EQ(rlt_redis_reset(h[0], &p, "hot", 3), RLT_OK);
    uint64_t seed = 77;
    int64_t per_window[64] = {0}, decisions = 0, worst = 0;
    for (int64_t t = 1000000000; t < 21000000000;) {
        t += rtest_below(&seed, 2000000); /* ~1000 requests per second: 10x the limit */
        rlt_decision d;
        int i = (int)rtest_below(&seed, S);
        ASSERT_EQ(
            rlt_redis_decide(h[i], &p, RLT_REDIS_CALLER_TIME | RLT_REDIS_LEASE, "hot", 3, t, 1, &d),
            RLT_OK);
        decisions++;
        if (d.allowed) per_window[(t / RLT_NS_PER_S) % 64]++;
    }
    for (int w = 0; w < 64; w++)
        if (per_window[w] > worst) worst = per_window[w];
    ASSERT_LE(worst, 100 + S * (K - 1));
    uint64_t trips = 0, local = 0;
    for (int i = 0; i < S; i++) {
        rlt_redis_stats st;
        rlt_redis_stats_get(h[i], &st);
        trips += st.round_trips;
        local += st.lease_local;
        rlt_redis_close(h[i]);
    }
    ASSERT(local > 0);
    ASSERT((int64_t)trips < decisions);
    printf("lease: %lld decisions, %llu round trips, %llu local, worst window %lld of 100\n",
           (long long)decisions, (unsigned long long)trips, (unsigned long long)local,
           (long long)worst);
}

TEST(lease_is_not_used_without_the_flag_or_for_shapers)
{
    rlt_redis *r = rtest_open((rlt_redis_options){.lease_units = K});
    rlt_policy p = rtest_policy("fixed_window:100/1h");
    rlt_policy l = rtest_policy("leaky_bucket:10/1s,queue=5");
    rlt_decision d;
    for (int i = 0; i < 5; i++) {
        ASSERT_EQ(rlt_redis_decide(r, &p, 0, "nolease", 7, 0, 1, &d), RLT_OK);
        ASSERT_EQ(rlt_redis_decide(r, &l, RLT_REDIS_LEASE, "nolease", 7, 0, 1, &d), RLT_OK);
    }
    rlt_redis_stats st;
    rlt_redis_stats_get(r, &st);
    ASSERT_EQ(st.lease_local, 0);
    ASSERT_EQ(st.lease_grants, 0);
    rlt_redis_close(r);
}

TEST(a_lease_that_does_not_fit_falls_back_to_the_exact_cost)
{
    rlt_redis *r = rtest_open((rlt_redis_options){.lease_units = K});
    rlt_policy p = rtest_policy("fixed_window:3/1h"); /* less than one lease */
    rlt_decision d;
    int allowed = 0;
    for (int i = 0; i < 6; i++) {
        ASSERT_EQ(rlt_redis_decide(r, &p, RLT_REDIS_LEASE, "small", 5, 0, 1, &d), RLT_OK);
        allowed += d.allowed;
    }
    ASSERT_EQ(allowed, 3); /* never more than Redis grants */
    rlt_redis_close(r);
}
