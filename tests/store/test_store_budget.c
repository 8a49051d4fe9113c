/* Multi-limit reservations (include/ratelimit/budget.h): all or nothing, settled once, the
 * refused inputs, and 64 threads streaming against a token budget, a user limit and a money
 * budget, checked against a reference ledger (labelled threads: run under TSan too). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "ratelimit/budget.h"
#include "store_test_util.h"
#include "test.h"

#define S RLT_NS_PER_S

static rlt_limit lim(int policy, const char *key, const char *weights)
{
    rlt_limit l;
    memset(&l, 0, sizeof l);
    l.policy = policy;
    l.key = key;
    l.klen = strlen(key);
    (void)rlt_weights_parse(weights, strlen(weights), &l.weights);
    return l;
}

static rlt_usage use(const char *t)
{
    rlt_usage u;
    (void)rlt_usage_parse(t, strlen(t), &u);
    return u;
}

static int64_t remaining(rlt_store *s, int id, const char *key, rlt_ns now)
{
    rlt_decision d;
    if (rlt_store_decide(s, id, key, strlen(key), now, 0, &d) != RLT_OK) return -1;
    return d.remaining;
}

static void keys_of(const rlt_limit *l, size_t n, rlt_check *c)
{
    for (size_t i = 0; i < n; i++)
        c[i] = (rlt_check){l[i].policy, l[i].key, l[i].klen, 0};
}

TEST(a_reservation_over_three_limits_is_all_or_nothing_and_settles_each_by_its_weights)
{
    rlt_store *s = tu_store(0, false, 4);
    int tok = tu_add(s, "tok", "fixed_window:10000/1h");
    int out = tu_add(s, "out", "fixed_window:3000/1h");
    int usd = tu_add(s, "usd", "fixed_window:100000/1h");
    rlt_limit l[3] = {lim(tok, "user:1", "in+out"), lim(out, "model:m", "out"),
                      lim(usd, "org:a", "in*3+out*15+cached*1")};
    rlt_usage est = use("in=1000,out=2000");
    rlt_decision c, each[3];
    uint64_t id = 0;
    int refused = 9;
    ASSERT_EQ(rlt_store_reserve_limits(s, 0, l, 3, &est, 0, 0, &c, each, &refused, &id), RLT_OK);
    ASSERT(c.allowed && id != 0 && refused == -1);
    ASSERT_EQ(each[0].remaining, 10000 - 3000);
    ASSERT_EQ(each[1].remaining, 3000 - 2000);
    ASSERT_EQ(each[2].remaining, 100000 - 33000);
    /* A second one would overrun the output-token limit: refused, nothing charged anywhere. */
    uint64_t id2 = 7;
    ASSERT_EQ(rlt_store_reserve_limits(s, 0, l, 3, &est, 1, 0, &c, NULL, &refused, &id2), RLT_OK);
    ASSERT(!c.allowed && id2 == 0 && refused == 1);
    ASSERT_EQ(remaining(s, tok, "user:1", 1), 7000);
    ASSERT_EQ(remaining(s, usd, "org:a", 1), 67000);
    /* Settled with the real usage: each limit charged its own cost, the rest refunded. */
    rlt_check k[3];
    keys_of(l, 3, k);
    rlt_usage real = use("in=1000,out=300,cached=200");
    int64_t charged[3];
    ASSERT_EQ(rlt_store_settle_limits(s, id, k, 3, &real, true, 2, &c, each, charged), RLT_OK);
    ASSERT_EQ(each[0].remaining, 10000 - 1300);
    ASSERT_EQ(each[1].remaining, 3000 - 300);
    ASSERT_EQ(each[2].remaining, 100000 - (3000 + 4500 + 200));
    ASSERT_EQ(charged[0] + charged[1] + charged[2], 0);
    /* Once only. */
    ASSERT_EQ(rlt_store_settle_limits(s, id, k, 3, &real, true, 3, &c, NULL, NULL), RLT_ENOENT);
    ASSERT_EQ(remaining(s, out, "model:m", 3), 2700);
    rlt_store_close(s);
}

