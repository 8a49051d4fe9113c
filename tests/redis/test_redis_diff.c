/* Differential tests: seeded random traces (caller time, whole microseconds) replayed through
 * rlt_decide in C and through the Redis scripts must give identical decisions: allowed,
 * limit, remaining, retry_after, reset_after and delay, for every algorithm; also at the
 * largest instants the scripts accept, and for multi-limit checks against the keyed store. */
#define RTEST_KIND "standalone"
#include "rtest.h"
#include "test.h"

#include "ratelimit/store.h"

#include "diff_checks.h"
#include "diff_policies.h"

/* Prints the first difference and fails. */
#define SAME(c, r, what)                                                                           \
    do {                                                                                           \
        if ((c) != (r))                                                                            \
            RLT_FAIL_("%s seed %llu step %d t=%lldus cost %lld: %s: C %lld, Redis %lld", text,     \
                      (unsigned long long)seed, step, (long long)(t / 1000), (long long)cost,      \
                      what, (long long)(c), (long long)(r));                                       \
    } while (0)

/* rlt_redis_decide, or (with `multi`) the same request as a one-limit rlt_redis_decide_multi,
 * which runs the multi-limit script on the same key. */
static int redis_decide(rlt_redis *r, const rlt_policy *p, bool multi, const char *key,
                        int64_t cost, int64_t t, rlt_decision *d)
{
    if (!multi) return rlt_redis_decide(r, p, RLT_REDIS_CALLER_TIME, key, strlen(key), t, cost, d);
    rlt_redis_check ck = {p, key, strlen(key), cost};
    int refused;
    return rlt_redis_decide_multi(r, &ck, 1, RLT_REDIS_CALLER_TIME, t, d, &refused);
}

/* One trace of `steps` requests on one key; Redis instants are C's plus `offset_us`.  With
 * `mix`, a third of the requests (but concurrency's) go through the multi-limit script. */
static void replay_mix(rlt_redis *r, const char *text, uint64_t seed, int steps, int64_t t0_us,
                       int64_t offset_us, bool mix, int *compared)
{
    rlt_policy p = rtest_policy(text);
    void *st = calloc(1, rlt_state_size(&p));
    char key[64];
    snprintf(key, sizeof key, "diff:%llu:%lld", (unsigned long long)seed, (long long)offset_us);
    ASSERT_EQ(rlt_redis_reset(r, &p, key, strlen(key)), RLT_OK);
    int64_t W = p.period / 1000, gap = W / p.limit + 1;
    int64_t t = t0_us * 1000, cost = 0;
    int64_t leases_c[8] = {0}, leases_r[8] = {0};
    uint64_t s = seed;
    for (int step = 0; step < steps; step++) {
        int64_t dt = rtest_trace_dt(&s, W, gap);
        t += dt * 1000;
        if (t < 0) t = 0;
        int64_t rc_c, rc_r;
        rlt_decision dc, dr;
        if (p.block > 0 && rtest_below(&s, 40) == 0) { /* a reset lifts a block */
            memset(st, 0, rlt_state_size(&p));
            ASSERT_EQ(rlt_redis_reset(r, &p, key, strlen(key)), RLT_OK);
            memset(leases_c, 0, sizeof leases_c);
            memset(leases_r, 0, sizeof leases_r);
            continue;
        }
        if (p.algo == RLT_CONCURRENCY && rtest_below(&s, 3) == 0) {
            /* release a lease we hold (or a bogus one): both sides must agree */
            int k = (int)rtest_below(&s, 8);
            rc_c = leases_c[k] ? rlt_release(&p, st, t, leases_c[k]) : RLT_ENOENT;
            rc_r = leases_r[k] ? rlt_redis_release(r, &p, RLT_REDIS_CALLER_TIME, key, strlen(key),
                                                   t + offset_us * 1000, leases_r[k])
                               : RLT_ENOENT;
            if (getenv("RLT_TEST_TRACE"))
                fprintf(stderr, "%s step %d t=%lldus release slot %d: C %lld Redis %lld\n", text,
                        step, (long long)(t / 1000), k, (long long)rc_c, (long long)rc_r);
            SAME(rc_c, rc_r, "release status");
            leases_c[k] = leases_r[k] = 0;
            (*compared)++;
            continue;
        }
        int64_t cpick = rtest_below(&s, 10);
        if (p.algo == RLT_CONCURRENCY)
            cost = cpick < 1 ? 0 : 1;
        else
            cost = cpick < 1 ? 0 : cpick < 7 ? 1 : rtest_below(&s, p.limit + 3);
        rc_c = rlt_decide(&p, st, t, cost, &dc);
        bool multi = mix && p.algo != RLT_CONCURRENCY && rtest_below(&s, 3) == 0;
        rc_r = redis_decide(r, &p, multi, key, cost, t + offset_us * 1000, &dr);
        SAME(rc_c, rc_r, "status");
        if (getenv("RLT_TEST_TRACE"))
            fprintf(stderr,
                    "%s step %d t=%lldus cost %lld: C %d rem %lld retry %lld reset %lld"
                    " | Redis %d rem %lld retry %lld reset %lld\n",
                    text, step, (long long)(t / 1000), (long long)cost, dc.allowed,
                    (long long)dc.remaining, (long long)dc.retry_after, (long long)dc.reset_after,
                    dr.allowed, (long long)dr.remaining, (long long)dr.retry_after,
                    (long long)dr.reset_after);
        if (rc_c) continue;
        SAME(dc.allowed, dr.allowed, "allowed");
        SAME(dc.limit, dr.limit, "limit");
        SAME(dc.remaining, dr.remaining, "remaining");
        SAME(dc.retry_after, dr.retry_after, "retry_after");
        SAME(dc.reset_after, dr.reset_after, "reset_after");
        SAME(dc.delay, dr.delay, "delay");
        SAME(dc.lease > 0, dr.lease > 0, "lease given");
        if (dc.lease > 0) {
            int k = (int)rtest_below(&s, 8);
            leases_c[k] = dc.lease;
            leases_r[k] = dr.lease;
        }
        (*compared)++;
    }
    free(st);
}

