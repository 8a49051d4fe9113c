/* Redis Cluster slots moving and failing under the library (cluster6): a reshard by
 * redis-cli while a steady load runs (no client error, exact totals), a slot answering
 * CLUSTERDOWN (the fail mode there only), and TRYAGAIN while a multi-key state is half
 * migrated (retried with a short backoff, then followed through ASK). */
#define RTEST_KIND "cluster6"
#include "rcluster.h"
#include "test.h"

#include <sys/wait.h>

/* Under test_redis_reshard_module the nodes have the module loaded: its path must be taken. */
static bool module_expected(void)
{
    const char *x = getenv("RLT_REDIS_EXTRA_ARGS");
    return x && strstr(x, "--loadmodule");
}

static rlt_redis_options opts(void)
{
    return (rlt_redis_options){.timeout = 2 * RLT_NS_PER_S, .backoff_min = 100 * RLT_NS_PER_MS};
}

/* Which master (0..2) serves `slot` now; -1 if none says so. */
static int owner(long slot)
{
    for (int m = 0; m < 3; m++)
        if (rc_serves(m, slot)) return m;
    return -1;
}

/* The first slot server m serves. */
static long first_slot(int m)
{
    redisReply *rep = rc_cmd(m, "CLUSTER SLOTS");
    long lo = -1;
    for (size_t k = 0; rep && k < rep->elements; k++) {
        redisReply *e = rep->element[k];
        if (e->element[2]->element[1]->integer == rtest_port(m) &&
            (lo < 0 || e->element[0]->integer < lo))
            lo = (long)e->element[0]->integer;
    }
    freeReplyObject(rep);
    return lo;
}

#define NK 64
#define LIMIT_A 25

