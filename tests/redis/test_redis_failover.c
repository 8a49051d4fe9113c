/* Redis Cluster failover under a steady load (cluster6: 3 masters, 3 replicas, node timeout
 * 1 s): a killed master's keys take the fail mode until its replica is promoted, then are
 * decided by Redis again without a new handle, while the other masters' keys stay exact; the
 * window and what the failover lost (writes not yet replicated, admitted again) are measured
 * and printed (docs/distributed.md quotes them). */
#define RTEST_KIND "cluster6"
#include "rcluster.h"
#include "test.h"

#define NK 96
#define LIMIT_A 40

typedef struct kst {
    char key[24];
    char a[160], b[160]; /* Redis key names under policies A and B */
    int alen, blen;
    long slot;
    int home;                 /* the master (0..2) serving the key at the start */
    long long ok_b, unsure_b; /* B decided by Redis; B calls that failed (maybe applied) */
    long long admitted_a;     /* A allowed by Redis (fail-closed admits nothing) */
    bool back[2];             /* per handle: decided by Redis again after the kill */
    int bad;                  /* non-OK statuses (the other masters' keys: must stay 0) */
    int fail_allowed;         /* fail-mode decisions that allowed (fail-closed: must be 0) */
} kst;

static kst ks[NK];

/* One round of the load: every key under A and B, through handle h, in one batch. */
static void round_of(rlt_redis *r, int h, const rlt_policy *pa, const rlt_policy *pb, bool after)
{
    rlt_redis_check ck[2 * NK];
    rlt_decision out[2 * NK];
    int st[2 * NK];
    for (int k = 0; k < NK; k++) {
        ck[2 * k] = (rlt_redis_check){pa, ks[k].key, strlen(ks[k].key), 1};
        ck[2 * k + 1] = (rlt_redis_check){pb, ks[k].key, strlen(ks[k].key), 1};
    }
    rlt_redis_decide_batch(r, ck, 2 * NK, 0, 0, out, st);
    for (int k = 0; k < NK; k++) {
        kst *x = &ks[k];
        for (int j = 0; j < 2; j++) {
            int s = st[2 * k + j];
            if (s != RLT_OK) {
                x->bad++;
                x->fail_allowed += out[2 * k + j].allowed;
            }
        }
        if (st[2 * k] == RLT_OK && out[2 * k].allowed) x->admitted_a++;
        if (st[2 * k + 1] == RLT_OK)
            x->ok_b++;
        else
            x->unsure_b++;
        if (after && st[2 * k] == RLT_OK && st[2 * k + 1] == RLT_OK) x->back[h] = true;
    }
}

