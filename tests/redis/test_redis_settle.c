/* Charge after the response in Redis (rlt_redis_reserve / rlt_redis_settle, lua/settle.lua)
 * against the C core: seeded random traces of decisions, reservations and settles (caller
 * time, whole microseconds, the clock stepping back at times) replayed through rlt_decide +
 * rlt_settle in C, with an exact table of outstanding reservations, and through Redis must give
 * identical decisions and statuses, for every algorithm that can settle.  Then: a settle at
 * most once, expiry (an unsettled reservation stays charged; its key goes) and the fail modes
 * without Redis.  test_redis_settle_module runs it all again with the module loaded: its
 * RL.DECIDE and the settle script on the same values (debts included). */
#define RTEST_KIND "standalone"
#include "rtest.h"
#include "test.h"

/* Prints the first difference and fails. */
#define SAME(c, r, what)                                                                           \
    do {                                                                                           \
        if ((c) != (r))                                                                            \
            RLT_FAIL_("%s seed %llu step %d t=%lldus op %d: %s: C %lld, Redis %lld", text,         \
                      (unsigned long long)seed, step, (long long)(t / 1000), op, what,             \
                      (long long)(c), (long long)(r));                                             \
    } while (0)

static const char *const settle_policies[] = {
    "fixed_window:5/1s",   "fixed_window:100/1m",         "fixed_window:3/7ms",
    "sliding_log:5/1s",    "sliding_log:20/10s",          "sliding_log:3/7ms",
    "sliding_window:5/1s", "sliding_window:7/3s",         "sliding_window:3/7ms",
    "token_bucket:3/1s",   "token_bucket:10/7s,burst=25", "token_bucket:13/997us,burst=4",
    "gcra:3/1s",           "gcra:7/3s,burst=2",           "gcra:13/997us,burst=4",
};
#define NSP (sizeof settle_policies / sizeof settle_policies[0])

/* An outstanding reservation on both sides. */
typedef struct res {
    bool live;
    int64_t at, estimate; /* the C side's reserved_at (ns) and estimate */
    uint64_t id;          /* Redis's id */
} res;

static void replay(rlt_redis *r, const char *text, uint64_t seed, int steps, int *compared)
{
    rlt_policy p = rtest_policy(text);
    void *st = calloc(1, rlt_state_size(&p));
    char key[64];
    snprintf(key, sizeof key, "settle:%llu", (unsigned long long)seed);
    ASSERT_EQ(rlt_redis_reset(r, &p, key, strlen(key)), RLT_OK);
    int64_t W = p.period / 1000, gap = W / p.limit + 1;
    int64_t t = 1000000 * INT64_C(1000);
    res tab[6] = {{0}};
    uint64_t s = seed;
    for (int step = 0; step < steps; step++) {
        int64_t dt = rtest_trace_dt(&s, W, gap);
        t += dt * 1000;
        int op = (int)rtest_below(&s, 3); /* 0 decide, 1 reserve, 2 settle */
        int k = (int)rtest_below(&s, 6);
        int64_t amount = rtest_below(&s, 10) < 2 ? 0 : rtest_below(&s, p.limit + 3);
        int rc_c, rc_r;
        rlt_decision dc, dr;
        if (op == 0) {
            rc_c = rlt_decide(&p, st, t, amount, &dc);
            rc_r = rlt_redis_decide(r, &p, RLT_REDIS_CALLER_TIME, key, strlen(key), t, amount, &dr);
        } else if (op == 1) {
            if (tab[k].live)
                op = 2; /* settle it instead */
            else {
                uint64_t id = 0;
                rc_c = rlt_decide(&p, st, t, amount, &dc);
                rc_r = rlt_redis_reserve(r, &p, RLT_REDIS_CALLER_TIME, key, strlen(key), t, amount,
                                         60 * RLT_NS_PER_S, &dr, &id);
                SAME(rc_c, rc_r, "reserve status");
                /* Allowed, or an estimate of 0 (charges nothing: always recorded). */
                SAME(dc.allowed || amount == 0, id != 0, "reservation id given");
                if (!rc_c && (dc.allowed || amount == 0)) tab[k] = (res){true, t, amount, id};
            }
        }
        if (op == 2) {
            if (tab[k].live) {
                rc_c = rlt_settle(&p, st, t, tab[k].at, tab[k].estimate, amount, &dc);
                rc_r = rlt_redis_settle(r, &p, RLT_REDIS_CALLER_TIME, key, strlen(key), t,
                                        tab[k].id, amount, &dr);
                tab[k].live = false;
            } else { /* an id never made, or settled before: unknown on both sides */
                rc_c = RLT_ENOENT;
                rc_r = rlt_redis_settle(r, &p, RLT_REDIS_CALLER_TIME, key, strlen(key), t,
                                        tab[k].id ? tab[k].id : 12345, amount, &dr);
            }
        }
        if (getenv("RLT_TEST_TRACE"))
            fprintf(stderr,
                    "%s step %d t=%lldus op %d amount %lld: C %d/%d rem %lld retry %lld reset "
                    "%lld | Redis %d/%d rem %lld retry %lld reset %lld\n",
                    text, step, (long long)(t / 1000), op, (long long)amount, rc_c, dc.allowed,
                    (long long)dc.remaining, (long long)dc.retry_after, (long long)dc.reset_after,
                    rc_r, dr.allowed, (long long)dr.remaining, (long long)dr.retry_after,
                    (long long)dr.reset_after);
        SAME(rc_c, rc_r, "status");
        if (rc_c) continue;
        SAME(dc.allowed, dr.allowed, "allowed");
        SAME(dc.limit, dr.limit, "limit");
        SAME(dc.remaining, dr.remaining, "remaining");
        SAME(dc.retry_after, dr.retry_after, "retry_after");
        SAME(dc.reset_after, dr.reset_after, "reset_after");
        (*compared)++;
    }
    free(st);
}