TEST(reshard_under_load_has_no_client_error_and_exact_totals)
{
    rtest_away_from_hour_end(90);
    rlt_redis *h[2] = {rtest_open(opts()), rtest_open(opts())};
    rlt_policy pa = rtest_policy("fixed_window:25/1h"),
               pb = rtest_policy("fixed_window:1000000000/1h");
    long lo = first_slot(1);
    ASSERT(lo >= 0);
    /* Half the keys in the 300 slots the reshard moves first (s1's lowest), half anywhere. */
    static char keys[NK][24], names[NK][160];
    static int nlen[NK];
    static long slot[NK];
    int moving = 0, any = 0;
    for (int c = 0; moving + any < NK && c < 200000; c++) {
        char k[24], nm[160];
        snprintf(k, sizeof k, "rk%d", c);
        int n = rlt_redis_key_name(h[0], &pb, k, strlen(k), nm, sizeof nm);
        long s = rc_slot(0, nm, (size_t)n);
        bool in = s >= lo && s < lo + 300;
        if (in ? moving >= NK / 2 : any >= NK / 2) continue;
        int i = moving + any;
        memcpy(keys[i], k, sizeof k);
        memcpy(names[i], nm, sizeof nm);
        nlen[i] = n;
        slot[i] = s;
        in ? moving++ : any++;
    }
    ASSERT_EQ(moving + any, NK);
    char from[41], to[41];
    rc_id(1, from);
    rc_id(2, to);
    char cmd[600];
    snprintf(cmd, sizeof cmd,
             "redis-cli --cluster reshard 127.0.0.1:%d --cluster-from %s --cluster-to %s "
             "--cluster-slots 300 --cluster-yes --cluster-pipeline 5 >/dev/null 2>&1",
             rtest_port(0), from, to);
    pid_t child = fork();
    ASSERT(child >= 0);
    if (child == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    long long ok_b[NK] = {0}, adm_a[NK] = {0}, bad = 0, rounds = 0;
    int wst = 0;
    bool done = false;
    int64_t until = rtest_mono_ns() + 60 * RLT_NS_PER_S;
    while (!done || rounds < 40) {
        if (!done && waitpid(child, &wst, WNOHANG) == child) done = true;
        if (rtest_mono_ns() > until) break;
        rlt_redis_check ck[2 * NK];
        rlt_decision out[2 * NK];
        int st[2 * NK];
        for (int k = 0; k < NK; k++) {
            ck[2 * k] = (rlt_redis_check){&pa, keys[k], strlen(keys[k]), 1};
            ck[2 * k + 1] = (rlt_redis_check){&pb, keys[k], strlen(keys[k]), 1};
        }
        rlt_redis_decide_batch(h[rounds % 2], ck, 2 * NK, 0, 0, out, st);
        for (int k = 0; k < NK; k++) {
            bad += st[2 * k] != RLT_OK || st[2 * k + 1] != RLT_OK;
            adm_a[k] += st[2 * k] == RLT_OK && out[2 * k].allowed;
            ok_b[k] += st[2 * k + 1] == RLT_OK;
        }
        rounds++;
    }
    ASSERT(done);
    ASSERT(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
    ASSERT_EQ(bad, 0);
    int moved = 0;
    for (int k = 0; k < NK; k++) {
        int m = owner(slot[k]);
        ASSERT(m >= 0);
        moved += m == 2 && k < NK && slot[k] >= lo && slot[k] < lo + 300;
        ASSERT_EQ(rc_count(m, names[k], (size_t)nlen[k]), ok_b[k]);
        ASSERT_EQ(adm_a[k], LIMIT_A);
    }
    ASSERT_EQ(moved, NK / 2);
    rlt_redis_stats st[2];
    rlt_redis_stats_get(h[0], &st[0]);
    rlt_redis_stats_get(h[1], &st[1]);
    ASSERT(st[0].redirects + st[1].redirects > 0);
    if (module_expected()) ASSERT(st[0].module_calls > 0 && st[1].module_calls > 0);
    printf("reshard of 300 slots under load: %lld rounds of %d checks, %d keys moved, 0 client "
           "errors, totals exact; redirects %llu + %llu\n",
           rounds, 2 * NK, moved, (unsigned long long)st[0].redirects,
           (unsigned long long)st[1].redirects);
    rlt_redis_close(h[0]);
    rlt_redis_close(h[1]);
}

/* A key of the given master's slots (other than `not_slot`), and its slot. */
static long key_on(rlt_redis *r, const rlt_policy *p, int m, long not_slot, char key[24], int seed)
{
    for (int c = 0; c < 100000; c++) {
        char nm[160];
        snprintf(key, 24, "cd%d_%d", seed, c);
        int n = rlt_redis_key_name(r, p, key, strlen(key), nm, sizeof nm);
        long s = rc_slot(m, nm, (size_t)n);
        if (s != not_slot && rc_serves(m, s)) return s;
    }
    return -1;
}

TEST(clusterdown_on_a_slot_takes_the_fail_mode_there_only)
{
    rtest_away_from_hour_end(90);
    rlt_redis *r = rtest_open(opts());
    rlt_policy p = rtest_policy("fixed_window:100/1h");
    char down[24], up[24];
    long sd = key_on(r, &p, 0, -1, down, 1), su = key_on(r, &p, 0, sd, up, 2);
    ASSERT(sd >= 0 && su >= 0);
    rlt_decision d;
    ASSERT_EQ(rlt_redis_decide(r, &p, 0, down, strlen(down), 0, 1, &d), RLT_OK);
    redisReply *rep = rc_cmd(0, "CLUSTER DELSLOTS %ld", sd);
    ASSERT(rep && rep->type != REDIS_REPLY_ERROR);
    freeReplyObject(rep);
    for (int i = 0; i < 10; i++) {
        ASSERT_EQ(rlt_redis_decide(r, &p, 0, down, strlen(down), 0, 1, &d), RLT_EBACKEND);
        ASSERT(!d.allowed); /* fail-closed */
        ASSERT_EQ(rlt_redis_decide(r, &p, RLT_REDIS_FAIL_OPEN, down, strlen(down), 0, 1, &d),
                  RLT_EBACKEND);
        ASSERT(d.allowed); /* fail-open */
        /* The same node's other slots, and the other nodes, still decide in Redis. */
        ASSERT_EQ(rlt_redis_decide(r, &p, 0, up, strlen(up), 0, 1, &d), RLT_OK);
        ASSERT_EQ(d.remaining, 100 - 1 - i);
    }
    rlt_redis_stats st;
    rlt_redis_stats_get(r, &st);
    ASSERT_EQ(st.nodes_open, 0);
    ASSERT_EQ(st.breaker_opened, 0);
    rep = rc_cmd(0, "CLUSTER ADDSLOTS %ld", sd);
    ASSERT(rep && rep->type != REDIS_REPLY_ERROR);
    freeReplyObject(rep);
    int64_t until = rtest_mono_ns() + 5 * RLT_NS_PER_S;
    int rc;
    while ((rc = rlt_redis_decide(r, &p, 0, down, strlen(down), 0, 1, &d)) != RLT_OK &&
           rtest_mono_ns() < until)
        usleep(20000);
    ASSERT_EQ(rc, RLT_OK);
    ASSERT_EQ(d.remaining, 100 - 2); /* the state was kept; the fail-mode calls charged nothing */
    rlt_redis_close(r);
}

TEST(tryagain_during_a_multi_key_migration_is_retried_then_asked)
{
    rtest_away_from_hour_end(90);
    rlt_redis *r = rtest_open(opts());
    rlt_policy a = rtest_policy("fixed_window:3/1h"), b = rtest_policy("fixed_window:5/1h");
    rlt_redis_check ck[2] = {{&a, "{t1}:api", 8, 1}, {&b, "{t1}:upload", 11, 1}};
    rlt_decision d;
    int refused;
    ASSERT_EQ(rlt_redis_decide_multi(r, ck, 2, 0, 0, &d, &refused), RLT_OK);
    char na[160], nb[160];
    int la = rlt_redis_key_name(r, &a, ck[0].key, ck[0].klen, na, sizeof na);
    int lb = rlt_redis_key_name(r, &b, ck[1].key, ck[1].klen, nb, sizeof nb);
    long s = rc_slot(0, na, (size_t)la);
    int x = owner(s), y = (x + 1) % 3;
    ASSERT(x >= 0);
    char idx[41], idy[41];
    rc_id(x, idx);
    rc_id(y, idy);
    freeReplyObject(rc_cmd(y, "CLUSTER SETSLOT %ld IMPORTING %s", s, idx));
    freeReplyObject(rc_cmd(x, "CLUSTER SETSLOT %ld MIGRATING %s", s, idy));
    redisReply *rep = rc_cmd(x, "MIGRATE 127.0.0.1 %d %b 0 5000 KEYS %b", rtest_port(y), "",
                             (size_t)0, na, (size_t)la);
    ASSERT(rep && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    /* Half migrated: the source answers TRYAGAIN; the library retries (1, 2, 4, 8 ms), then
     * takes the fail mode.  Nothing ran. */
    int64_t t0 = rtest_mono_ns();
    ASSERT_EQ(rlt_redis_decide_multi(r, ck, 2, 0, 0, &d, &refused), RLT_EBACKEND);
    int64_t took = rtest_mono_ns() - t0;
    ASSERT(!d.allowed);
    rlt_redis_stats st;
    rlt_redis_stats_get(r, &st);
    ASSERT_EQ(st.tryagain, 5);
    ASSERT(took >= 15 * RLT_NS_PER_MS);
    /* The rest moves: the source answers ASK, the target runs it after ASKING. */
    rep = rc_cmd(x, "MIGRATE 127.0.0.1 %d %b 0 5000 KEYS %b", rtest_port(y), "", (size_t)0, nb,
                 (size_t)lb);
    ASSERT(rep && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    uint64_t before = st.redirects;
    ASSERT_EQ(rlt_redis_decide_multi(r, ck, 2, 0, 0, &d, &refused), RLT_OK);
    ASSERT(d.allowed);
    ASSERT_EQ(d.remaining, 1); /* a: 3 - 2, the state moved with the keys */
    rlt_redis_stats_get(r, &st);
    ASSERT(st.redirects > before);
    for (int m = 0; m < 3; m++)
        freeReplyObject(rc_cmd(m, "CLUSTER SETSLOT %ld NODE %s", s, idy));
    ASSERT_EQ(rlt_redis_decide_multi(r, ck, 2, 0, 0, &d, &refused), RLT_OK);
    ASSERT_EQ(d.remaining, 0);
    if (module_expected()) ASSERT(st.module_calls > 0);
    printf("TRYAGAIN: 5 replies, fail mode after %lld ms; then ASK followed\n",
           (long long)(took / RLT_NS_PER_MS));
    rlt_redis_close(r);
}
