/* Differential tests of the Redis module: seeded random traces (caller time, whole
 * microseconds) through the core (rlt_decide), the Lua scripts and the module must give
 * identical decisions for every algorithm, on the same 22 policies as tests/redis's
 * differential, with module and scripts alternating on one key (so each reads what the other
 * wrote); and the library detects the module by itself. */
#define RTEST_KIND "standalone"
#define RTEST_SERVER_ARGS "--loadmodule " RLT_MODULE_PATH " testing yes"
#include "rtest.h"
#include "test.h"

#include "diff_checks.h"
#include "diff_policies.h" /* the same 22 policies as the scripts' differential */

#define SAME(c, r, what)                                                                           \
    do {                                                                                           \
        if ((c) != (r))                                                                            \
            RLT_FAIL_("%s seed %llu step %d t=%lldus cost %lld via %s: %s: C %lld, Redis %lld",    \
                      text, (unsigned long long)seed, step, (long long)(t / 1000),                 \
                      (long long)cost, side ? "module" : "scripts", what, (long long)(c),          \
                      (long long)(r));                                                             \
    } while (0)

static rlt_redis *open_engine(rlt_redis_engine e)
{
    return rtest_open((rlt_redis_options){
        .timeout = 2 * RLT_NS_PER_S, .ttl_floor = 60 * RLT_NS_PER_S, .engine = e});
}

/* One trace on one key: each request goes to h[0] (scripts) or h[1] (module) as `route` says
 * (0: scripts only, 1: module only, 2: at random); with `multi`, a third of them (but
 * concurrency's) as a one-limit multi-limit check. */
static void replay(rlt_redis *h[2], const char *text, uint64_t seed, int steps, int64_t t0_us,
                   int64_t offset_us, int route, bool multi_mix, int *compared)
{
    rlt_policy p = rtest_policy(text);
    void *st = calloc(1, rlt_state_size(&p));
    char key[64];
    snprintf(key, sizeof key, "mdiff:%llu:%d:%lld", (unsigned long long)seed, route,
             (long long)offset_us);
    ASSERT_EQ(rlt_redis_reset(h[0], &p, key, strlen(key)), RLT_OK);
    int64_t W = p.period / 1000, gap = W / p.limit + 1;
    int64_t t = t0_us * 1000, cost = 0;
    int64_t leases[8] = {0}, leases_r[8] = {0};
    uint64_t s = seed;
    for (int step = 0; step < steps; step++) {
        int side = route == 2 ? (int)rtest_below(&s, 2) : route;
        int64_t dt = rtest_trace_dt(&s, W, gap);
        t += dt * 1000;
        if (t < 0) t = 0;
        int64_t tr = t + offset_us * 1000;
        if (p.block > 0 && rtest_below(&s, 40) == 0) { /* a reset lifts a block (either side) */
            memset(st, 0, rlt_state_size(&p));
            ASSERT_EQ(rlt_redis_reset(h[side], &p, key, strlen(key)), RLT_OK);
            memset(leases, 0, sizeof leases);
            memset(leases_r, 0, sizeof leases_r);
            continue;
        }
        if (p.algo == RLT_CONCURRENCY && rtest_below(&s, 3) == 0) {
            int k = (int)rtest_below(&s, 8);
            int64_t rc_c = leases[k] ? rlt_release(&p, st, t, leases[k]) : RLT_ENOENT;
            int64_t rc_r = leases_r[k] ? rlt_redis_release(h[side], &p, RLT_REDIS_CALLER_TIME, key,
                                                           strlen(key), tr, leases_r[k])
                                       : RLT_ENOENT;
            SAME(rc_c, rc_r, "release status");
            leases[k] = leases_r[k] = 0;
            continue;
        }
        int64_t cpick = rtest_below(&s, 10);
        if (p.algo == RLT_CONCURRENCY)
            cost = cpick < 1 ? 0 : 1;
        else
            cost = cpick < 1 ? 0 : cpick < 7 ? 1 : rtest_below(&s, p.limit + 3);
        rlt_decision dc, dr;
        int64_t rc_c = rlt_decide(&p, st, t, cost, &dc), rc_r;
        if (multi_mix && p.algo != RLT_CONCURRENCY && rtest_below(&s, 3) == 0) {
            rlt_redis_check ck = {&p, key, strlen(key), cost};
            int refused;
            rc_r =
                rlt_redis_decide_multi(h[side], &ck, 1, RLT_REDIS_CALLER_TIME, tr, &dr, &refused);
        } else {
            rc_r = rlt_redis_decide(h[side], &p, RLT_REDIS_CALLER_TIME, key, strlen(key), tr, cost,
                                    &dr);
        }
        SAME(rc_c, rc_r, "status");
        if (rc_c) continue;
        SAME(dc.allowed, dr.allowed, "allowed");
        SAME(dc.limit, dr.limit, "limit");
        SAME(dc.remaining, dr.remaining, "remaining");
        SAME(dc.retry_after, dr.retry_after, "retry_after");
        SAME(dc.reset_after, dr.reset_after, "reset_after");
        SAME(dc.delay, dr.delay, "delay");
        SAME(dc.lease > 0, dr.lease > 0, "lease given");
        if (dc.lease > 0) {
            /* Both engines take lease ids from the same rule: the scripts' microseconds. */
            int k = (int)rtest_below(&s, 8);
            leases[k] = dc.lease;
            leases_r[k] = dr.lease;
        }
        (*compared)++;
    }
    free(st);
}

