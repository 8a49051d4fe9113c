/* Boundary ticks and argument validation: a timestamp exactly W old no longer counts, the
 * instant k x W belongs to the new fixed window, invalid numbers are RLT_EINVAL, oversized
 * ones RLT_ERANGE, costs that can never fit report retry_after -1 and RLT_ENEVER, and GCRA's
 * now x scale_ overflow is RLT_ERANGE with the state unchanged. */
#include "core_util.h"

#include <limits.h>

TEST(sliding_log_timestamp_exactly_w_old_no_longer_counts)
{
    rlt_policy p = parse_policy("sliding_log:2/10s");
    void *st = new_state(&p);
    rlt_decision d;
    ASSERT_EQ(rlt_decide(&p, st, 5 * S, 1, &d), RLT_OK);
    ASSERT_EQ(rlt_decide(&p, st, 7 * S, 1, &d), RLT_OK);
    ASSERT(d.allowed);
    ASSERT_EQ(d.reset_after, 10 * S);
    ASSERT_EQ(rlt_decide(&p, st, 15 * S - 1, 1, &d), RLT_OK); /* 5 s entry is W - 1 ns old */
    ASSERT(!d.allowed);
    ASSERT_EQ(d.retry_after, 1);
    ASSERT_EQ(rlt_decide(&p, st, 15 * S, 1, &d), RLT_OK); /* exactly W old: gone */
    ASSERT(d.allowed);
    ASSERT_EQ(d.remaining, 0);
    ASSERT_EQ(rlt_decide(&p, st, 17 * S - 1, 0, &d), RLT_OK);
    ASSERT(!d.allowed);
    ASSERT_EQ(rlt_decide(&p, st, 17 * S, 0, &d), RLT_OK);
    ASSERT(d.allowed);
    ASSERT_EQ(d.remaining, 1);
    free(st);
}

TEST(fixed_window_boundary_instant_belongs_to_the_new_window)
{
    rlt_policy p = parse_policy("fixed_window:3/10s");
    void *st = new_state(&p);
    rlt_decision d;
    ASSERT_EQ(rlt_decide(&p, st, 20 * S - 1, 3, &d), RLT_OK);
    ASSERT(d.allowed);
    ASSERT_EQ(d.reset_after, 1);
    ASSERT_EQ(rlt_decide(&p, st, 20 * S - 1, 1, &d), RLT_OK);
    ASSERT(!d.allowed);
    ASSERT_EQ(d.retry_after, 1);
    ASSERT_EQ(rlt_decide(&p, st, 20 * S, 3, &d), RLT_OK); /* 2N across the boundary */
    ASSERT(d.allowed);
    ASSERT_EQ(d.reset_after, 10 * S);
    free(st);
    /* negative instants: -1 ns belongs to window -1, [-W, 0) */
    st = new_state(&p);
    ASSERT_EQ(rlt_decide(&p, st, -10 * S, 3, &d), RLT_OK);
    ASSERT(d.allowed);
    ASSERT_EQ(d.reset_after, 10 * S);
    ASSERT_EQ(rlt_decide(&p, st, -1, 1, &d), RLT_OK);
    ASSERT(!d.allowed);
    ASSERT_EQ(d.retry_after, 1);
    ASSERT_EQ(rlt_decide(&p, st, 0, 1, &d), RLT_OK);
    ASSERT(d.allowed);
    free(st);
}

TEST(sliding_window_previous_window_counts_fully_at_the_boundary)
{
    rlt_policy p = parse_policy("sliding_window:10/60s");
    void *st = new_state(&p);
    rlt_decision d;
    ASSERT_EQ(rlt_decide(&p, st, 59 * S, 10, &d), RLT_OK);
    ASSERT(d.allowed);
    ASSERT_EQ(rlt_decide(&p, st, 60 * S, 0, &d), RLT_OK); /* 10 x 60/60 + 0 */
    ASSERT(!d.allowed);
    ASSERT_EQ(d.remaining, 0);
    ASSERT_EQ(d.retry_after, 6 * S); /* 10 x (60 - e)/60 <= 9  <=>  e >= 6 s */
    ASSERT_EQ(rlt_decide(&p, st, 120 * S, 0, &d), RLT_OK); /* both windows gone */
    ASSERT_EQ(d.remaining, 10);
    free(st);
}