TEST(a_reservation_that_uses_the_last_of_a_budget_is_allowed_and_says_so)
{
    rlt_store *s = tu_store(0, false, 4);
    int tok = tu_add(s, "tok", "fixed_window:100/1h");
    rlt_limit l[1] = {lim(tok, "u", "in+out")};
    rlt_usage est = use("in=40,out=60");
    rlt_decision c, each[1];
    uint64_t id = 0;
    ASSERT_EQ(rlt_store_reserve_limits(s, 0, l, 1, &est, 0, 0, &c, each, NULL, &id), RLT_OK);
    ASSERT(c.allowed && id != 0); /* the decision, not the peek after it (which would deny) */
    ASSERT_EQ(each[0].remaining, 0);
    ASSERT(each[0].allowed); /* each limit's own decision, its remaining after the charge */
    rlt_store_close(s);
}

TEST(a_policy_change_or_a_load_since_the_reservation_refunds_nothing)
{
    rlt_store *s = tu_store(0, false, 4);
    int tok = tu_add(s, "tok", "fixed_window:1000/1h");
    rlt_limit l[1] = {lim(tok, "u", "in+out")};
    rlt_usage est = use("in=100,out=300");
    rlt_decision c;
    uint64_t id = 0;
    ASSERT_EQ(rlt_store_reserve_limits(s, 0, l, 1, &est, 0, 0, &c, NULL, NULL, &id), RLT_OK);
    rlt_policy p = tu_policy("fixed_window:2000/1h");
    int same = -1;
    ASSERT_EQ(rlt_store_set_policy(s, "tok", &p, RLT_CHANGE_KEEP, &same), RLT_OK);
    ASSERT_EQ(same, tok);
    rlt_check k[1];
    keys_of(l, 1, k);
    rlt_usage u = use("in=100,out=10");
    ASSERT_EQ(rlt_store_settle_limits(s, id, k, 1, &u, true, 1, &c, NULL, NULL), RLT_OK);
    ASSERT_EQ(remaining(s, tok, "u", 1), 2000 - 400); /* the estimate stays: no refund */
    rlt_store_close(s);
}

