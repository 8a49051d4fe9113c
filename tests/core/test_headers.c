/* HTTP header arithmetic: Retry-After in whole seconds rounded up, and the exact text of the
 * RateLimit-Policy / RateLimit, legacy RateLimit-* and X-RateLimit-* fields. */
#include "core_util.h"

TEST(retry_after_seconds_rounds_up)
{
    ASSERT_EQ(rlt_retry_after_seconds(0), 0);
    ASSERT_EQ(rlt_retry_after_seconds(-1), -1);
    ASSERT_EQ(rlt_retry_after_seconds(1), 1);
    ASSERT_EQ(rlt_retry_after_seconds(999999999), 1);
    ASSERT_EQ(rlt_retry_after_seconds(S), 1);
    ASSERT_EQ(rlt_retry_after_seconds(S + 1), 2);
    ASSERT_EQ(rlt_retry_after_seconds(2 * S), 2);
    ASSERT_EQ(rlt_retry_after_seconds(INT64_MAX), INT64_MAX / S + 1);
}

static rlt_policy gcra100;

static int fmt(char *buf, size_t cap, const char *name, const rlt_decision *d, unsigned which)
{
    return rlt_format_headers(buf, cap, name, &gcra100, d, which);
}

TEST(headers_exact_text_for_an_allowed_decision)
{
    gcra100 = parse_policy("gcra:100/1m");
    void *st = new_state(&gcra100);
    rlt_decision d;
    ASSERT_EQ(rlt_decide(&gcra100, st, 0, 1, &d), RLT_OK);
    ASSERT(d.allowed);
    ASSERT_EQ(d.remaining, 99);
    ASSERT_EQ(d.reset_after, 600 * MS); /* one request's worth: 60 s / 100 */
    char buf[512];
    int n = fmt(buf, sizeof buf, "api", &d, RLT_HDR_ALL);
    const char *want = "RateLimit-Policy: \"api\";q=100;w=60\r\n"
                       "RateLimit: \"api\";r=99;t=1\r\n"
                       "RateLimit-Limit: 100\r\n"
                       "RateLimit-Remaining: 99\r\n"
                       "RateLimit-Reset: 1\r\n"
                       "X-RateLimit-Limit: 100\r\n"
                       "X-RateLimit-Remaining: 99\r\n"
                       "X-RateLimit-Reset: 1\r\n";
    ASSERT_STR_EQ(buf, want);
    ASSERT_EQ(n, (long long)strlen(want));
    /* families one by one; no Retry-After on an allowed decision */
    ASSERT_EQ(fmt(buf, sizeof buf, "api", &d, RLT_HDR_RETRY_AFTER), 0);
    ASSERT_STR_EQ(buf, "");
    fmt(buf, sizeof buf, NULL, &d, RLT_HDR_IETF);
    ASSERT_STR_EQ(buf, "RateLimit-Policy: \"default\";q=100;w=60\r\n"
                       "RateLimit: \"default\";r=99;t=1\r\n");
    fmt(buf, sizeof buf, "api", &d, RLT_HDR_LEGACY);
    ASSERT_STR_EQ(buf, "RateLimit-Limit: 100\r\nRateLimit-Remaining: 99\r\nRateLimit-Reset: 1\r\n");
    fmt(buf, sizeof buf, "api", &d, RLT_HDR_X);
    ASSERT_STR_EQ(buf, "X-RateLimit-Limit: 100\r\nX-RateLimit-Remaining: 99\r\n"
                       "X-RateLimit-Reset: 1\r\n");
    free(st);
}