static void replay(rlt_redis *r, const char *text, uint64_t seed, int steps, int64_t t0_us,
                   int64_t offset_us, int *compared)
{
    replay_mix(r, text, seed, steps, t0_us, offset_us, false, compared);
}

TEST(redis_scripts_match_c_on_random_traces)
{
    rlt_redis *r = rtest_open(
        (rlt_redis_options){.timeout = 2 * RLT_NS_PER_S, .ttl_floor = 60 * RLT_NS_PER_S});
    int compared = 0;
    for (size_t i = 0; i < NPOL; i++) {
        for (uint64_t seed = 1; seed <= 4; seed++) {
            replay(r, policies[i], seed * 7919 + i, 250, 1000000, 0, &compared);
            if (rlt_test_failed_now) break;
        }
        if (rlt_test_failed_now) break;
    }
    rlt_redis_stats st;
    rlt_redis_stats_get(r, &st);
    ASSERT_EQ(st.fail_open + st.fail_closed, 0);
    ASSERT(compared > 10000);
    rlt_redis_close(r);
}

/* Calendar windows: traces of Unix instants around the month starts of 2024-2026 (DST days,
 * February 29, new year) and between them, with the clock stepping back at times, through the
 * one-limit and the multi-limit scripts, against rlt_decide with origin 0. */
TEST(redis_scripts_match_c_on_calendar_windows_around_month_ends)
{
    static const char *const texts[] = {
        "fixed_window:3/1mo,tz=Europe/Paris",        "fixed_window:4/1mo,tz=America/New_York",
        "fixed_window:2/1mo,tz=Australia/Lord_Howe", "fixed_window:5/3mo,tz=Europe/Paris",
        "fixed_window:3/1y,tz=Australia/Lord_Howe",  "fixed_window:3/1mo"};
    rlt_redis *r = rtest_open(
        (rlt_redis_options){.timeout = 2 * RLT_NS_PER_S, .ttl_floor = 60 * RLT_NS_PER_S});
    int compared = 0, step = 0;
    const int64_t S = RLT_NS_PER_S;
    for (size_t i = 0; i < sizeof texts / sizeof texts[0] && !rlt_test_failed_now; i++) {
        const char *text = texts[i];
        rlt_policy p = rtest_policy(text);
        int64_t starts[40];
        for (int m = 0; m < 40; m++) /* months from 2023-12 */
            ASSERT_EQ(rlt_zone_month_start(&p.zone, 647 + m, &starts[m]), RLT_OK);
        for (uint64_t seed = 1; seed <= 3 && !rlt_test_failed_now; seed++) {
            char key[64];
            snprintf(key, sizeof key, "cal:%zu:%llu", i, (unsigned long long)seed);
            ASSERT_EQ(rlt_redis_reset(r, &p, key, strlen(key)), RLT_OK);
            unsigned char st[16] = {0};
            uint64_t s = seed * 104729 + i;
            int64_t t = starts[1] * S, cost = 0;
            for (step = 0; step < 300; step++) {
                int64_t pick = rtest_below(&s, 10);
                if (pick < 4) /* next to a month start, to the microsecond */
                    t = starts[1 + rtest_below(&s, 37)] * S +
                        ((int64_t)rtest_below(&s, 4000001) - 2000000) * 1000;
                else if (pick < 8)
                    t += (int64_t)rtest_below(&s, 3 * 86400) * S +
                         (int64_t)rtest_below(&s, 1000000) * 1000;
                else
                    t -= (int64_t)rtest_below(&s, 20 * 86400) * S; /* the clock steps back */
                if (t < starts[1] * S) t = starts[1] * S;
                if (t > starts[38] * S) t = starts[20] * S;
                int64_t cpick = rtest_below(&s, 10);
                cost = cpick < 1 ? 0 : cpick < 8 ? 1 : (int64_t)rtest_below(&s, p.limit + 2);
                rlt_decision dc, dr;
                int rc_c = rlt_decide(&p, st, t, cost, &dc);
                bool multi = rtest_below(&s, 3) == 0;
                int rc_r = redis_decide(r, &p, multi, key, cost, t, &dr);
                SAME(rc_c, rc_r, "status");
                if (rc_c) continue;
                SAME(dc.allowed, dr.allowed, "allowed");
                SAME(dc.remaining, dr.remaining, "remaining");
                SAME(dc.retry_after, dr.retry_after, "retry_after");
                SAME(dc.reset_after, dr.reset_after, "reset_after");
                compared++;
            }
        }
    }
    (void)step;
    ASSERT(compared > 5000);
    rlt_redis_close(r);
}

