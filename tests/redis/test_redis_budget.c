/* Multi-limit reservations in Redis (rlt_redis_reserve_limits / rlt_redis_settle_limits,
 * lua/budget.lua) against the keyed store's (rlt_store_reserve_limits / _settle_limits):
 * seeded random traces of reserves over three limits of different algorithms, partial and final
 * settles with typed usages, settles of unknown ids and of another key set, replayed on both
 * at the same caller times, must give the same statuses, decisions and charges. */
#define RTEST_KIND "standalone"
#include "ratelimit/budget.h"
#include "rtest.h"
#include "store_test_util.h"
#include "test.h"

#define SAME(c, r, what)                                                                           \
    do {                                                                                           \
        if ((c) != (r))                                                                            \
            RLT_FAIL_("set %d seed %llu step %d op %d: %s: C %lld, Redis %lld", set,               \
                      (unsigned long long)seed, step, op, what, (long long)(c), (long long)(r));   \
    } while (0)

/* Three limits per set: a token limit, an output-token limit, a money budget. */
static const char *const sets[][3] = {
    {"fixed_window:5000/1s", "sliding_window:2000/2s", "token_bucket:90000/1s"},
    {"gcra:5000/1s", "fixed_window:1500/1s", "sliding_log:60000/3s"},
    {"token_bucket:4000/1s,burst=6000", "gcra:2000/1s", "fixed_window:80000/1s"},
};
static const char *const weights[3] = {"in+out", "out", "in*3+out*15+cached*1+2"};
static const char *const keys[3] = {"{u}:user:1", "{u}:model:x", "{u}:org:a"};

/* What the traces went through (so that the comparison cannot pass on one kind alone). */
static int n_allowed, n_denied, n_over;

typedef struct res {
    bool live;
    uint64_t cid, rid;
} res;

static rlt_usage usage(uint64_t *s, bool with_in)
{
    rlt_usage u;
    memset(&u, 0, sizeof u);
    const char *names[3] = {"in", "out", "cached"};
    for (int j = with_in ? 0 : 1; j < 3; j++) {
        if (j == 2 && rtest_below(s, 2)) continue;
        snprintf(u.item[u.n].name, sizeof u.item[u.n].name, "%s", names[j]);
        u.item[u.n++].count = rtest_below(s, j == 1 ? 700 : 400);
    }
    return u;
}