TEST(bad_settles_change_nothing_and_a_good_one_still_settles)
{
    rlt_store *s = tu_store(0, false, 4);
    int tok = tu_add(s, "tok", "sliding_window:5000/1m");
    int req = tu_add(s, "req", "fixed_window:10/1m");
    rlt_limit l[2] = {lim(tok, "u", "in+out"), lim(req, "u", "1")};
    rlt_usage est = use("in=100,out=400");
    rlt_decision c;
    uint64_t id = 0;
    ASSERT_EQ(rlt_store_reserve_limits(s, 1, l, 2, &est, 0, 0, &c, NULL, NULL, &id), RLT_OK);
    ASSERT(c.allowed);
    rlt_check k[2];
    keys_of(l, 2, k);
    rlt_usage u = use("in=100,out=50,cached=3"); /* cached: no limit weighs it */
    ASSERT_EQ(rlt_store_settle_limits(s, id, k, 2, &u, true, 1, &c, NULL, NULL), RLT_EINVAL);
    u = use("in=100,out=50");
    u.item[1].count = -5;
    ASSERT_EQ(rlt_store_settle_limits(s, id, k, 2, &u, true, 1, &c, NULL, NULL), RLT_EINVAL);
    u = use("in=100,out=50");
    ASSERT_EQ(rlt_store_settle_limits(s, id, k, 1, &u, true, 1, &c, NULL, NULL), RLT_ENOENT);
    rlt_check other[2] = {k[0], k[1]};
    other[0].key = "v";
    ASSERT_EQ(rlt_store_settle_limits(s, id, other, 2, &u, true, 1, &c, NULL, NULL), RLT_ENOENT);
    ASSERT_EQ(rlt_store_settle_limits(s, id ^ 1, k, 2, &u, true, 1, &c, NULL, NULL), RLT_ENOENT);
    ASSERT_EQ(remaining(s, tok, "u", 1), 4500); /* still the estimate */
    ASSERT_EQ(rlt_store_settle_limits(s, id, k, 2, &u, true, 1, &c, NULL, NULL), RLT_OK);
    ASSERT_EQ(remaining(s, tok, "u", 1), 4850);
    ASSERT_EQ(remaining(s, req, "u", 1), 9); /* the request counted once */
    /* Reserve-side refusals. */
    rlt_usage bad = use("in=1,tools=2");
    ASSERT_EQ(rlt_store_reserve_limits(s, 0, l, 2, &bad, 2, 0, &c, NULL, NULL, &id), RLT_EINVAL);
    int leaky = tu_add(s, "leaky", "leaky_bucket:10/1s");
    rlt_limit lk[1] = {lim(leaky, "u", "in")};
    ASSERT_EQ(rlt_store_reserve_limits(s, 0, lk, 1, &est, 2, 0, &c, NULL, NULL, &id), RLT_EINVAL);
    rlt_limit big[1] = {lim(tok, "u", "in*1099511627775+out*1099511627775")};
    rlt_usage huge = use("in=1099511627775,out=1099511627775");
    ASSERT_EQ(rlt_store_reserve_limits(s, 0, big, 1, &huge, 2, 0, &c, NULL, NULL, &id), RLT_ERANGE);
    ASSERT_EQ(rlt_store_reserve_limits(s, 0, l, 17, &est, 2, 0, &c, NULL, NULL, &id), RLT_EINVAL);
    rlt_store_close(s);
}

TEST(partial_settles_charge_each_chunk_and_the_final_one_releases_the_rest)
{
    rlt_store *s = tu_store(0, false, 4);
    int tok = tu_add(s, "tok", "fixed_window:1000/1h");
    rlt_limit l[1] = {lim(tok, "u", "in+out")};
    rlt_usage est = use("in=100,out=300");
    rlt_decision c;
    uint64_t id = 0;
    ASSERT_EQ(rlt_store_reserve_limits(s, 0, l, 1, &est, 0, 10 * S, &c, NULL, NULL, &id), RLT_OK);
    rlt_check k[1];
    keys_of(l, 1, k);
    int64_t ch[1];
    rlt_usage u = use("in=100,out=100");
    ASSERT_EQ(rlt_store_settle_limits(s, id, k, 1, &u, false, 1, &c, NULL, ch), RLT_OK);
    ASSERT_EQ(ch[0], 0);
    ASSERT_EQ(c.remaining, 600); /* held: still the estimate */
    u = use("out=150");          /* 350 of 400 used, then 100 more: 50 over */
    ASSERT_EQ(rlt_store_settle_limits(s, id, k, 1, &u, false, 2, &c, NULL, ch), RLT_OK);
    ASSERT_EQ(ch[0], 0);
    u = use("out=100");
    ASSERT_EQ(rlt_store_settle_limits(s, id, k, 1, &u, false, 3, &c, NULL, ch), RLT_OK);
    ASSERT_EQ(ch[0], 50);
    ASSERT_EQ(c.remaining, 1000 - 450);
    u = use("out=0");
    ASSERT_EQ(rlt_store_settle_limits(s, id, k, 1, &u, true, 4, &c, NULL, ch), RLT_OK);
    ASSERT_EQ(c.remaining, 550);
    /* An abandoned stream: charged as estimated (less nothing) at its timeout. */
    ASSERT_EQ(rlt_store_reserve_limits(s, 0, l, 1, &est, 5, 10 * S, &c, NULL, NULL, &id), RLT_OK);
    u = use("out=10");
    ASSERT_EQ(rlt_store_settle_limits(s, id, k, 1, &u, false, 6, &c, NULL, NULL), RLT_OK);
    ASSERT_EQ(rlt_store_limit_reservations(s, 7), (size_t)1);
    ASSERT_EQ(rlt_store_settle_limits(s, id, k, 1, &u, true, 11 * S, &c, NULL, NULL), RLT_ENOENT);
    ASSERT_EQ(remaining(s, tok, "u", 11 * S), 550 - 400);
    ASSERT_EQ(rlt_store_limit_reservations(s, 11 * S), (size_t)0);
    rlt_store_close(s);
}

