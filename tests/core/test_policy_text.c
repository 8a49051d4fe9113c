/* Policy text: parse/format round trips for every algorithm and option, canonical forms,
 * durations, and error messages that name the offending part of the text. */
#include "core_util.h"

static void same_policy(const rlt_policy *a, const rlt_policy *b)
{
    ASSERT_EQ(a->algo, b->algo);
    ASSERT_EQ(a->limit, b->limit);
    ASSERT_EQ(a->period, b->period);
    ASSERT_EQ(a->burst, b->burst);
    ASSERT_EQ(a->queue, b->queue);
    ASSERT_EQ(a->delay, b->delay);
    ASSERT_EQ(a->scale_, b->scale_);
    ASSERT_EQ(a->unit_, b->unit_);
    ASSERT_EQ(a->cap_, b->cap_);
    ASSERT_EQ(a->free_, b->free_);
}

TEST(policy_text_canonical_forms)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"gcra:100/1m", "gcra:100/1m"},
        {"gcra:100/60s", "gcra:100/1m"},
        {"gcra:100/m", "gcra:100/1m"},
        {"token_bucket:2/1s,burst=5", "token_bucket:2/1s,burst=5"},
        {"token_bucket:5/1s,burst=5", "token_bucket:5/1s"},
        {"gcra:7/1000ms,burst=1", "gcra:7/1s,burst=1"},
        {"fixed_window:100/3600s", "fixed_window:100/1h"},
        {"sliding_log:5/1500ms", "sliding_log:5/1500ms"},
        {"sliding_window:3/86400s", "sliding_window:3/1d"},
        {"sliding_window:3/90m", "sliding_window:3/90m"},
        {"fixed_window:1/999983ns", "fixed_window:1/999983ns"},
        {"fixed_window:1/1000ns", "fixed_window:1/1us"},
        {"leaky_bucket:10/s", "leaky_bucket:10/1s,queue=0"},
        {"leaky_bucket:10/1s,burst=5", "leaky_bucket:10/1s,queue=5"},
        {"leaky_bucket:10/1s,queue=5,delay=2", "leaky_bucket:10/1s,queue=5,delay=2"},
        {"leaky_bucket:10/1s,burst=5,nodelay", "leaky_bucket:10/1s,queue=5,delay=5"},
        {"leaky_bucket:10/1s,queue=5,delay=9", "leaky_bucket:10/1s,queue=5,delay=5"},
        {"concurrency:10", "concurrency:10/1m"},
        {"concurrency:10/30s", "concurrency:10/30s"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rlt_policy p = parse_policy(cases[i].in), q;
        char buf[128];
        int n = rlt_policy_format(&p, buf, sizeof buf);
        ASSERT_EQ(n, (long long)strlen(cases[i].out));
        ASSERT_STR_EQ(buf, cases[i].out);
        ASSERT_EQ(rlt_policy_parse(&q, buf, (size_t)n, NULL, 0), RLT_OK);
        same_policy(&p, &q);
        if (rlt_test_failed_now) return;
    }
}

TEST(policy_text_round_trips_for_random_policies_of_every_algorithm)
{
    uint64_t base = test_seed(0xc100);
    for (int tr = 0; tr < 2000; tr++) {
        uint64_t seed = base + (uint64_t)tr;
        rng r = {seed};
        rlt_algo algo = all_algos[tr % N_ALGOS];
        rlt_policy p = random_policy(&r, algo);
        if (rng_chance(&r, 1, 3)) { /* bigger numbers too, when representable */
            rlt_policy big;
            bool bucket = algo == RLT_TOKEN_BUCKET || algo == RLT_GCRA;
            int64_t q = algo == RLT_LEAKY_BUCKET ? rng_range(&r, 0, 1000) : 0;
            if (rlt_policy_init(&big, algo, rng_range(&r, 1, 60000),
                                rng_range(&r, 1, INT64_C(1) << rng_range(&r, 1, 50)),
                                bucket ? rng_range(&r, 0, 99999) : 0, q,
                                algo == RLT_LEAKY_BUCKET ? rng_range(&r, 0, 1000) : 0) == RLT_OK)
                p = big;
        }
        char buf[128];
        int n = rlt_policy_format(&p, buf, sizeof buf);
        CHECK(seed, n > 0);
        rlt_policy q;
        char err[256];
        int rc = rlt_policy_parse(&q, buf, (size_t)n, err, sizeof err);
        if (rc) FAIL_SEED(seed, "\"%s\" does not parse back: %s", buf, err);
        same_policy(&p, &q);
        if (rlt_test_failed_now) {
            fprintf(stderr, "  seed 0x%llx: %s\n", (unsigned long long)seed, buf);
            return;
        }
    }
}