static void replay(rlt_redis *r, int set, uint64_t seed, int steps, int *compared)
{
    rlt_store *st = tu_store(0, false, 4);
    rlt_policy p[3];
    rlt_limit cl[3];
    rlt_redis_limit rl[3];
    rlt_check ck[3];
    rlt_redis_check rk[3];
    for (int i = 0; i < 3; i++) {
        char name[8];
        snprintf(name, sizeof name, "p%d", i);
        int id = tu_add(st, name, sets[set][i]);
        ASSERT(id >= 0);
        p[i] = rtest_policy(sets[set][i]);
        ASSERT_EQ(rlt_redis_reset(r, &p[i], keys[i], strlen(keys[i])), RLT_OK);
        memset(&cl[i], 0, sizeof cl[i]);
        cl[i] = (rlt_limit){.policy = id, .key = keys[i], .klen = strlen(keys[i])};
        ASSERT_EQ(rlt_weights_parse(weights[i], strlen(weights[i]), &cl[i].weights), RLT_OK);
        rl[i] = (rlt_redis_limit){&p[i], keys[i], strlen(keys[i]), cl[i].weights};
        ck[i] = (rlt_check){id, keys[i], strlen(keys[i]), 0};
        rk[i] = (rlt_redis_check){&p[i], keys[i], strlen(keys[i]), 0};
    }
    res tab[5] = {{0}};
    uint64_t s = seed;
    int64_t t = 1000000 * INT64_C(1000); /* whole microseconds: the scripts' unit */
    for (int step = 0; step < steps && !rlt_test_failed_now; step++) {
        t += rtest_below(&s, 4) == 0 ? rtest_below(&s, 1500000) * 1000
                                     : rtest_below(&s, 20000) * 1000;
        /* 0 reserve, 1 partial, 2 final, 3 unknown id, 4 a plain decision on one limit (on the
         * module's RL.DECIDE when it is loaded: the same state formats as the scripts') */
        int op = (int)rtest_below(&s, 5);
        int k = (int)rtest_below(&s, 5);
        rlt_decision dc, dr, ec[3], er[3];
        int64_t xc[3] = {0}, xr[3] = {0};
        int rc_c, rc_r;
        if (op == 4) {
            int i = k % 3;
            int64_t cost = rtest_below(&s, 300);
            rc_c = rlt_store_decide(st, ck[i].policy, keys[i], strlen(keys[i]), t, cost, &ec[i]);
            rc_r = rlt_redis_decide(r, &p[i], RLT_REDIS_CALLER_TIME, keys[i], strlen(keys[i]), t,
                                    cost, &er[i]);
            for (int j = 0; j < 3; j++)
                if (j != i) ec[j] = er[j] = (rlt_decision){0};
            dc = ec[i];
            dr = er[i];
        } else if (op == 0 && !tab[k].live) {
            rlt_usage est = usage(&s, true);
            int fc = -2, fr = -2;
            uint64_t ic = 0, ir = 0;
            rc_c = rlt_store_reserve_limits(st, 0, cl, 3, &est, t, 60 * RLT_NS_PER_S, &dc, ec, &fc,
                                            &ic);
            rc_r = rlt_redis_reserve_limits(r, rl, 3, RLT_REDIS_CALLER_TIME, &est, t,
                                            60 * RLT_NS_PER_S, &dr, er, &fr, &ir);
            SAME(fc, fr, "refused");
            SAME(ic != 0, ir != 0, "reservation made");
            if (!rc_c && ic) tab[k] = (res){true, ic, ir};
            if (!rc_c) *(ic ? &n_allowed : &n_denied) += 1;
        } else if (op == 3 || !tab[k].live) {
            op = 3;
            rlt_usage u = usage(&s, false);
            rc_c = rlt_store_settle_limits(st, 77, ck, 3, &u, true, t, &dc, ec, xc);
            rc_r = rlt_redis_settle_limits(r, 77, rk, 3, RLT_REDIS_CALLER_TIME, &u, true, t, &dr,
                                           er, xr);
        } else {
            bool final = op == 2;
            rlt_usage u = usage(&s, rtest_below(&s, 2) == 0);
            rc_c = rlt_store_settle_limits(st, tab[k].cid, ck, 3, &u, final, t, &dc, ec, xc);
            rc_r = rlt_redis_settle_limits(r, tab[k].rid, rk, 3, RLT_REDIS_CALLER_TIME, &u, final,
                                           t, &dr, er, xr);
            if (final) tab[k].live = false;
        }
        SAME(rc_c, rc_r, "status");
        if (rc_c) continue;
        SAME(dc.allowed, dr.allowed, "allowed");
        SAME(dc.remaining, dr.remaining, "remaining");
        for (int i = 0; i < 3; i++) {
            SAME(ec[i].allowed, er[i].allowed, "limit allowed");
            SAME(ec[i].remaining, er[i].remaining, "limit remaining");
            SAME(ec[i].reset_after, er[i].reset_after, "limit reset_after");
            SAME(ec[i].retry_after, er[i].retry_after, "limit retry_after");
            SAME(xc[i], xr[i], "charged");
            n_over += xc[i] > 0;
        }
        (*compared)++;
    }
    rlt_store_close(st);
}

TEST(redis_multi_limit_reservations_match_the_store_on_random_traces)
{
    rlt_redis *r = rtest_open(
        (rlt_redis_options){.timeout = 2 * RLT_NS_PER_S, .ttl_floor = 60 * RLT_NS_PER_S});
    int compared = 0;
    for (int set = 0; set < 3 && !rlt_test_failed_now; set++)
        for (uint64_t seed = 1; seed <= 4 && !rlt_test_failed_now; seed++)
            replay(r, set, seed * 7919 + (uint64_t)set, 300, &compared);
    rlt_redis_stats stt;
    rlt_redis_stats_get(r, &stt);
    ASSERT_EQ(stt.fail_open + stt.fail_closed, 0);
    const char *extra = getenv("RLT_REDIS_EXTRA_ARGS"); /* test_redis_budget_module */
    if (extra && strstr(extra, "--loadmodule")) ASSERT(stt.module_calls > 300);
    fprintf(stderr, "compared %d: %d reserves allowed, %d denied, %d settles past the estimate\n",
            compared, n_allowed, n_denied, n_over);
    ASSERT(compared > 1200 && n_allowed > 100 && n_denied > 40 && n_over > 50);
    rlt_redis_close(r);
}