TEST(redis_scripts_match_c_at_the_largest_instants)
{
    /* Redis runs at instants near 2^52 us (its limit); C at the same trace shifted to a small
     * origin by a whole number of windows, which changes no decision. */
    rlt_redis *r = rtest_open(
        (rlt_redis_options){.timeout = 2 * RLT_NS_PER_S, .ttl_floor = 60 * RLT_NS_PER_S});
    int compared = 0;
    for (size_t i = 0; i < NPOL; i++) {
        rlt_policy p = rtest_policy(policies[i]);
        int64_t W = p.period / 1000;
        int64_t offset = ((INT64_C(1) << 52) / W - 5000) * W;
        replay(r, policies[i], 424242 + i, 150, 0, offset, &compared);
        if (rlt_test_failed_now) break;
    }
    rlt_redis_close(r);
}

TEST(one_limit_and_multi_limit_scripts_share_each_keys_state)
{
    /* Each algorithm has its own script for one limit, and the multi-limit script holds them
     * all: both must read and write one state format (e.g. GCRA's "t:f" with scale > 1). */
    rlt_redis *r = rtest_open(
        (rlt_redis_options){.timeout = 2 * RLT_NS_PER_S, .ttl_floor = 60 * RLT_NS_PER_S});
    int compared = 0;
    for (size_t i = 0; i < NPOL; i++) {
        replay_mix(r, policies[i], 31337 + i, 200, 1000000, 0, true, &compared);
        if (rlt_test_failed_now) break;
    }
    ASSERT(compared > 3000);
    rlt_redis_close(r);
}

TEST(gcra_and_leaky_bucket_match_c_after_the_clock_steps_back_decades)
{
    /* A charge 20 years in, then instants back near the origin: tat - now passes 2^53 scaled
     * units, which the scripts carry as (whole us, fraction) and the client widens. */
    rlt_redis *r = rtest_open(
        (rlt_redis_options){.timeout = 2 * RLT_NS_PER_S, .ttl_floor = 60 * RLT_NS_PER_S});
    const char *texts[] = {"gcra:13/997us,burst=4",
                           "gcra:3/1s",
                           "gcra:1000/1s,burst=50",
                           "leaky_bucket:7/3s,queue=3",
                           "token_bucket:13/997us,burst=4",
                           "gcra:3/1s,block=1d*2..1000d",
                           "leaky_bucket:7/3s,queue=3,block=1h"};
    const int64_t year = INT64_C(365) * 86400 * RLT_NS_PER_S;
    const int64_t times[] = {20 * year, 20 * year + 5000, RLT_NS_PER_S, 0, 3 * year, 20 * year};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        for (int multi = 0; multi < 2; multi++) {
            rlt_policy p = rtest_policy(texts[i]);
            void *st = calloc(1, rlt_state_size(&p));
            ASSERT_EQ(rlt_redis_reset(r, &p, "decades", 7), RLT_OK);
            for (size_t k = 0; k < sizeof times / sizeof times[0]; k++) {
                for (int64_t cost = 0; cost <= 2; cost++) {
                    rlt_decision dc, dr;
                    ASSERT_EQ(rlt_decide(&p, st, times[k], cost, &dc), RLT_OK);
                    ASSERT_EQ(redis_decide(r, &p, multi, "decades", cost, times[k], &dr), RLT_OK);
                    ASSERT_EQ(dc.allowed, dr.allowed);
                    ASSERT_EQ(dc.remaining, dr.remaining);
                    ASSERT_EQ(dc.retry_after, dr.retry_after);
                    ASSERT_EQ(dc.reset_after, dr.reset_after);
                    ASSERT_EQ(dc.delay, dr.delay);
                }
            }
            free(st);
        }
    }
    rlt_redis_close(r);
}