TEST(headers_exact_text_for_a_denied_decision)
{
    gcra100 = parse_policy("gcra:100/1m");
    rlt_decision d = {.allowed = false,
                      .limit = 100,
                      .remaining = 0,
                      .retry_after = 1500 * MS,
                      .reset_after = 1 * S};
    char buf[512];
    fmt(buf, sizeof buf, "a.b:c-d_e", &d, RLT_HDR_ALL);
    /* t is at least Retry-After on a denial */
    ASSERT_STR_EQ(buf, "Retry-After: 2\r\n"
                       "RateLimit-Policy: \"a.b:c-d_e\";q=100;w=60\r\n"
                       "RateLimit: \"a.b:c-d_e\";r=0;t=2\r\n"
                       "RateLimit-Limit: 100\r\n"
                       "RateLimit-Remaining: 0\r\n"
                       "RateLimit-Reset: 2\r\n"
                       "X-RateLimit-Limit: 100\r\n"
                       "X-RateLimit-Remaining: 0\r\n"
                       "X-RateLimit-Reset: 2\r\n");
    /* a cost that never fits: no Retry-After (no wait makes it succeed); t says when fresh */
    rlt_decision never = {.allowed = false,
                          .limit = 100,
                          .remaining = 3,
                          .retry_after = -1,
                          .reset_after = 30 * S + 1};
    fmt(buf, sizeof buf, "x", &never, RLT_HDR_RETRY_AFTER | RLT_HDR_IETF);
    ASSERT_STR_EQ(buf, "RateLimit-Policy: \"x\";q=100;w=60\r\n"
                       "RateLimit: \"x\";r=3;t=31\r\n");
    /* ... also on a fresh key, where the reset is 0: never "Retry-After: 0" on a denial */
    never.reset_after = 0;
    fmt(buf, sizeof buf, "x", &never, RLT_HDR_ALL);
    ASSERT(strstr(buf, "Retry-After") == NULL);
    /* w rounds the period up to whole seconds and q shrinks so that q/w <= N/W */
    gcra100 = parse_policy("gcra:100/1500ms");
    fmt(buf, sizeof buf, "x", &d, RLT_HDR_IETF);
    ASSERT_STR_EQ(buf, "RateLimit-Policy: \"x\";q=133;w=2\r\nRateLimit: \"x\";r=0;t=2\r\n");
}

TEST(headers_report_enospc_when_the_buffer_is_short)
{
    gcra100 = parse_policy("gcra:100/1m");
    rlt_decision d = {.allowed = false, .limit = 100, .retry_after = S, .reset_after = S};
    char buf[512];
    int n = fmt(buf, sizeof buf, "api", &d, RLT_HDR_ALL);
    ASSERT(n > 0);
    for (size_t cap = 1; cap <= (size_t)n; cap++) {
        memset(buf, 'z', sizeof buf);
        ASSERT_EQ(fmt(buf, cap, "api", &d, RLT_HDR_ALL), RLT_ENOSPC);
        ASSERT_EQ(buf[cap], 'z'); /* nothing written past the buffer */
    }
    ASSERT_EQ(fmt(buf, (size_t)n + 1, "api", &d, RLT_HDR_ALL), n);
}