TEST(a_full_table_ends_the_biggest_holders_reservations)
{
    rlt_store_options o;
    memset(&o, 0, sizeof o);
    o.max_reservations = 8;
    rlt_store *s = NULL;
    ASSERT_EQ(rlt_store_open(&s, &o), RLT_OK);
    int tok = tu_add(s, "tok", "fixed_window:1000000/1h");
    rlt_limit l[1] = {lim(tok, "u", "in")};
    rlt_usage est = use("in=10");
    rlt_decision c;
    uint64_t id = 0, first = 0;
    for (int i = 0; i < 8; i++) {
        ASSERT_EQ(rlt_store_reserve_limits(s, 77, l, 1, &est, 0, 0, &c, NULL, NULL, &id), RLT_OK);
        if (i == 0) first = id;
    }
    ASSERT_EQ(rlt_store_reserve_limits(s, 0, l, 1, &est, 0, 0, &c, NULL, NULL, &id), RLT_EFULL);
    ASSERT_EQ(rlt_store_reserve_limits(s, 78, l, 1, &est, 0, 0, &c, NULL, NULL, &id), RLT_OK);
    rlt_check k[1];
    keys_of(l, 1, k);
    rlt_usage u = use("in=0");
    ASSERT_EQ(rlt_store_settle_limits(s, first, k, 1, &u, true, 1, &c, NULL, NULL), RLT_ENOENT);
    ASSERT_EQ(remaining(s, tok, "u", 1), 1000000 - 90); /* ended ones stay charged */
    rlt_store_close(s);
    o.max_reservations_per_holder = 2; /* and one holder's own bound */
    ASSERT_EQ(rlt_store_open(&s, &o), RLT_OK);
    tok = tu_add(s, "tok", "fixed_window:1000000/1h");
    l[0].policy = tok;
    ASSERT_EQ(rlt_store_reserve_limits(s, 5, l, 1, &est, 0, 0, &c, NULL, NULL, &id), RLT_OK);
    ASSERT_EQ(rlt_store_reserve_limits(s, 5, l, 1, &est, 0, 0, &c, NULL, NULL, &first), RLT_OK);
    ASSERT_EQ(rlt_store_reserve_limits(s, 5, l, 1, &est, 0, 0, &c, NULL, NULL, &id), RLT_EFULL);
    ASSERT_EQ(remaining(s, tok, "u", 1), 1000000 - 20); /* the refused one charged nothing */
    ASSERT_EQ(rlt_store_settle_limits(s, first, k, 1, &u, true, 1, &c, NULL, NULL), RLT_OK);
    ASSERT_EQ(rlt_store_reserve_limits(s, 5, l, 1, &est, 0, 0, &c, NULL, NULL, &id), RLT_OK);
    rlt_store_close(s);
}

/* 64 streams at once.  Each thread: reserve prompt + max_tokens on (user token limit, org money
 * budget, model output limit), stream random chunks with partial settles, settle final.  The
 * ledger sums every admitted stream's real costs; at the end (one window, no expiry) every
 * limit's charge equals the ledger exactly, and no limit ever admitted past its budget. */
#define STREAMS 64
#define ROUNDS 40
typedef struct ctx {
    rlt_store *s;
    int pol[3];
    int t;
    int64_t ledger[3];
    int64_t max_settles;
} ctx;

