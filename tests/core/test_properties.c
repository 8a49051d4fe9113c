/* Property tests of the core algorithms over seeded random traces (clock never stepping back):
 * the bounds each algorithm promises on what it admits, checked on every span the trace
 * contains, and GCRA's decision-for-decision agreement with the token bucket.
 * Replay a failure with RLT_TEST_SEED=<seed printed>. */
#include "core_util.h"

#define TRACES 200
#define STEPS 300

typedef struct acc {
    rlt_ns t;     /* when it was decided */
    int64_t cost; /* cost admitted (>= 1) */
    rlt_ns delay; /* leaky bucket delay */
} acc;

/* Runs a random monotone trace of `steps` decisions on a fresh state of `p`; stores the
 * admitted requests (cost >= 1) in out[] and returns how many, or -1 on a status error. */
static int run_trace(rng *r, const rlt_policy *p, int steps, acc *out)
{
    void *st = new_state(p);
    rlt_ns now = rng_range(r, -3 * p->period, 3 * p->period);
    int n = 0;
    for (int i = 0; i < steps; i++) {
        now += random_step(r, p);
        int64_t cost = random_cost(r, p);
        rlt_decision d;
        if (rlt_decide(p, st, now, cost, &d) != RLT_OK) {
            free(st);
            return -1;
        }
        if (d.allowed && cost > 0) out[n++] = (acc){now, cost, d.delay};
    }
    free(st);
    return n;
}

TEST(sliding_log_never_exceeds_limit_in_any_half_open_window)
{
    uint64_t base = test_seed(0x5100);
    static acc a[STEPS];
    for (int tr = 0; tr < TRACES; tr++) {
        uint64_t seed = base + (uint64_t)tr;
        rng r = {seed};
        rlt_policy p = random_policy(&r, RLT_SLIDING_LOG);
        int n = run_trace(&r, &p, STEPS, a);
        CHECK(seed, n >= 0);
        /* every window [a[i].t, a[i].t + W) that starts at an accepted timestamp */
        for (int i = 0; i < n; i++) {
            int64_t sum = 0;
            for (int j = i; j < n && a[j].t - a[i].t < p.period; j++)
                sum += a[j].cost;
            CHECK_LE(seed, sum, p.limit);
        }
    }
}

TEST(fixed_window_admits_at_most_n_per_aligned_window_and_2n_per_span)
{
    uint64_t base = test_seed(0xf100);
    static acc a[STEPS];
    for (int tr = 0; tr < TRACES; tr++) {
        uint64_t seed = base + (uint64_t)tr;
        rng r = {seed};
        rlt_policy p = random_policy(&r, RLT_FIXED_WINDOW);
        int n = run_trace(&r, &p, STEPS, a);
        CHECK(seed, n >= 0);
        for (int i = 0; i < n; i++) {
            int64_t span = 0, aligned = 0;
            /* floor division: timestamps can be negative */
            int64_t k = a[i].t / p.period - (a[i].t % p.period < 0);
            for (int j = i; j < n && a[j].t - a[i].t < p.period; j++)
                span += a[j].cost;
            for (int j = 0; j < n; j++)
                if (a[j].t / p.period - (a[j].t % p.period < 0) == k) aligned += a[j].cost;
            CHECK_LE(seed, span, 2 * p.limit);
            CHECK_LE(seed, aligned, p.limit);
        }
    }
}

TEST(token_bucket_never_exceeds_burst_plus_refill_in_any_span)
{
    uint64_t base = test_seed(0x7b00);
    static acc a[STEPS];
    for (int tr = 0; tr < TRACES; tr++) {
        uint64_t seed = base + (uint64_t)tr;
        rng r = {seed};
        rlt_algo algo = tr % 2 ? RLT_GCRA : RLT_TOKEN_BUCKET;
        rlt_policy p = random_policy(&r, algo);
        int n = run_trace(&r, &p, STEPS, a);
        CHECK(seed, n >= 0);
        for (int i = 0; i < n; i++) {
            int64_t sum = 0;
            for (int j = i; j < n; j++) {
                sum += a[j].cost;
                i128 refill = (i128)(a[j].t - a[i].t) * p.limit / p.period;
                CHECK(seed, (i128)sum <= (i128)p.burst + refill);
            }
        }
    }
}

