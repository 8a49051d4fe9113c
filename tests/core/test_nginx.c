/* nginx equivalence of the leaky bucket: nginx's limit_req arithmetic (rate R r/s, burst=Q,
 * delay=D or nodelay), written here from its documented algorithm and independently of
 * src/core/leaky.c, against leaky_bucket:R/1s,queue=Q,delay=D on seeded random traces of
 * whole-millisecond times (clock never stepping back).  Pass/reject must be identical and
 * nginx's delay in ms must equal our delay in ns truncated to ms. */
#include "core_util.h"

/* One key's node of ngx_http_limit_req_module: excess in 0.001 requests, last in ms. */
typedef struct ngx_node {
    bool exists;
    int64_t excess; /* 1000 = one request */
    int64_t last;   /* ms */
} ngx_node;

typedef struct ngx_limit {
    int64_t rate;  /* in 0.001 r/s, as nginx stores "R r/s" */
    int64_t burst; /* in 0.001 requests */
    int64_t delay; /* in 0.001 requests */
} ngx_limit;

/* Returns 1 when passed (and *delay_ms set), 0 when rejected (busy). */
static int ngx_limit_req(const ngx_limit *l, ngx_node *n, int64_t now, int64_t *delay_ms)
{
    int64_t excess;
    if (!n->exists) { /* a new node starts with excess 0 and passes */
        n->exists = true;
        n->excess = 0;
        n->last = now;
        excess = 0;
    } else {
        int64_t ms = now - n->last;
        if (ms < -60000)
            ms = 1;
        else if (ms < 0)
            ms = 0;
        excess = n->excess - l->rate * ms / 1000 + 1000;
        if (excess < 0) excess = 0;
        if (excess > l->burst) return 0;
        n->excess = excess;
        if (ms != 0) n->last = now;
    }
    *delay_ms = excess <= l->delay ? 0 : (excess - l->delay) * 1000 / l->rate;
    return 1;
}

TEST(leaky_bucket_matches_nginx_limit_req_on_millisecond_traces)
{
    uint64_t base = test_seed(0xe100);
    int64_t passed = 0, rejected = 0, delayed = 0;
    for (int tr = 0; tr < 400; tr++) {
        uint64_t seed = base + (uint64_t)tr;
        rng r = {seed};
        static const int64_t rates[] = {1, 2, 3, 7, 10, 13, 100, 333, 1000};
        int64_t rate = rates[rng_range(&r, 0, 8)];
        int64_t queue = rng_range(&r, 0, 20);
        bool nodelay = rng_chance(&r, 1, 4);
        int64_t delay = nodelay ? queue : rng_range(&r, 0, queue);
        char text[128];
        if (nodelay)
            snprintf(text, sizeof text, "leaky_bucket:%lld/1s,burst=%lld,nodelay", (long long)rate,
                     (long long)queue);
        else
            snprintf(text, sizeof text, "leaky_bucket:%lld/1s,burst=%lld,delay=%lld",
                     (long long)rate, (long long)queue, (long long)delay);
        rlt_policy p = parse_policy(text);
        ngx_limit lim = {rate * 1000, queue * 1000, nodelay ? INT64_MAX / 1000 : delay * 1000};
        ngx_node node = {0};
        void *st = new_state(&p);
        int64_t now_ms = rng_range(&r, 0, 100000);
        int64_t gap = 1000 / rate + 1; /* ms between requests at the rate */
        for (int i = 0; i < 400; i++) {
            switch (rng_range(&r, 0, 4)) {
            case 0:
                break; /* same millisecond */
            case 1:
                now_ms += rng_range(&r, 0, 3);
                break;
            case 2:
                now_ms += rng_range(&r, 0, gap);
                break;
            case 3:
                now_ms += rng_range(&r, 0, 2 * gap);
                break;
            default:
                now_ms += rng_range(&r, 0, (queue + 2) * gap);
                break;
            }
            int64_t ngx_delay = 0;
            int ngx_pass = ngx_limit_req(&lim, &node, now_ms, &ngx_delay);
            rlt_decision d;
            CHECK_EQ(seed, rlt_decide(&p, st, now_ms * MS, 1, &d), RLT_OK);
            if (d.allowed != (ngx_pass == 1) || (ngx_pass && d.delay / MS != ngx_delay))
                FAIL_SEED(seed,
                          "%s request %d at %lld ms: nginx %s delay %lld ms; "
                          "ours %s delay %lld ns",
                          text, i, (long long)now_ms, ngx_pass ? "passes" : "rejects",
                          (long long)ngx_delay, d.allowed ? "passes" : "rejects",
                          (long long)d.delay);
            passed += ngx_pass;
            rejected += !ngx_pass;
            delayed += ngx_pass && ngx_delay > 0;
        }
        free(st);
    }
    /* the traces exercised all three outcomes */
    ASSERT(passed > 10000);
    ASSERT(rejected > 10000);
    ASSERT(delayed > 1000);
}

/* nginx's documented example: rate=1r/s burst=5, 7 requests in the same instant: the first
 * passes at once, 5 are queued (sent 1 s apart), the 7th is rejected; with delay=3 the
 * first 4 pass without delay. */
TEST(leaky_bucket_nginx_burst_example)
{
    rlt_policy p = parse_policy("leaky_bucket:1/1s,burst=5");
    void *st = new_state(&p);
    rlt_decision d;
    for (int i = 0; i < 6; i++) {
        ASSERT_EQ(rlt_decide(&p, st, 0, 1, &d), RLT_OK);
        ASSERT(d.allowed);
        ASSERT_EQ(d.delay, i * S);
    }
    ASSERT_EQ(rlt_decide(&p, st, 0, 1, &d), RLT_OK);
    ASSERT(!d.allowed);
    ASSERT_EQ(d.retry_after, 1 * S);
    ASSERT_EQ(d.limit, 6);
    free(st);

    p = parse_policy("leaky_bucket:1/1s,burst=5,delay=3");
    st = new_state(&p);
    static const rlt_ns want[] = {0, 0, 0, 0, 1 * S, 2 * S};
    for (int i = 0; i < 6; i++) {
        ASSERT_EQ(rlt_decide(&p, st, 0, 1, &d), RLT_OK);
        ASSERT(d.allowed);
        ASSERT_EQ(d.delay, want[i]);
    }
    free(st);

    p = parse_policy("leaky_bucket:1/1s,burst=5,nodelay");
    ASSERT_EQ(p.delay, 5);
    st = new_state(&p);
    for (int i = 0; i < 6; i++) {
        ASSERT_EQ(rlt_decide(&p, st, 0, 1, &d), RLT_OK);
        ASSERT(d.allowed);
        ASSERT_EQ(d.delay, 0);
    }
    free(st);
}
