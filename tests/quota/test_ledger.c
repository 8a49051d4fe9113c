/* The quota division state (src/quota/quota.c) driven through its API: the ledger against a
 * shadow of every assignment sent (departed streams' included until their TTL), fairness once
 * settled, a joiner's share at once (one, and a fleet of 1,000 at one instant), freeing after
 * the TTL, budget changes, caps and bad arguments.  Replay a failure with RLT_TEST_SEED=<seed>. */
#include "core/core_util.h"

#include "quota/quota.h"

#define I S /* the reporting interval of these tests */

static rlt__quota *open_quota(const rlt__quota_options *o)
{
    rlt__quota *q = NULL;
    if (rlt__quota_open(&q, o) != RLT_OK) abort();
    return q;
}

static uint32_t open_bucket(rlt__quota *q, int64_t n, rlt_ns p, int64_t b)
{
    rlt__quota_budget bu = {n, p, b, 0};
    uint32_t id;
    if (rlt__quota_bucket_open(q, &bu, &id) != RLT_OK) abort();
    return id;
}

static uint32_t open_stream(rlt__quota *q)
{
    uint32_t id;
    if (rlt__quota_stream_open(q, &id) != RLT_OK) abort();
    return id;
}

/* One report; aborts on a status (the tests below give only valid ones). */
static rlt__quota_answer report(rlt__quota *q, uint32_t s, uint32_t b, uint64_t allowed,
                                uint64_t denied, rlt_ns elapsed, rlt_ns now)
{
    rlt__quota_usage u = {allowed, denied, elapsed};
    rlt__quota_answer a;
    int rc = rlt__quota_report(q, s, b, &u, now, &a);
    if (rc) {
        fprintf(stderr, "report: %s\n", rlt_strerror(rc));
        abort();
    }
    return a;
}

static rlt__quota_member_info member(const rlt__quota *q, uint32_t s, uint32_t b, rlt_ns now)
{
    rlt__quota_member_info info;
    if (rlt__quota_member(q, s, b, now, &info) != RLT_OK) abort();
    return info;
}

/* The shadow of one member: what was last sent to it, and when. */
typedef struct shadow {
    bool used, open;
    uint32_t stream, bucket;
    int64_t q, b;
    rlt_ns sent, expires;
} shadow;

#define MAXSH 256