TEST(token_bucket_refills_exactly_one_token_after_w_over_n)
{
    rlt_policy p = parse_policy("token_bucket:3/7s");
    void *st = new_state(&p);
    rlt_decision d;
    ASSERT_EQ(rlt_decide(&p, st, 0, 3, &d), RLT_OK);
    ASSERT_EQ(rlt_decide(&p, st, 0, 1, &d), RLT_OK);
    ASSERT(!d.allowed);
    ASSERT_EQ(d.retry_after, 2333333334); /* ceil(7 s / 3) */
    ASSERT_EQ(d.reset_after, 7 * S);
    ASSERT_EQ(rlt_decide(&p, st, 2333333333, 1, &d), RLT_OK);
    ASSERT(!d.allowed);
    ASSERT_EQ(d.retry_after, 1);
    ASSERT_EQ(rlt_decide(&p, st, 2333333334, 1, &d), RLT_OK);
    ASSERT(d.allowed);
    free(st);
}

TEST(policy_init_rejects_zero_and_negative_numbers_with_einval)
{
    rlt_policy p;
    for (size_t i = 0; i < N_ALGOS; i++) {
        rlt_algo a = all_algos[i];
        ASSERT_EQ(rlt_policy_init(&p, a, 0, S, 0, 0, 0), RLT_EINVAL);
        ASSERT_EQ(rlt_policy_init(&p, a, -1, S, 0, 0, 0), RLT_EINVAL);
        ASSERT_EQ(rlt_policy_init(&p, a, INT64_MIN, S, 0, 0, 0), RLT_EINVAL);
        if (a != RLT_CONCURRENCY) { /* concurrency: period <= 0 means the default timeout */
            ASSERT_EQ(rlt_policy_init(&p, a, 1, 0, 0, 0, 0), RLT_EINVAL);
            ASSERT_EQ(rlt_policy_init(&p, a, 1, -1, 0, 0, 0), RLT_EINVAL);
            ASSERT_EQ(rlt_policy_init(&p, a, 1, INT64_MIN, 0, 0, 0), RLT_EINVAL);
        }
        ASSERT_EQ(rlt_policy_init(&p, a, 1, S, -1, 0, 0), RLT_EINVAL);
        ASSERT_EQ(rlt_policy_init(&p, a, 1, S, 0, -1, 0), RLT_EINVAL);
        ASSERT_EQ(rlt_policy_init(&p, a, 1, S, 0, 0, -1), RLT_EINVAL);
        ASSERT_EQ(rlt_state_size(&p), 0); /* a failed init leaves no usable policy */
        ASSERT_EQ(rlt_policy_init(&p, a, 1, S, 0, 0, 0), RLT_OK);
        ASSERT(rlt_state_size(&p) > 0);
    }
    ASSERT_EQ(rlt_policy_init(&p, RLT_ALGO_NONE, 1, S, 0, 0, 0), RLT_EINVAL);
    ASSERT_EQ(rlt_policy_init(&p, (rlt_algo)99, 1, S, 0, 0, 0), RLT_EINVAL);
    ASSERT_EQ(rlt_policy_init(NULL, RLT_GCRA, 1, S, 0, 0, 0), RLT_EINVAL);
    ASSERT_EQ(rlt_policy_init(&p, RLT_CONCURRENCY, 4, 0, 0, 0, 0), RLT_OK);
    ASSERT_EQ(p.period, RLT_CONCURRENCY_DEFAULT_TIMEOUT);
}