static void compare_decisions(uint64_t seed, const rlt_decision *g, const rlt_decision *t)
{
    CHECK_EQ(seed, g->allowed, t->allowed);
    CHECK_EQ(seed, g->limit, t->limit);
    CHECK_EQ(seed, g->remaining, t->remaining);
    CHECK_EQ(seed, g->retry_after, t->retry_after);
    CHECK_EQ(seed, g->reset_after, t->reset_after);
    CHECK_EQ(seed, g->delay, t->delay);
}

TEST(gcra_and_token_bucket_agree_on_every_decision_field)
{
    uint64_t base = test_seed(0x6c00);
    for (int tr = 0; tr < TRACES; tr++) {
        uint64_t seed = base + (uint64_t)tr;
        rng r = {seed};
        rlt_policy tb = random_policy(&r, RLT_TOKEN_BUCKET);
        rlt_policy g = make_policy(RLT_GCRA, tb.limit, tb.period, tb.burst, 0, 0);
        void *st_tb = new_state(&tb), *st_g = new_state(&g);
        /* from t >= 0: see token_bucket_fresh_state_before_time_zero_agrees_with_gcra */
        rlt_ns now = rng_range(&r, 0, 5 * tb.period);
        for (int i = 0; i < STEPS && !rlt_test_failed_now; i++) {
            now += random_step(&r, &tb);
            int64_t cost = random_cost(&r, &tb);
            rlt_decision dt, dg;
            CHECK_EQ(seed, rlt_decide(&tb, st_tb, now, cost, &dt), RLT_OK);
            CHECK_EQ(seed, rlt_decide(&g, st_g, now, cost, &dg), RLT_OK);
            compare_decisions(seed, &dg, &dt);
            if (cost > 0) {
                rlt_ns at_t = 0, at_g = 0;
                int rt = rlt_when(&tb, st_tb, now, cost, &at_t);
                int rg = rlt_when(&g, st_g, now, cost, &at_g);
                CHECK_EQ(seed, rt, rg);
                CHECK_EQ(seed, at_t, at_g);
            }
            CHECK_EQ(seed, rlt_is_fresh(&tb, st_tb, now), rlt_is_fresh(&g, st_g, now));
        }
        free(st_tb);
        free(st_g);
        if (rlt_test_failed_now) return;
    }
}

/* The same agreement from clock origins before 0 (instants have an arbitrary origin). */
TEST(token_bucket_fresh_state_before_time_zero_agrees_with_gcra)
{
    uint64_t base = test_seed(0x6d00);
    for (int tr = 0; tr < TRACES; tr++) {
        uint64_t seed = base + (uint64_t)tr;
        rng r = {seed};
        rlt_policy tb = random_policy(&r, RLT_TOKEN_BUCKET);
        rlt_policy g = make_policy(RLT_GCRA, tb.limit, tb.period, tb.burst, 0, 0);
        void *st_tb = new_state(&tb), *st_g = new_state(&g);
        rlt_ns now = rng_range(&r, -50 * tb.period, -tb.period);
        for (int i = 0; i < STEPS && !rlt_test_failed_now; i++) {
            now += random_step(&r, &tb);
            int64_t cost = random_cost(&r, &tb);
            rlt_decision dt, dg;
            CHECK_EQ(seed, rlt_decide(&tb, st_tb, now, cost, &dt), RLT_OK);
            CHECK_EQ(seed, rlt_decide(&g, st_g, now, cost, &dg), RLT_OK);
            compare_decisions(seed, &dg, &dt);
        }
        free(st_tb);
        free(st_g);
        if (rlt_test_failed_now) return;
    }
}

/* Minimal form of the above: token_bucket:1/1s, one request at -10 s, the next at -9 s. */
TEST(token_bucket_fresh_state_at_negative_time_refills_from_that_time)
{
    rlt_policy p = parse_policy("token_bucket:1/1s");
    void *st = new_state(&p);
    rlt_decision d;
    ASSERT_EQ(rlt_decide(&p, st, -10 * S, 1, &d), RLT_OK);
    ASSERT(d.allowed);
    ASSERT_EQ(rlt_decide(&p, st, -9 * S, 1, &d), RLT_OK);
    int allowed = d.allowed;
    rlt_ns retry = d.retry_after;
    free(st);
    ASSERT(allowed); /* GCRA allows it: one token refilled in 1 s */
    ASSERT_EQ(retry, 0);
}

static int64_t window_of(rlt_ns t, rlt_ns w)
{
    return t / w - (t % w < 0);
}