TEST(redis_reserve_and_settle_match_c_on_random_traces)
{
    rlt_redis *r = rtest_open(
        (rlt_redis_options){.timeout = 2 * RLT_NS_PER_S, .ttl_floor = 60 * RLT_NS_PER_S});
    int compared = 0;
    for (size_t i = 0; i < NSP; i++) {
        for (uint64_t seed = 1; seed <= 4; seed++) {
            replay(r, settle_policies[i], seed * 7919 + i, 300, &compared);
            if (rlt_test_failed_now) break;
        }
        if (rlt_test_failed_now) break;
    }
    rlt_redis_stats st;
    rlt_redis_stats_get(r, &st);
    ASSERT_EQ(st.fail_open + st.fail_closed, 0);
    ASSERT(compared > 12000);
    /* test_redis_settle_module: the decisions ran on the module, the settles on the script */
    const char *extra = getenv("RLT_REDIS_EXTRA_ARGS");
    if (extra && strstr(extra, "--loadmodule")) ASSERT(st.module_calls > 1000);
    rlt_redis_close(r);
}

TEST(redis_settle_happens_at_most_once)
{
    rlt_redis *r = rtest_open((rlt_redis_options){.timeout = 2 * RLT_NS_PER_S});
    rlt_policy p = rtest_policy("token_bucket:10/1s");
    const char *key = "once";
    ASSERT_EQ(rlt_redis_reset(r, &p, key, 4), RLT_OK);
    rlt_decision d;
    uint64_t id = 0;
    int64_t t = 5 * RLT_NS_PER_S;
    ASSERT_EQ(rlt_redis_reserve(r, &p, RLT_REDIS_CALLER_TIME, key, 4, t, 8, 0, &d, &id), RLT_OK);
    ASSERT(d.allowed && id != 0);
    ASSERT_EQ(d.remaining, 2);
    ASSERT_EQ(rlt_redis_settle(r, &p, RLT_REDIS_CALLER_TIME, key, 4, t, id, 1, &d), RLT_OK);
    ASSERT_EQ(d.remaining, 9); /* 7 refunded */
    /* The second settle finds nothing and refunds nothing more. */
    ASSERT_EQ(rlt_redis_settle(r, &p, RLT_REDIS_CALLER_TIME, key, 4, t, id, 0, &d), RLT_ENOENT);
    ASSERT_EQ(rlt_redis_decide(r, &p, RLT_REDIS_CALLER_TIME, key, 4, t, 0, &d), RLT_OK);
    ASSERT_EQ(d.remaining, 9);
    /* Another key's or another policy's reservation with the same id is not this one. */
    uint64_t id2 = 0;
    ASSERT_EQ(rlt_redis_reserve(r, &p, RLT_REDIS_CALLER_TIME, key, 4, t, 3, 0, &d, &id2), RLT_OK);
    ASSERT(id2 != 0 && id2 != id);
    rlt_policy q = rtest_policy("token_bucket:11/1s");
    ASSERT_EQ(rlt_redis_settle(r, &q, RLT_REDIS_CALLER_TIME, key, 4, t, id2, 0, &d), RLT_ENOENT);
    ASSERT_EQ(rlt_redis_settle(r, &p, RLT_REDIS_CALLER_TIME, "twice", 5, t, id2, 0, &d),
              RLT_ENOENT);
    /* A debt: the real cost past the limit is charged, the next request waits. */
    ASSERT_EQ(rlt_redis_settle(r, &p, RLT_REDIS_CALLER_TIME, key, 4, t, id2, 20, &d), RLT_OK);
    ASSERT(!d.allowed);
    ASSERT_EQ(d.remaining, 0);
    ASSERT_EQ(rlt_redis_decide(r, &p, RLT_REDIS_CALLER_TIME, key, 4, t + RLT_NS_PER_S, 1, &d),
              RLT_OK);
    ASSERT(!d.allowed); /* 1 + 20 units used, 10 repaid in a second */
    /* Arguments refused before Redis. */
    ASSERT_EQ(rlt_redis_settle(r, &p, RLT_REDIS_CALLER_TIME, key, 4, t, id2, -1, &d), RLT_EINVAL);
    rlt_policy lb = rtest_policy("leaky_bucket:3/1s,queue=2");
    ASSERT_EQ(rlt_redis_reserve(r, &lb, RLT_REDIS_CALLER_TIME, key, 4, t, 1, 0, &d, &id),
              RLT_EINVAL);
    ASSERT_EQ(id, 0);
    rlt_redis_close(r);
}

