/* Redis Sentinel (master s0, replica s1, three sentinels s2-s4, down-after 1 s): the library
 * asks the sentinels for the master, and when the master dies and the sentinels promote the
 * replica, follows it (the +switch-master message or the next question) within about one
 * breaker interval of the switch, with the fail mode meanwhile; measured and printed. */
#define RTEST_KIND "sentinel"
#include "rcluster.h"
#include "test.h"

#define NK 32

static int port_of(const char *addr)
{
    const char *c = strrchr(addr, ':');
    return c ? atoi(c + 1) : -1;
}

/* The master's port as sentinel s2 reports it. */
static int sentinel_says(void)
{
    redisReply *rep = rc_cmd(2, "SENTINEL get-master-addr-by-name mymaster");
    int p = rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 ? atoi(rep->element[1]->str)
                                                                        : -1;
    freeReplyObject(rep);
    return p;
}

TEST(sentinel_master_is_resolved_and_its_failover_followed)
{
    rtest_away_from_hour_end(90);
    rlt_redis_options o = {.timeout = 300 * RLT_NS_PER_MS,
                           .breaker_failures = 2,
                           .backoff_min = 100 * RLT_NS_PER_MS,
                           .backoff_max = 400 * RLT_NS_PER_MS};
    rlt_redis *h[2] = {rtest_open(o), rtest_open(o)};
    /* A third handle, idle during the failover and never asking again by itself: only the
     * +switch-master message can tell it. */
    o.refresh_interval = 3600 * RLT_NS_PER_S;
    rlt_redis *idle = rtest_open(o);
    rlt_policy p = rtest_policy("fixed_window:1000000000/1h");
    rlt_decision d;
    ASSERT_EQ(rlt_redis_decide(idle, &p, 0, "idle", 4, 0, 1, &d), RLT_OK);
    static char keys[NK][16], names[NK][160];
    static int nlen[NK];
    long long ok[NK] = {0}, unsure[NK] = {0}, fail_allowed = 0, failed = 0;
    for (int k = 0; k < NK; k++) {
        snprintf(keys[k], sizeof keys[k], "s%d", k);
        nlen[k] = rlt_redis_key_name(h[0], &p, keys[k], strlen(keys[k]), names[k], sizeof names[k]);
    }
    bool back[2];
    int64_t t_kill = 0, t_switch = 0, t_all = 0;
    for (int i = 0; !t_all; i++) {
        rlt_redis_check ck[NK];
        rlt_decision out[NK];
        int st[NK];
        for (int k = 0; k < NK; k++)
            ck[k] = (rlt_redis_check){&p, keys[k], strlen(keys[k]), 1};
        rlt_redis_decide_batch(h[i % 2], ck, NK, 0, 0, out, st);
        bool all_ok = true;
        for (int k = 0; k < NK; k++) {
            ok[k] += st[k] == RLT_OK;
            unsure[k] += st[k] != RLT_OK;
            if (st[k] != RLT_OK) {
                failed++;
                fail_allowed += out[k].allowed;
                all_ok = false;
            }
        }
        if (i < 10) {
            ASSERT(all_ok);
        } else if (i == 10) {
            rlt_redis_node_info ni;
            ASSERT_EQ(rlt_redis_node_info_get(h[0], 0, &ni), RLT_OK);
            ASSERT_EQ(port_of(ni.addr), rtest_port(0));
            ASSERT_EQ(kill(rtest_pid(0), SIGKILL), 0);
            t_kill = rtest_mono_ns();
            back[0] = back[1] = false;
        } else {
            int64_t now = rtest_mono_ns();
            if (!t_switch && i % 10 == 0 && sentinel_says() == rtest_port(1)) t_switch = now;
            if (all_ok) back[i % 2] = true;
            if (back[0] && back[1]) t_all = now;
            ASSERT(now - t_kill < 30 * RLT_NS_PER_S);
        }
        usleep(5000);
    }
    ASSERT_EQ(fail_allowed, 0); /* fail-closed */
    if (!t_switch) t_switch = t_all;
    long long lost = 0;
    for (int k = 0; k < NK; k++) {
        long long c = rc_count(1, names[k], (size_t)nlen[k]);
        ASSERT(c >= 0);
        ASSERT_LE(c, ok[k] + unsure[k]);
        if (ok[k] > c) lost += ok[k] - c;
    }
    for (int i = 0; i < 2; i++) {
        rlt_redis_stats st;
        rlt_redis_stats_get(h[i], &st);
        ASSERT_EQ(st.master_switches, 1);
        rlt_redis_node_info ni;
        ASSERT_EQ(rlt_redis_node_info_get(h[i], 0, &ni), RLT_OK);
        ASSERT_EQ(port_of(ni.addr), rtest_port(1));
    }
    /* The idle handle's first call after the switch goes to the new master at once. */
    usleep(100 * 1000);
    ASSERT_EQ(rlt_redis_decide(idle, &p, 0, "idle", 4, 0, 1, &d), RLT_OK);
    rlt_redis_stats ist;
    rlt_redis_stats_get(idle, &ist);
    ASSERT_EQ(ist.errors, 0);
    ASSERT_EQ(ist.master_switches, 1);
    ASSERT_EQ(ist.topology_reads, 1);
    rlt_redis_close(idle);
    printf("sentinel failover: the sentinels switched ~%lld ms after the kill; both handles "
           "decided in the new master %lld ms after the kill (%lld ms after the switch); %lld "
           "fail-mode decisions meanwhile; writes lost %lld\n",
           (long long)((t_switch - t_kill) / RLT_NS_PER_MS),
           (long long)((t_all - t_kill) / RLT_NS_PER_MS),
           (long long)((t_all - t_switch) / RLT_NS_PER_MS), failed, lost);
    /* Within one breaker interval (backoff_max) of the switch, plus the 10-round polling of
     * the sentinel here and a loaded machine's margin. */
    ASSERT_LE(t_all - t_switch, 400 * RLT_NS_PER_MS + 800 * RLT_NS_PER_MS);
    rlt_redis_close(h[0]);
    rlt_redis_close(h[1]);
}