TEST(policy_init_rejects_oversized_numbers_with_erange)
{
    rlt_policy p;
    /* burst x unit_ overflows: 1 per INT64_MAX ns has unit_ = INT64_MAX */
    ASSERT_EQ(rlt_policy_init(&p, RLT_TOKEN_BUCKET, 1, INT64_MAX, 2, 0, 0), RLT_ERANGE);
    ASSERT_EQ(rlt_policy_init(&p, RLT_GCRA, 1, INT64_MAX, 2, 0, 0), RLT_ERANGE);
    ASSERT_EQ(rlt_policy_init(&p, RLT_GCRA, 1, 1000 * S, INT64_MAX, 0, 0), RLT_ERANGE);
    ASSERT_EQ(rlt_policy_init(&p, RLT_GCRA, 1, INT64_MAX, 1, 0, 0), RLT_OK);
    /* leaky: (Q + 1) x unit_ overflows */
    ASSERT_EQ(rlt_policy_init(&p, RLT_LEAKY_BUCKET, 1, INT64_MAX, 0, 1, 0), RLT_ERANGE);
    ASSERT_EQ(rlt_policy_init(&p, RLT_LEAKY_BUCKET, 1, S, 0, INT64_MAX, 0), RLT_ERANGE);
    ASSERT_EQ(rlt_policy_init(&p, RLT_LEAKY_BUCKET, 1, INT64_MAX, 0, 0, 0), RLT_OK);
    /* state sizes */
    ASSERT_EQ(rlt_policy_init(&p, RLT_SLIDING_LOG, RLT_SLIDING_LOG_MAX + 1, S, 0, 0, 0),
              RLT_ERANGE);
    ASSERT_EQ(rlt_policy_init(&p, RLT_SLIDING_LOG, RLT_SLIDING_LOG_MAX, S, 0, 0, 0), RLT_OK);
    ASSERT_EQ(rlt_policy_init(&p, RLT_CONCURRENCY, RLT_CONCURRENCY_MAX + 1, S, 0, 0, 0),
              RLT_ERANGE);
    ASSERT_EQ(rlt_policy_init(&p, RLT_CONCURRENCY, INT64_MAX, S, 0, 0, 0), RLT_ERANGE);
    /* big but representable */
    ASSERT_EQ(rlt_policy_init(&p, RLT_FIXED_WINDOW, INT64_MAX, INT64_MAX, 0, 0, 0), RLT_OK);
    ASSERT_EQ(rlt_policy_init(&p, RLT_SLIDING_WINDOW, INT64_MAX, INT64_MAX, 0, 0, 0), RLT_OK);
    ASSERT_EQ(rlt_policy_init(&p, RLT_TOKEN_BUCKET, INT64_MAX, 1, 0, 0, 0), RLT_OK);
}

TEST(cost_larger_than_capacity_never_fits)
{
    static const char *const texts[] = {
        "fixed_window:5/1s", "sliding_log:5/1s",  "sliding_window:5/1s",
        "token_bucket:5/1s", "gcra:2/1s,burst=5", "leaky_bucket:5/1s,queue=4",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        rlt_policy p = parse_policy(texts[i]);
        void *st = new_state(&p);
        rlt_decision d;
        rlt_ns at = 12345;
        int64_t costs[] = {6, 7, 1000, INT64_MAX};
        for (size_t c = 0; c < 4; c++) {
            ASSERT_EQ(rlt_decide(&p, st, S, costs[c], &d), RLT_OK);
            ASSERT(!d.allowed);
            ASSERT_EQ(d.retry_after, -1);
            ASSERT_EQ(d.limit, 5);
            ASSERT_EQ(d.remaining, 5);
            ASSERT_EQ(rlt_when(&p, st, S, costs[c], &at), RLT_ENEVER);
            ASSERT_EQ(at, 12345);
        }
        ASSERT(rlt_is_fresh(&p, st, S));                 /* nothing was charged */
        ASSERT_EQ(rlt_decide(&p, st, S, 5, &d), RLT_OK); /* exactly the capacity fits */
        ASSERT(d.allowed);
        ASSERT_EQ(d.remaining, 0);
        free(st);
    }
}

TEST(negative_cost_and_concurrency_cost_above_one_are_einval)
{
    for (size_t i = 0; i < N_ALGOS; i++) {
        rlt_policy p = make_policy(all_algos[i], 3, S, 0, 0, 0);
        void *st = new_state(&p);
        rlt_decision d;
        rlt_ns at;
        ASSERT_EQ(rlt_decide(&p, st, 0, -1, &d), RLT_EINVAL);
        ASSERT_EQ(rlt_decide(&p, st, 0, INT64_MIN, &d), RLT_EINVAL);
        ASSERT_EQ(rlt_when(&p, st, 0, -1, &at), RLT_EINVAL);
        ASSERT_EQ(rlt_when(&p, st, 0, 0, &at), RLT_EINVAL); /* rlt_when needs cost >= 1 */
        ASSERT_EQ(rlt_decide(NULL, st, 0, 1, &d), RLT_EINVAL);
        ASSERT_EQ(rlt_decide(&p, NULL, 0, 1, &d), RLT_EINVAL);
        ASSERT_EQ(rlt_decide(&p, st, 0, 1, NULL), RLT_EINVAL);
        ASSERT_EQ(rlt_when(&p, st, 0, 1, NULL), RLT_EINVAL);
        if (p.algo == RLT_CONCURRENCY) {
            ASSERT_EQ(rlt_decide(&p, st, 0, 2, &d), RLT_EINVAL);
            ASSERT_EQ(rlt_when(&p, st, 0, 2, &at), RLT_EINVAL);
        } else {
            ASSERT_EQ(rlt_release(&p, st, 0, 1), RLT_EINVAL);
        }
        ASSERT(rlt_is_fresh(&p, st, 0));
        free(st);
    }
    /* an uninitialised (zero) policy is refused everywhere */
    rlt_policy z;
    memset(&z, 0, sizeof z);
    uint64_t st[4] = {0};
    rlt_decision d;
    ASSERT_EQ(rlt_decide(&z, st, 0, 1, &d), RLT_EINVAL);
    ASSERT_EQ(rlt_state_size(&z), 0);
    ASSERT_EQ(rlt_state_shift(&z, st, 1), RLT_EINVAL);
    ASSERT(!rlt_is_fresh(&z, st, 0));
}

