/* The penalty box (block=) against a plain reference model: the model runs the same algorithm
 * without block= on its own state (that algorithm is checked against its own reference in
 * test_reference.c) and keeps the box as three plain variables (blocked once?, until, level)
 * with the rules of docs/algorithms.md written out in __int128.  Every decision field, the
 * freshness, rlt_when and the exactness of retry_after are compared on seeded random traces of
 * every algorithm; then the state size, all-zero freshness, validity, shift and the text. */
#include "core_util.h"

#define TRACES 120
#define STEPS 300

typedef struct bmodel {
    rlt_policy p;     /* with block= */
    rlt_policy inner; /* the same without */
    unsigned char *ist;
    bool ever;
    i128 until; /* exclusive end of the latest block */
    int64_t level;
} bmodel;

static i128 len_of(const rlt_policy *p, int64_t k)
{
    i128 len = p->block;
    for (int64_t i = 0; i < k; i++) {
        len *= p->block_factor;
        if (len >= p->block_max) return p->block_max;
    }
    return len < p->block_max ? len : p->block_max;
}

static i128 mem_end(const bmodel *m)
{
    return m->p.block_factor > 1 ? m->until + m->p.period : m->until;
}

static rlt_ns clamp(i128 v)
{
    return v > INT64_MAX ? INT64_MAX : (rlt_ns)v;
}

static rlt_decision model_decide(bmodel *m, rlt_ns now, int64_t cost)
{
    rlt_decision d;
    if (m->ever && now < m->until) {
        unsigned char *copy = dup_state(&m->inner, m->ist);
        if (rlt_decide(&m->inner, copy, now, cost, &d)) abort();
        free(copy);
        if (!d.allowed && d.retry_after < 0) return d;
        d.allowed = false;
        if (m->until - now > d.retry_after) d.retry_after = clamp(m->until - now);
        if (mem_end(m) - now > d.reset_after) d.reset_after = clamp(mem_end(m) - now);
        d.remaining = 0;
        d.delay = 0;
        d.lease = 0;
        return d;
    }
    if (rlt_decide(&m->inner, m->ist, now, cost, &d)) abort();
    if (!d.allowed && d.retry_after >= 0 && cost > 0) {
        if (m->ever && now < m->until + m->p.period) {
            if (len_of(&m->p, m->level) < m->p.block_max) m->level++;
        } else {
            m->level = 0;
        }
        i128 len = len_of(&m->p, m->level);
        m->until = now + len;
        if (m->until > INT64_MAX) m->until = INT64_MAX;
        m->ever = true;
        if (len > d.retry_after) d.retry_after = (rlt_ns)len;
        d.remaining = 0;
    }
    if (m->ever && mem_end(m) - now > d.reset_after) d.reset_after = clamp(mem_end(m) - now);
    return d;
}

static bool model_fresh(const bmodel *m, rlt_ns now)
{
    return rlt_is_fresh(&m->inner, m->ist, now) && (!m->ever || now >= mem_end(m));
}

/* A random block= on policy p: a length around the period, sometimes escalating. */
static rlt_policy with_random_block(rng *r, rlt_policy p)
{
    rlt_ns base = rng_range(r, 1, 2 * p.period + 1);
    int64_t f = rng_chance(r, 1, 3) ? 1 : rng_range(r, 2, 3);
    rlt_ns max = base * rng_range(r, 1, 9);
    if (rlt_policy_set_block(&p, base, f, max)) abort();
    return p;
}

static bool same_decision(const rlt_decision *a, const rlt_decision *b)
{
    return a->allowed == b->allowed && a->limit == b->limit && a->remaining == b->remaining &&
           a->retry_after == b->retry_after && a->reset_after == b->reset_after &&
           a->delay == b->delay && a->lease == b->lease;
}

#define CHECK_DECISION(seed, step, got, want)                                                      \
    do {                                                                                           \
        if (!same_decision(&(got), &(want)))                                                       \
            FAIL_SEED(                                                                             \
                seed,                                                                              \
                "step %d: got allowed %d rem %lld retry %lld reset %lld delay %lld lease "         \
                "%lld; model allowed %d rem %lld retry %lld reset %lld delay %lld lease "          \
                "%lld",                                                                            \
                step, (got).allowed, (long long)(got).remaining, (long long)(got).retry_after,     \
                (long long)(got).reset_after, (long long)(got).delay, (long long)(got).lease,      \
                (want).allowed, (long long)(want).remaining, (long long)(want).retry_after,        \
                (long long)(want).reset_after, (long long)(want).delay, (long long)(want).lease);  \
    } while (0)