TEST(policy_format_reports_enospc_when_the_buffer_is_short)
{
    rlt_policy p = parse_policy("token_bucket:2/1s,burst=5");
    char buf[64];
    int n = rlt_policy_format(&p, buf, sizeof buf);
    ASSERT_EQ(n, 25);
    for (size_t cap = 1; cap <= (size_t)n; cap++)
        ASSERT_EQ(rlt_policy_format(&p, buf, cap), RLT_ENOSPC);
    ASSERT_EQ(rlt_policy_format(&p, buf, (size_t)n + 1), n);
}

/* Parses `text`, expects status `rc`, and a message that contains `part`. */
static void expect_error(const char *text, int rc, const char *part)
{
    rlt_policy p;
    char err[512];
    memset(err, 'x', sizeof err);
    int got = rlt_policy_parse(&p, text, strlen(text), err, sizeof err);
    if (got != rc) RLT_FAIL_("\"%s\": status %d (%s), want %d", text, got, err, rc);
    if (!memchr(err, '\0', sizeof err)) RLT_FAIL_("\"%s\": message not NUL-terminated", text);
    if (!strstr(err, part))
        RLT_FAIL_("\"%s\": message \"%s\" does not name \"%s\"", text, err, part);
    /* no message buffer: same status */
    ASSERT_EQ(rlt_policy_parse(&p, text, strlen(text), NULL, 0), rc);
}

TEST(policy_parse_errors_name_the_offending_part)
{
    expect_error("bogus:1/s", RLT_EPARSE, "bogus");
    expect_error("GCRA:1/s", RLT_EPARSE, "GCRA");
    expect_error(":1/s", RLT_EPARSE, "unknown algorithm");
    expect_error("gcra", RLT_EPARSE, "gcra");
    expect_error("gcra:abc/s", RLT_EPARSE, "abc");
    expect_error("gcra:0/s", RLT_EPARSE, "\"0\"");
    expect_error("gcra:-5/s", RLT_EPARSE, "-5");
    expect_error("gcra:/s", RLT_EPARSE, "limit");
    expect_error("gcra:10", RLT_EPARSE, "10");
    expect_error("gcra:10/5x", RLT_EPARSE, "5x");
    expect_error("gcra:10/0s", RLT_EPARSE, "0s");
    expect_error("gcra:10/", RLT_EPARSE, "period");
    expect_error("gcra:10/1.5s", RLT_EPARSE, "1.5s");
    expect_error("gcra:10/s,foo=1", RLT_EPARSE, "foo=1");
    expect_error("gcra:10/s,burst", RLT_EPARSE, "burst");
    expect_error("gcra:10/s,burst=x", RLT_EPARSE, "burst=x");
    expect_error("gcra:10/s,burst=0", RLT_EPARSE, "burst=0");
    expect_error("gcra:10/s,", RLT_EPARSE, "option");
    expect_error("fixed_window:10/s,burst=5", RLT_EPARSE, "burst=5");
    expect_error("sliding_log:10/s,queue=5", RLT_EPARSE, "queue=5");
    expect_error("token_bucket:10/s,delay=1", RLT_EPARSE, "delay=1");
    expect_error("gcra:10/s,nodelay", RLT_EPARSE, "nodelay");
    expect_error("concurrency:10/s,burst=2", RLT_EPARSE, "burst=2");
    /* overflow */
    expect_error("gcra:99999999999999999999/s", RLT_ERANGE, "99999999999999999999");
    expect_error("gcra:1/9999999999999999999s", RLT_ERANGE, "9999999999999999999s");
    expect_error("gcra:1/200000d", RLT_ERANGE, "200000d");
    expect_error("gcra:1/1s,burst=99999999999999999999", RLT_ERANGE, "burst=99999999999999999999");
    expect_error("token_bucket:1/100000d,burst=999999", RLT_ERANGE, "burst=999999");
    expect_error("sliding_log:2000000/1s", RLT_ERANGE, "2000000");
    expect_error("concurrency:100000", RLT_ERANGE, "100000");
}

