/* An adaptive limit inside a concurrency policy (rlt_policy_set_adaptive, the text's
 * adaptive=/min=/init=/slow=, rlt_release_report): the text round-trips and bad bounds are
 * refused with a message, decisions admit no more than the learned limit, releases move it
 * within floor..ceiling, bad reports release nothing, and class ceilings are shares of the
 * limit in force. */
#include "core_util.h"

#include "ratelimit/adaptive.h"

static rlt_policy parse_ok(const char *t)
{
    rlt_policy p;
    char err[256];
    int rc = rlt_policy_parse(&p, t, strlen(t), err, sizeof err);
    if (rc) {
        fprintf(stderr, "%s: %s\n", t, err);
        abort();
    }
    return p;
}

TEST(the_text_round_trips_and_bad_bounds_are_refused)
{
    rlt_policy p = parse_ok("concurrency:200/30s,adaptive=vegas,min=10");
    ASSERT_EQ(p.adapt, RLT_ADAPT_VEGAS);
    ASSERT_EQ(p.adapt_min, 10);
    ASSERT_EQ(p.adapt_init, 10);
    char buf[128];
    ASSERT(rlt_policy_format(&p, buf, sizeof buf) > 0);
    ASSERT_STR_EQ(buf, "concurrency:200/30s,adaptive=vegas,min=10");
    p = parse_ok("concurrency:50,adaptive=aimd,min=5,init=20,slow=250ms");
    ASSERT(rlt_policy_format(&p, buf, sizeof buf) > 0);
    rlt_policy q = parse_ok(buf);
    ASSERT(rlt_policy_equal(&p, &q));
    ASSERT_EQ(rlt_state_size(&p), (size_t)(16 + 16 * 50 + 32));

    const char *bad[] = {
        "concurrency:10,adaptive=gradient",         "concurrency:10,adaptive=vegas,min=11",
        "concurrency:10,adaptive=vegas,min=0",      "concurrency:10,adaptive=aimd,min=5,init=3",
        "concurrency:10,min=5",                     "gcra:10/s,adaptive=aimd",
        "concurrency:10,adaptive=vegas,slow=1s",    "concurrency:10,adaptive=aimd,adaptive=aimd",
        "concurrency:10,adaptive=aimd,slow=2h",     "concurrency:10,adaptive=aimd,min=-1",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[256] = "";
        ASSERT_EQ(rlt_policy_parse(&p, bad[i], strlen(bad[i]), err, sizeof err), RLT_EPARSE);
        ASSERT(err[0] != '\0');
    }
}

TEST(decisions_admit_the_learned_limit_and_releases_move_it_within_bounds)
{
    rlt_policy p = parse_ok("concurrency:20/1h,adaptive=aimd,min=2,init=4");
    uint8_t *st = calloc(1, rlt_state_size(&p));
    int64_t leases[20];
    rlt_decision d;
    int n = 0;
    for (int i = 0; i < 20; i++) {
        ASSERT_EQ(rlt_decide(&p, st, S, 1, &d), RLT_OK);
        if (d.allowed) leases[n++] = d.lease;
    }
    ASSERT_EQ(n, 4); /* the initial limit, not the 20 slots */
    ASSERT_EQ(d.limit, 4);
    ASSERT_EQ(rlt_concurrency_limit(&p, st), 4);
    /* successes with the limit used grow it (+1 per limit's worth of releases) */
    for (int round = 0; round < 200; round++) {
        for (int i = 0; i < n; i++)
            ASSERT_EQ(rlt_release_report(&p, st, S + round, leases[i], 5 * MS, RLT_OUTCOME_SUCCESS),
                      RLT_OK);
        n = 0;
        for (int i = 0; i < 20; i++) {
            ASSERT_EQ(rlt_decide(&p, st, S + round, 1, &d), RLT_OK);
            if (d.allowed) leases[n++] = d.lease;
        }
        ASSERT_EQ(n, rlt_concurrency_limit(&p, st));
        ASSERT_LE(n, 20);
    }
    ASSERT_EQ(rlt_concurrency_limit(&p, st), 20); /* the ceiling, not above */
    /* drops cut it, once per round trip, never below the floor */
    int64_t before = rlt_concurrency_limit(&p, st);
    for (int i = 0; i < n; i++)
        ASSERT_EQ(rlt_release_report(&p, st, (2 + i) * S, leases[i], MS, RLT_OUTCOME_DROPPED),
                  RLT_OK);
    ASSERT(rlt_concurrency_limit(&p, st) < before);
    for (int round = 0; round < 100; round++) {
        ASSERT_EQ(rlt_decide(&p, st, (30 + round) * S, 1, &d), RLT_OK);
        ASSERT(d.allowed);
        ASSERT_EQ(rlt_release_report(&p, st, (30 + round) * S, d.lease, MS, RLT_OUTCOME_DROPPED),
                  RLT_OK);
        ASSERT_LE(2, rlt_concurrency_limit(&p, st));
    }
    ASSERT_EQ(rlt_concurrency_limit(&p, st), 2);
    /* a peek reports the limit in force */
    ASSERT_EQ(rlt_decide(&p, st, 200 * S, 0, &d), RLT_OK);
    ASSERT_EQ(d.limit, 2);
    free(st);
}

