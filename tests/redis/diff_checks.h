/* Checks the differential tests run on both engines (tests/redis/test_redis_diff.c for the
 * scripts, tests/redismodule/test_module_diff.c for the module), each on an open handle.
 * A failed ASSERT marks the calling test failed and returns from the check. */
#ifndef RLT_DIFF_CHECKS_H
#define RLT_DIFF_CHECKS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ratelimit/redis.h"
#include "rtest.h"
#include "test.h"

/* A cost of INT64_MAX never fits any algorithm: denied with retry_after -1 (never), and the
 * remaining and reset_after the C core gives. */
static void diff_huge_costs_never_fit_like_c(rlt_redis *r)
{
    const char *texts[] = {"gcra:3/1s",        "fixed_window:5/1s", "sliding_window:5/1s",
                           "sliding_log:5/1s", "token_bucket:3/1s", "leaky_bucket:3/1s,queue=2"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        rlt_policy p = rtest_policy(texts[i]);
        void *st = calloc(1, rlt_state_size(&p));
        rlt_decision dc, dr;
        ASSERT_EQ(rlt_redis_reset(r, &p, "huge", 4), RLT_OK);
        ASSERT_EQ(rlt_decide(&p, st, 5000000000, INT64_MAX, &dc), RLT_OK);
        ASSERT_EQ(
            rlt_redis_decide(r, &p, RLT_REDIS_CALLER_TIME, "huge", 4, 5000000000, INT64_MAX, &dr),
            RLT_OK);
        ASSERT_EQ(dc.allowed, dr.allowed);
        ASSERT_EQ(dr.retry_after, -1);
        ASSERT_EQ(dc.remaining, dr.remaining);
        ASSERT_EQ(dc.reset_after, dr.reset_after);
        free(st);
    }
}

/* Forty checks on four keys (PREFIX0..PREFIX3) in one batch at one instant, ten requests
 * per key allowed: the first ten of each key pass, in order, as single calls would. */
static void diff_batch_matches_single_calls(rlt_redis *r, const char *prefix)
{
    rlt_policy p = rtest_policy("gcra:10/1s,burst=10");
    enum { N = 40 };
    rlt_redis_check ck[N];
    char keys[N][32];
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof keys[i], "%.20s%d", prefix, i % 4);
        ck[i] = (rlt_redis_check){&p, keys[i], strlen(keys[i]), 1};
    }
    for (int k = 0; k < 4; k++)
        ASSERT_EQ(rlt_redis_reset(r, &p, keys[k], strlen(keys[k])), RLT_OK);
    rlt_decision out[N];
    int status[N];
    ASSERT_EQ(rlt_redis_decide_batch(r, ck, N, RLT_REDIS_CALLER_TIME, 7000000000, out, status),
              RLT_OK);
    for (int i = 0; i < N; i++) {
        ASSERT_EQ(status[i], RLT_OK);
        ASSERT_EQ(out[i].allowed, i / 4 < 10);
        ASSERT_EQ(out[i].remaining, 10 - 1 - i / 4);
    }
}

/* jitter= runs on every engine: each decision's retry_after is rlt_jitter of the key's FNV-1a
 * at the caller's now over C's exact wait, through single, one-limit multi and batch calls, on
 * traces of several keys that are often denied. */
static void diff_jitter_is_rlt_jitter_of_the_exact_wait(rlt_redis *r)
{
    const char *texts[] = {"gcra:3/1s,jitter=10%",          "fixed_window:5/1s,jitter=100%",
                           "sliding_window:5/1s,jitter=7%", "sliding_log:4/1s,jitter=50%",
                           "token_bucket:3/1s,jitter=25%",  "leaky_bucket:3/1s,queue=2,jitter=10%",
                           "concurrency:2/2s,jitter=10%"};
    int jittered = 0;
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        rlt_policy p = rtest_policy(texts[i]);
        enum { K = 4 };
        void *st[K];
        char keys[K][32];
        for (int k = 0; k < K; k++) {
            st[k] = calloc(1, rlt_state_size(&p));
            snprintf(keys[k], sizeof keys[k], "jit:%zu:%d", i, k);
            ASSERT_EQ(rlt_redis_reset(r, &p, keys[k], strlen(keys[k])), RLT_OK);
        }
        uint64_t s = 77 + i;
        int64_t t = 3000000000;
        for (int step = 0; step < 120; step++) {
            t += (int64_t)rtest_below(&s, 200) * 1000000;
            int k = (int)rtest_below(&s, K);
            rlt_decision dc, dr;
            ASSERT_EQ(rlt_decide(&p, st[k], t, 1, &dc), RLT_OK);
            rlt_ns want =
                rlt_jitter(&p, rlt_hash_fnv1a(keys[k], strlen(keys[k])), t, dc.retry_after);
            rlt_redis_check ck = {&p, keys[k], strlen(keys[k]), 1};
            int how = p.algo == RLT_CONCURRENCY ? 0 : (int)rtest_below(&s, 3), status, refused;
            if (how == 0) {
                ASSERT_EQ(rlt_redis_decide(r, &p, RLT_REDIS_CALLER_TIME, keys[k], strlen(keys[k]),
                                           t, 1, &dr),
                          RLT_OK);
            } else if (how == 1) {
                ASSERT_EQ(
                    rlt_redis_decide_multi(r, &ck, 1, RLT_REDIS_CALLER_TIME, t, &dr, &refused),
                    RLT_OK);
            } else {
                ASSERT_EQ(rlt_redis_decide_batch(r, &ck, 1, RLT_REDIS_CALLER_TIME, t, &dr, &status),
                          RLT_OK);
            }
            ASSERT_EQ(dc.allowed, dr.allowed);
            ASSERT_EQ(dr.retry_after, want);
            ASSERT(dr.retry_after >= dc.retry_after);
            if (want != dc.retry_after) jittered++;
        }
        for (int k = 0; k < K; k++)
            free(st[k]);
    }
    ASSERT(jittered > 100); /* the check saw real spreads, not only pass-throughs */
}