TEST(redis_refuses_policies_beyond_2_pow_53)
{
    rlt_policy p = rtest_policy("token_bucket:1/1000s,burst=1000000");
    ASSERT_EQ(rlt_redis_policy_check(&p), RLT_OK); /* cap 10^15 < 2^50 */
    p = rtest_policy("token_bucket:1/1000s,burst=2000000");
    ASSERT_EQ(rlt_redis_policy_check(&p), RLT_ERANGE);
    p = rtest_policy("gcra:3/1500ns");
    ASSERT_EQ(rlt_redis_policy_check(&p), RLT_EINVAL); /* not whole microseconds */
    p = rtest_policy("sliding_window:100000000/1000d");
    ASSERT_EQ(rlt_redis_policy_check(&p), RLT_ERANGE);
    rlt_redis *r = rtest_open((rlt_redis_options){0});
    rlt_decision d;
    p = rtest_policy("token_bucket:1/1000s,burst=2000000");
    ASSERT_EQ(rlt_redis_decide(r, &p, 0, "k", 1, 0, 1, &d), RLT_ERANGE);
    ASSERT(!d.allowed);
    p = rtest_policy("gcra:3/1s");
    ASSERT_EQ(rlt_redis_decide(r, &p, RLT_REDIS_CALLER_TIME, "k", 1,
                               ((INT64_C(1) << 52) + 1) * 1000, 1, &d),
              RLT_ERANGE);
    ASSERT_EQ(rlt_redis_decide(r, &p, RLT_REDIS_CALLER_TIME, "k", 1, -5, 1, &d), RLT_ERANGE);
    ASSERT_EQ(rlt_redis_decide(r, &p, 0, "", 0, 0, 1, &d), RLT_EKEYLEN);
    ASSERT_EQ(rlt_redis_decide(r, &p, 0, "k", 1, 0, -1, &d), RLT_EINVAL);
    rlt_redis_close(r);
}

TEST(redis_huge_costs_never_fit_like_c)
{
    rlt_redis *r = rtest_open((rlt_redis_options){0});
    diff_huge_costs_never_fit_like_c(r);
    rlt_redis_close(r);
}

TEST(redis_scripts_jitter_is_rlt_jitter_of_the_exact_wait)
{
    rlt_redis *r = rtest_open((rlt_redis_options){.ttl_floor = 60 * RLT_NS_PER_S});
    diff_jitter_is_rlt_jitter_of_the_exact_wait(r);
    rlt_redis_close(r);
}

TEST(redis_penalty_box_matches_c_on_random_traces)
{
    /* Blocks, escalations, restarts, resets and clock steps, through the one-limit and the
     * one-limit multi calls (both run multi.lua with the companion key), at small instants
     * and near 2^52 us. */
    rlt_redis *r = rtest_open(
        (rlt_redis_options){.timeout = 2 * RLT_NS_PER_S, .ttl_floor = 60 * RLT_NS_PER_S});
    int compared = 0;
    for (size_t i = 0; i < NBPOL && !rlt_test_failed_now; i++) {
        for (uint64_t seed = 1; seed <= 4 && !rlt_test_failed_now; seed++)
            replay_mix(r, block_policies[i], seed * 6007 + i, 300, 1000000, 0, true, &compared);
        rlt_policy p = rtest_policy(block_policies[i]);
        int64_t W = p.period / 1000, offset = ((INT64_C(1) << 52) / W - 50000) * W;
        if (!rlt_test_failed_now) replay(r, block_policies[i], 5150 + i, 200, 0, offset, &compared);
    }
    ASSERT(compared > 10000);
    rlt_redis_close(r);
}

TEST(redis_penalty_box_blocks_escalates_and_resets_like_c)
{
    rlt_redis *r = rtest_open((rlt_redis_options){.ttl_floor = 60 * RLT_NS_PER_S});
    diff_block_runs_like_c(r);
    rlt_redis_close(r);
}