static void *stream(void *arg)
{
    ctx *x = arg;
    uint64_t r = 0xb0d9e7 + (uint64_t)x->t;
    char user[16];
    snprintf(user, sizeof user, "user:%d", x->t % 8);
    rlt_limit l[3] = {lim(x->pol[0], user, "in+out"), lim(x->pol[1], "org", "in*3+out*15"),
                      lim(x->pol[2], "model", "out")};
    rlt_check k[3];
    keys_of(l, 3, k);
    for (int i = 0; i < ROUNDS; i++) {
        int64_t in = 1 + (int64_t)tu_below(&r, 200), max_out = 1 + (int64_t)tu_below(&r, 500);
        int64_t out = (int64_t)tu_below(&r, (uint64_t)max_out + 1);
        rlt_usage est;
        memset(&est, 0, sizeof est);
        est.n = 2;
        strcpy(est.item[0].name, "in");
        est.item[0].count = in;
        strcpy(est.item[1].name, "out");
        est.item[1].count = max_out;
        rlt_decision c;
        uint64_t id;
        if (rlt_store_reserve_limits(x->s, 0, l, 3, &est, 1, 0, &c, NULL, NULL, &id) != RLT_OK)
            abort();
        if (!c.allowed) continue;
        int64_t sent = 0;
        rlt_usage u = est;
        u.item[1].count = 0;
        u.item[0].count = in; /* the prompt with the first chunk */
        for (;;) {
            int64_t chunk = (int64_t)tu_below(&r, 64);
            bool last = sent + chunk >= out;
            if (last) chunk = out - sent;
            u.item[1].count = chunk;
            sent += chunk;
            if (rlt_store_settle_limits(x->s, id, k, 3, &u, last, 1, &c, NULL, NULL) != RLT_OK)
                abort();
            x->max_settles++;
            u.item[0].count = 0;
            if (last) break;
        }
        x->ledger[0] += in + out;
        x->ledger[1] += in * 3 + out * 15;
        x->ledger[2] += out;
    }
    return NULL;
}

TEST(sixty_four_streams_reserving_the_maximum_never_pass_the_budget_and_settle_exactly_once)
{
    rlt_store *s = tu_store(0, false, 16);
    ctx c[STREAMS];
    int pol[3] = {tu_add(s, "u", "fixed_window:20000/1h"), tu_add(s, "o", "fixed_window:900000/1h"),
                  tu_add(s, "m", "fixed_window:60000/1h")};
    pthread_t th[STREAMS];
    for (int t = 0; t < STREAMS; t++) {
        memset(&c[t], 0, sizeof c[t]);
        c[t].s = s;
        memcpy(c[t].pol, pol, sizeof pol);
        c[t].t = t;
        ASSERT_EQ(pthread_create(&th[t], NULL, stream, &c[t]), 0);
    }
    int64_t total[3] = {0, 0, 0}, users[8] = {0};
    for (int t = 0; t < STREAMS; t++) {
        pthread_join(th[t], NULL);
        for (int j = 0; j < 3; j++)
            total[j] += c[t].ledger[j];
        users[t % 8] += c[t].ledger[0];
    }
    ASSERT_EQ(rlt_store_limit_reservations(s, 2), (size_t)0);
    ASSERT_EQ(remaining(s, pol[1], "org", 2), 900000 - total[1]);
    ASSERT_EQ(remaining(s, pol[2], "model", 2), 60000 - total[2]);
    for (int u = 0; u < 8; u++) {
        char key[16];
        snprintf(key, sizeof key, "user:%d", u);
        ASSERT_EQ(remaining(s, pol[0], key, 2), 20000 - users[u]);
        ASSERT_LE(users[u], 20000);
    }
    ASSERT_LE(total[1], 900000);
    ASSERT_LE(total[2], 60000);
    ASSERT(total[2] > 60000 / 2); /* the budget was the bound that mattered */
    rlt_store_close(s);
}