TEST(penalty_box_matches_the_reference_model_on_random_traces_of_every_algorithm)
{
    uint64_t base = test_seed(0xb10c);
    for (size_t a = 0; a < N_ALGOS; a++) {
        for (int t = 0; t < TRACES; t++) {
            uint64_t seed = base + a * 1000 + (uint64_t)t;
            rng r = {seed};
            bmodel m = {0};
            m.inner = random_policy(&r, all_algos[a]);
            m.p = with_random_block(&r, m.inner);
            m.ist = new_state(&m.inner);
            unsigned char *st = new_state(&m.p);
            CHECK_EQ(seed, rlt_state_size(&m.p), rlt_state_size(&m.inner) + 16);
            rlt_ns now = rng_range(&r, 0, 5 * S);
            int64_t leases[16];
            int nleases = 0;
            for (int i = 0; i < STEPS; i++) {
                now += random_step(&r, &m.p);
                if (m.p.algo == RLT_CONCURRENCY && nleases > 0 && rng_chance(&r, 1, 4)) {
                    int k = (int)rng_range(&r, 0, nleases - 1);
                    int rc1 = rlt_release(&m.p, st, now, leases[k]);
                    int rc2 = rlt_release(&m.inner, m.ist, now, leases[k]);
                    CHECK_EQ(seed, rc1, rc2);
                    leases[k] = leases[--nleases];
                    continue;
                }
                int64_t cost = random_cost(&r, &m.p);
                /* rlt_when agrees with the model's blocked-or-inner answer. */
                if (cost > 0) {
                    rlt_ns at = 0, want_at = 0;
                    int rc = rlt_when(&m.p, st, now, cost, &at);
                    int wrc = rlt_when(&m.inner, m.ist, now, cost, &want_at);
                    CHECK_EQ(seed, rc, wrc);
                    if (!rc && m.ever && m.until > want_at) want_at = clamp(m.until);
                    if (!rc) CHECK_EQ(seed, at, want_at);
                }
                rlt_decision d, want;
                unsigned char *before = dup_state(&m.p, st);
                CHECK_EQ(seed, rlt_decide(&m.p, st, now, cost, &d), RLT_OK);
                want = model_decide(&m, now, cost);
                CHECK_DECISION(seed, i, d, want);
                CHECK(seed, rlt_state_valid(&m.p, st));
                CHECK_EQ(seed, rlt_is_fresh(&m.p, st, now), model_fresh(&m, now));
                if (cost == 0 || (!d.allowed && d.retry_after < 0))
                    CHECK(seed, memcmp(before, st, rlt_state_size(&m.p)) == 0); /* peeks */
                /* retry_after is exact: one ns sooner is still denied, then allowed. */
                if (!d.allowed && d.retry_after > 0 && cost > 0) {
                    rlt_decision e;
                    unsigned char *c = dup_state(&m.p, st);
                    if (rlt_decide(&m.p, c, now + d.retry_after - 1, cost, &e)) abort();
                    CHECK(seed, !e.allowed);
                    memcpy(c, st, rlt_state_size(&m.p));
                    if (rlt_decide(&m.p, c, now + d.retry_after, cost, &e)) abort();
                    CHECK(seed, e.allowed);
                    free(c);
                }
                free(before);
                if (d.lease > 0 && nleases < 16) leases[nleases++] = d.lease;
                if (rlt_test_failed_now) break;
            }
            free(st);
            free(m.ist);
            if (rlt_test_failed_now) return;
        }
    }
}

TEST(penalty_box_blocks_every_request_until_its_end_and_charges_nothing)
{
    rlt_policy p = parse_policy("fixed_window:2/1s,block=10m");
    unsigned char *st = new_state(&p);
    rlt_decision d;
    ASSERT_EQ(rlt_decide(&p, st, 0, 1, &d), RLT_OK);
    ASSERT(d.allowed);
    ASSERT_EQ(rlt_decide(&p, st, 1, 1, &d), RLT_OK);
    ASSERT(d.allowed);
    ASSERT_EQ(rlt_decide(&p, st, 2, 1, &d), RLT_OK); /* the breach */
    ASSERT(!d.allowed);
    ASSERT_EQ(d.retry_after, 600 * S);
    ASSERT_EQ(d.remaining, 0);
    /* Later windows would allow; the box denies with the wait to its end. */
    ASSERT_EQ(rlt_decide(&p, st, 5 * 60 * S + 2, 1, &d), RLT_OK);
    ASSERT(!d.allowed);
    ASSERT_EQ(d.retry_after, 5 * 60 * S);
    ASSERT_EQ(rlt_decide(&p, st, 600 * S + 1, 0, &d), RLT_OK); /* a peek sees it */
    ASSERT(!d.allowed);
    ASSERT_EQ(d.retry_after, 1);
    ASSERT_EQ(rlt_decide(&p, st, 600 * S + 2, 1, &d), RLT_OK);
    ASSERT(d.allowed);
    ASSERT_EQ(d.remaining, 1); /* the blocked requests charged nothing */
    free(st);
}

