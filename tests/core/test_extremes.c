/* Overflow extremes: INT64_MAX / INT64_MIN times, INT64_MAX costs and periods, shifts by
 * the int64 limits, on every algorithm.  Every call must answer RLT_OK or RLT_ERANGE (state
 * then unchanged) and never overflow: run under UBSan, which aborts on a signed overflow.
 * Kept in its own executable so such an abort cannot hide the results of other tests. */
#include "core_util.h"

static const rlt_ns times[] = {INT64_MIN, INT64_MIN + 1, INT64_MIN / 2, -7,       -1, 0,
                               1,         INT64_MAX / 2, INT64_MAX - 1, INT64_MAX};
#define N_TIMES (sizeof times / sizeof times[0])

/* Each call on `p` at every extreme time, in an order that also steps the clock back. */
static void hammer_extremes(const rlt_policy *p)
{
    char text[128];
    rlt_policy_format(p, text, sizeof text);
    void *st = new_state(p);
    const int64_t costs[] = {0, 1, p->limit, INT64_MAX};
    for (int round = 0; round < 2; round++) {
        for (size_t i = 0; i < N_TIMES; i++) {
            /* forwards in round 0, backwards in round 1 */
            rlt_ns now = times[round == 0 ? i : N_TIMES - 1 - i];
            for (size_t c = 0; c < 4; c++) {
                int64_t cost = costs[c];
                if (p->algo == RLT_CONCURRENCY && cost > 1) continue;
                void *before = dup_state(p, st);
                rlt_decision d;
                rlt_ns at;
                int rc = rlt_decide(p, st, now, cost, &d);
                bool same = memcmp(before, st, rlt_state_size(p)) == 0;
                if (rc != RLT_OK && rc != RLT_ERANGE)
                    RLT_FAIL_("%s at %lld cost %lld: %s", text, (long long)now, (long long)cost,
                              rlt_strerror(rc));
                if (rc == RLT_ERANGE && !same)
                    RLT_FAIL_("%s at %lld cost %lld: RLT_ERANGE changed the state", text,
                              (long long)now, (long long)cost);
                if (rc == RLT_OK && (d.retry_after < -1 || d.reset_after < 0 || d.remaining < 0 ||
                                     d.delay < 0 || (d.allowed && d.retry_after != 0)))
                    RLT_FAIL_("%s at %lld cost %lld (round %d): allowed=%d remaining=%lld "
                              "retry_after=%lld reset_after=%lld delay=%lld",
                              text, (long long)now, (long long)cost, round, d.allowed,
                              (long long)d.remaining, (long long)d.retry_after,
                              (long long)d.reset_after, (long long)d.delay);
                if (cost > 0) {
                    rc = rlt_when(p, st, now, cost, &at);
                    ASSERT(rc == RLT_OK || rc == RLT_ERANGE || rc == RLT_ENEVER);
                    if (rc == RLT_OK) ASSERT(at >= now);
                }
                (void)rlt_is_fresh(p, st, now);
                if (d.lease > 0) (void)rlt_release(p, st, now, d.lease);
                free(before);
            }
        }
    }
    /* shifts by the extremes saturate toward the past, and refuse (state unchanged) where a
     * bucket's instant would pass INT64_MAX and so credit time that never passed */
    const rlt_ns deltas[] = {INT64_MAX, INT64_MIN, INT64_MAX, 1, -1, INT64_MIN + 1};
    for (size_t i = 0; i < sizeof deltas / sizeof deltas[0]; i++) {
        void *before = dup_state(p, st);
        int src = rlt_state_shift(p, st, deltas[i]);
        bool same = memcmp(before, st, rlt_state_size(p)) == 0;
        free(before);
        ASSERT(src == RLT_OK || (src == RLT_ERANGE && deltas[i] > 0 && same));
        rlt_decision d;
        int rc = rlt_decide(p, st, 0, 1, &d);
        ASSERT(rc == RLT_OK || rc == RLT_ERANGE);
    }
    free(st);
}