TEST(ledger_counts_every_assignment_sent_until_its_ttl_and_never_passes_the_budget)
{
    uint64_t base = test_seed(0x1ed6);
    static shadow sh[MAXSH];
    for (int tr = 0; tr < 120; tr++) {
        uint64_t seed = base + (uint64_t)tr;
        rng r = {seed};
        memset(sh, 0, sizeof sh);
        rlt__quota_options o = {.report_interval = I};
        if (rng_chance(&r, 1, 2)) o.ttl = rng_range(&r, 3, 12) * I;
        if (rng_chance(&r, 1, 2)) o.min_resend = rng_range(&r, 1, 4) * I / 4;
        if (o.ttl && o.ttl < 2 * I + (o.min_resend ? o.min_resend : I)) o.ttl = 0;
        rlt__quota *q = open_quota(&o);
        uint32_t nb = (uint32_t)rng_range(&r, 1, 3), bk[3];
        int64_t cap_q[3], cap_b[3];
        for (uint32_t b = 0; b < nb; b++) {
            cap_q[b] = rng_range(&r, 1, 400);
            cap_b[b] = rng_range(&r, 1, 300);
            bk[b] = open_bucket(q, cap_q[b], S, cap_b[b]);
        }
        uint32_t open[12];
        int nopen = 0, nsh = 0;
        rlt_ns now = rng_range(&r, -100 * S, 100 * S);
        for (int step = 0; step < 600; step++) {
            now += rng_range(&r, 0, I / 2);
            int what = (int)rng_range(&r, 0, 19);
            if (nopen == 0 || (what == 0 && nopen < 12)) {
                open[nopen++] = open_stream(q);
            } else if (what == 1) { /* a stream closes: its members depart */
                int i = (int)rng_range(&r, 0, nopen - 1);
                ASSERT_EQ(rlt__quota_stream_close(q, open[i]), RLT_OK);
                for (int j = 0; j < nsh; j++)
                    if (sh[j].open && sh[j].stream == open[i]) sh[j].open = false;
                open[i] = open[--nopen];
            } else if (what == 2) {
                rlt__quota_sweep(q, now);
            } else {
                uint32_t s = open[rng_range(&r, 0, nopen - 1)];
                uint32_t b = (uint32_t)rng_range(&r, 0, nb - 1);
                int j = 0;
                while (j < nsh && !(sh[j].open && sh[j].stream == s && sh[j].bucket == b))
                    j++;
                uint64_t allowed = (uint64_t)rng_range(&r, 0, 3 * cap_q[b]);
                uint64_t denied = rng_chance(&r, 1, 2) ? (uint64_t)rng_range(&r, 0, 500) : 0;
                rlt__quota_answer a =
                    report(q, s, bk[b], allowed, denied, rng_range(&r, 0, 2 * I), now);
                if (j == nsh) {
                    CHECK(seed, nsh < MAXSH);
                    sh[nsh++] = (shadow){true, true, s, b, 0, 0, INT64_MIN, INT64_MIN};
                    CHECK(seed, a.reason == RLT__QUOTA_FIRST); /* a joiner is answered at once */
                }
                shadow *m = &sh[j];
                if (a.reason != RLT__QUOTA_KEEP) {
                    /* never two bursts to one member within G */
                    if (m->b > 0 && m->expires > now)
                        CHECK_LE(seed, o.min_resend ? o.min_resend : I, now - m->sent);
                    m->q = a.assignment.tokens_per_fill;
                    m->b = a.assignment.max_tokens;
                    m->sent = now;
                    m->expires = a.assignment.expires_at;
                    CHECK_EQ(seed, a.assignment.deny_all, m->q == 0);
                } else {
                    CHECK(seed, m->expires > now);
                    CHECK_EQ(seed, a.assignment.tokens_per_fill, m->q);
                    CHECK_EQ(seed, a.assignment.max_tokens, m->b);
                }
            }
            for (uint32_t b = 0; b < nb; b++) {
                int64_t sq = 0, sb = 0;
                for (int j = 0; j < nsh; j++)
                    if (sh[j].bucket == b && sh[j].expires > now) {
                        sq += sh[j].q;
                        sb += sh[j].b;
                    }
                rlt__quota_totals t;
                ASSERT_EQ(rlt__quota_bucket_totals(q, bk[b], now, &t), RLT_OK);
                CHECK_EQ(seed, t.tokens_per_fill, sq);
                CHECK_EQ(seed, t.max_tokens, sb);
                CHECK_LE(seed, sq, cap_q[b]);
                CHECK_LE(seed, sb, cap_b[b]);
            }
        }
        rlt__quota_close(q);
    }
}

/* n streams report full demand every interval for `rounds` intervals from `t0`. */
static void saturate(rlt__quota *q, const uint32_t *s, int n, uint32_t b, rlt_ns t0, int rounds)
{
    for (int k = 0; k < rounds; k++)
        for (int i = 0; i < n; i++)
            report(q, s[i], b, 1000, 100000, I, t0 + k * I + i);
}

TEST(light_streams_get_their_demand_plus_headroom_and_heavy_ones_share_the_rest)
{
    rlt__quota_options o = {.report_interval = I};
    rlt__quota *q = open_quota(&o);
    uint32_t b = open_bucket(q, 1000, S, 1000); /* Q 1000, 950 divided (5 % reserve) */
    uint32_t s[5];
    const uint64_t demand[5] = {40, 100, 0, 5000, 9000}; /* per second */
    for (int i = 0; i < 5; i++)
        s[i] = open_stream(q);
    for (int k = 0; k < 6; k++)
        for (int i = 0; i < 5; i++) {
            uint64_t allowed = demand[i] < 300 ? demand[i] : 250, denied = demand[i] - allowed;
            report(q, s[i], b, allowed, demand[i] < 300 ? 0 : denied, I, (k + 1) * I + i);
        }
    rlt_ns now = 7 * I;
    rlt__quota_member_info m[5];
    for (int i = 0; i < 5; i++)
        m[i] = member(q, s[i], b, now);
    ASSERT_EQ(m[0].target_q, 50);  /* 40 + 25 % */
    ASSERT_EQ(m[1].target_q, 125); /* 100 + 25 % */
    ASSERT_EQ(m[2].target_q, 1);   /* no demand: the one-token minimum */
    /* the rest, 950 - 176 = 774, shared equally by the two heavy streams */
    ASSERT_EQ(m[3].target_q, 387);
    ASSERT_EQ(m[4].target_q, 387);
    for (int i = 0; i < 5; i++) {
        /* live within the material-change threshold (1/8) of its target */
        int64_t d = m[i].live.tokens_per_fill - m[i].target_q;
        ASSERT_LE((d < 0 ? -d : d) * 8, m[i].live.tokens_per_fill);
        ASSERT(m[i].target_b >= 1);
    }
    rlt__quota_close(q);
}