TEST(headers_reject_bad_names_and_arguments)
{
    gcra100 = parse_policy("gcra:100/1m");
    rlt_decision d = {.allowed = true, .limit = 100, .remaining = 5};
    char buf[1024], long_name[80];
    memset(long_name, 'a', 65);
    long_name[65] = '\0';
    static const char *const bad[] = {"", "a b", "x\"y", "a;b", "a,b", "é", "a\r\nX: 1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ASSERT_EQ(fmt(buf, sizeof buf, bad[i], &d, RLT_HDR_ALL), RLT_EINVAL);
    ASSERT_EQ(fmt(buf, sizeof buf, long_name, &d, RLT_HDR_ALL), RLT_EINVAL);
    long_name[64] = '\0';
    ASSERT(fmt(buf, sizeof buf, long_name, &d, RLT_HDR_ALL) > 0);
    ASSERT_EQ(rlt_format_headers(NULL, 10, "a", &gcra100, &d, RLT_HDR_ALL), RLT_EINVAL);
    ASSERT_EQ(rlt_format_headers(buf, 0, "a", &gcra100, &d, RLT_HDR_ALL), RLT_EINVAL);
    ASSERT_EQ(rlt_format_headers(buf, sizeof buf, "a", NULL, &d, RLT_HDR_ALL), RLT_EINVAL);
    ASSERT_EQ(rlt_format_headers(buf, sizeof buf, "a", &gcra100, NULL, RLT_HDR_ALL), RLT_EINVAL);
}

/* The legacy and X- trios of one q, r and t (t < 0: no Reset line). */
static const char *trios(long long q, long long r, long long t)
{
    static char buf[512];
    char reset[64] = "", xreset[64] = "";
    if (t >= 0) {
        snprintf(reset, sizeof reset, "RateLimit-Reset: %lld\r\n", t);
        snprintf(xreset, sizeof xreset, "X-RateLimit-Reset: %lld\r\n", t);
    }
    snprintf(buf, sizeof buf,
             "RateLimit-Limit: %lld\r\nRateLimit-Remaining: %lld\r\n%s"
             "X-RateLimit-Limit: %lld\r\nX-RateLimit-Remaining: %lld\r\n%s",
             q, r, reset, q, r, xreset);
    return buf;
}

/* The table of docs/algorithms.md, one real trace per algorithm with burst or queue != N:
 * q/w is the sustained rate N/W, r what may be sent now, t Retry-After on a denial and the
 * time to fresh otherwise; the legacy and X- trios carry the same q, r and t. */
TEST(headers_tell_the_sustained_rate_not_the_burst_for_every_algorithm)
{
    static const struct {
        const char *policy;
        int count; /* requests at t = 0 */
        const char *ietf;
        long long q, r, t;
    } cases[] = {
        /* 100 a minute, bursts of 20: after 1, 19 left and 0.6 s to full */
        {"gcra:100/1m,burst=20", 1, "\"p\";q=100;w=60|\"p\";r=19;t=1", 100, 19, 1},
        /* the whole burst used: 20 x 0.6 s until full */
        {"gcra:100/1m,burst=20", 20, "\"p\";q=100;w=60|\"p\";r=0;t=12", 100, 0, 12},
        /* one more: denied, t = Retry-After = the next token, 0.6 s */
        {"gcra:100/1m,burst=20", 21, "\"p\";q=100;w=60|\"p\";r=0;t=1", 100, 0, 1},
        {"token_bucket:1000/1h,burst=10", 1, "\"p\";q=1000;w=3600|\"p\";r=9;t=4", 1000, 9, 4},
        {"token_bucket:1000/1h,burst=10", 11, "\"p\";q=1000;w=3600|\"p\";r=0;t=4", 1000, 0, 4},
        /* a burst above N: r may exceed q */
        {"token_bucket:2/1s,burst=50", 1, "\"p\";q=2;w=1|\"p\";r=49;t=1", 2, 49, 1},
        {"gcra:2/1s,burst=50", 30, "\"p\";q=2;w=1|\"p\";r=20;t=15", 2, 20, 15},
        /* a shaper sending 2 a second with a queue of 5: 5 more accepted now, 0.5 s to drain */
        {"leaky_bucket:2/1s,queue=5", 1, "\"p\";q=2;w=1|\"p\";r=5;t=1", 2, 5, 1},
        /* queue full (6 accepted, 3 s of backlog), the 7th waits for one slot: 0.5 s */
        {"leaky_bucket:2/1s,queue=5", 7, "\"p\";q=2;w=1|\"p\";r=0;t=1", 2, 0, 1},
        {"leaky_bucket:2/1s,queue=5,delay=2", 6, "\"p\";q=2;w=1|\"p\";r=0;t=3", 2, 0, 3},
        {"fixed_window:4/10s", 3, "\"p\";q=4;w=10|\"p\";r=1;t=10", 4, 1, 10},
        {"sliding_log:4/10s", 5, "\"p\";q=4;w=10|\"p\";r=0;t=10", 4, 0, 10},
        /* both counts leave the estimate at the start of window 2: 20 s */
        {"sliding_window:4/10s", 2, "\"p\";q=4;w=10|\"p\";r=2;t=20", 4, 2, 20},
        /* slots, not a rate: no window, and no reset a clock could predict while allowed */
        {"concurrency:3/30s", 1, "\"p\";q=3;qu=\"concurrent-requests\"|\"p\";r=2", 3, 2, -1},
        /* ... and on a denial, the lease timeout that frees a slot at the latest */
        {"concurrency:3/30s", 4, "\"p\";q=3;qu=\"concurrent-requests\"|\"p\";r=0;t=30", 3, 0, 30},
        /* 10 per 100 ms is 100 a second, not 10 */
        {"gcra:10/100ms,burst=3", 1, "\"p\";q=100;w=1|\"p\";r=2;t=1", 100, 2, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rlt_policy p = parse_policy(cases[i].policy);
        void *st = new_state(&p);
        char want[1024];
        const char *bar = strchr(cases[i].ietf, '|');
        rlt_decision d;
        for (int k = 0; k < cases[i].count; k++)
            ASSERT_EQ(rlt_decide(&p, st, 0, 1, &d), RLT_OK);
        char ra[64] = "";
        if (!d.allowed)
            snprintf(ra, sizeof ra, "Retry-After: %lld\r\n",
                     (long long)rlt_retry_after_seconds(d.retry_after));
        snprintf(want, sizeof want, "%sRateLimit-Policy: %.*s\r\nRateLimit: %s\r\n%s", ra,
                 (int)(bar - cases[i].ietf), cases[i].ietf, bar + 1,
                 trios(cases[i].q, cases[i].r, cases[i].t));
        char got[1024];
        ASSERT(rlt_format_headers(got, sizeof got, "p", &p, &d, RLT_HDR_ALL) > 0);
        if (strcmp(got, want) != 0)
            fprintf(stderr, "  policy %s after %d requests\n", cases[i].policy, cases[i].count);
        ASSERT_STR_EQ(got, want);
        /* Retry-After is never earlier than t (the draft's rule) */
        if (!d.allowed && cases[i].t >= 0)
            ASSERT_EQ(rlt_retry_after_seconds(d.retry_after), cases[i].t);
        free(st);
    }
}

/* q/w never promises more than the policy's rate N/W, and equals it for whole seconds. */
TEST(headers_quota_per_window_never_exceeds_the_rate)
{
    uint64_t base = test_seed(0xd200);
    for (int tr = 0; tr < 500; tr++) {
        uint64_t seed = base + (uint64_t)tr;
        rng r = {seed};
        rlt_policy p = random_policy(&r, all_algos[tr % (N_ALGOS - 1)]); /* no concurrency */
        rlt_decision d = {.allowed = true, .limit = p.limit, .remaining = 1};
        char buf[512];
        long long q, w;
        CHECK(seed, rlt_format_headers(buf, sizeof buf, "p", &p, &d, RLT_HDR_IETF) > 0);
        CHECK_EQ(seed, sscanf(buf, "RateLimit-Policy: \"p\";q=%lld;w=%lld", &q, &w), 2);
        /* q / w <= N / W  <=>  q x W <= N x w x 1 s, and q is the largest such integer */
        CHECK(seed, (i128)q * p.period <= (i128)p.limit * w * S);
        CHECK(seed, (i128)(q + 1) * p.period > (i128)p.limit * w * S);
        CHECK(seed, q >= p.limit && w >= 1 && (i128)(w - 1) * S < p.period);
        if (p.period % S == 0) CHECK_EQ(seed, q, p.limit);
        if (rlt_test_failed_now) return;
    }
}

/* Retry-After from a real denial is enough: waiting that many whole seconds succeeds. */
TEST(retry_after_header_wait_always_succeeds)
{
    uint64_t base = test_seed(0xd100);
    for (int tr = 0; tr < 300; tr++) {
        uint64_t seed = base + (uint64_t)tr;
        rng r = {seed};
        rlt_policy p = random_policy(&r, all_algos[tr % (N_ALGOS - 1)]); /* no concurrency */
        void *st = new_state(&p);
        rlt_ns now = rng_range(&r, 0, 10 * S);
        for (int i = 0; i < 100; i++) {
            now += random_step(&r, &p);
            rlt_decision d, e;
            int64_t cost = rng_range(&r, 1, 3);
            CHECK_EQ(seed, rlt_decide(&p, st, now, cost, &d), RLT_OK);
            if (d.allowed || d.retry_after < 0) continue;
            int64_t secs = rlt_retry_after_seconds(d.retry_after);
            CHECK(seed, secs >= 1);
            void *c = dup_state(&p, st);
            CHECK_EQ(seed, rlt_decide(&p, c, now + secs * S, cost, &e), RLT_OK);
            free(c);
            CHECK(seed, e.allowed);
        }
        free(st);
        if (rlt_test_failed_now) return;
    }
}