TEST(redis_multi_limit_matches_the_store)
{
    const char *texts[] = {"fixed_window:10/1s",    "gcra:3/1s,burst=5",
                           "sliding_window:20/10s", "token_bucket:5/2s",
                           "sliding_log:8/3s",      "fixed_window:4/1s,block=2s*2..10s",
                           "gcra:2/1s,block=1500ms"};
    enum { NP = sizeof texts / sizeof texts[0] };
    rlt_policy p[NP];
    rlt_store *s;
    ASSERT_EQ(rlt_store_open(&s, NULL), RLT_OK);
    int ids[NP];
    for (int i = 0; i < NP; i++) {
        char name[8];
        snprintf(name, sizeof name, "p%d", i);
        p[i] = rtest_policy(texts[i]);
        ASSERT_EQ(rlt_store_set_policy(s, name, &p[i], RLT_CHANGE_RESET, &ids[i]), RLT_OK);
    }
    rlt_redis *r = rtest_open(
        (rlt_redis_options){.timeout = 2 * RLT_NS_PER_S, .ttl_floor = 60 * RLT_NS_PER_S});
    static const char *keys[] = {"{u1}:a", "{u1}:b"};
    for (int i = 0; i < NP; i++)
        for (int k = 0; k < 2; k++)
            ASSERT_EQ(rlt_redis_reset(r, &p[i], keys[k], strlen(keys[k])), RLT_OK);
    uint64_t seed = 99;
    int64_t t = 1000000000;
    for (int step = 0; step < 1500; step++) {
        t += rtest_below(&seed, 4) == 0 ? 0 : rtest_below(&seed, 400000) * 1000;
        size_t n = 1 + (size_t)rtest_below(&seed, 3);
        rlt_check cc[3];
        rlt_redis_check rc[3];
        for (size_t i = 0; i < n; i++) {
            int pi = (int)rtest_below(&seed, NP), k = (int)rtest_below(&seed, 2);
            bool twice = false; /* the same limit twice is refused by Redis */
            for (size_t j = 0; j < i; j++)
                if (rc[j].policy == &p[pi] && rc[j].key == keys[k]) twice = true;
            if (twice) {
                n = i;
                break;
            }
            int64_t cost = rtest_below(&seed, 3);
            cc[i] = (rlt_check){ids[pi], keys[k], strlen(keys[k]), cost};
            rc[i] = (rlt_redis_check){&p[pi], keys[k], strlen(keys[k]), cost};
        }
        rlt_decision dc, dr;
        int rf_c, rf_r;
        ASSERT_EQ(rlt_store_decide_multi(s, cc, n, t, &dc, &rf_c), RLT_OK);
        ASSERT_EQ(rlt_redis_decide_multi(r, rc, n, RLT_REDIS_CALLER_TIME, t, &dr, &rf_r), RLT_OK);
        ASSERT_EQ(dc.allowed, dr.allowed);
        ASSERT_EQ(rf_c, rf_r);
        ASSERT_EQ(dc.limit, dr.limit);
        ASSERT_EQ(dc.remaining, dr.remaining);
        ASSERT_EQ(dc.retry_after, dr.retry_after);
        ASSERT_EQ(dc.reset_after, dr.reset_after);
    }
    rlt_redis_close(r);
    rlt_store_close(s);
}

TEST(redis_batch_matches_single_calls)
{
    rlt_redis *r = rtest_open(
        (rlt_redis_options){.timeout = 2 * RLT_NS_PER_S, .ttl_floor = 60 * RLT_NS_PER_S});
    diff_batch_matches_single_calls(r, "batch");
    rlt_redis_close(r);
}

TEST(redis_server_time_is_used_by_default)
{
    rlt_redis *r = rtest_open((rlt_redis_options){0});
    rlt_policy p = rtest_policy("fixed_window:5/1h");
    char key[64];
    snprintf(key, sizeof key, "servertime:%lld", (long long)rtest_mono_ns());
    int allowed = 0;
    rlt_decision d;
    for (int i = 0; i < 8; i++) {
        /* `now` is ignored without RLT_REDIS_CALLER_TIME: wild values change nothing */
        ASSERT_EQ(rlt_redis_decide(r, &p, 0, key, strlen(key), (int64_t)i * 1000000007, 1, &d),
                  RLT_OK);
        allowed += d.allowed;
        ASSERT(d.reset_after > 0 && d.reset_after <= 3600 * RLT_NS_PER_S);
    }
    ASSERT_EQ(allowed, 5);
    ASSERT(d.retry_after > 0);
    rlt_redis_close(r);
}