TEST(module_matches_c_and_scripts_alternating_on_one_key)
{
    rlt_redis *h[2] = {open_engine(RLT_REDIS_ENGINE_SCRIPTS), open_engine(RLT_REDIS_ENGINE_AUTO)};
    int compared = 0;
    for (size_t i = 0; i < NPOL && !rlt_test_failed_now; i++)
        for (uint64_t seed = 1; seed <= 3 && !rlt_test_failed_now; seed++)
            replay(h, policies[i], seed * 7919 + i, 200, 1000000, 0, 2, true, &compared);
    rlt_redis_stats st;
    rlt_redis_stats_get(h[1], &st);
    ASSERT(st.module_calls > 1000);
    ASSERT_EQ(st.fail_open + st.fail_closed, 0);
    rlt_redis_stats_get(h[0], &st);
    ASSERT_EQ(st.module_calls, 0);
    ASSERT(compared > 8000);
    rlt_redis_close(h[0]);
    rlt_redis_close(h[1]);
}

TEST(module_alone_matches_c_on_random_traces)
{
    rlt_redis *h[2] = {open_engine(RLT_REDIS_ENGINE_SCRIPTS), open_engine(RLT_REDIS_ENGINE_MODULE)};
    int compared = 0;
    for (size_t i = 0; i < NPOL && !rlt_test_failed_now; i++)
        replay(h, policies[i], 4242 + i, 300, 1000000, 0, 1, false, &compared);
    ASSERT(compared > 4000);
    rlt_redis_close(h[0]);
    rlt_redis_close(h[1]);
}

TEST(module_matches_c_at_the_largest_instants)
{
    rlt_redis *h[2] = {open_engine(RLT_REDIS_ENGINE_SCRIPTS), open_engine(RLT_REDIS_ENGINE_MODULE)};
    int compared = 0;
    for (size_t i = 0; i < NPOL && !rlt_test_failed_now; i++) {
        rlt_policy p = rtest_policy(policies[i]);
        int64_t W = p.period / 1000;
        int64_t offset = ((INT64_C(1) << 52) / W - 5000) * W;
        replay(h, policies[i], 424242 + i, 150, 0, offset, 2, false, &compared);
    }
    rlt_redis_close(h[0]);
    rlt_redis_close(h[1]);
}