TEST(penalty_box_escalates_on_breaches_within_the_window_after_the_block_and_caps)
{
    /* One request per minute; block 1m, doubled on each breach within 1m of the last block's
     * end, at most 5m. */
    rlt_policy p = parse_policy("fixed_window:1/1m,block=1m*2..5m");
    unsigned char *st = new_state(&p);
    rlt_decision d;
    const rlt_ns M = 60 * S;
    rlt_ns t = 0, expect[] = {1 * M, 2 * M, 4 * M, 5 * M, 5 * M};
    for (int i = 0; i < 5; i++) {
        ASSERT_EQ(rlt_decide(&p, st, t, 1, &d), RLT_OK); /* first of its window */
        ASSERT(d.allowed);
        ASSERT_EQ(rlt_decide(&p, st, t, 1, &d), RLT_OK); /* breach */
        ASSERT(!d.allowed);
        ASSERT_EQ(d.retry_after, expect[i]);
        /* One ns before the block's end: still blocked.  At its end a new window: allowed,
         * and the next breach comes 0 ns after the block's end, within W. */
        ASSERT_EQ(rlt_decide(&p, st, t + expect[i] - 1, 1, &d), RLT_OK);
        ASSERT_EQ(d.retry_after, 1);
        t += expect[i];
    }
    /* A breach more than W after the block's end starts over at 1m. */
    t += 10 * M;
    ASSERT_EQ(rlt_decide(&p, st, t, 1, &d), RLT_OK);
    ASSERT(d.allowed);
    ASSERT_EQ(rlt_decide(&p, st, t, 1, &d), RLT_OK);
    ASSERT_EQ(d.retry_after, 1 * M);
    /* Exactly W after the block's end is no longer within the window: start over. */
    t += M + M;
    ASSERT_EQ(rlt_decide(&p, st, t, 1, &d), RLT_OK);
    ASSERT(d.allowed);
    ASSERT_EQ(rlt_decide(&p, st, t, 1, &d), RLT_OK);
    ASSERT_EQ(d.retry_after, 1 * M);
    /* W - 1 ns after it is: escalate. */
    t += M + M - 1;
    ASSERT_EQ(rlt_decide(&p, st, t, 1, &d), RLT_OK);
    ASSERT(d.allowed);
    ASSERT_EQ(rlt_decide(&p, st, t, 1, &d), RLT_OK);
    ASSERT_EQ(d.retry_after, 2 * M);
    free(st);
}

TEST(penalty_box_peeks_and_never_fitting_costs_start_no_block)
{
    rlt_policy p = parse_policy("token_bucket:1/1s,block=1h");
    unsigned char *st = new_state(&p);
    rlt_decision d;
    ASSERT_EQ(rlt_decide(&p, st, 0, 1, &d), RLT_OK);
    ASSERT_EQ(rlt_decide(&p, st, 1, 0, &d), RLT_OK); /* a peek that would be denied */
    ASSERT(!d.allowed);
    ASSERT(d.retry_after < S);
    ASSERT_EQ(rlt_decide(&p, st, 2, 5, &d), RLT_OK); /* can never fit */
    ASSERT_EQ(d.retry_after, -1);
    ASSERT_EQ(rlt_decide(&p, st, S, 1, &d), RLT_OK);
    ASSERT(d.allowed);
    free(st);
}

TEST(penalty_box_on_concurrency_still_releases_while_blocked)
{
    rlt_policy p = parse_policy("concurrency:1/1m,block=30s");
    unsigned char *st = new_state(&p);
    rlt_decision d;
    ASSERT_EQ(rlt_decide(&p, st, 0, 1, &d), RLT_OK);
    int64_t lease = d.lease;
    ASSERT_EQ(rlt_decide(&p, st, 1, 1, &d), RLT_OK);
    ASSERT(!d.allowed);
    ASSERT_EQ(d.retry_after, 60 * S - 1); /* the lease's expiry is later than the block */
    ASSERT_EQ(rlt_release(&p, st, 2, lease), RLT_OK);
    ASSERT_EQ(rlt_decide(&p, st, 3, 1, &d), RLT_OK);
    ASSERT(!d.allowed);
    ASSERT_EQ(d.retry_after, 30 * S - 2);
    ASSERT_EQ(rlt_decide(&p, st, 30 * S + 1, 1, &d), RLT_OK);
    ASSERT(d.allowed);
    free(st);
}

