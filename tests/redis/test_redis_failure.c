/* Failure is a decision: a stopped (SIGSTOP) or killed Redis makes every call return within
 * the timeout plus a margin with the call's fail mode, the breaker opens and answers at once,
 * and after a restart or SCRIPT FLUSH the library reconnects and reloads its script without
 * an error reaching the caller. */
#define RTEST_KIND "standalone"
#include "rtest.h"
#include "test.h"

#include <sys/wait.h>

#define TIMEOUT (40 * RLT_NS_PER_MS)
/* Generous: the bound under test is "about the timeout", not a performance figure, and the
 * machine may be loaded or running sanitizers. */
#define MARGIN (250 * RLT_NS_PER_MS)

static rlt_redis *open_fast(void)
{
    return rtest_open((rlt_redis_options){.timeout = TIMEOUT,
                                          .breaker_failures = 2,
                                          .backoff_min = 200 * RLT_NS_PER_MS,
                                          .backoff_max = 400 * RLT_NS_PER_MS});
}

/* Decides once and checks the call's duration and fail mode. */
static int timed(rlt_redis *r, const rlt_policy *p, unsigned flags, rlt_decision *d, int64_t *took)
{
    int64_t t0 = rtest_mono_ns();
    int rc = rlt_redis_decide(r, p, flags, "fkey", 4, 0, 1, d);
    *took = rtest_mono_ns() - t0;
    return rc;
}

TEST(stopped_redis_costs_at_most_the_timeout_and_the_breaker_opens)
{
    rlt_redis *r = open_fast();
    rlt_policy p = rtest_policy("gcra:1000/1s");
    rlt_decision d;
    int64_t took;
    ASSERT_EQ(timed(r, &p, 0, &d, &took), RLT_OK);
    ASSERT(d.allowed);
    ASSERT_EQ(kill(rtest_pid(0), SIGSTOP), 0);
    int timeouts = 0, fast = 0;
    for (int i = 0; i < 30; i++) {
        unsigned flags = (i % 2) ? RLT_REDIS_FAIL_OPEN : 0;
        int rc = timed(r, &p, flags, &d, &took);
        if (rc != RLT_ETIMEDOUT && rc != RLT_EBACKEND) {
            kill(rtest_pid(0), SIGCONT);
            RLT_FAIL_("call %d returned %d while Redis is stopped", i, rc);
        }
        ASSERT_EQ(d.allowed, (flags & RLT_REDIS_FAIL_OPEN) != 0);
        if (!d.allowed) ASSERT(d.retry_after >= RLT_NS_PER_MS);
        ASSERT_LE(took, TIMEOUT + MARGIN);
        timeouts += rc == RLT_ETIMEDOUT;
        fast += took < TIMEOUT / 2;
    }
    rlt_redis_stats st;
    rlt_redis_stats_get(r, &st);
    /* Two timeouts open the breaker; while open, calls are answered at once (a trial call
     * every backoff may wait out the timeout again). */
    ASSERT(st.breaker_opened >= 1);
    ASSERT_EQ(st.nodes_open, 1);
    ASSERT(timeouts >= 2 && timeouts <= 6);
    ASSERT(fast >= 20);
    ASSERT_EQ(st.fail_open + st.fail_closed, 30);
    ASSERT(st.short_circuited >= 20);
    ASSERT_EQ(kill(rtest_pid(0), SIGCONT), 0);
    /* Recovery: after the backoff a trial call goes through and closes the breaker. */
    int64_t until = rtest_mono_ns() + 3 * RLT_NS_PER_S;
    int rc;
    do {
        rc = timed(r, &p, 0, &d, &took);
        ASSERT_LE(took, TIMEOUT + MARGIN);
        if (rc) usleep(20000);
    } while (rc != RLT_OK && rtest_mono_ns() < until);
    ASSERT_EQ(rc, RLT_OK);
    rlt_redis_stats_get(r, &st);
    ASSERT_EQ(st.nodes_open, 0);
    rlt_redis_close(r);
}