/* A sliding log of 2500 runs (more than one RPUSH chunk of the settle's rewrite) settles as
 * the core does, refund and debt alike. */
TEST(redis_sliding_log_settle_keeps_a_long_log_exact)
{
    rlt_redis *r = rtest_open(
        (rlt_redis_options){.timeout = 2 * RLT_NS_PER_S, .ttl_floor = 60 * RLT_NS_PER_S});
    rlt_policy p = rtest_policy("sliding_log:3000/10s");
    void *st = calloc(1, rlt_state_size(&p));
    const char *key = "longlog";
    ASSERT_EQ(rlt_redis_reset(r, &p, key, strlen(key)), RLT_OK);
    rlt_decision dc, dr;
    int64_t t = RLT_NS_PER_S;
    for (int i = 0; i < 2500; i++, t += 1000) {
        ASSERT_EQ(rlt_decide(&p, st, t, 1, &dc), RLT_OK);
        ASSERT_EQ(rlt_redis_decide(r, &p, RLT_REDIS_CALLER_TIME, key, strlen(key), t, 1, &dr),
                  RLT_OK);
    }
    uint64_t id = 0;
    int64_t at = t;
    ASSERT_EQ(rlt_decide(&p, st, at, 400, &dc), RLT_OK);
    ASSERT_EQ(
        rlt_redis_reserve(r, &p, RLT_REDIS_CALLER_TIME, key, strlen(key), at, 400, 0, &dr, &id),
        RLT_OK);
    ASSERT(dr.allowed && id != 0);
    t += 5000;
    ASSERT_EQ(rlt_settle(&p, st, t, at, 400, 1000, &dc), RLT_OK); /* debt: 600 more */
    ASSERT_EQ(rlt_redis_settle(r, &p, RLT_REDIS_CALLER_TIME, key, strlen(key), t, id, 1000, &dr),
              RLT_OK);
    ASSERT_EQ(dc.remaining, dr.remaining);
    ASSERT_EQ(dc.retry_after, dr.retry_after);
    ASSERT_EQ(dc.reset_after, dr.reset_after);
    ASSERT_EQ(rlt_decide(&p, st, t, 300, &dc), RLT_OK);
    ASSERT_EQ(
        rlt_redis_reserve(r, &p, RLT_REDIS_CALLER_TIME, key, strlen(key), t, 300, 0, &dr, &id),
        RLT_OK);
    ASSERT_EQ(dc.allowed, dr.allowed);
    for (int64_t probe = t; probe < t + 11 * RLT_NS_PER_S; probe += 997 * RLT_NS_PER_MS) {
        ASSERT_EQ(rlt_decide(&p, st, probe, 0, &dc), RLT_OK);
        ASSERT_EQ(rlt_redis_decide(r, &p, RLT_REDIS_CALLER_TIME, key, strlen(key), probe, 0, &dr),
                  RLT_OK);
        ASSERT_EQ(dc.remaining, dr.remaining);
        ASSERT_EQ(dc.retry_after, dr.retry_after);
    }
    free(st);
    rlt_redis_close(r);
}

