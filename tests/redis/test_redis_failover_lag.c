/* What a failover costs (cluster6): replication asynchronous, a master's last writes may never
 * reach its replica.  Here the replica is stopped (SIGSTOP) and its link cut (CLIENT KILL TYPE
 * replica), the key is charged on the master, the master killed and the replica resumed:
 * after the promotion the key admits again exactly the units the replica missed, and no more
 * -- the bound docs/distributed.md states.  Also: a master that stops answering (SIGSTOP). */
#define RTEST_KIND "cluster6"
#include "rcluster.h"
#include "test.h"

#define LIMIT 10

/* The replication offsets of master m and of its replica (INFO replication); false if none. */
static bool offsets(int m, long long *master, long long *replica)
{
    redisReply *rep = rc_cmd(m, "INFO replication");
    bool ok = false;
    if (rep && rep->type == REDIS_REPLY_STRING) {
        const char *s = strstr(rep->str, "master_repl_offset:"), *r = strstr(rep->str, "slave0:");
        const char *o = r ? strstr(r, "offset=") : NULL;
        if (s && o) {
            *master = atoll(s + 19);
            *replica = atoll(o + 7);
            ok = true;
        }
    }
    freeReplyObject(rep);
    return ok;
}

TEST(unreplicated_writes_are_admitted_again_after_failover_and_no_more)
{
    rtest_away_from_hour_end(90);
    rlt_redis *r = rtest_open((rlt_redis_options){.timeout = 300 * RLT_NS_PER_MS,
                                                  .breaker_failures = 2,
                                                  .backoff_min = 100 * RLT_NS_PER_MS,
                                                  .backoff_max = 400 * RLT_NS_PER_MS});
    rlt_policy p = rtest_policy("fixed_window:10/1h");
    char key[24], name[160];
    int len = 0;
    long slot = -1;
    for (int c = 0; c < 100000 && slot < 0; c++) {
        snprintf(key, sizeof key, "lag%d", c);
        len = rlt_redis_key_name(r, &p, key, strlen(key), name, sizeof name);
        long s = rc_slot(0, name, (size_t)len);
        if (rc_serves(0, s)) slot = s;
    }
    ASSERT(slot >= 0);
    rlt_decision d;
    for (int i = 0; i < 4; i++) {
        ASSERT_EQ(rlt_redis_decide(r, &p, 0, key, strlen(key), 0, 1, &d), RLT_OK);
        ASSERT(d.allowed);
    }
    /* Those 4 reached the replica. */
    long long mo = 0, ro = -1;
    int64_t until = rtest_mono_ns() + 10 * RLT_NS_PER_S;
    while (!(offsets(0, &mo, &ro) && ro >= mo) && rtest_mono_ns() < until)
        usleep(10000);
    ASSERT(ro >= mo);
    /* The replica of s0, stopped so that it cannot reconnect (and catch up from the
     * backlog) while the master is cut off from it. */
    int rep_of = -1;
    for (int m = 3; m < 6; m++) {
        redisReply *ir = rc_cmd(m, "INFO replication");
        char want[40];
        snprintf(want, sizeof want, "master_port:%d\r", rtest_port(0));
        if (ir && ir->type == REDIS_REPLY_STRING && strstr(ir->str, want)) rep_of = m;
        freeReplyObject(ir);
    }
    ASSERT(rep_of >= 3);
    ASSERT_EQ(kill(rtest_pid(rep_of), SIGSTOP), 0);
    /* Cut the link, charge the rest of the window on the master alone, kill it. */
    redisReply *rep = rc_cmd(0, "CLIENT KILL TYPE replica");
    ASSERT(rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == 1);
    freeReplyObject(rep);
    int after_cut = 0;
    for (int i = 0; i < LIMIT; i++) {
        ASSERT_EQ(rlt_redis_decide(r, &p, 0, key, strlen(key), 0, 1, &d), RLT_OK);
        after_cut += d.allowed;
    }
    ASSERT_EQ(after_cut, LIMIT - 4);
    ASSERT(!d.allowed); /* the window is full on the master */
    ASSERT_EQ(kill(rtest_pid(0), SIGKILL), 0);
    int64_t t_kill = rtest_mono_ns();
    ASSERT_EQ(kill(rtest_pid(rep_of), SIGCONT), 0);
    /* Wait for the promotion (fail mode meanwhile), then count what the key admits again. */
    int rc, failed = 0;
    while ((rc = rlt_redis_decide(r, &p, 0, key, strlen(key), 0, 0, &d)) != RLT_OK) {
        ASSERT(!d.allowed);
        failed++;
        ASSERT(rtest_mono_ns() - t_kill < 20 * RLT_NS_PER_S);
        usleep(5000);
    }
    int home = -1;
    for (int m = 3; m < 6; m++)
        if (rc_serves(m, slot)) home = m;
    ASSERT(home >= 3);
    long long kept = rc_count(home, name, (size_t)len);
    int again = 0;
    for (int i = 0; i < 2 * LIMIT; i++) {
        ASSERT_EQ(rlt_redis_decide(r, &p, 0, key, strlen(key), 0, 1, &d), RLT_OK);
        again += d.allowed;
    }
    /* The replica kept the 4 from before the cut; what it missed is admitted again, exactly. */
    ASSERT_EQ(kept, 4);
    ASSERT_EQ(again, LIMIT - kept);
    ASSERT_LE(again, after_cut);
    printf("failover with replication cut: %d units charged after the cut, the replica kept "
           "%lld of %d, the key admitted %d again (bound: %d); %d fail-mode decisions during "
           "%lld ms\n",
           after_cut, kept, LIMIT, again, after_cut, failed,
           (long long)((rtest_mono_ns() - t_kill) / RLT_NS_PER_MS));
    rlt_redis_close(r);
}