TEST(module_matches_c_after_the_clock_steps_back_decades)
{
    rlt_redis *r = open_engine(RLT_REDIS_ENGINE_MODULE);
    const char *texts[] = {"gcra:13/997us,burst=4", "gcra:3/1s", "gcra:1000/1s,burst=50",
                           "leaky_bucket:7/3s,queue=3", "token_bucket:13/997us,burst=4",
                           "gcra:999999/1s",
                           /* a box around the 128-bit path: blocked, breached, escalated */
                           "gcra:3/1s,block=1d*2..1000d", "leaky_bucket:7/3s,queue=3,block=1h",
                           "gcra:999999/1s,block=10950d*2..13000d"};
    const int64_t year = INT64_C(365) * 86400 * RLT_NS_PER_S;
    const int64_t times[] = {20 * year, 20 * year + 5000, RLT_NS_PER_S, 0, 3 * year, 20 * year};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        rlt_policy p = rtest_policy(texts[i]);
        void *st = calloc(1, rlt_state_size(&p));
        ASSERT_EQ(rlt_redis_reset(r, &p, "decades", 7), RLT_OK);
        for (size_t k = 0; k < sizeof times / sizeof times[0]; k++) {
            for (int64_t cost = 0; cost <= 2; cost++) {
                rlt_decision dc, dr;
                int rc = rlt_decide(&p, st, times[k], cost, &dc);
                if (rc == RLT_ERANGE) continue; /* the core's own int64 bound (scale x now) */
                ASSERT_EQ(rc, RLT_OK);
                ASSERT_EQ(rlt_redis_decide(r, &p, RLT_REDIS_CALLER_TIME, "decades", 7, times[k],
                                           cost, &dr),
                          RLT_OK);
                ASSERT_EQ(dc.allowed, dr.allowed);
                ASSERT_EQ(dc.remaining, dr.remaining);
                ASSERT_EQ(dc.retry_after, dr.retry_after);
                ASSERT_EQ(dc.reset_after, dr.reset_after);
                ASSERT_EQ(dc.delay, dr.delay);
            }
        }
        free(st);
    }
    rlt_redis_close(r);
}

/* Beyond the core's int64 (GCRA at 999999/s after the clock stepped back 20 years: C refuses
 * the instant, the module runs the 128-bit path), the module's penalty box still answers as
 * the scripts: a block longer than the algorithm's wait shows in retry_after and reset_after. */
TEST(module_and_scripts_agree_on_the_penalty_box_beyond_the_cores_int64)
{
    rlt_redis *h[2] = {open_engine(RLT_REDIS_ENGINE_SCRIPTS), open_engine(RLT_REDIS_ENGINE_MODULE)};
    const char *texts[] = {"gcra:999999/1s,block=9000d*2..13000d",
                           "leaky_bucket:999999/1s,queue=3,block=9000d"};
    const int64_t year = INT64_C(365) * 86400 * RLT_NS_PER_S;
    const int64_t times[] = {20 * year, 20 * year + 5000, RLT_NS_PER_S, 0,
                             3 * year,  20 * year,        26 * year,    26 * year + 1000};
    int longer = 0;
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        rlt_policy p = rtest_policy(texts[i]);
        const char *keys[2] = {"huge:s", "huge:m"};
        for (int e = 0; e < 2; e++)
            ASSERT_EQ(rlt_redis_reset(h[0], &p, keys[e], 6), RLT_OK);
        for (size_t k = 0; k < sizeof times / sizeof times[0]; k++) {
            for (int64_t cost = 0; cost <= 2; cost++) {
                rlt_decision d[2];
                for (int e = 0; e < 2; e++)
                    ASSERT_EQ(rlt_redis_decide(h[e], &p, RLT_REDIS_CALLER_TIME, keys[e], 6,
                                               times[k], cost, &d[e]),
                              RLT_OK);
                ASSERT_EQ(d[0].allowed, d[1].allowed);
                ASSERT_EQ(d[0].remaining, d[1].remaining);
                ASSERT_EQ(d[0].retry_after, d[1].retry_after);
                ASSERT_EQ(d[0].reset_after, d[1].reset_after);
                ASSERT_EQ(d[0].delay, d[1].delay);
                if (times[k] < 20 * year && d[1].retry_after > 20 * year - times[k]) longer++;
            }
        }
    }
    ASSERT(longer > 4); /* the block, not the algorithm, set those waits */
    rlt_redis_stats st;
    rlt_redis_stats_get(h[1], &st);
    ASSERT(st.module_calls >= 40);
    rlt_redis_close(h[0]);
    rlt_redis_close(h[1]);
}