TEST(penalty_box_state_size_zero_fresh_validity_and_shift)
{
    rng r = {test_seed(0x5b1)};
    for (size_t a = 0; a < N_ALGOS; a++) {
        rlt_policy q = random_policy(&r, all_algos[a]);
        rlt_policy p = with_random_block(&r, q);
        ASSERT_EQ(rlt_state_size(&p), rlt_state_size(&q) + 16);
        unsigned char *st = new_state(&p);
        ASSERT(rlt_is_fresh(&p, st, 0));
        ASSERT(rlt_state_valid(&p, st));
        /* Drive it into a block, then shift by delta: the same decisions delta later. */
        rlt_decision d, e;
        rlt_ns now = 1000;
        for (int i = 0; i < 40; i++)
            if (rlt_decide(&p, st, now, 1, &d)) abort();
        ASSERT(!rlt_is_fresh(&p, st, now));
        unsigned char *moved = dup_state(&p, st);
        const rlt_ns delta = 7 * p.period; /* whole periods: windows stay aligned */
        ASSERT_EQ(rlt_state_shift(&p, moved, delta), RLT_OK);
        ASSERT_EQ(rlt_decide(&p, st, now + 5, 1, &d), RLT_OK);
        ASSERT_EQ(rlt_decide(&p, moved, now + 5 + delta, 1, &e), RLT_OK);
        ASSERT(same_decision(&d, &e));
        /* A level beyond any reachable one is invalid. */
        int64_t bad = 65;
        memcpy(moved + rlt_state_size(&q) + 8, &bad, 8);
        ASSERT(!rlt_state_valid(&p, moved));
        free(moved);
        free(st);
    }
}

/* A block that ends at the end of int64 time, asked about from its far past: the wait
 * saturates (no signed overflow: UBSan runs this) and the request stays denied. */
TEST(penalty_box_at_the_ends_of_int64_time_saturates)
{
    rlt_policy p = parse_policy("gcra:1/1s,block=10m");
    uint64_t st[4] = {0};
    rlt_decision d;
    const rlt_ns end = INT64_MAX - RLT_NS_PER_S;
    ASSERT_EQ(rlt_decide(&p, st, end, 1, &d), RLT_OK);
    ASSERT(d.allowed);
    ASSERT_EQ(rlt_decide(&p, st, end, 1, &d), RLT_OK); /* the breach: blocked to INT64_MAX */
    ASSERT(!d.allowed);
    int rc = rlt_decide(&p, st, INT64_MIN + 1, 1, &d);
    ASSERT(rc == RLT_OK || rc == RLT_ERANGE);
    if (rc == RLT_OK) {
        ASSERT(!d.allowed);
        ASSERT_EQ(d.retry_after, INT64_MAX);
    }
}

TEST(penalty_box_clock_stepping_back_sees_a_longer_block_never_a_shorter_one)
{
    rlt_policy p = parse_policy("gcra:1/1s,block=10s");
    unsigned char *st = new_state(&p);
    rlt_decision d;
    ASSERT_EQ(rlt_decide(&p, st, 100 * S, 1, &d), RLT_OK);
    ASSERT_EQ(rlt_decide(&p, st, 100 * S, 1, &d), RLT_OK);
    ASSERT_EQ(d.retry_after, 10 * S);
    ASSERT_EQ(rlt_decide(&p, st, 50 * S, 1, &d), RLT_OK);
    ASSERT(!d.allowed);
    ASSERT_EQ(d.retry_after, 60 * S);
    free(st);
}

TEST(penalty_box_state_convert_keeps_the_block_and_refuses_a_size_change)
{
    rlt_policy a = parse_policy("token_bucket:1/1s,block=1m");
    rlt_policy b = parse_policy("token_bucket:10/1s,block=2m");
    rlt_policy c = parse_policy("token_bucket:10/1s");
    unsigned char *st = new_state(&a);
    rlt_decision d;
    ASSERT_EQ(rlt_decide(&a, st, 0, 1, &d), RLT_OK);
    ASSERT_EQ(rlt_decide(&a, st, 0, 1, &d), RLT_OK);
    ASSERT_EQ(rlt_state_convert(&a, &b, st, 1, RLT_CONVERT_KEEP), RLT_OK);
    ASSERT_EQ(rlt_decide(&b, st, 2, 1, &d), RLT_OK);
    ASSERT(!d.allowed);
    ASSERT_EQ(d.retry_after, 60 * S - 2);
    ASSERT_EQ(rlt_state_convert(&b, &c, st, 3, RLT_CONVERT_KEEP), RLT_EINVAL);
    free(st);
}