TEST(redis_multi_limit_settle_refuses_bad_usage_and_another_key_set_with_nothing_changed)
{
    rlt_redis *r = rtest_open((rlt_redis_options){.timeout = 2 * RLT_NS_PER_S});
    rlt_policy p = rtest_policy("fixed_window:1000/1h");
    const char *k1 = "{b}:a", *k2 = "{b}:b";
    ASSERT_EQ(rlt_redis_reset(r, &p, k1, 5), RLT_OK);
    ASSERT_EQ(rlt_redis_reset(r, &p, k2, 5), RLT_OK);
    rlt_redis_limit l[2] = {{&p, k1, 5, {0}}, {&p, k2, 5, {0}}};
    ASSERT_EQ(rlt_weights_parse("in+out", 6, &l[0].weights), RLT_OK);
    ASSERT_EQ(rlt_weights_parse("out*2", 5, &l[1].weights), RLT_OK);
    rlt_usage est, u;
    ASSERT_EQ(rlt_usage_parse("in=100,out=200", 14, &est), RLT_OK);
    rlt_decision c, e[2];
    uint64_t id = 0;
    ASSERT_EQ(rlt_redis_reserve_limits(r, l, 2, 0, &est, 0, 0, &c, e, NULL, &id), RLT_OK);
    ASSERT(c.allowed && id != 0);
    ASSERT_EQ(e[0].remaining, 700);
    ASSERT_EQ(e[1].remaining, 600);
    rlt_redis_check k[2] = {{&p, k1, 5, 0}, {&p, k2, 5, 0}},
                    other[2] = {{&p, k2, 5, 0}, {&p, k1, 5, 0}};
    ASSERT_EQ(rlt_usage_parse("in=1,tools=3", 12, &u), RLT_OK);
    ASSERT_EQ(rlt_redis_settle_limits(r, id, k, 2, 0, &u, true, 0, &c, e, NULL), RLT_EINVAL);
    ASSERT_EQ(rlt_usage_parse("out=1099511627775", 17, &u), RLT_OK);
    ASSERT_EQ(rlt_redis_settle_limits(r, id, k, 2, 0, &u, true, 0, &c, e, NULL), RLT_OK);
    ASSERT(!c.allowed); /* a debt past both limits */
    ASSERT_EQ(rlt_redis_reserve_limits(r, l, 1, 0, &est, 0, 0, &c, e, NULL, &id), RLT_OK);
    ASSERT(!c.allowed && id == 0);
    ASSERT_EQ(rlt_redis_reset(r, &p, k1, 5), RLT_OK);
    ASSERT_EQ(rlt_redis_reset(r, &p, k2, 5), RLT_OK);
    ASSERT_EQ(rlt_redis_reserve_limits(r, l, 2, 0, &est, 0, 0, &c, e, NULL, &id), RLT_OK);
    ASSERT_EQ(rlt_usage_parse("out=10", 6, &u), RLT_OK);
    ASSERT_EQ(rlt_redis_settle_limits(r, id, other, 2, 0, &u, true, 0, &c, e, NULL), RLT_ENOENT);
    ASSERT_EQ(rlt_redis_settle_limits(r, id, k, 1, 0, &u, true, 0, &c, e, NULL), RLT_ENOENT);
    int64_t x[2];
    ASSERT_EQ(rlt_redis_settle_limits(r, id, k, 2, 0, &u, true, 0, &c, e, x), RLT_OK);
    ASSERT_EQ(e[0].remaining, 990);
    ASSERT_EQ(e[1].remaining, 980);
    ASSERT_EQ(rlt_redis_settle_limits(r, id, k, 2, 0, &u, true, 0, &c, e, x), RLT_ENOENT);
    rlt_redis_close(r);
}