TEST(module_huge_costs_never_fit_like_c)
{
    rlt_redis *r = open_engine(RLT_REDIS_ENGINE_MODULE);
    diff_huge_costs_never_fit_like_c(r);
    rlt_redis_close(r);
}

TEST(module_jitter_is_rlt_jitter_of_the_exact_wait)
{
    rlt_redis *r = open_engine(RLT_REDIS_ENGINE_MODULE);
    diff_jitter_is_rlt_jitter_of_the_exact_wait(r);
    rlt_redis_stats st;
    rlt_redis_stats_get(r, &st);
    ASSERT(st.module_calls >= 700); /* the module decided them */
    rlt_redis_close(r);
}

TEST(module_penalty_box_matches_c_and_scripts_alternating_on_one_key)
{
    /* block= on every algorithm: blocks, escalations, restarts, resets and clock steps, each
     * request through the scripts or the module at random, both reading the companion key the
     * other wrote; and near 2^52 us on the module alone. */
    rlt_redis *h[2] = {open_engine(RLT_REDIS_ENGINE_SCRIPTS), open_engine(RLT_REDIS_ENGINE_MODULE)};
    int compared = 0;
    for (size_t i = 0; i < NBPOL && !rlt_test_failed_now; i++) {
        for (uint64_t seed = 1; seed <= 3 && !rlt_test_failed_now; seed++)
            replay(h, block_policies[i], seed * 4099 + i, 300, 1000000, 0, 2, true, &compared);
        rlt_policy p = rtest_policy(block_policies[i]);
        int64_t W = p.period / 1000, offset = ((INT64_C(1) << 52) / W - 50000) * W;
        if (!rlt_test_failed_now)
            replay(h, block_policies[i], 777 + i, 200, 0, offset, 1, false, &compared);
    }
    rlt_redis_stats st;
    rlt_redis_stats_get(h[1], &st);
    ASSERT(st.module_calls > 3000);
    ASSERT_EQ(st.fail_open + st.fail_closed, 0);
    ASSERT(compared > 8000);
    rlt_redis_close(h[0]);
    rlt_redis_close(h[1]);
}

TEST(module_engine_penalty_box_blocks_escalates_and_resets_like_c)
{
    rlt_redis *r = open_engine(RLT_REDIS_ENGINE_MODULE);
    diff_block_runs_like_c(r);
    rlt_redis_close(r);
}