TEST(a_joining_stream_gets_a_share_at_once_and_its_fair_share_within_three_intervals)
{
    rlt__quota_options o = {.report_interval = I};
    rlt__quota *q = open_quota(&o);
    uint32_t b = open_bucket(q, 1000, S, 500);
    uint32_t s[4];
    for (int i = 0; i < 4; i++)
        s[i] = open_stream(q);
    saturate(q, s, 3, b, I, 5); /* three streams settle on about 316 each */
    rlt__quota_totals t;
    ASSERT_EQ(rlt__quota_bucket_totals(q, b, 6 * I, &t), RLT_OK);
    ASSERT(t.tokens_per_fill >= 900);
    rlt__quota_answer a = report(q, s[3], b, 1, 0, 0, 6 * I); /* the joiner's first report */
    ASSERT_EQ(a.reason, RLT__QUOTA_FIRST);
    ASSERT(!a.assignment.deny_all);
    ASSERT(a.assignment.tokens_per_fill >= 1 && a.assignment.max_tokens >= 1);
    /* three intervals later the four share 950 about equally */
    saturate(q, s, 4, b, 6 * I + 10, 3);
    for (int i = 0; i < 4; i++) {
        rlt__quota_member_info m = member(q, s[i], b, 9 * I);
        ASSERT(m.live.tokens_per_fill >= 237 * 7 / 8 && m.live.tokens_per_fill <= 238);
    }
    rlt__quota_close(q);
}

/* A cold start: 1,000 Envoys open their streams and report a new bucket at one instant.  Each
 * is answered at once with about Q / 1,000 (its equal share among the open streams, less a
 * reserve of one share), not the whole division for the first and deny-all for the others
 * until the first may be lowered, G later; the ledger stays within Q and B throughout. */
TEST(a_fleet_reporting_a_new_bucket_at_once_gets_equal_shares_at_once)
{
    enum { N = 1000 };
    rlt__quota_options o = {.report_interval = I, .max_streams = N, .max_members = N};
    rlt__quota *q = open_quota(&o);
    uint32_t b = open_bucket(q, 1000000, S, 10000); /* Q 1,000,000 per 1 s, B 10,000 */
    static uint32_t s[N];
    for (int i = 0; i < N; i++)
        s[i] = open_stream(q);
    int64_t least = INT64_MAX, most = 0;
    for (int i = 0; i < N; i++) {
        rlt__quota_answer a = report(q, s[i], b, 1, 0, 0, 0);
        ASSERT_EQ(a.reason, RLT__QUOTA_FIRST);
        ASSERT(!a.assignment.deny_all);
        if (a.assignment.tokens_per_fill < least) least = a.assignment.tokens_per_fill;
        if (a.assignment.tokens_per_fill > most) most = a.assignment.tokens_per_fill;
        ASSERT(a.assignment.max_tokens >= 9);
    }
    ASSERT_EQ(least, 999); /* (1,000,000 - 1,000) / 1,000: the reserve is one share */
    ASSERT_EQ(most, 999);
    rlt__quota_totals t;
    ASSERT_EQ(rlt__quota_bucket_totals(q, b, 0, &t), RLT_OK);
    ASSERT_EQ(t.tokens_per_fill, 999000);
    ASSERT(t.max_tokens <= 10000);
    rlt__quota_close(q);
}

