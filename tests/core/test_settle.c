/* rlt_settle: random traces of requests, reservations and settles against an exact reference
 * that charges every settled reservation its real cost at the instant it was reserved (and
 * every other accepted request its cost when it was accepted).  The state after settling is
 * never more generous than that reference, now or at any later instant; settled at once it is
 * exactly the reference; debt is charged past the limit. */
#include "core_util.h"

static const rlt_algo settle_algos[] = {RLT_FIXED_WINDOW, RLT_SLIDING_LOG, RLT_SLIDING_WINDOW,
                                        RLT_TOKEN_BUCKET, RLT_GCRA};
#define N_SETTLE (sizeof settle_algos / sizeof settle_algos[0])

/* The reference: every charge as (instant, units), replayed from scratch for each question. */
typedef struct charge {
    rlt_ns t;
    int64_t units;
} charge;

#define MAX_CHARGES 4096

typedef struct model {
    charge c[MAX_CHARGES];
    int n;
} model;

static i128 floor_div128(i128 a, i128 b)
{
    i128 q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

/* What a cost-0 peek reports as remaining at t (>= every charge's instant). */
static int64_t ref_remaining(const rlt_policy *p, const model *m, rlt_ns t)
{
    const i128 N = p->limit, W = p->period;
    switch (p->algo) {
    case RLT_TOKEN_BUCKET:
    case RLT_GCRA: {
        i128 used = 0;
        rlt_ns last = 0;
        for (int i = 0; i < m->n; i++) {
            if (i > 0) used -= (i128)(m->c[i].t - last) * p->scale_;
            if (used < 0) used = 0;
            used += (i128)m->c[i].units * p->unit_;
            last = m->c[i].t;
        }
        if (m->n > 0) used -= (i128)(t - last) * p->scale_;
        if (used < 0) used = 0;
        return used >= p->cap_ ? 0 : (int64_t)((p->cap_ - used) / p->unit_);
    }
    case RLT_FIXED_WINDOW: {
        i128 k = floor_div128(t, W), count = 0;
        for (int i = 0; i < m->n; i++)
            if (floor_div128(m->c[i].t, W) == k) count += m->c[i].units;
        return N - count > 0 ? (int64_t)(N - count) : 0;
    }
    case RLT_SLIDING_WINDOW: {
        i128 k = floor_div128(t, W), prev = 0, curr = 0, e = t - k * W;
        for (int i = 0; i < m->n; i++) {
            i128 w = floor_div128(m->c[i].t, W);
            if (w == k) curr += m->c[i].units;
            if (w == k - 1) prev += m->c[i].units;
        }
        i128 left = N * W - prev * (W - e) - curr * W;
        return left <= 0 ? 0 : (int64_t)(left / W);
    }
    default: { /* sliding log */
        i128 live = 0;
        for (int i = 0; i < m->n; i++)
            if (t - m->c[i].t < W) live += m->c[i].units;
        return N - live > 0 ? (int64_t)(N - live) : 0;
    }
    }
}

static int64_t peek_remaining(const rlt_policy *p, const void *st, rlt_ns t)
{
    void *c = dup_state(p, st);
    rlt_decision d;
    int rc = rlt_decide(p, c, t, 0, &d);
    free(c);
    if (rc) abort();
    return d.remaining;
}

typedef struct resv {
    int charge; /* index of its charge in the model */
    rlt_ns at;
    int64_t estimate;
} resv;

TEST(settled_state_is_never_more_generous_than_charging_the_real_cost_when_reserved)
{
    const uint64_t base = test_seed(0x5e771e);
    long refunds = 0, debts = 0, probes = 0;
    for (int trace = 0; trace < 3000; trace++) {
        const uint64_t seed = base + (uint64_t)trace;
        rng r = {seed};
        const rlt_policy p = random_policy(&r, settle_algos[trace % N_SETTLE]);
        void *st = new_state(&p);
        static model m;
        m.n = 0;
        resv open[16];
        int nopen = 0;
        rlt_ns now = rng_range(&r, 0, 3 * p.period);
        const int64_t lim = rlt_policy_limit(&p);
        for (int step = 0; step < 200 && m.n < MAX_CHARGES - 2; step++) {
            now += random_step(&r, &p);
            rlt_decision d;
            int op = (int)rng_range(&r, 0, 9);
            if (op <= 3) { /* a plain request */
                int64_t cost = random_cost(&r, &p);
                CHECK_EQ(seed, rlt_decide(&p, st, now, cost, &d), RLT_OK);
                if (d.allowed && cost > 0) m.c[m.n++] = (charge){now, cost};
            } else if (op <= 6 && nopen < 16) { /* a reservation */
                int64_t e = rng_range(&r, 0, lim);
                CHECK_EQ(seed, rlt_decide(&p, st, now, e, &d), RLT_OK);
                if (d.allowed) {
                    open[nopen++] = (resv){m.n, now, e};
                    m.c[m.n++] = (charge){now, e};
                }
            } else if (nopen > 0) { /* a settle of one outstanding reservation */
                int i = (int)rng_range(&r, 0, nopen - 1);
                resv v = open[i];
                int64_t real = rng_range(&r, 0, 2 * lim + 2);
                if (p.algo == RLT_SLIDING_LOG) { /* N slots: the one documented bound */
                    int64_t room = peek_remaining(&p, st, now);
                    if (real > v.estimate + room) real = v.estimate + room;
                }
                int64_t before = peek_remaining(&p, st, now);
                CHECK_EQ(seed, rlt_settle(&p, st, now, v.at, v.estimate, real, &d), RLT_OK);
                CHECK(seed, rlt_state_valid(&p, st));
                CHECK_EQ(seed, d.remaining, peek_remaining(&p, st, now));
                if (d.remaining > before) refunds++;
                if (real > v.estimate + before) debts++;
                m.c[v.charge].units = real;
                open[i] = open[--nopen];
            }
            /* Never more generous than the reference, now and later. */
            const rlt_ns later[] = {0,           1, p.period / 3, p.period, p.period + p.period / 2,
                                    3 * p.period};
            for (size_t j = 0; j < sizeof later / sizeof later[0]; j++) {
                rlt_ns t = now + later[j];
                CHECK_LE(seed, peek_remaining(&p, st, t), ref_remaining(&p, &m, t));
                probes++;
            }
        }
        free(st);
    }
    /* The traces did exercise refunds and debts. */
    ASSERT(refunds > 1000);
    ASSERT(debts > 100);
    ASSERT(probes > 100000);
}

TEST(settled_at_once_is_exactly_charging_the_real_cost)
{
    const uint64_t base = test_seed(0xa70ce);
    for (int trace = 0; trace < 2000; trace++) {
        const uint64_t seed = base + (uint64_t)trace;
        rng r = {seed};
        const rlt_policy p = random_policy(&r, settle_algos[trace % N_SETTLE]);
        void *a = new_state(&p), *b = new_state(&p);
        rlt_ns now = rng_range(&r, 0, 3 * p.period);
        rlt_decision da, db;
        for (int step = 0; step < 50; step++) {
            now += random_step(&r, &p);
            int64_t e = rng_range(&r, 0, rlt_policy_limit(&p));
            int64_t room = peek_remaining(&p, a, now);
            CHECK_EQ(seed, rlt_decide(&p, a, now, e, &da), RLT_OK);
            if (!da.allowed) continue;
            int64_t real = rng_range(&r, 0, room); /* what a direct request could charge */
            CHECK_EQ(seed, rlt_settle(&p, a, now, now, e, real, &da), RLT_OK);
            CHECK_EQ(seed, rlt_decide(&p, b, now, real, &db), RLT_OK);
            CHECK(seed, db.allowed);
            for (rlt_ns t = now; t < now + 3 * p.period; t += p.period / 4 + 1)
                CHECK_EQ(seed, peek_remaining(&p, a, t), peek_remaining(&p, b, t));
        }
        free(a);
        free(b);
    }
}

TEST(extra_cost_is_charged_past_the_limit_as_debt)
{
    rlt_policy p = parse_policy("token_bucket:10/10s");
    int64_t st[2] = {0};
    rlt_decision d;
    ASSERT_EQ(rlt_decide(&p, st, 0, 5, &d), RLT_OK);
    ASSERT_EQ(rlt_settle(&p, st, 0, 0, 5, 25, &d), RLT_OK);
    ASSERT_EQ(d.remaining, 0);
    ASSERT(!d.allowed);
    ASSERT_EQ(d.retry_after, 16 * S); /* 25 used: one more needs 9, so 16 s of refill */
    ASSERT_EQ(d.reset_after, 25 * S);

    p = parse_policy("gcra:10/10s");
    int64_t g = 0;
    ASSERT_EQ(rlt_decide(&p, &g, 0, 5, &d), RLT_OK);
    ASSERT_EQ(rlt_settle(&p, &g, 0, 0, 5, 25, &d), RLT_OK);
    ASSERT_EQ(d.retry_after, 16 * S);

    p = parse_policy("fixed_window:10/10s");
    int64_t fw[2] = {0};
    ASSERT_EQ(rlt_decide(&p, fw, 1 * S, 5, &d), RLT_OK);
    ASSERT_EQ(rlt_settle(&p, fw, 2 * S, 1 * S, 5, 30, &d), RLT_OK);
    ASSERT_EQ(d.remaining, 0);
    ASSERT_EQ(d.retry_after, 8 * S); /* the debt is forgotten with its window */
    ASSERT_EQ(rlt_decide(&p, fw, 10 * S, 10, &d), RLT_OK);
    ASSERT(d.allowed);
}

TEST(refund_of_a_bucket_gives_back_only_what_refill_has_not_repaid)
{
    /* 10 reserved at t = 0 on 10/10s; a request of 5 at t = 5 s (allowed: 5 refilled); the
     * reservation turns out to cost 0.  Charging 0 at t = 0 would leave 5 used at 5 s, so
     * only 5 of the 10 come back. */
    rlt_policy p = parse_policy("token_bucket:10/10s");
    int64_t st[2] = {0};
    rlt_decision d;
    ASSERT_EQ(rlt_decide(&p, st, 0, 10, &d), RLT_OK);
    ASSERT_EQ(rlt_decide(&p, st, 5 * S, 5, &d), RLT_OK);
    ASSERT(d.allowed);
    ASSERT_EQ(rlt_settle(&p, st, 5 * S, 0, 10, 0, &d), RLT_OK);
    ASSERT_EQ(d.remaining, 5);
    /* Refunded at once, a reservation comes back whole. */
    int64_t g = 0;
    p = parse_policy("gcra:10/10s");
    ASSERT_EQ(rlt_decide(&p, &g, 0, 10, &d), RLT_OK);
    ASSERT_EQ(rlt_settle(&p, &g, 0, 0, 10, 3, &d), RLT_OK);
    ASSERT_EQ(d.remaining, 7);
}

TEST(token_bucket_refund_after_the_clock_stepped_back_leaves_out_all_refill)
{
    /* Reserve 10 at 0 on 10/10s; 5 at 5 s (5 had refilled); the clock steps back to 2 s and
     * the reservation settles at 0: charging 0 at 0 leaves 5 used, so at most 5 come back. */
    rlt_policy p = parse_policy("token_bucket:10/10s");
    int64_t st[2] = {0};
    rlt_decision d;
    ASSERT_EQ(rlt_decide(&p, st, 0, 10, &d), RLT_OK);
    ASSERT_EQ(rlt_decide(&p, st, 5 * S, 5, &d), RLT_OK);
    ASSERT_EQ(rlt_settle(&p, st, 2 * S, 0, 10, 0, &d), RLT_OK);
    ASSERT_EQ(d.remaining, 5);
}

TEST(window_refund_only_while_the_charge_still_counts)
{
    rlt_policy p = parse_policy("fixed_window:10/10s");
    int64_t fw[2] = {0};
    rlt_decision d;
    ASSERT_EQ(rlt_decide(&p, fw, 9 * S, 8, &d), RLT_OK);
    ASSERT_EQ(rlt_settle(&p, fw, 11 * S, 9 * S, 8, 0, &d), RLT_OK); /* next window: nothing */
    ASSERT_EQ(d.remaining, 10);
    ASSERT_EQ(rlt_decide(&p, fw, 12 * S, 10, &d), RLT_OK);
    ASSERT(d.allowed);

    p = parse_policy("sliding_window:10/10s");
    int64_t sw[3] = {0};
    ASSERT_EQ(rlt_decide(&p, sw, 5 * S, 10, &d), RLT_OK);
    ASSERT_EQ(rlt_settle(&p, sw, 15 * S, 5 * S, 10, 4, &d), RLT_OK); /* from the previous */
    ASSERT_EQ(d.remaining, 8); /* 4 x (10 - 5) / 10 = 2 in the estimate */
    ASSERT_EQ(rlt_settle(&p, sw, 25 * S, 5 * S, 4, 0, &d), RLT_OK); /* left the estimate */
    ASSERT_EQ(d.remaining, 10);

    p = parse_policy("sliding_log:4/10s");
    int64_t lg[2 + 4] = {0};
    ASSERT_EQ(rlt_decide(&p, lg, 1 * S, 1, &d), RLT_OK);
    ASSERT_EQ(rlt_decide(&p, lg, 2 * S, 3, &d), RLT_OK);
    ASSERT_EQ(rlt_settle(&p, lg, 3 * S, 2 * S, 3, 1, &d), RLT_OK);
    ASSERT_EQ(d.remaining, 2);
    ASSERT_EQ(d.reset_after, 9 * S); /* the newest kept entry is at 2 s */
    ASSERT_EQ(rlt_settle(&p, lg, 3 * S, 2 * S, 4, 9, &d), RLT_OK); /* only 4 slots */
    ASSERT_EQ(d.remaining, 0);
    ASSERT(rlt_state_valid(&p, lg));
}

/* A calendar month's refund follows the real month, not floor(now / mean month length):
 * 2026-01-31 23:00 UTC is in January, though the mean-length index already says February. */
TEST(calendar_window_refund_only_within_the_local_month_charged)
{
    const rlt_ns jan31_2300 = INT64_C(1769900400) * S, jan31_2330 = INT64_C(1769902200) * S;
    rlt_policy p = parse_policy("fixed_window:10/1mo");
    int64_t fw[2] = {0};
    rlt_decision d;
    ASSERT_EQ(rlt_decide(&p, fw, jan31_2300, 8, &d), RLT_OK);
    ASSERT_EQ(rlt_settle(&p, fw, jan31_2330, jan31_2300, 8, 1, &d), RLT_OK); /* same month */
    ASSERT_EQ(d.remaining, 9);
    /* In Paris 23:30 UTC is already 00:30 on 1 February: the charge's month has ended. */
    p = parse_policy("fixed_window:10/1mo,tz=Europe/Paris");
    int64_t fp[2] = {0};
    ASSERT_EQ(rlt_decide(&p, fp, jan31_2300 - 3600 * S, 8, &d), RLT_OK); /* 23:00 in Paris */
    ASSERT_EQ(rlt_settle(&p, fp, jan31_2330, jan31_2300 - 3600 * S, 8, 0, &d), RLT_OK);
    ASSERT_EQ(d.remaining, 10); /* a new month: nothing to take back, nothing carried */
    ASSERT_EQ(rlt_decide(&p, fp, jan31_2330, 10, &d), RLT_OK);
    ASSERT(d.allowed);
}

TEST(settle_on_a_penalty_box_policy_works_on_the_algorithm_and_starts_no_block)
{
    rlt_policy p = parse_policy("token_bucket:10/10s,block=1m");
    void *st = new_state(&p);
    rlt_decision d;
    ASSERT_EQ(rlt_decide(&p, st, 0, 4, &d), RLT_OK);
    ASSERT_EQ(rlt_settle(&p, st, 0, 0, 4, 1, &d), RLT_OK); /* refund: 9 left */
    ASSERT_EQ(d.remaining, 9);
    ASSERT(rlt_state_valid(&p, st));
    ASSERT_EQ(rlt_settle(&p, st, 0, 0, 0, 15, &d), RLT_OK); /* debt: 16 used */
    ASSERT(!d.allowed);
    ASSERT_EQ(d.retry_after, 7 * S); /* the bucket's own wait, no block of 1 min */
    ASSERT_EQ(rlt_decide(&p, st, 7 * S, 1, &d), RLT_OK);
    ASSERT(d.allowed);
    /* A request denied by the debt is a breach as any other: then the block applies. */
    ASSERT_EQ(rlt_settle(&p, st, 7 * S, 7 * S, 1, 30, &d), RLT_OK);
    ASSERT_EQ(rlt_decide(&p, st, 7 * S, 1, &d), RLT_OK);
    ASSERT(!d.allowed);
    ASSERT_EQ(d.retry_after, 60 * S);
    free(st);
}

TEST(settle_refuses_what_cannot_settle)
{
    rlt_decision d;
    int64_t st[64] = {0};
    rlt_policy p = parse_policy("leaky_bucket:10/s,queue=5");
    ASSERT(!rlt_settle_supported(&p));
    ASSERT_EQ(rlt_settle(&p, st, 0, 0, 1, 0, &d), RLT_EINVAL);
    p = parse_policy("concurrency:3");
    ASSERT(!rlt_settle_supported(&p));
    ASSERT_EQ(rlt_settle(&p, st, 0, 0, 1, 0, &d), RLT_EINVAL);
    p = parse_policy("gcra:10/s");
    ASSERT(rlt_settle_supported(&p));
    ASSERT_EQ(rlt_settle(&p, st, 0, 0, -1, 0, &d), RLT_EINVAL);
    ASSERT_EQ(rlt_settle(&p, st, 0, 0, 1, -1, &d), RLT_EINVAL);
    ASSERT_EQ(rlt_settle(&p, st, 0, 0, 11, 0, &d), RLT_EINVAL); /* never allowed */
    ASSERT_EQ(rlt_settle(NULL, st, 0, 0, 1, 0, &d), RLT_EINVAL);
    ASSERT(!rlt_settle_supported(NULL));
}

TEST(a_debt_past_int64_saturates_and_keeps_denying)
{
    /* Envoy's stream-end charge (drain_over_limit) may carry hits_addend 2^63 - 1: the debt
     * saturates at what the state holds, and every later call is answered (denied), never
     * RLT_ERANGE, for every algorithm that settles, at the origin and far from it. */
    const char *texts[] = {"fixed_window:10/1m", "sliding_window:10/1m", "sliding_log:10/1m",
                           "token_bucket:10/1m", "gcra:10/1m", "gcra:1000000/1s,burst=5"};
    const rlt_ns origins[] = {0, 1000 * S, (rlt_ns)1 << 61};
    for (size_t t = 0; t < sizeof texts / sizeof texts[0]; t++)
        for (size_t o = 0; o < sizeof origins / sizeof origins[0]; o++) {
            rlt_policy p = parse_policy(texts[t]);
            int64_t *st = calloc(1, rlt_state_size(&p));
            ASSERT(st != NULL);
            rlt_ns now = origins[o];
            rlt_decision d;
            ASSERT_EQ(rlt_decide(&p, st, now, 0, &d), RLT_OK);
            ASSERT_EQ(rlt_settle(&p, st, now, now, 0, INT64_MAX, &d), RLT_OK);
            ASSERT(!d.allowed);
            ASSERT_EQ(d.remaining, 0);
            for (int k = 0; k < 3; k++) { /* more debt on top: still saturated, still OK */
                ASSERT_EQ(rlt_settle(&p, st, now + k, now + k, 0, INT64_MAX, &d), RLT_OK);
                ASSERT_EQ(rlt_decide(&p, st, now + k, 1, &d), RLT_OK);
                ASSERT(!d.allowed);
                ASSERT(d.retry_after > 0);
            }
            /* A day later: the windows forgot their debt; the buckets still owe it. */
            ASSERT_EQ(rlt_decide(&p, st, now + 86400 * S, 1, &d), RLT_OK);
            bool bucket = p.algo == RLT_TOKEN_BUCKET || p.algo == RLT_GCRA;
            ASSERT_EQ(d.allowed, !bucket);
            free(st);
        }
}