TEST(sentinel_options_are_validated_and_no_sentinel_means_the_fail_mode)
{
    rlt_redis *r = NULL;
    ASSERT_EQ(rlt_redis_open(&r, &(rlt_redis_options){.sentinels = "127.0.0.1:1"}), RLT_EINVAL);
    ASSERT_EQ(rlt_redis_open(&r, &(rlt_redis_options){.sentinels = "127.0.0.1:1",
                                                      .master_name = "m",
                                                      .cluster = true}),
              RLT_EINVAL);
    ASSERT_EQ(rlt_redis_open(
                  &r, &(rlt_redis_options){.sentinels = "127.0.0.1:1", .master_name = "two words"}),
              RLT_EINVAL);
    ASSERT_EQ(rlt_redis_open(&r, &(rlt_redis_options){.sentinels = "nohost", .master_name = "m"}),
              RLT_EINVAL);
    /* Nothing listens on port 1: every call takes its fail mode, quickly. */
    ASSERT_EQ(rlt_redis_open(&r, &(rlt_redis_options){.sentinels = "127.0.0.1:1",
                                                      .master_name = "mymaster",
                                                      .timeout = 100 * RLT_NS_PER_MS}),
              RLT_OK);
    rlt_policy p = rtest_policy("gcra:10/1s");
    rlt_decision d;
    for (int i = 0; i < 5; i++) {
        int64_t t0 = rtest_mono_ns();
        ASSERT_EQ(rlt_redis_decide(r, &p, RLT_REDIS_FAIL_OPEN, "k", 1, 0, 1, &d), RLT_EBACKEND);
        ASSERT(d.allowed);
        ASSERT_LE(rtest_mono_ns() - t0, 350 * RLT_NS_PER_MS);
    }
    rlt_redis_node_info ni;
    ASSERT_EQ(rlt_redis_node_info_get(r, 0, &ni), RLT_OK);
    ASSERT(!ni.connected);
    rlt_redis_close(r);
}
