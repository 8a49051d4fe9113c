/* The simulator's contract check (src/cli/contract.c): each algorithm's promise is found
 * broken on a made-up record that breaks it and kept on one at its edge, and the library's own
 * decisions keep every contract on random traces. */
#include "cli/cliutil.h"
#include "test.h"

#include <stdlib.h>

#define S RLT_NS_PER_S

static rlt_policy pol(const char *text)
{
    rlt_policy p;
    char err[128];
    if (rlt_policy_parse(&p, text, strlen(text), err, sizeof err) != RLT_OK) {
        fprintf(stderr, "bad policy %s: %s\n", text, err);
        abort();
    }
    return p;
}

/* Times in ms, cost 1 each. */
static int check(const char *policy, const int64_t *ms, size_t n, rlt_ns wait, rlt_ns hold)
{
    rlt_policy p = pol(policy);
    rlt__accepted e[64];
    for (size_t i = 0; i < n; i++)
        e[i] = (rlt__accepted){ms[i] * RLT_NS_PER_MS, 1};
    char text[160];
    return rlt__contract_check(&p, e, n, wait, hold, S, text, sizeof text);
}

#define N_(a) (sizeof(a) / sizeof(a)[0])

TEST(fixed_window_contract_allows_2n_across_a_boundary_but_not_n_plus_1_in_one_window)
{
    static const int64_t across[] = {6000, 7000, 8000, 9000, 10000, 11000, 12000, 13000};
    static const int64_t inside[] = {1000, 2000, 3000, 4000, 9999};
    ASSERT_EQ(check("fixed_window:4/10s", across, N_(across), 0, 0), 1);
    ASSERT_EQ(check("fixed_window:4/10s", inside, N_(inside), 0, 0), 0);
}

TEST(sliding_log_contract_breaks_at_n_plus_1_in_any_span_of_w)
{
    static const int64_t edge[] = {0, 1000, 2000, 3000, 10000};   /* 0 has left at 10 s */
    static const int64_t broken[] = {0, 1000, 2000, 3000, 9999};
    ASSERT_EQ(check("sliding_log:4/10s", edge, N_(edge), 0, 0), 1);
    ASSERT_EQ(check("sliding_log:4/10s", broken, N_(broken), 0, 0), 0);
}

TEST(sliding_counter_contract_is_n_per_window_and_2n_per_span)
{
    static const int64_t two_n[] = {6000, 7000, 8000, 9000, 10000, 11000, 12000, 13000};
    static const int64_t five[] = {1000, 2000, 3000, 4000, 5000};
    ASSERT_EQ(check("sliding_window:4/10s", two_n, N_(two_n), 0, 0), 1);
    ASSERT_EQ(check("sliding_window:4/10s", five, N_(five), 0, 0), 0);
}

TEST(token_bucket_contract_is_a_full_bucket_plus_refill)
{
    /* B = 4, 0.4 a second: 4 at once, then one more each 2.5 s */
    static const int64_t full[] = {0, 0, 0, 0, 2500, 5000};
    static const int64_t early[] = {0, 0, 0, 0, 2500, 4999};
    ASSERT_EQ(check("token_bucket:4/10s", full, N_(full), 0, 0), 1);
    ASSERT_EQ(check("token_bucket:4/10s", early, N_(early), 0, 0), 0);
    ASSERT_EQ(check("gcra:4/10s", early, N_(early), 0, 0), 0);
    /* the bound holds from any starting request, not only the first */
    static const int64_t later[] = {0, 20000, 20000, 20000, 20000, 20000};
    ASSERT_EQ(check("gcra:4/10s", later, N_(later), 0, 0), 0);
}

TEST(leaky_bucket_contract_is_spacing_and_a_bounded_wait)
{
    static const int64_t spaced[] = {0, 2500, 5000, 7500};
    static const int64_t close[] = {0, 2500, 4998, 7500};
    ASSERT_EQ(check("leaky_bucket:4/10s,queue=4", spaced, N_(spaced), 10 * S, 0), 1);
    ASSERT_EQ(check("leaky_bucket:4/10s,queue=4", close, N_(close), 0, 0), 0);
    ASSERT_EQ(check("leaky_bucket:4/10s,queue=4", spaced, N_(spaced), 10 * S + 1, 0), 1);
    ASSERT_EQ(check("leaky_bucket:4/10s,queue=4", spaced, N_(spaced), 10 * S + 2, 0), 0);
}

TEST(concurrency_contract_is_n_in_flight)
{
    static const int64_t t[] = {0, 1000, 2000, 3000, 4000};
    ASSERT_EQ(check("concurrency:4/10s", t, N_(t), 0, 4 * S), 1); /* the first ends at 4 s */
    ASSERT_EQ(check("concurrency:4/10s", t, N_(t), 0, 4 * S + 1), 0);
    ASSERT_EQ(check("concurrency:4/3s", t, N_(t), 0, 60 * S), 1); /* the timeout reclaims */
}

/* What the library decides keeps every contract, on random traces. */
TEST(library_decisions_keep_every_contract_the_simulator_checks)
{
    static const char *const policies[] = {
        "fixed_window:5/3s",      "sliding_log:5/3s",       "sliding_window:5/3s",
        "token_bucket:5/3s",      "gcra:5/3s,burst=8",      "token_bucket:7/2s,burst=2",
        "leaky_bucket:5/3s,queue=3", "leaky_bucket:3/1s,queue=0"};
    uint64_t x = 0x5eed;
    for (size_t k = 0; k < N_(policies); k++) {
        rlt_policy p = pol(policies[k]);
        void *st = calloc(1, rlt_state_size(&p));
        rlt__accepted *e = malloc(2000 * sizeof *e);
        ASSERT(st && e);
        size_t m = 0;
        rlt_ns t = 0, wait = 0;
        for (int i = 0; i < 2000; i++) {
            x = x * 6364136223846793005u + 1442695040888963407u;
            t += (rlt_ns)((x >> 33) % 900) * RLT_NS_PER_MS;
            int64_t cost = 1 + (int64_t)((x >> 20) % 2);
            rlt_decision d;
            ASSERT_EQ(rlt_decide(&p, st, t, cost, &d), RLT_OK);
            if (d.allowed) {
                e[m++] = (rlt__accepted){t + d.delay, cost};
                if (d.delay > wait) wait = d.delay;
            }
        }
        char text[160];
        if (!rlt__contract_check(&p, e, m, wait, 0, S, text, sizeof text))
            fprintf(stderr, "  %s broke \"%s\"\n", policies[k], text);
        ASSERT_EQ(rlt__contract_check(&p, e, m, wait, 0, S, text, sizeof text), 1);
        ASSERT(m > 0);
        free(st);
        free(e);
    }
}