TEST(a_closed_streams_share_is_freed_only_after_its_ttl)
{
    rlt__quota_options o = {.report_interval = I}; /* ttl 8 I */
    rlt__quota *q = open_quota(&o);
    uint32_t b = open_bucket(q, 1000, S, 500);
    uint32_t s[2] = {open_stream(q), open_stream(q)};
    saturate(q, s, 2, b, I, 4);
    rlt__quota_member_info gone = member(q, s[0], b, 5 * I);
    ASSERT(gone.live.tokens_per_fill >= 400);
    rlt_ns until = gone.live.expires_at;
    ASSERT_EQ(rlt__quota_stream_close(q, s[0]), RLT_OK);
    rlt_ns now = 5 * I;
    for (; now < until + 3 * I; now += I) {
        report(q, s[1], b, 1000, 100000, I, now);
        rlt__quota_totals t;
        ASSERT_EQ(rlt__quota_bucket_totals(q, b, now, &t), RLT_OK);
        int64_t mine = member(q, s[1], b, now).live.tokens_per_fill;
        if (now < until) {
            ASSERT_LE(mine + gone.live.tokens_per_fill, 1000);
            ASSERT_EQ(t.tokens_per_fill, mine + gone.live.tokens_per_fill);
        }
    }
    /* after the TTL the survivor has the whole division: 950 */
    ASSERT_EQ(member(q, s[1], b, now).live.tokens_per_fill, 950);
    rlt__quota_close(q);
}

TEST(a_lowered_budget_never_raises_the_ledger_and_is_met_within_one_ttl)
{
    rlt__quota_options o = {.report_interval = I};
    rlt__quota *q = open_quota(&o);
    uint32_t b = open_bucket(q, 1000, S, 500);
    uint32_t s[3] = {open_stream(q), open_stream(q), open_stream(q)};
    saturate(q, s, 3, b, I, 4);
    rlt__quota_budget half = {500, S, 250, 0};
    ASSERT_EQ(rlt__quota_bucket_budget(q, b, &half), RLT_OK);
    rlt__quota_totals t;
    ASSERT_EQ(rlt__quota_bucket_totals(q, b, 5 * I, &t), RLT_OK);
    int64_t prev = t.tokens_per_fill;
    for (int k = 0; k < 12; k++) {
        saturate(q, s, 3, b, (5 + k) * I, 1);
        ASSERT_EQ(rlt__quota_bucket_totals(q, b, (6 + k) * I, &t), RLT_OK);
        if (prev > 500) ASSERT_LE(t.tokens_per_fill, prev);
        prev = t.tokens_per_fill;
    }
    ASSERT_LE(t.tokens_per_fill, 500);
    ASSERT_LE(t.max_tokens, 250);
    rlt__quota_budget other_fill = {500, S, 250, 2 * S};
    ASSERT_EQ(rlt__quota_bucket_budget(q, b, &other_fill), RLT_EINVAL);
    rlt__quota_close(q);
}

TEST(a_zero_budget_answers_deny_all_and_drains_the_ledger_within_one_ttl)
{
    rlt__quota_options o = {.report_interval = I};
    rlt__quota *q = open_quota(&o);
    uint32_t b = open_bucket(q, 1000, S, 500);
    uint32_t s[2] = {open_stream(q), open_stream(q)};
    saturate(q, s, 2, b, I, 4);
    rlt__quota_budget zero = {0, S, 0, 0};
    ASSERT_EQ(rlt__quota_bucket_budget(q, b, &zero), RLT_OK);
    rlt__quota_budget none = {0, S, 0, 0};
    uint32_t other;
    ASSERT_EQ(rlt__quota_bucket_open(q, &none, &other), RLT_EINVAL); /* only a new budget */
    rlt__quota_totals t;
    ASSERT_EQ(rlt__quota_bucket_totals(q, b, 5 * I, &t), RLT_OK);
    ASSERT_EQ(t.fill_capacity, 0);
    ASSERT_EQ(t.burst, 0);
    int64_t prev = t.tokens_per_fill;
    ASSERT_LE(1, prev);
    rlt_ns now = 5 * I;
    for (int k = 0; k < 10; k++, now += I) {
        for (int j = 0; j < 2; j++) {
            rlt__quota_answer a = report(q, s[j], b, 1000, 100000, I, now);
            /* nothing is ever raised: whatever is sent is a deny-all */
            if (a.reason != RLT__QUOTA_KEEP) ASSERT(a.assignment.deny_all);
        }
        ASSERT_EQ(rlt__quota_bucket_totals(q, b, now, &t), RLT_OK);
        ASSERT_LE(t.tokens_per_fill, prev);
        prev = t.tokens_per_fill;
    }
    ASSERT_EQ(t.tokens_per_fill, 0); /* within one TTL (8 I) */
    ASSERT_EQ(t.max_tokens, 0);
    /* the demand is still the streams', not capped by the zero budget: Redis mode asks for a
     * part with it */
    ASSERT_EQ(t.unknown, 0);
    ASSERT_LE(2 * 101000, t.demand);
    rlt__quota_budget back = {1000, S, 500, 0};
    ASSERT_EQ(rlt__quota_bucket_budget(q, b, &back), RLT_OK);
    rlt__quota_answer a = report(q, s[0], b, 1000, 100000, I, now);
    ASSERT(!a.assignment.deny_all);
    rlt__quota_close(q);
}