TEST(killed_master_fails_over_to_its_replica_and_the_other_keys_stay_exact)
{
    rtest_away_from_hour_end(90);
    rlt_redis_options o = {.timeout = 500 * RLT_NS_PER_MS, /* a dead node refuses at once */
                           .breaker_failures = 2,
                           .backoff_min = 100 * RLT_NS_PER_MS,
                           .backoff_max = 400 * RLT_NS_PER_MS};
    rlt_redis *h[2] = {rtest_open(o), rtest_open(o)}; /* two daemons' handles */
    rlt_policy pa = rtest_policy("fixed_window:40/1h"),
               pb = rtest_policy("fixed_window:1000000000/1h");
    int per_home[3] = {0};
    for (int k = 0; k < NK; k++) {
        kst *x = &ks[k];
        snprintf(x->key, sizeof x->key, "user%d", k);
        x->alen = rlt_redis_key_name(h[0], &pa, x->key, strlen(x->key), x->a, sizeof x->a);
        x->blen = rlt_redis_key_name(h[0], &pb, x->key, strlen(x->key), x->b, sizeof x->b);
        x->slot = rc_slot(1, x->b, (size_t)x->blen);
        ASSERT_EQ(rc_slot(1, x->a, (size_t)x->alen), x->slot); /* one hash tag: one slot */
        x->home = -1;
        for (int m = 0; m < 3; m++)
            if (rc_serves(m, x->slot)) x->home = m;
        ASSERT(x->home >= 0);
        per_home[x->home]++;
    }
    for (int m = 0; m < 3; m++)
        ASSERT(per_home[m] >= 10);
    for (int i = 0; i < 16; i++)
        round_of(h[i % 2], i % 2, &pa, &pb, false);
    for (int k = 0; k < NK; k++)
        ASSERT_EQ(ks[k].bad, 0);

    ASSERT_EQ(kill(rtest_pid(0), SIGKILL), 0);
    int64_t t_kill = rtest_mono_ns(), t_first = 0, t_all = 0, t_promoted = 0, last_look = 0;
    long s0_slot = -1;
    for (int k = 0; k < NK && s0_slot < 0; k++)
        if (ks[k].home == 0) s0_slot = ks[k].slot;
    /* 20 s is what the issue watched; a loaded machine's election may take longer: 40 s. */
    for (int i = 0; !t_all && rtest_mono_ns() - t_kill < 40 * RLT_NS_PER_S; i++) {
        round_of(h[i % 2], i % 2, &pa, &pb, true);
        int64_t now = rtest_mono_ns();
        bool all = true, any = false;
        for (int k = 0; k < NK; k++)
            if (ks[k].home == 0) {
                all = all && ks[k].back[0] && ks[k].back[1];
                any = any || ks[k].back[0] || ks[k].back[1];
            }
        if (any && !t_first) t_first = now;
        if (all) t_all = now;
        if (!t_promoted && now - last_look > 50 * RLT_NS_PER_MS) {
            last_look = now;
            for (int m = 3; m < 6; m++)
                if (rc_serves(m, s0_slot)) t_promoted = now;
        }
        usleep(5000);
    }
    if (!t_all) { /* say where it stood: promoted or not, and which handle did not follow */
        int back0 = 0, back1 = 0, home0 = 0;
        for (int k = 0; k < NK; k++)
            if (ks[k].home == 0) {
                home0++;
                back0 += ks[k].back[0];
                back1 += ks[k].back[1];
            }
        fprintf(stderr,
                "failover: after %.1f s, replica promoted: %s (%.0f ms after the kill); keys of "
                "the killed master back in Redis: handle 0 %d/%d, handle 1 %d/%d\n",
                (double)(rtest_mono_ns() - t_kill) / 1e9, t_promoted ? "yes" : "no",
                t_promoted ? (double)(t_promoted - t_kill) / 1e6 : 0.0, back0, home0, back1, home0);
    }
    ASSERT(t_all > 0);
    for (int i = 0; i < 10; i++)
        round_of(h[i % 2], i % 2, &pa, &pb, true);

    long long lost = 0, unsure = 0, over = 0, failed = 0;
    for (int k = 0; k < NK; k++) {
        kst *x = &ks[k];
        ASSERT_EQ(x->fail_allowed, 0);
        if (x->home != 0) {
            /* Not on the killed master: every call decided by Redis, and Redis holds exactly
             * what was admitted. */
            ASSERT_EQ(x->bad, 0);
            ASSERT_EQ(rc_count(x->home, x->b, (size_t)x->blen), x->ok_b);
            ASSERT_EQ(x->admitted_a, LIMIT_A);
            continue;
        }
        int now_home = -1;
        for (int m = 3; m < 6; m++)
            if (rc_serves(m, x->slot)) now_home = m;
        ASSERT(now_home >= 3);
        long long c = rc_count(now_home, x->b, (size_t)x->blen);
        ASSERT(c >= 0);
        failed += x->bad;
        if (x->ok_b > c) lost += x->ok_b - c;
        ASSERT_LE(c, x->ok_b + x->unsure_b);
        unsure += x->unsure_b;
        if (x->admitted_a > LIMIT_A) over += x->admitted_a - LIMIT_A;
    }
    /* What a key admits again is bounded by what the failover lost of it. */
    ASSERT_LE(over, lost + unsure);
    rlt_redis_stats st[2];
    for (int i = 0; i < 2; i++) {
        rlt_redis_stats_get(h[i], &st[i]);
        ASSERT(st[i].topology_reads >= 2);
    }
    printf("failover: replica promoted ~%lld ms after the kill; first decision from Redis on its "
           "slots after %lld ms, on every key through both handles after %lld ms; %lld "
           "fail-mode decisions on those keys; writes lost %lld, over-admission %lld "
           "(keys on the other masters: exact); slot-map reads %llu + %llu\n",
           t_promoted ? (long long)((t_promoted - t_kill) / RLT_NS_PER_MS) : -1LL,
           (long long)((t_first - t_kill) / RLT_NS_PER_MS),
           (long long)((t_all - t_kill) / RLT_NS_PER_MS), failed, lost, over,
           (unsigned long long)st[0].topology_reads, (unsigned long long)st[1].topology_reads);
    /* The handles follow the promotion within about one failure-driven refresh. */
    if (t_promoted) ASSERT_LE(t_all - t_promoted, 2 * RLT_NS_PER_S);
    rlt_redis_close(h[0]);
    rlt_redis_close(h[1]);
}