TEST(policy_text_block_and_jitter_round_trip_and_errors_name_the_option)
{
    static const char *const ok[][2] = {
        {"gcra:100/1m,block=10m", "gcra:100/1m,block=10m"},
        {"fixed_window:10/1s,block=1m*2..1h", "fixed_window:10/1s,block=1m*2..1h"},
        {"leaky_bucket:5/1s,burst=3,block=90s,jitter=10%",
         "leaky_bucket:5/1s,queue=3,block=90s,jitter=10%"},
        {"token_bucket:5/1s,jitter=100%,burst=9", "token_bucket:5/1s,burst=9,jitter=100%"},
        {"concurrency:4,block=1s", "concurrency:4/1m,block=1s"},
        {"sliding_log:3/1s,block=1500ms*3..1h", "sliding_log:3/1s,block=1500ms*3..1h"},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        rlt_policy p = parse_policy(ok[i][0]), q;
        char buf[128];
        ASSERT(rlt_policy_format(&p, buf, sizeof buf) > 0);
        if (strcmp(buf, ok[i][1]) != 0) RLT_FAIL_("%s formats as %s", ok[i][0], buf);
        ASSERT_EQ(rlt_policy_parse(&q, buf, strlen(buf), NULL, 0), RLT_OK);
        ASSERT(memcmp(&p, &q, sizeof p) == 0);
    }
    static const char *const bad[] = {
        "gcra:1/1s,block=0s",
        "gcra:1/1s,block=1m*1..1h",
        "gcra:1/1s,block=1m*2..30s",
        "gcra:1/1s,block=1m*2",
        "gcra:1/1s,block=10",
        "gcra:1/1s,block=1m,block=2m",
        "gcra:1/1s,jitter=0%",
        "gcra:1/1s,jitter=101%",
        "gcra:1/1s,jitter=10",
        "gcra:1/1s,jitter=%",
        "gcra:1/1s,jitter=5%,jitter=5%",
        "gcra:1/1s,block=1m*x..1h",
        "gcra:1/1s,block=1m*2..",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rlt_policy p;
        char err[256];
        int rc = rlt_policy_parse(&p, bad[i], strlen(bad[i]), err, sizeof err);
        if (rc != RLT_EPARSE) RLT_FAIL_("%s: rc %d (%s)", bad[i], rc, err);
        const char *opt = strrchr(bad[i], ',') + 1;
        if (!strstr(err, opt)) RLT_FAIL_("%s: message \"%s\" does not name %s", bad[i], err, opt);
    }
    /* Short buffers: ENOSPC, never a cut text. */
    rlt_policy p = parse_policy("gcra:100/1m,block=1m*2..1h,jitter=10%");
    char buf[64];
    int n = rlt_policy_format(&p, buf, sizeof buf);
    ASSERT(n > 0);
    for (size_t cap = 1; cap <= (size_t)n; cap++)
        ASSERT_EQ(rlt_policy_format(&p, buf, cap), RLT_ENOSPC);
}

TEST(policy_set_block_and_jitter_validate_their_numbers)
{
    rlt_policy p = parse_policy("gcra:1/1s");
    ASSERT_EQ(rlt_policy_set_block(&p, -1, 1, 0), RLT_EINVAL);
    ASSERT_EQ(rlt_policy_set_block(&p, S, 0, S), RLT_EINVAL);
    ASSERT_EQ(rlt_policy_set_block(&p, S, 2, S - 1), RLT_EINVAL);
    ASSERT_EQ(rlt_policy_set_block(&p, S, 1, 0), RLT_OK);
    ASSERT_EQ(p.block_max, S);
    ASSERT_EQ(rlt_policy_set_block(&p, 0, 0, 0), RLT_OK);
    ASSERT_EQ(p.block, 0);
    ASSERT_EQ(rlt_policy_set_jitter(&p, 101), RLT_EINVAL);
    ASSERT_EQ(rlt_policy_set_jitter(&p, -1), RLT_EINVAL);
    ASSERT_EQ(rlt_policy_set_jitter(&p, 100), RLT_OK);
    ASSERT_EQ(rlt_policy_set_block(NULL, S, 1, S), RLT_EINVAL);
    rlt_policy z = {0};
    ASSERT_EQ(rlt_policy_set_jitter(&z, 10), RLT_EINVAL);
}