/* An unsettled reservation stays charged as estimated; its key is gone after the timeout and
 * a late settle is unknown. */
TEST(redis_reservation_expires_charged_as_estimated)
{
    rlt_redis *r = rtest_open((rlt_redis_options){.timeout = 2 * RLT_NS_PER_S});
    rlt_policy p = rtest_policy("fixed_window:10/1m");
    char key[64];
    snprintf(key, sizeof key, "expiry:%lld", (long long)rtest_mono_ns());
    rlt_decision d;
    uint64_t id = 0;
    /* On the caller's clock, 1 s into the first minute for every call: on Redis's own clock
     * the 300 ms below could cross a minute boundary and start a new window. */
    const unsigned ct = RLT_REDIS_CALLER_TIME;
    const rlt_ns t = RLT_NS_PER_S;
    ASSERT_EQ(rlt_redis_reserve(r, &p, ct, key, strlen(key), t, 6, 200 * RLT_NS_PER_MS, &d, &id),
              RLT_OK);
    ASSERT(d.allowed && id != 0);
    char name[4096];
    int len = rlt_redis_key_name(r, &p, key, strlen(key), name, sizeof name);
    ASSERT(len > 0);
    snprintf(name + len, sizeof name - (size_t)len, ":r:%016llx", (unsigned long long)id);
    redisContext *raw = rtest_raw(0);
    redisReply *rep = redisCommand(raw, "PTTL %s", name);
    ASSERT(rep && rep->type == REDIS_REPLY_INTEGER && rep->integer > 0 && rep->integer <= 200);
    freeReplyObject(rep);
    struct timespec ts = {0, 300 * 1000 * 1000};
    nanosleep(&ts, NULL);
    rep = redisCommand(raw, "EXISTS %s", name);
    ASSERT(rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == 0);
    freeReplyObject(rep);
    ASSERT_EQ(rlt_redis_settle(r, &p, ct, key, strlen(key), t + 300 * RLT_NS_PER_MS, id, 0, &d),
              RLT_ENOENT);
    ASSERT_EQ(rlt_redis_decide(r, &p, ct, key, strlen(key), t + 300 * RLT_NS_PER_MS, 0, &d),
              RLT_OK);
    ASSERT_EQ(d.remaining, 4); /* still charged at its estimate */
    redisFree(raw);
    rlt_redis_close(r);
}

/* Without Redis: a reserve takes the fail mode and gives no id; a settle is RLT_EBACKEND. */
TEST(redis_reserve_without_redis_follows_the_fail_mode)
{
    rlt_redis *r = NULL;
    ASSERT_EQ(rlt_redis_open(&r, &(rlt_redis_options){.servers = "127.0.0.1:1",
                                                      .timeout = 50 * RLT_NS_PER_MS}),
              RLT_OK);
    rlt_policy p = rtest_policy("gcra:5/1s");
    rlt_decision d;
    uint64_t id = 99;
    int rc = rlt_redis_reserve(r, &p, RLT_REDIS_FAIL_OPEN, "k", 1, 0, 1, 0, &d, &id);
    ASSERT(rc == RLT_EBACKEND || rc == RLT_ETIMEDOUT);
    ASSERT(d.allowed);
    ASSERT_EQ(id, 0);
    rc = rlt_redis_reserve(r, &p, 0, "k", 1, 0, 1, 0, &d, &id);
    ASSERT(rc == RLT_EBACKEND || rc == RLT_ETIMEDOUT);
    ASSERT(!d.allowed);
    ASSERT(d.retry_after > 0);
    ASSERT_EQ(id, 0);
    rc = rlt_redis_settle(r, &p, 0, "k", 1, 0, 1234, 1, &d);
    ASSERT(rc == RLT_EBACKEND || rc == RLT_ETIMEDOUT);
    ASSERT(!d.allowed);
    rlt_redis_close(r);
}

/* ---- a huge real cost: the debt saturates (settle.lua's header) ---------------------------- */

static const char *const debt_policies[] = {
    "fixed_window:10/1m",      "sliding_window:10/1m",    "sliding_window:10000/1h",
    "token_bucket:10/1m",      "token_bucket:1000003/1s", "gcra:10/1m",
    "gcra:1000000/1s,burst=5", "gcra:1000003/1s",
};