static void all_extremes(rlt_ns period)
{
    for (size_t a = 0; a < N_ALGOS; a++) {
        const int64_t limits[] = {1, 3, RLT_CONCURRENCY_MAX};
        for (size_t l = 0; l < 3; l++) {
            rlt_policy p;
            int rc = rlt_policy_init(&p, all_algos[a], limits[l], period, 0, 0, 0);
            if (rc == RLT_ERANGE) continue; /* too big to represent: refused up front */
            ASSERT_EQ(rc, RLT_OK);
            hammer_extremes(&p);
            if (rlt_test_failed_now) return;
        }
    }
}

TEST(period_1ns_survives_int64_extreme_times_and_costs)
{
    all_extremes(1);
}

TEST(period_3ns_survives_int64_extreme_times_and_costs)
{
    all_extremes(3);
}

TEST(period_7s_survives_int64_extreme_times_and_costs)
{
    all_extremes(7 * S);
}

TEST(period_int64_max_survives_int64_extreme_times_and_costs)
{
    all_extremes(INT64_MAX);
}

TEST(limit_int64_max_survives_int64_extreme_times_and_costs)
{
    static const rlt_algo algos[] = {RLT_FIXED_WINDOW, RLT_SLIDING_WINDOW, RLT_TOKEN_BUCKET,
                                     RLT_GCRA, RLT_LEAKY_BUCKET};
    for (size_t a = 0; a < 5; a++) {
        rlt_policy p;
        if (rlt_policy_init(&p, algos[a], INT64_MAX, 1, 0, 0, 0) == RLT_OK) hammer_extremes(&p);
        if (rlt_policy_init(&p, algos[a], INT64_MAX, INT64_MAX, 0, 0, 0) == RLT_OK)
            hammer_extremes(&p);
        if (rlt_policy_init(&p, algos[a], INT64_MAX - 1, INT64_MAX, 0, 0, 0) == RLT_OK)
            hammer_extremes(&p);
    }
}

/* A denial must say how long to wait (> 0) or never (-1): retry_after 0 means allowed.  At
 * the very end of int64 time the wait saturates to 0 for a denied request. */
TEST(denial_at_int64_max_never_reports_retry_after_0)
{
    static const char *const texts[] = {"sliding_log:5/7s", "fixed_window:5/7s",
                                        "sliding_window:5/7s", "concurrency:5/7s"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        rlt_policy p = parse_policy(texts[i]);
        void *st = new_state(&p);
        rlt_decision d;
        for (int k = 0; k < 5; k++)
            ASSERT_EQ(rlt_decide(&p, st, INT64_MAX - S, 1, &d), RLT_OK);
        ASSERT_EQ(rlt_decide(&p, st, INT64_MAX, 1, &d), RLT_OK);
        bool allowed = d.allowed;
        rlt_ns retry = d.retry_after;
        free(st);
        if (!allowed && retry == 0)
            RLT_FAIL_("%s: denied at INT64_MAX with retry_after 0", texts[i]);
    }
}

/* The shift that used to saturate and mint: gcra:8/3ns,burst=16 near INT64_MAX / scale_. */
TEST(shift_past_int64_max_is_refused_not_minted)
{
    rlt_policy p = parse_policy("gcra:8/3ns,burst=16");
    void *st = new_state(&p);
    rlt_decision before, after;
    rlt_ns now = INT64_MAX / p.scale_ - 5; /* tat = now x 8 + 30 still fits; + 21 x 8 not */
    ASSERT_EQ(rlt_decide(&p, st, now, 10, &before), RLT_OK);
    ASSERT(before.allowed);
    ASSERT_EQ(rlt_decide(&p, st, now, 0, &before), RLT_OK);
    ASSERT_EQ(rlt_state_shift(&p, st, 21), RLT_ERANGE);
    ASSERT_EQ(rlt_decide(&p, st, now, 0, &after), RLT_OK); /* unchanged state, same answer */
    ASSERT_EQ(after.remaining, before.remaining);
    ASSERT_EQ(after.reset_after, before.reset_after);
    free(st);
}