TEST(policy_parse_error_message_is_truncated_safely)
{
    rlt_policy p;
    char err[8];
    ASSERT_EQ(rlt_policy_parse(&p, "bogus:1/s", 9, err, sizeof err), RLT_EPARSE);
    ASSERT_EQ(strlen(err), 7);
    ASSERT_EQ(rlt_policy_parse(&p, "gcra:1/s", 8, err, sizeof err), RLT_OK);
    ASSERT_EQ(err[0], '\0');
    /* `len` bounds the text: a valid prefix of a longer buffer */
    ASSERT_EQ(rlt_policy_parse(&p, "gcra:1/sGARBAGE", 8, NULL, 0), RLT_OK);
    ASSERT_EQ(p.period, S);
    ASSERT_EQ(rlt_policy_parse(NULL, "gcra:1/s", 8, NULL, 0), RLT_EINVAL);
    ASSERT_EQ(rlt_policy_parse(&p, NULL, 0, NULL, 0), RLT_EINVAL);
}

TEST(algorithm_names_round_trip)
{
    for (size_t i = 0; i < N_ALGOS; i++) {
        const char *name = rlt_algo_name(all_algos[i]);
        ASSERT_EQ(rlt_algo_from_name(name, strlen(name)), all_algos[i]);
    }
    ASSERT_STR_EQ(rlt_algo_name(RLT_ALGO_NONE), "none");
    ASSERT_STR_EQ(rlt_algo_name((rlt_algo)42), "none");
    ASSERT_EQ(rlt_algo_from_name("gcr", 3), RLT_ALGO_NONE);
    ASSERT_EQ(rlt_algo_from_name("gcra", 3), RLT_ALGO_NONE);
    ASSERT_EQ(rlt_algo_from_name("none", 4), RLT_ALGO_NONE);
    ASSERT_EQ(rlt_algo_from_name(NULL, 0), RLT_ALGO_NONE);
}

TEST(duration_parse_units_defaults_and_overflow)
{
    static const struct {
        const char *text;
        rlt_ns unit, want;
        int rc;
    } cases[] = {
        {"250ms", 0, 250 * MS, RLT_OK},
        {"1s", 0, S, RLT_OK},
        {"3h", 0, 3 * 3600 * S, RLT_OK},
        {"2d", 0, 2 * 86400 * S, RLT_OK},
        {"5m", 0, 300 * S, RLT_OK},
        {"7us", 0, 7 * US, RLT_OK},
        {"9ns", 0, 9, RLT_OK},
        {"s", 0, S, RLT_OK},
        {"15", S, 15 * S, RLT_OK},
        {"15", 0, 0, RLT_EPARSE},
        {"", S, 0, RLT_EPARSE},
        {"1x", 0, 0, RLT_EPARSE},
        {"-1s", 0, 0, RLT_EPARSE},
        {"1 s", 0, 0, RLT_EPARSE},
        {"1S", 0, 0, RLT_EPARSE},
        {"106752d", 0, 0, RLT_ERANGE},
        {"106751d", 0, INT64_C(106751) * 86400 * S, RLT_OK},
        {"9223372036854775807ns", 0, INT64_MAX, RLT_OK},
        {"9223372036854775808ns", 0, 0, RLT_ERANGE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rlt_ns out = -42;
        int rc = rlt_duration_parse(cases[i].text, strlen(cases[i].text), cases[i].unit, &out);
        if (rc != cases[i].rc)
            RLT_FAIL_("\"%s\": status %d, want %d", cases[i].text, rc, cases[i].rc);
        if (rc == RLT_OK && out != cases[i].want)
            RLT_FAIL_("\"%s\": %lld, want %lld", cases[i].text, (long long)out,
                      (long long)cases[i].want);
    }
}