/* One step of the saturation test: the core's decision dc against Redis's dr (and the scripts'
 * ds when the module decides dr: both read one state, so they agree to the ns).  `exact`: the
 * debt is below where the scripts saturate (a window's count 2^52 is above every N: always), so
 * every field is the core's; a sliding window whose 1000 x N x W passes 2^52 retries at most
 * 999 ns earlier (its count P = 2^52 leaves floor(1000 slack / P) ns); past the scripts' bound
 * a bucket holds its debt to 2^53 - 2^50 us, the core its own to int64: Redis never allows what
 * the core denies, and its waits stay positive and finite. */
static void debt_same(const char *text, int64_t extra, const char *what, bool exact, bool sw_ns,
                      const rlt_decision *dc, const rlt_decision *dr, const rlt_decision *ds)
{
    char ctx[200];
    snprintf(ctx, sizeof ctx, "%s extra %lld %s", text, (long long)extra, what);
    if (ds && (ds->allowed != dr->allowed || ds->remaining != dr->remaining ||
               ds->retry_after != dr->retry_after || ds->reset_after != dr->reset_after))
        RLT_FAIL_("%s: scripts %d/%lld/%lld/%lld, module %d/%lld/%lld/%lld", ctx, ds->allowed,
                  (long long)ds->remaining, (long long)ds->retry_after, (long long)ds->reset_after,
                  dr->allowed, (long long)dr->remaining, (long long)dr->retry_after,
                  (long long)dr->reset_after);
    if (dr->allowed && !dc->allowed) RLT_FAIL_("%s: Redis allows what the core denies", ctx);
    if (!dr->allowed && dr->retry_after <= 0) RLT_FAIL_("%s: a denial without a wait", ctx);
    if (dr->reset_after < 0) RLT_FAIL_("%s: reset_after %lld", ctx, (long long)dr->reset_after);
    if (!exact) return;
    int64_t dretry = dc->retry_after - dr->retry_after;
    if (dc->allowed != dr->allowed || dc->remaining != dr->remaining ||
        dc->reset_after != dr->reset_after || (sw_ns ? dretry < 0 || dretry >= 1000 : dretry != 0))
        RLT_FAIL_("%s: C %d/%lld/%lld/%lld, Redis %d/%lld/%lld/%lld", ctx, dc->allowed,
                  (long long)dc->remaining, (long long)dc->retry_after, (long long)dc->reset_after,
                  dr->allowed, (long long)dr->remaining, (long long)dr->retry_after,
                  (long long)dr->reset_after);
}