TEST(gcra_now_times_scale_overflow_is_erange_with_state_unchanged)
{
    rlt_policy p = parse_policy("gcra:3/7ns"); /* scale_ 3: |now| x 3 must fit int64 */
    ASSERT_EQ(p.scale_, 3);
    void *st = new_state(&p);
    rlt_decision d;
    ASSERT_EQ(rlt_decide(&p, st, 100, 1, &d), RLT_OK);
    void *before = dup_state(&p, st);
    rlt_ns edge = INT64_MAX / 3, at;
    ASSERT_EQ(rlt_decide(&p, st, edge + 1, 1, &d), RLT_ERANGE);
    ASSERT_EQ(rlt_decide(&p, st, -edge - 2, 1, &d), RLT_ERANGE);
    ASSERT_EQ(rlt_decide(&p, st, INT64_MAX, 0, &d), RLT_ERANGE);
    ASSERT_EQ(rlt_decide(&p, st, INT64_MIN, 1, &d), RLT_ERANGE);
    ASSERT_EQ(rlt_when(&p, st, INT64_MAX, 1, &at), RLT_ERANGE);
    ASSERT(memcmp(before, st, rlt_state_size(&p)) == 0);
    ASSERT(!rlt_is_fresh(&p, st, INT64_MAX)); /* cannot tell: not fresh */
    /* at `edge` now x 3 fits, but the new tat (now x 3 + one unit) does not: refused too */
    ASSERT_EQ(rlt_decide(&p, st, edge, 1, &d), RLT_ERANGE);
    ASSERT(memcmp(before, st, rlt_state_size(&p)) == 0);
    /* the largest now that can charge a full burst: (INT64_MAX - cap_) / scale_ */
    ASSERT_EQ(rlt_decide(&p, st, (INT64_MAX - p.cap_) / 3, 3, &d), RLT_OK);
    ASSERT(d.allowed);
    ASSERT_EQ(rlt_decide(&p, st, -edge, 1, &d), RLT_OK);
    free(before);
    free(st);
    /* the same for the leaky bucket, which keeps the same scaled word */
    p = parse_policy("leaky_bucket:3/7ns,queue=2");
    st = new_state(&p);
    before = dup_state(&p, st);
    ASSERT_EQ(rlt_decide(&p, st, edge + 1, 1, &d), RLT_ERANGE);
    ASSERT(memcmp(before, st, rlt_state_size(&p)) == 0);
    free(before);
    free(st);
}

/* rlt_when's contract: "RLT_ERANGE as rlt_decide".  At now = INT64_MAX (now x scale_ fits
 * with scale_ 1) GCRA cannot store the new tat, so rlt_decide is RLT_ERANGE; rlt_when must not
 * promise the request is allowed at that instant. */
TEST(gcra_when_is_erange_where_decide_is_at_the_int64_edge)
{
    rlt_policy p = parse_policy("gcra:5/7s");
    ASSERT_EQ(p.scale_, 1);
    void *st = new_state(&p);
    rlt_decision d;
    rlt_ns at = 0;
    int rd = rlt_decide(&p, st, INT64_MAX, 1, &d);
    int rw = rlt_when(&p, st, INT64_MAX, 1, &at);
    free(st);
    ASSERT_EQ(rd, RLT_ERANGE);
    ASSERT_EQ(rw, rd);
}