/* block= (the penalty box): a breach blocks every request to the block's end whatever the
 * algorithm says, with that retry_after; a breach within W after a block's end escalates (x2,
 * capped at 1m); peeks see the block; a reset lifts it.  Every call kind (single, one-limit
 * multi, batch) against rlt_decide on the same trace, and the companion key expires. */
static void diff_block_runs_like_c(rlt_redis *r)
{
    rlt_policy p = rtest_policy("fixed_window:1/1s,block=10s*2..1m");
    ASSERT_EQ(rlt_redis_policy_check(&p), RLT_OK);
    void *st = calloc(1, rlt_state_size(&p));
    const char *key = "blk:run";
    ASSERT_EQ(rlt_redis_reset(r, &p, key, strlen(key)), RLT_OK);
    const int64_t S = RLT_NS_PER_S, t0 = 1000 * S;
    /* instant, cost, expected allowed, expected retry_after (ns) */
    const struct {
        int64_t t, cost;
        bool allowed;
        int64_t retry;
    } steps[] = {
        {t0, 1, true, 0},
        {t0 + S / 2, 1, false, 10 * S},                 /* breach: a 10 s block */
        {t0 + 5 * S, 0, false, 5500 * S / 1000},        /* a peek sees it */
        {t0 + 5 * S, 1, false, 5500 * S / 1000},        /* the window has room, the block says no */
        {t0 + 10 * S + S / 2, 1, true, 0},              /* the block ended (exclusive end) */
        {t0 + 10 * S + S / 2 + 1000, 1, false, 20 * S}, /* within W of its end: escalates */
        {t0 + 31 * S, 1, true, 0},
        {t0 + 31 * S + 1000, 1, false, 40 * S},
        {t0 + 71 * S + S / 2, 1, true, 0},
        {t0 + 71 * S + S / 2 + 1000, 1, false, 60 * S}, /* 80 s, capped */
        {t0 + 200 * S, 1, true, 0},
        {t0 + 200 * S + 1000, 1, false, 10 * S}, /* long after: starts over */
    };
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        rlt_decision dc, dr;
        ASSERT_EQ(rlt_decide(&p, st, steps[i].t, steps[i].cost, &dc), RLT_OK);
        rlt_redis_check ck = {&p, key, strlen(key), steps[i].cost};
        int refused, status;
        if (i % 3 == 0)
            ASSERT_EQ(rlt_redis_decide(r, &p, RLT_REDIS_CALLER_TIME, key, strlen(key), steps[i].t,
                                       steps[i].cost, &dr),
                      RLT_OK);
        else if (i % 3 == 1)
            ASSERT_EQ(
                rlt_redis_decide_multi(r, &ck, 1, RLT_REDIS_CALLER_TIME, steps[i].t, &dr, &refused),
                RLT_OK);
        else
            ASSERT_EQ(
                rlt_redis_decide_batch(r, &ck, 1, RLT_REDIS_CALLER_TIME, steps[i].t, &dr, &status),
                RLT_OK);
        ASSERT_EQ(dc.allowed, steps[i].allowed);
        ASSERT_EQ(dc.retry_after, steps[i].retry);
        ASSERT_EQ(dr.allowed, dc.allowed);
        ASSERT_EQ(dr.retry_after, dc.retry_after);
        ASSERT_EQ(dr.remaining, dc.remaining);
        ASSERT_EQ(dr.reset_after, dc.reset_after);
    }
    /* Blocked again, then a reset lifts the block on both. */
    rlt_decision dr;
    ASSERT_EQ(rlt_redis_decide(r, &p, RLT_REDIS_CALLER_TIME, key, strlen(key), t0 + 200 * S + 2000,
                               1, &dr),
              RLT_OK);
    ASSERT(!dr.allowed);
    ASSERT_EQ(rlt_redis_reset(r, &p, key, strlen(key)), RLT_OK);
    ASSERT_EQ(rlt_redis_decide(r, &p, RLT_REDIS_CALLER_TIME, key, strlen(key), t0 + 200 * S + 3000,
                               1, &dr),
              RLT_OK);
    ASSERT(dr.allowed);
    free(st);
}

#endif