TEST(redis_a_huge_settle_saturates_and_keeps_denying)
{
    const rlt_redis_options o = {.timeout = 2 * RLT_NS_PER_S, .ttl_floor = 60 * RLT_NS_PER_S};
    rlt_redis *r = rtest_open(o);
    const char *extra_args = getenv("RLT_REDIS_EXTRA_ARGS");
    rlt_redis *rs = NULL; /* with the module loaded: the scripts on the same keys */
    if (extra_args && strstr(extra_args, "--loadmodule")) {
        rlt_redis_options os = o;
        os.engine = RLT_REDIS_ENGINE_SCRIPTS;
        rs = rtest_open(os);
    }
    const int64_t extras[] = {100000000,          INT64_C(1) << 40, (INT64_C(1) << 52) - 5,
                              (INT64_C(1) << 53), INT64_C(1) << 62, INT64_MAX - 1};
    const unsigned ct = RLT_REDIS_CALLER_TIME;
    for (size_t i = 0; i < sizeof debt_policies / sizeof debt_policies[0]; i++)
        for (size_t x = 0; x < sizeof extras / sizeof extras[0]; x++) {
            const char *text = debt_policies[i];
            rlt_policy p = rtest_policy(text);
            int64_t W = p.period / 1000, g = rlt_gcd(p.limit, W), unit = W / g;
            bool bucket = p.algo == RLT_TOKEN_BUCKET || p.algo == RLT_GCRA;
            bool sw_ns = p.algo == RLT_SLIDING_WINDOW && p.limit * W > (INT64_C(1) << 52) / 1000;
            /* used <= 2 x B x unit before the debt: under 2^52 with what is charged here */
            bool exact = !bucket || extras[x] <= ((INT64_C(1) << 52) - 4 * p.burst * unit) / unit;
            void *st = calloc(1, rlt_state_size(&p));
            char key[64];
            snprintf(key, sizeof key, "debt:%zu:%zu", i, x);
            size_t kl = strlen(key);
            ASSERT_EQ(rlt_redis_reset(r, &p, key, kl), RLT_OK);
            rlt_decision dc, dr, ds;
            int64_t t = 1000 * RLT_NS_PER_S, t1 = t + RLT_NS_PER_MS;
            uint64_t a = 0, b = 0, c = 0;
            /* Two reservations at t: a settles at a huge cost, then b is refunded in full. */
            ASSERT_EQ(rlt_decide(&p, st, t, 1, &dc), RLT_OK);
            ASSERT_EQ(rlt_redis_reserve(r, &p, ct, key, kl, t, 1, 0, &dr, &a), RLT_OK);
            ASSERT(dc.allowed && dr.allowed && a != 0);
            ASSERT_EQ(rlt_decide(&p, st, t, 3, &dc), RLT_OK);
            ASSERT_EQ(rlt_redis_reserve(r, &p, ct, key, kl, t, 3, 0, &dr, &b), RLT_OK);
            ASSERT(dc.allowed && dr.allowed && b != 0);
            ASSERT_EQ(rlt_settle(&p, st, t1, t, 1, 1 + extras[x], &dc), RLT_OK);
            ASSERT_EQ(rlt_redis_settle(r, &p, ct, key, kl, t1, a, 1 + extras[x], &dr), RLT_OK);
            ASSERT(!dc.allowed && !dr.allowed);
            debt_same(text, extras[x], "after the settle", exact, sw_ns, &dc, &dr, NULL);
            ASSERT_EQ(rlt_settle(&p, st, t1, t, 3, 0, &dc), RLT_OK);
            ASSERT_EQ(rlt_redis_settle(r, &p, ct, key, kl, t1, b, 0, &dr), RLT_OK);
            ASSERT(!dc.allowed && !dr.allowed); /* a refund does not undo the debt */
            /* More debt on top: a saturated state takes it, still no error. */
            ASSERT_EQ(rlt_decide(&p, st, t1, 0, &dc), RLT_OK);
            ASSERT_EQ(rlt_redis_reserve(r, &p, ct, key, kl, t1, 0, 0, &dr, &c), RLT_OK);
            ASSERT(c != 0);
            ASSERT_EQ(rlt_settle(&p, st, t1, t1, 0, extras[x], &dc), RLT_OK);
            ASSERT_EQ(rlt_redis_settle(r, &p, ct, key, kl, t1, c, extras[x], &dr), RLT_OK);
            ASSERT(!dc.allowed && !dr.allowed);
            /* Later requests (whole us: Redis's instants): within the window, past it, a day, a
             * year, 80 years on. */
            const int64_t later[] = {0,
                                     1000,
                                     p.period / 2 + 1000,
                                     p.period + 1000,
                                     2 * p.period + 1000,
                                     86400 * RLT_NS_PER_S,
                                     INT64_C(365) * 86400 * RLT_NS_PER_S,
                                     INT64_C(80) * 365 * 86400 * RLT_NS_PER_S};
            for (size_t k = 0; k < sizeof later / sizeof later[0] && !rlt_test_failed_now; k++) {
                int64_t at = t1 + later[k];
                char what[48];
                snprintf(what, sizeof what, "at +%lldus", (long long)(later[k] / 1000));
                if (rs) ASSERT_EQ(rlt_redis_decide(rs, &p, ct, key, kl, at, 0, &ds), RLT_OK);
                int rc = rlt_decide(&p, st, at, 0, &dc);
                ASSERT_EQ(rlt_redis_decide(r, &p, ct, key, kl, at, 0, &dr), RLT_OK);
                if (rc == RLT_ERANGE) { /* the core's own bound (scale x now): Redis alone */
                    ASSERT(p.algo == RLT_GCRA);
                    dc = dr;
                } else {
                    ASSERT_EQ(rc, RLT_OK);
                }
                debt_same(text, extras[x], what, exact && rc == RLT_OK, sw_ns, &dc, &dr,
                          rs ? &ds : NULL);
                if (!exact) ASSERT(!dr.allowed); /* saturated: to 2^53 - 2^50 us */
                if (!bucket && later[k] > 2 * p.period) ASSERT(dr.allowed); /* forgotten */
            }
            free(st);
            if (rlt_test_failed_now) goto done;
        }
done:
    rlt_redis_close(rs);
    rlt_redis_close(r);
}