TEST(totals_sum_the_open_members_demands_and_count_the_unknown_ones)
{
    rlt__quota_options o = {.report_interval = I};
    rlt__quota *q = open_quota(&o);
    uint32_t b = open_bucket(q, 100, S, 50);
    uint32_t s[3] = {open_stream(q), open_stream(q), open_stream(q)};
    report(q, s[0], b, 30, 10, I, 0);       /* 40 per F = 1 s */
    report(q, s[1], b, 500, 500, 2 * I, 0); /* 500, above Q: counted whole */
    report(q, s[2], b, 0, 0, 0, 0);         /* no rate yet */
    rlt__quota_totals t;
    ASSERT_EQ(rlt__quota_bucket_totals(q, b, 0, &t), RLT_OK);
    ASSERT_EQ(t.demand, 540);
    ASSERT_EQ(t.unknown, 1);
    ASSERT_EQ(rlt__quota_stream_close(q, s[1]), RLT_OK); /* departed: not asking any more */
    ASSERT_EQ(rlt__quota_bucket_totals(q, b, 0, &t), RLT_OK);
    ASSERT_EQ(t.demand, 40);
    rlt__quota_close(q);
}

TEST(sweep_frees_departed_members_and_closed_buckets_after_their_ttl)
{
    rlt__quota_options o = {.report_interval = I, .max_buckets = 1};
    rlt__quota *q = open_quota(&o);
    uint32_t b = open_bucket(q, 100, S, 100), other;
    uint32_t s = open_stream(q);
    rlt__quota_answer a = report(q, s, b, 5, 0, I, 0);
    rlt__quota_budget bu = {1, S, 1, 0};
    ASSERT_EQ(rlt__quota_bucket_open(q, &bu, &other), RLT_EFULL);
    ASSERT_EQ(rlt__quota_bucket_close(q, b), RLT_OK);
    ASSERT_EQ(rlt__quota_bucket_close(q, b), RLT_EINVAL);
    rlt__quota_usage u = {1, 0, I};
    ASSERT_EQ(rlt__quota_report(q, s, b, &u, I, &a), RLT_EINVAL); /* closing: no reports */
    rlt__quota_sweep(q, a.assignment.expires_at - 1);
    rlt__quota_totals t;
    ASSERT_EQ(rlt__quota_bucket_totals(q, b, a.assignment.expires_at - 1, &t), RLT_OK);
    ASSERT_EQ(t.members, 1); /* still held: its Envoy enforces it */
    ASSERT_EQ(rlt__quota_bucket_open(q, &bu, &other), RLT_EFULL);
    rlt__quota_sweep(q, a.assignment.expires_at);
    ASSERT_EQ(rlt__quota_bucket_totals(q, b, a.assignment.expires_at, &t), RLT_EINVAL);
    ASSERT_EQ(rlt__quota_bucket_open(q, &bu, &other), RLT_OK);
    ASSERT_EQ(other, b); /* the id is reused */
    rlt__quota_close(q);
}