TEST(sliding_counter_stays_within_2n_per_span_n_per_window_and_its_bound_over_the_log)
{
    uint64_t base = test_seed(0x5c00);
    static acc a[STEPS];
    for (int tr = 0; tr < TRACES; tr++) {
        uint64_t seed = base + (uint64_t)tr;
        rng r = {seed};
        rlt_policy p = random_policy(&r, RLT_SLIDING_WINDOW);
        int n = run_trace(&r, &p, STEPS, a);
        CHECK(seed, n >= 0);
        const rlt_ns w = p.period;
        for (int i = 0; i < n; i++) {
            int64_t span = 0, aligned = 0, prev = 0, tail = 0;
            int64_t k = window_of(a[i].t, w);
            for (int j = i; j < n && a[j].t - a[i].t < w; j++)
                span += a[j].cost;
            for (int j = 0; j < n; j++) {
                int64_t kj = window_of(a[j].t, w);
                if (kj == k) aligned += a[j].cost;
                if (kj == k - 1) prev += a[j].cost;
                if (a[j].t > a[i].t - w && a[j].t <= a[i].t) tail += a[j].cost;
            }
            CHECK_LE(seed, span, 2 * p.limit);
            CHECK_LE(seed, aligned, p.limit);
            /* The documented over-admission against the exact log: in the span (t-W, t]
             * ending at an admitted request, at most N + prev x elapsed / W. */
            rlt_ns elapsed = a[i].t - k * w;
            CHECK(seed, (i128)tail * w <= (i128)p.limit * w + (i128)prev * elapsed);
        }
    }
}

/* The counter's bound is reached: prev spread unevenly (all at the end of the previous
 * window) lets through more than the log would, but never more than the bound. */
TEST(sliding_counter_over_admits_when_previous_window_was_uneven)
{
    rlt_policy sw = parse_policy("sliding_window:10/10s");
    rlt_policy lg = parse_policy("sliding_log:10/10s");
    void *s1 = new_state(&sw), *s2 = new_state(&lg);
    rlt_decision d;
    for (int i = 0; i < 10; i++) {
        ASSERT_EQ(rlt_decide(&sw, s1, 9 * S, 1, &d), RLT_OK);
        ASSERT(d.allowed);
        ASSERT_EQ(rlt_decide(&lg, s2, 9 * S, 1, &d), RLT_OK);
        ASSERT(d.allowed);
    }
    /* at 15 s: estimate 10 x 5/10 = 5, so 5 more fit; the log (all 10 still live) admits 0 */
    int admitted_sw = 0, admitted_log = 0;
    for (int i = 0; i < 10; i++) {
        ASSERT_EQ(rlt_decide(&sw, s1, 15 * S, 1, &d), RLT_OK);
        admitted_sw += d.allowed;
        ASSERT_EQ(rlt_decide(&lg, s2, 15 * S, 1, &d), RLT_OK);
        admitted_log += d.allowed;
    }
    ASSERT_EQ(admitted_sw, 5);
    ASSERT_EQ(admitted_log, 0);
    /* 15 in (5 s, 15 s]: exactly N + prev x elapsed / W = 10 + 10 x 5/10 */
    free(s1);
    free(s2);
}

TEST(leaky_bucket_sends_spaced_w_over_n_and_delays_at_most_queue_slots)
{
    uint64_t base = test_seed(0x1e00);
    static acc a[STEPS];
    for (int tr = 0; tr < TRACES; tr++) {
        uint64_t seed = base + (uint64_t)tr;
        rng r = {seed};
        rlt_policy p = random_policy(&r, RLT_LEAKY_BUCKET);
        if (tr % 2) p = make_policy(RLT_LEAKY_BUCKET, p.limit, p.period, 0, p.queue, 0);
        int n = run_trace(&r, &p, STEPS, a);
        CHECK(seed, n >= 0);
        for (int i = 0; i < n; i++) {
            /* delay <= (Q - D) x W/N rounded up, so <= Q x W/N + 1 ns */
            CHECK(seed, a[i].delay >= 0);
            CHECK(seed, (i128)a[i].delay * p.limit <= (i128)p.queue * p.period + p.limit);
            CHECK(seed,
                  (i128)a[i].delay * p.limit <= (i128)(p.queue - p.delay) * p.period + p.limit - 1);
            if (p.delay == 0 && i + 1 < n) {
                /* a cost c takes c send slots: the next send is >= c x W/N later (floor) */
                rlt_ns gap = (a[i + 1].t + a[i + 1].delay) - (a[i].t + a[i].delay);
                CHECK(seed, (i128)gap >= (i128)a[i].cost * p.period / p.limit);
            }
        }
    }
}
