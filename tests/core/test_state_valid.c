/* rlt_state_valid: states the algorithms produce are valid; damaged counts and indices are not. */
#include "test.h"

#include "ratelimit/ratelimit.h"

static const char *const texts[] = {
    "fixed_window:5/10s", "sliding_log:5/10s", "sliding_window:5/10s",
    "token_bucket:5/10s", "gcra:5/10s",        "leaky_bucket:5/10s,queue=3",
    "concurrency:5/10s",
};

TEST(states_made_by_decisions_are_valid)
{
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        rlt_policy p;
        ASSERT_EQ(rlt_policy_parse(&p, texts[i], strlen(texts[i]), NULL, 0), RLT_OK);
        unsigned char st[256] = {0};
        ASSERT(rlt_state_valid(&p, st)); /* fresh */
        uint64_t x = 12345;
        rlt_ns now = 0;
        for (int k = 0; k < 500; k++) {
            x = x * 6364136223846793005u + 1442695040888963407u;
            now += (rlt_ns)(x >> 40) % (3 * RLT_NS_PER_S);
            if ((x >> 20) % 7 == 0) now -= RLT_NS_PER_S; /* some backwards steps */
            rlt_decision d;
            ASSERT_EQ(rlt_decide(&p, st, now, p.algo == RLT_CONCURRENCY ? 1 : (int64_t)(x % 3), &d),
                      RLT_OK);
            if (!rlt_state_valid(&p, st)) RLT_FAIL_("%s: invalid after step %d", texts[i], k);
        }
    }
}

TEST(damaged_counts_and_indices_are_invalid)
{
    rlt_policy p;
    int64_t st[2 + 5] = {0};
    ASSERT_EQ(rlt_policy_parse(&p, "sliding_log:5/10s", 17, NULL, 0), RLT_OK);
    st[0] = 5; /* head out of range */
    ASSERT(!rlt_state_valid(&p, st));
    st[0] = 0;
    st[1] = 6; /* count above N */
    ASSERT(!rlt_state_valid(&p, st));
    st[1] = 2;
    st[2] = 10, st[3] = 9; /* unsorted */
    ASSERT(!rlt_state_valid(&p, st));
    st[3] = 11;
    ASSERT(rlt_state_valid(&p, st));

    int64_t fw[2] = {0, 6}; /* a count above N is a settled debt (rlt_settle) */
    ASSERT_EQ(rlt_policy_parse(&p, "fixed_window:5/10s", 18, NULL, 0), RLT_OK);
    ASSERT(rlt_state_valid(&p, fw));
    fw[1] = -1;
    ASSERT(!rlt_state_valid(&p, fw));

    int64_t tb[2] = {-1, 0};
    ASSERT_EQ(rlt_policy_parse(&p, "token_bucket:5/10s", 18, NULL, 0), RLT_OK);
    ASSERT(!rlt_state_valid(&p, tb));
    tb[0] = p.cap_ + 1; /* more than the capacity used: a settled debt */
    ASSERT(rlt_state_valid(&p, tb));
    tb[0] = p.cap_;
    ASSERT(rlt_state_valid(&p, tb));
}

TEST(policy_limit_is_the_limit_every_decision_reports)
{
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        rlt_policy p;
        ASSERT_EQ(rlt_policy_parse(&p, texts[i], strlen(texts[i]), NULL, 0), RLT_OK);
        unsigned char st[256] = {0};
        rlt_decision d;
        ASSERT_EQ(rlt_decide(&p, st, 0, 1, &d), RLT_OK);
        ASSERT_EQ(rlt_policy_limit(&p), d.limit);
    }
    ASSERT_EQ(rlt_policy_limit(NULL), 0);
}

/* Each option at most once, and text with a NUL byte is refused (the message would stop at
 * it and name the wrong part). */
TEST(policy_text_refuses_repeated_options_and_nul_bytes)
{
    static const char *const bad[] = {
        "gcra:1/1s,burst=1,burst=2", "token_bucket:1/1s,burst=2,burst=2",
        "leaky_bucket:1/1s,queue=2,burst=3", "leaky_bucket:1/1s,queue=2,delay=1,nodelay",
        "leaky_bucket:1/1s,queue=2,nodelay,nodelay"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rlt_policy p;
        char err[256];
        ASSERT_EQ(rlt_policy_parse(&p, bad[i], strlen(bad[i]), err, sizeof err), RLT_EPARSE);
        ASSERT(strstr(err, "once") != NULL);
    }
    rlt_policy p;
    char err[256];
    ASSERT_EQ(rlt_policy_parse(&p, "gcra:1/1s\0,burst=5", 18, err, sizeof err), RLT_EPARSE);
    ASSERT(strstr(err, "NUL") != NULL);
    ASSERT_EQ(rlt_policy_parse(&p, "leaky_bucket:2/1s,queue=5,delay=3", 33, err, sizeof err),
              RLT_OK);
}
