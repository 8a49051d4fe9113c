/* Several processes (fork), each with its own handle and connection, share one limit on one
 * key: together they are admitted exactly the limit, never one more. */
#define RTEST_KIND "standalone"
#include "rtest.h"
#include "test.h"

#include <sys/wait.h>

enum { PROCS = 6, TRIES = 400 };

static void hammer(const char *text, const char *key, int64_t expect)
{
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    rlt_policy p = rtest_policy(text);
    for (int k = 0; k < PROCS; k++) {
        pid_t pid = fork();
        ASSERT(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            rlt_redis *r = rtest_open((rlt_redis_options){.timeout = 2 * RLT_NS_PER_S});
            int64_t allowed = 0, errors = 0;
            for (int i = 0; i < TRIES; i++) {
                rlt_decision d;
                int rc = rlt_redis_decide(r, &p, 0, key, strlen(key), 0, 1, &d);
                if (rc)
                    errors++;
                else
                    allowed += d.allowed;
            }
            rlt_redis_close(r);
            int64_t msg[2] = {allowed, errors};
            _exit(write(fds[1], msg, sizeof msg) == sizeof msg ? 0 : 1);
        }
    }
    close(fds[1]);
    int64_t total = 0, errors = 0, msg[2];
    while (read(fds[0], msg, sizeof msg) == sizeof msg)
        total += msg[0], errors += msg[1];
    close(fds[0]);
    for (int k = 0; k < PROCS; k++) {
        int status;
        wait(&status);
        ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    ASSERT_EQ(errors, 0);
    ASSERT_EQ(total, expect);
}

TEST(processes_sharing_a_fixed_window_get_exactly_the_limit)
{
    hammer("fixed_window:777/1h", "shared-fw", 777);
}

TEST(processes_sharing_a_gcra_bucket_get_exactly_the_burst)
{
    /* refill of 1 per hour: nothing refills during the test */
    hammer("gcra:1/1h,burst=500", "shared-gcra", 500);
}

TEST(processes_sharing_a_sliding_log_get_exactly_the_limit)
{
    hammer("sliding_log:300/1h", "shared-log", 300);
}

TEST(processes_sharing_a_concurrency_limit_get_exactly_the_slots)
{
    hammer("concurrency:50/1h", "shared-cc", 50);
}
