/* Exact rationals: a rate N per W hammered continuously for a long simulated time admits
 * exactly B + floor(elapsed x N / W) (token bucket, GCRA; Q + 1 + ... for the leaky bucket):
 * not one more or less, with no drift however long the run.  "Hammered" means a request at
 * every instant: the next admission happens at the first instant rlt_when reports, so the
 * loop jumps there instead of stepping every nanosecond. */
#include "core_util.h"

#define DAY (86400 * S)

/* Admissions of cost-1 requests sent as early as possible in [start, start + span]. */
static int64_t hammer(const rlt_policy *p, rlt_ns start, rlt_ns span)
{
    void *st = new_state(p);
    int64_t admitted = 0;
    rlt_ns t = start, end = start + span;
    for (;;) {
        rlt_ns at;
        if (rlt_when(p, st, t, 1, &at) != RLT_OK) abort();
        if (at > end) break;
        rlt_decision d;
        if (rlt_decide(p, st, at, 1, &d) != RLT_OK || !d.allowed) abort();
        admitted++;
        t = at;
    }
    free(st);
    return admitted;
}

/* With `origins` 1: from 0; 3: also from an odd origin and from a negative one. */
static void check_rate(rlt_algo algo, int64_t n, rlt_ns w, int64_t b, rlt_ns span, int origins)
{
    for (int k = 0; k < origins && !rlt_test_failed_now; k++) {
        rlt_ns start = k == 0 ? 0 : k == 1 ? 123456789 : -5 * DAY - 7;
        rlt_policy p = algo == RLT_LEAKY_BUCKET ? make_policy(algo, n, w, 0, b - 1, 0)
                                                : make_policy(algo, n, w, b, 0, 0);
        int64_t want = b + (int64_t)((i128)span * n / w);
        int64_t got = hammer(&p, start, span);
        if (got != want) {
            char text[128];
            rlt_policy_format(&p, text, sizeof text);
            RLT_FAIL_("%s from %lld over %lld ns: admitted %lld, exact %lld", text,
                      (long long)start, (long long)span, (long long)got, (long long)want);
        }
    }
}

TEST(three_per_7s_over_30_days_admits_exactly_burst_plus_floor)
{
    check_rate(RLT_TOKEN_BUCKET, 3, 7 * S, 3, 30 * DAY, 1);
    check_rate(RLT_GCRA, 3, 7 * S, 3, 30 * DAY, 3);
    check_rate(RLT_GCRA, 3, 7 * S, 10, 30 * DAY, 1);
    check_rate(RLT_LEAKY_BUCKET, 3, 7 * S, 5, 30 * DAY, 3);
}

TEST(seven_per_1s_over_30_days_admits_exactly_burst_plus_floor)
{
    check_rate(RLT_TOKEN_BUCKET, 7, 1 * S, 7, 30 * DAY, 1); /* 18 M admissions each */
    check_rate(RLT_GCRA, 7, 1 * S, 2, 30 * DAY, 1);
}

TEST(thousand_per_1h_over_30_days_admits_exactly_burst_plus_floor)
{
    check_rate(RLT_TOKEN_BUCKET, 1000, 3600 * S, 1000, 30 * DAY, 3);
    check_rate(RLT_GCRA, 1000, 3600 * S, 50, 30 * DAY, 3);
    check_rate(RLT_LEAKY_BUCKET, 1000, 3600 * S, 1, 30 * DAY, 3);
}

TEST(one_per_1d_over_30_days_admits_exactly_burst_plus_floor)
{
    check_rate(RLT_TOKEN_BUCKET, 1, DAY, 1, 30 * DAY, 3);
    check_rate(RLT_GCRA, 1, DAY, 1, 30 * DAY, 3);
    check_rate(RLT_LEAKY_BUCKET, 1, DAY, 3, 30 * DAY, 3);
    /* and a span that ends 1 ns before the next refill */
    check_rate(RLT_GCRA, 1, DAY, 1, 30 * DAY - 1, 3);
}

/* The window algorithms over a month: a fixed window and a sliding log admit N per window. */
TEST(windows_over_30_days_admit_exactly_n_per_window)
{
    static const struct {
        rlt_algo algo;
        int64_t n;
        rlt_ns w;
    } cases[] = {{RLT_FIXED_WINDOW, 3, 7 * S},
                 {RLT_SLIDING_LOG, 3, 7 * S},
                 {RLT_FIXED_WINDOW, 1000, 3600 * S},
                 {RLT_SLIDING_LOG, 1000, 3600 * S}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rlt_policy p = make_policy(cases[i].algo, cases[i].n, cases[i].w, 0, 0, 0);
        /* starting at a window boundary, 30 days hold ceil(30d / W) window starts */
        int64_t starts = (int64_t)((30 * DAY + cases[i].w - 1) / cases[i].w);
        ASSERT_EQ(hammer(&p, 0, 30 * DAY - 1), starts * cases[i].n);
    }
}