TEST(killed_redis_fails_fast_and_restart_recovers_without_errors)
{
    rlt_redis *r = open_fast();
    rlt_policy p = rtest_policy("fixed_window:1000/1h");
    rlt_decision d;
    int64_t took;
    ASSERT_EQ(timed(r, &p, 0, &d, &took), RLT_OK);
    ASSERT_EQ(kill(rtest_pid(0), SIGKILL), 0);
    for (int i = 0; i < 100 && kill(rtest_pid(0), 0) == 0; i++)
        usleep(10000);
    for (int i = 0; i < 10; i++) {
        int rc = timed(r, &p, RLT_REDIS_FAIL_OPEN, &d, &took);
        ASSERT(rc == RLT_EBACKEND || rc == RLT_ETIMEDOUT);
        ASSERT(d.allowed);
        ASSERT_LE(took, TIMEOUT + MARGIN);
    }
    rlt_redis_stats st;
    rlt_redis_stats_get(r, &st);
    ASSERT_EQ(st.fail_open, 10);
    ASSERT_EQ(rtest_sh("restart", 0), 0);
    /* After the breaker's backoff the library reconnects; the restarted server has no script
     * (NOSCRIPT): it is loaded and the call answered, with no error to the caller. */
    usleep(450 * 1000);
    ASSERT_EQ(timed(r, &p, 0, &d, &took), RLT_OK);
    ASSERT(d.allowed);
    rlt_redis_stats_get(r, &st);
    ASSERT(st.script_loads >= 1);
    rlt_redis_close(r);
}

TEST(restart_between_calls_and_script_flush_leak_no_error)
{
    rlt_redis *r = open_fast();
    rlt_policy p = rtest_policy("token_bucket:100/1s");
    rlt_decision d;
    int64_t took;
    ASSERT_EQ(timed(r, &p, 0, &d, &took), RLT_OK);
    /* A quick restart while the handle holds an idle connection: the stale connection is
     * noticed before use, not reported as a failure. */
    ASSERT_EQ(rtest_sh("restart", 0), 0);
    for (int i = 0; i < 5; i++)
        ASSERT_EQ(timed(r, &p, 0, &d, &took), RLT_OK);
    redisContext *raw = rtest_raw(0);
    for (int round = 0; round < 3; round++) {
        redisReply *rep = redisCommand(raw, "SCRIPT FLUSH");
        ASSERT(rep && rep->type == REDIS_REPLY_STATUS);
        freeReplyObject(rep);
        ASSERT_EQ(timed(r, &p, 0, &d, &took), RLT_OK);
    }
    redisFree(raw);
    rlt_redis_stats st;
    rlt_redis_stats_get(r, &st);
    ASSERT(st.script_loads >= 4);
    ASSERT_EQ(st.fail_open + st.fail_closed, 0);
    rlt_redis_close(r);
}

TEST(batch_against_a_stopped_redis_returns_within_the_timeout)
{
    rlt_redis *r = open_fast();
    rlt_policy p = rtest_policy("gcra:1000/1s");
    rlt_redis_check ck[16];
    for (int i = 0; i < 16; i++)
        ck[i] = (rlt_redis_check){&p, "bk", 2, 1};
    rlt_decision out[16];
    int status[16];
    /* A served batch first (the scripts loaded), within a few tries: the previous test restarted
     * this server and the short timeout may catch its first reply on a loaded machine. */
    int warm = RLT_ETIMEDOUT;
    for (int i = 0; i < 50 && warm != RLT_OK; i++)
        warm = rlt_redis_decide_batch(r, ck, 16, 0, 0, out, status);
    ASSERT_EQ(warm, RLT_OK);
    ASSERT_EQ(kill(rtest_pid(0), SIGSTOP), 0);
    int64_t t0 = rtest_mono_ns();
    int rc = rlt_redis_decide_batch(r, ck, 16, RLT_REDIS_FAIL_OPEN, 0, out, status);
    int64_t took = rtest_mono_ns() - t0;
    kill(rtest_pid(0), SIGCONT);
    ASSERT_EQ(rc, RLT_ETIMEDOUT);
    ASSERT_LE(took, TIMEOUT + MARGIN);
    for (int i = 0; i < 16; i++) {
        ASSERT_EQ(status[i], RLT_ETIMEDOUT);
        ASSERT(out[i].allowed);
    }
    rlt_redis_close(r);
}