TEST(module_multi_limit_matches_the_scripts_multi_limit)
{
    const char *texts[] = {"fixed_window:10/1s",
                           "gcra:3/1s,burst=5",
                           "sliding_window:20/10s",
                           "token_bucket:5/2s",
                           "sliding_log:8/3s",
                           "leaky_bucket:4/1s,queue=3",
                           "fixed_window:4/1s,block=2s*2..10s",
                           "sliding_log:3/1s,block=1500ms"};
    enum { NP = sizeof texts / sizeof texts[0] };
    rlt_policy p[NP];
    for (int i = 0; i < NP; i++)
        p[i] = rtest_policy(texts[i]);
    rlt_redis *h[2] = {open_engine(RLT_REDIS_ENGINE_SCRIPTS), open_engine(RLT_REDIS_ENGINE_MODULE)};
    /* Two key sets, one per engine, fed the same trace: every combined answer must agree. */
    static const char *keys[2][2] = {{"{s1}:a", "{s1}:b"}, {"{m1}:a", "{m1}:b"}};
    for (int e = 0; e < 2; e++)
        for (int i = 0; i < NP; i++)
            for (int k = 0; k < 2; k++)
                ASSERT_EQ(rlt_redis_reset(h[0], &p[i], keys[e][k], strlen(keys[e][k])), RLT_OK);
    uint64_t seed = 99;
    int64_t t = 1000000000;
    for (int step = 0; step < 800; step++) {
        t += rtest_below(&seed, 4) == 0 ? 0 : rtest_below(&seed, 400000) * 1000;
        size_t n = 1 + (size_t)rtest_below(&seed, 3);
        rlt_redis_check rc[2][3];
        for (size_t i = 0; i < n; i++) {
            int pi = (int)rtest_below(&seed, NP), k = (int)rtest_below(&seed, 2);
            bool twice = false;
            for (size_t j = 0; j < i; j++)
                if (rc[0][j].policy == &p[pi] && rc[0][j].key == keys[0][k]) twice = true;
            if (twice) {
                n = i;
                break;
            }
            int64_t cost = rtest_below(&seed, 3);
            for (int e = 0; e < 2; e++)
                rc[e][i] = (rlt_redis_check){&p[pi], keys[e][k], strlen(keys[e][k]), cost};
        }
        rlt_decision d[2];
        int rf[2];
        for (int e = 0; e < 2; e++)
            ASSERT_EQ(
                rlt_redis_decide_multi(h[e], rc[e], n, RLT_REDIS_CALLER_TIME, t, &d[e], &rf[e]),
                RLT_OK);
        ASSERT_EQ(d[0].allowed, d[1].allowed);
        ASSERT_EQ(rf[0], rf[1]);
        ASSERT_EQ(d[0].limit, d[1].limit);
        ASSERT_EQ(d[0].remaining, d[1].remaining);
        ASSERT_EQ(d[0].retry_after, d[1].retry_after);
        ASSERT_EQ(d[0].reset_after, d[1].reset_after);
        ASSERT_EQ(d[0].delay, d[1].delay);
    }
    rlt_redis_stats st;
    rlt_redis_stats_get(h[1], &st);
    ASSERT(st.module_calls >= 800);
    rlt_redis_close(h[0]);
    rlt_redis_close(h[1]);
}

TEST(module_batch_matches_single_calls)
{
    rlt_redis *r = open_engine(RLT_REDIS_ENGINE_AUTO);
    diff_batch_matches_single_calls(r, "mbatch");
    rlt_redis_stats st;
    rlt_redis_stats_get(r, &st);
    ASSERT_EQ(st.module_calls, 40); /* the whole batch went to the module */
    rlt_redis_close(r);
}

TEST(the_library_detects_the_module_and_reports_it_per_node)
{
    rlt_redis *r = open_engine(RLT_REDIS_ENGINE_AUTO);
    rlt_redis_node_info ni;
    ASSERT_EQ(rlt_redis_node_info_get(r, 0, &ni), RLT_OK);
    ASSERT_EQ(ni.engine, RLT_REDIS_ENGINE_AUTO); /* not connected yet */
    ASSERT(!ni.connected);
    rlt_policy p = rtest_policy("gcra:5/1s");
    rlt_decision d;
    ASSERT_EQ(rlt_redis_decide(r, &p, 0, "detect", 6, 0, 1, &d), RLT_OK);
    ASSERT(d.allowed);
    ASSERT_EQ(rlt_redis_node_info_get(r, 0, &ni), RLT_OK);
    ASSERT_EQ(ni.engine, RLT_REDIS_ENGINE_MODULE);
    ASSERT(ni.caller_time);
    ASSERT(ni.connected);
    ASSERT(strchr(ni.addr, ':') != NULL);
    ASSERT_EQ(rlt_redis_node_info_get(r, 1, &ni), RLT_ENOENT);
    ASSERT_EQ(rlt_redis_node_info_get(NULL, 0, &ni), RLT_EINVAL);
    rlt_redis_stats st;
    rlt_redis_stats_get(r, &st);
    ASSERT_EQ(st.module_calls, 1);
    rlt_redis_close(r);

    r = open_engine(RLT_REDIS_ENGINE_SCRIPTS);
    ASSERT_EQ(rlt_redis_decide(r, &p, 0, "detect", 6, 0, 1, &d), RLT_OK);
    ASSERT_EQ(rlt_redis_node_info_get(r, 0, &ni), RLT_OK);
    ASSERT_EQ(ni.engine, RLT_REDIS_ENGINE_SCRIPTS);
    rlt_redis_stats_get(r, &st);
    ASSERT_EQ(st.module_calls, 0);
    rlt_redis_close(r);
}