TEST(bad_reports_release_nothing_and_unknown_leases_teach_nothing)
{
    rlt_policy p = parse_ok("concurrency:8/10s,adaptive=vegas,min=1,init=4");
    uint8_t *st = calloc(1, rlt_state_size(&p));
    uint8_t *copy = malloc(rlt_state_size(&p));
    rlt_decision d;
    ASSERT_EQ(rlt_decide(&p, st, S, 1, &d), RLT_OK);
    memcpy(copy, st, rlt_state_size(&p));
    ASSERT_EQ(rlt_release_report(&p, st, S, d.lease, -1, RLT_OUTCOME_SUCCESS), RLT_EINVAL);
    ASSERT_EQ(rlt_release_report(&p, st, S, d.lease, RLT_ADAPT_LATENCY_MAX + 1, 0), RLT_ERANGE);
    ASSERT_EQ(rlt_release_report(&p, st, S, d.lease, MS, 7), RLT_EINVAL);
    ASSERT_EQ(rlt_release_report(&p, st, S, d.lease + 99, MS, RLT_OUTCOME_DROPPED), RLT_ENOENT);
    ASSERT_EQ(memcmp(copy, st, rlt_state_size(&p)), 0);
    ASSERT(rlt_state_valid(&p, st));
    ASSERT_EQ(rlt_release_report(&p, st, S, d.lease, MS, RLT_OUTCOME_SUCCESS), RLT_OK);
    /* a learned limit outside the bounds is a corrupt state */
    rlt_adapt_state a = {100 * 1000, 0, 0, 1};
    memcpy(st + 16 + 16 * 8, &a, sizeof a);
    ASSERT(!rlt_state_valid(&p, st));
    free(copy);
    free(st);
}

TEST(class_ceilings_are_shares_of_the_limit_in_force)
{
    rlt_policy p = parse_ok("concurrency:100/10s,adaptive=aimd,min=10");
    uint8_t *st = calloc(1, rlt_state_size(&p));
    rlt_decision d;
    int crit = 0, shed = 0;
    for (int i = 0; i < 20; i++) {
        ASSERT_EQ(rlt_decide_class(&p, st, S, 1, RLT_CLASS_SHEDDABLE, 20, &d), RLT_OK);
        shed += d.allowed;
    }
    for (int i = 0; i < 20; i++) {
        ASSERT_EQ(rlt_decide_class(&p, st, S, 1, RLT_CLASS_CRITICAL, 20, &d), RLT_OK);
        crit += d.allowed;
    }
    ASSERT_EQ(shed, 6); /* 10 - 2 x ceil(10 x 20%) */
    ASSERT_EQ(crit, 4); /* the rest of the limit in force, 10 */
    free(st);
}



TEST(a_policy_carries_its_class_reserve)
{
    rlt_policy p = parse_ok("gcra:100/1m,reserve=20%");
    ASSERT_EQ(p.reserve, 20);
    char buf[128];
    ASSERT(rlt_policy_format(&p, buf, sizeof buf) > 0);
    ASSERT_STR_EQ(buf, "gcra:100/1m,reserve=20%");
    rlt_policy q = parse_ok("gcra:100/1m");
    ASSERT(!rlt_policy_equal(&p, &q));
    const char *bad[] = {"gcra:100/1m,reserve=101%", "gcra:100/1m,reserve=20",
                         "gcra:100/1m,reserve=%", "gcra:100/1m,reserve=5%,reserve=5%",
                         "gcra:100/1m,reserve=-1%"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[256] = "";
        ASSERT_EQ(rlt_policy_parse(&q, bad[i], strlen(bad[i]), err, sizeof err), RLT_EPARSE);
        ASSERT(strstr(err, "reserve") != NULL);
    }
    /* reserve_pct -1: the policy's; an explicit one overrides it */
    uint64_t st[2] = {0, 0};
    rlt_decision d;
    int shed = 0;
    for (int i = 0; i < 100; i++) {
        ASSERT_EQ(rlt_decide_class(&p, st, S, 1, RLT_CLASS_SHEDDABLE, -1, &d), RLT_OK);
        shed += d.allowed;
    }
    ASSERT_EQ(shed, 60);
    ASSERT_EQ(rlt_decide_class(&p, st, S, 1, RLT_CLASS_SHEDDABLE, 0, &d), RLT_OK);
    ASSERT(d.allowed);
    ASSERT_EQ(rlt_decide_class(&p, st, S, 1, RLT_CLASS_SHEDDABLE, -2, &d), RLT_EINVAL);
}