TEST(caps_refuse_with_efull_and_change_nothing)
{
    rlt__quota_options o = {
        .report_interval = I, .max_streams = 2, .max_buckets_per_stream = 2, .max_members = 3};
    rlt__quota *q = open_quota(&o);
    uint32_t b[3] = {open_bucket(q, 100, S, 10), open_bucket(q, 100, S, 10),
                     open_bucket(q, 100, S, 10)};
    uint32_t s1 = open_stream(q), s2 = open_stream(q), s3;
    ASSERT_EQ(rlt__quota_stream_open(q, &s3), RLT_EFULL);
    report(q, s1, b[0], 1, 0, I, 0);
    report(q, s1, b[1], 1, 0, I, 0);
    rlt__quota_usage u = {1, 0, I};
    rlt__quota_answer a;
    ASSERT_EQ(rlt__quota_report(q, s1, b[2], &u, 0, &a), RLT_EFULL); /* per stream */
    report(q, s2, b[2], 1, 0, I, 0);
    ASSERT_EQ(rlt__quota_report(q, s2, b[0], &u, 0, &a), RLT_EFULL); /* members in total */
    rlt__quota_totals t;
    ASSERT_EQ(rlt__quota_bucket_totals(q, b[0], 0, &t), RLT_OK);
    ASSERT_EQ(t.members, 1);
    ASSERT_EQ(rlt__quota_member(q, s2, b[0], 0, &(rlt__quota_member_info){0}), RLT_ENOENT);
    ASSERT_EQ(rlt__quota_stream_close(q, s1), RLT_OK);
    ASSERT_EQ(rlt__quota_stream_open(q, &s3), RLT_OK);
    rlt__quota_close(q);
}

TEST(bad_arguments_are_einval)
{
    rlt__quota *q = NULL;
    rlt__quota_options o = {0};
    ASSERT_EQ(rlt__quota_open(&q, &o), RLT_EINVAL); /* no reporting interval */
    o = (rlt__quota_options){.report_interval = I, .ttl = 2 * I};
    ASSERT_EQ(rlt__quota_open(&q, &o), RLT_EINVAL); /* ttl < renew_before + min_resend */
    o = (rlt__quota_options){.report_interval = I, .reserve_permille = 501};
    ASSERT_EQ(rlt__quota_open(&q, &o), RLT_EINVAL);
    o = (rlt__quota_options){.report_interval = I};
    q = open_quota(&o);
    uint32_t id;
    rlt__quota_budget bu = {0, S, 1, 0};
    ASSERT_EQ(rlt__quota_bucket_open(q, &bu, &id), RLT_EINVAL);
    bu = (rlt__quota_budget){1, S, INT64_C(1) << 32, 0};
    ASSERT_EQ(rlt__quota_bucket_open(q, &bu, &id), RLT_ERANGE); /* max_tokens is uint32 */
    bu = (rlt__quota_budget){1, S, 1, S / 2};
    ASSERT_EQ(rlt__quota_bucket_open(q, &bu, &id), RLT_ERANGE); /* Q = 0 */
    bu = (rlt__quota_budget){INT64_MAX, 1, 1, INT64_MAX};
    ASSERT_EQ(rlt__quota_bucket_open(q, &bu, &id), RLT_ERANGE);
    uint32_t b = open_bucket(q, 10, S, 10), s = open_stream(q);
    rlt__quota_usage u = {1, 0, -1};
    rlt__quota_answer a;
    ASSERT_EQ(rlt__quota_report(q, s, b, &u, 0, &a), RLT_EINVAL); /* negative elapsed */
    u.elapsed = 0;
    ASSERT_EQ(rlt__quota_report(q, s + 1, b, &u, 0, &a), RLT_EINVAL);
    ASSERT_EQ(rlt__quota_report(q, s, b + 1, &u, 0, &a), RLT_EINVAL);
    ASSERT_EQ(rlt__quota_report(q, s, b, NULL, 0, &a), RLT_EINVAL);
    ASSERT_EQ(rlt__quota_stream_close(q, s + 1), RLT_EINVAL);
    int64_t e;
    ASSERT_EQ(rlt__quota_excess_bound(q, b, -1, false, &e), RLT_EINVAL);
    ASSERT_EQ(rlt__quota_excess_bound(q, b, 10 * I, false, &e), RLT_OK);
    ASSERT_EQ(e, 10 + 10 * 10); /* B + B x T / G with G = I */
    ASSERT_EQ(rlt__quota_excess_bound(q, b, 10 * I, true, &e), RLT_OK);
    ASSERT_EQ(e, 10 + 10 * 10 / 6); /* G = ttl - renew_before = 6 I */
    rlt__quota_close(q);
    rlt__quota_close(NULL);
}