/* A master that stops answering (SIGSTOP): its keys cost one timeout each until its breaker
 * opens, then the fail mode at once; the other masters' keys are decided by Redis throughout;
 * when the cluster fails it over (node timeout 1 s), its replica serves its keys. */
TEST(stopped_master_takes_the_fail_mode_per_node_until_its_replica_takes_over)
{
    rtest_away_from_hour_end(90);
    const rlt_ns timeout = 100 * RLT_NS_PER_MS, margin = 400 * RLT_NS_PER_MS;
    rlt_redis *r = rtest_open((rlt_redis_options){.timeout = timeout,
                                                  .breaker_failures = 2,
                                                  .backoff_min = 100 * RLT_NS_PER_MS,
                                                  .backoff_max = 400 * RLT_NS_PER_MS});
    rlt_policy p = rtest_policy("fixed_window:1000000/1h");
    char on1[24] = "", on2[24] = "";
    long slot1 = -1;
    for (int c = 0; c < 100000 && (!on1[0] || !on2[0]); c++) {
        char k[24], nm[160];
        snprintf(k, sizeof k, "st%d", c);
        int n = rlt_redis_key_name(r, &p, k, strlen(k), nm, sizeof nm);
        long s = rc_slot(2, nm, (size_t)n);
        if (!on1[0] && rc_serves(1, s)) {
            memcpy(on1, k, sizeof k);
            slot1 = s;
        } else if (!on2[0] && rc_serves(2, s)) {
            memcpy(on2, k, sizeof k);
        }
    }
    ASSERT(on1[0] && on2[0]);
    rlt_decision d;
    ASSERT_EQ(rlt_redis_decide(r, &p, 0, on1, strlen(on1), 0, 1, &d), RLT_OK);
    ASSERT_EQ(kill(rtest_pid(1), SIGSTOP), 0);
    int64_t t_stop = rtest_mono_ns(), t_back = 0;
    int failed = 0, slow = 0, other = 0;
    while (!t_back) {
        int64_t t0 = rtest_mono_ns();
        int rc = rlt_redis_decide(r, &p, 0, on1, strlen(on1), 0, 1, &d);
        int64_t took = rtest_mono_ns() - t0;
        if (rc == RLT_OK) {
            t_back = rtest_mono_ns();
        } else {
            ASSERT(!d.allowed);
            failed++;
            slow += took > timeout / 2;
        }
        if (took > timeout + margin) {
            kill(rtest_pid(1), SIGCONT);
            RLT_FAIL_("a call took %lld ms", (long long)(took / RLT_NS_PER_MS));
        }
        /* Another master's key: decided by Redis at once, whatever s1 does. */
        int64_t t1 = rtest_mono_ns();
        int rc2 = rlt_redis_decide(r, &p, 0, on2, strlen(on2), 0, 1, &d);
        int64_t took2 = rtest_mono_ns() - t1;
        if (rc2 != RLT_OK || took2 > margin) {
            kill(rtest_pid(1), SIGCONT);
            RLT_FAIL_("the key on s2 was not decided by Redis at once (status %d, %lld ms)", rc2,
                      (long long)(took2 / RLT_NS_PER_MS));
        }
        other++;
        if (rtest_mono_ns() - t_stop > 20 * RLT_NS_PER_S) {
            kill(rtest_pid(1), SIGCONT);
            RLT_FAIL_("s1's slots never came back");
        }
        usleep(5000);
    }
    ASSERT_EQ(kill(rtest_pid(1), SIGCONT), 0);
    bool replica = false;
    for (int m = 3; m < 6; m++)
        replica = replica || rc_serves(m, slot1);
    ASSERT(replica);
    /* Timeouts only until the breaker opened and at its trials (every 100-400 ms). */
    ASSERT(slow < failed / 4 + 3);
    rlt_redis_stats st;
    rlt_redis_stats_get(r, &st);
    ASSERT(st.breaker_opened >= 1);
    printf("stopped master: its keys took the fail mode for %lld ms (%d calls, %d waited a "
           "timeout), then its promoted replica decided; %d calls on another master decided "
           "by Redis meanwhile\n",
           (long long)((t_back - t_stop) / RLT_NS_PER_MS), failed, slow, other);
    rlt_redis_close(r);
}
