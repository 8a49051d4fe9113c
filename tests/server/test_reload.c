/* Tests of ratelimitd's config reload without sockets: a reload is all or nothing (nothing of
 * a refused config reaches the store; a store failure part-way puts the old policies back). */
#include "test.h"

#include "server/resp/cmd.h"
#include "server/config/config.h"
#include "server/config/load.h"
#include "server/request/decide.h"
#include "server/http/httpin.h"
#include "server/stats/metrics.h"
#include "server/net/pipe.h"
#include "server/request/request.h"
#include "server/request/srv.h"

static const char *A = "policies:\n  api: gcra:2/1h\n";
static const char *B = "policies:\n  api: gcra:100/1h\n"
                       "domain: edge\n"
                       "descriptors:\n"
                       "  - key: path\n"
                       "    value: x\n"
                       "    rate_limit:\n"
                       "      unit: minute\n"
                       "      requests_per_unit: 2\n";

static rlt__config *parse(const char *yaml)
{
    rlt__config *cfg = NULL;
    char err[600];
    if (rlt__config_parse(yaml, strlen(yaml), "test.yaml", &cfg, err, sizeof err) < 0) {
        fprintf(stderr, "%s\n", err);
        return NULL;
    }
    cfg->set.snapshot[0] = '\0';
    return cfg;
}

static char reply_[4096];

static const char *run(rlt__srv *s, const char *line)
{
    static char buf[1024];
    static rlt__resp_arg argv[16];
    size_t argc;
    snprintf(buf, sizeof buf, "%s\r\n", line);
    const char *err;
    rlt__session ss;
    rlt__session_init(s, &ss);
    ssize_t r = rlt__resp_parse(buf, strlen(buf), NULL, argv, &argc, &err);
    rlt__obuf o = {0};
    rlt__scratch *sc = rlt__scratch_new(RLT__SCRATCH_CAP);
    if (r > 0 && argc > 0 && sc) rlt__cmd_exec(s, &ss, NULL, sc, argv, argc, 1000 * RLT_NS_PER_S, &o);
    rlt__scratch_free(sc);
    size_t n = o.len < sizeof reply_ - 1 ? o.len : sizeof reply_ - 1;
    if (n) memcpy(reply_, o.data, n);
    reply_[n] = '\0';
    rlt__obuf_free(&o);
    return reply_;
}

/* The old policy answers: RL.POLICY shows its text and RL.CHECK its limit (the 2nd integer). */
static void assert_old_policy(rlt__srv *s)
{
    ASSERT_STR_EQ(run(s, "RL.POLICY api"), "$9\r\ngcra:2/1h\r\n");
    ASSERT(strncmp(run(s, "RL.CHECK k api"), "*6\r\n:1\r\n:2\r\n", 12) == 0);
}

TEST(a_reload_refused_by_the_store_leaves_every_old_policy_in_place)
{
    char err[600];
    rlt__srv *s = NULL;
    ASSERT_EQ(rlt__srv_open(&s, parse(A), 0, 0, err, sizeof err), RLT_OK);
    rlt__config *b = parse(B);
    ASSERT(b != NULL && b->nrules == 1);
    /* A store name the store refuses (a space): the named policy before it must not land. */
    snprintf(b->rules[0].name, sizeof b->rules[0].name, "r:edge.path_/api v1");
    ASSERT_EQ(rlt__srv_check_config(b, err, sizeof err), RLT_EINVAL);
    ASSERT(rlt__srv_apply_config(s, b, err, sizeof err) != RLT_OK);
    ASSERT(strstr(err, "edge.path_x") != NULL);
    assert_old_policy(s);
    rlt__config_free(b);
    rlt__srv_close(s);
}

TEST(a_reload_that_fails_in_the_store_midway_restores_the_old_policies)
{
    char err[600];
    rlt__srv *s = NULL;
    ASSERT_EQ(rlt__srv_open(&s, parse(A), 0, 0, err, sizeof err), RLT_OK);
    rlt__config *b = parse(B);
    ASSERT(b != NULL);
    ASSERT_EQ(rlt__srv_check_config(b, err, sizeof err), RLT_OK);
    /* Writes: 0 = default, 1 = api, 2 = the rule: run out of memory at the rule. */
    rlt__srv_fail_apply_after = 2;
    ASSERT(rlt__srv_apply_config(s, b, err, sizeof err) != RLT_OK);
    ASSERT_EQ(rlt__srv_fail_apply_after, -1);
    ASSERT(strstr(err, "previous policies were restored") != NULL);
    assert_old_policy(s);
    /* The same config applies once memory is back. */
    ASSERT_EQ(rlt__srv_apply_config(s, b, err, sizeof err), 0);
    ASSERT_STR_EQ(run(s, "RL.POLICY api"), "$11\r\ngcra:100/1h\r\n");
    rlt__srv_close(s);
}

TEST(a_config_with_a_tier_naming_a_missing_policy_is_refused_before_the_store)
{
    char err[600];
    rlt__config *c = parse("policies:\n  api: gcra:2/1h\ntiers:\n  free: api\n");
    ASSERT(c != NULL && c->ntiers == 1);
    ASSERT_EQ(rlt__srv_check_config(c, err, sizeof err), 0);
    snprintf(c->tiers[0].policy, sizeof c->tiers[0].policy, "nope");
    ASSERT_EQ(rlt__srv_check_config(c, err, sizeof err), -1);
    ASSERT(strstr(err, "nope") != NULL);
    rlt__config_free(c);
}

/* The third integer of an RL.CHECK reply: remaining. */
static long remaining_of(const char *reply)
{
    long v[3] = {0, 0, 0};
    sscanf(reply, "*6\r\n:%ld\r\n:%ld\r\n:%ld", &v[0], &v[1], &v[2]);
    return v[2];
}

TEST(a_reload_applies_each_policys_change_mode_to_used_allowance)
{
    static const struct {
        const char *mode;
        long remaining; /* after 4 of 10 used, the policy becomes 20 per hour */
    } cases[] = {{"keep", 16 - 1}, {"scale", 12 - 1}, {"reset", 20 - 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[600], b[256];
        rlt__srv *s = NULL;
        ASSERT_EQ(rlt__srv_open(&s, parse("policies:\n  api: fixed_window:10/1h\n"), 0, 0, err,
                                sizeof err),
                  RLT_OK);
        for (int k = 0; k < 4; k++)
            run(s, "RL.CHECK u api");
        snprintf(b, sizeof b, "policies:\n  api: {policy: fixed_window:20/1h, change: %s}\n",
                 cases[i].mode);
        rlt__config *c = parse(b);
        ASSERT(c != NULL);
        ASSERT_EQ(rlt__srv_apply_config(s, c, err, sizeof err), RLT_OK);
        if (remaining_of(run(s, "RL.CHECK u api")) != cases[i].remaining)
            RLT_FAIL_("change %s: %s", cases[i].mode, reply_);
        rlt__srv_close(s);
    }
    rlt__config *c = NULL;
    char err[600];
    const char *bad = "policies:\n  api: {policy: gcra:1/1s, change: forget}\n";
    ASSERT_EQ(rlt__config_parse(bad, strlen(bad), "t.yaml", &c, err, sizeof err), RLT_EPARSE);
    ASSERT_STR_EQ(err, "t.yaml:2: change must be keep, reset or scale");
}

TEST(a_reload_that_leaves_a_policy_unchanged_keeps_its_state_whatever_its_change_mode)
{
    char err[600];
    const char *y = "policies:\n  login: {policy: fixed_window:3/1h, change: reset}\n";
    rlt__srv *s = NULL;
    ASSERT_EQ(rlt__srv_open(&s, parse(y), 0, 0, err, sizeof err), RLT_OK);
    for (int k = 0; k < 3; k++)
        run(s, "RL.CHECK u login");
    ASSERT_EQ(remaining_of(run(s, "RL.CHECK u login")), 0);
    /* The same file again (a logrotate hook, a config-management run): nothing is reset. */
    ASSERT_EQ(rlt__srv_apply_config(s, parse(y), err, sizeof err), RLT_OK);
    ASSERT(strncmp(run(s, "RL.CHECK u login"), "*6\r\n:0\r\n", 8) == 0);
    rlt__srv_close(s);
}

TEST(a_failed_reload_undoes_exactly_even_with_reset_and_scale_policies)
{
    char err[600];
    rlt__srv *s = NULL;
    ASSERT_EQ(
        rlt__srv_open(&s, parse("policies:\n  api: fixed_window:10/1h\n"), 0, 0, err, sizeof err),
        RLT_OK);
    for (int k = 0; k < 4; k++)
        run(s, "RL.CHECK u api");
    /* The reset of api comes after every other write; the new rule's write fails before it. */
    rlt__config *b = parse("policies:\n  api: {policy: fixed_window:20/1h, change: reset}\n"
                           "domain: edge\ndescriptors:\n  - key: path\n    rate_limit: "
                           "{unit: minute, requests_per_unit: 2}\n");
    ASSERT(b != NULL);
    rlt__srv_fail_apply_after =
        1; /* writes: 0 default, 1 the rule (api waits for the second pass) */
    ASSERT(rlt__srv_apply_config(s, b, err, sizeof err) != RLT_OK);
    ASSERT(strstr(err, "the previous policies were restored") != NULL);
    rlt__config_free(b);
    /* 4 of 10 still used: the 5th check leaves 5. */
    ASSERT_EQ(remaining_of(run(s, "RL.CHECK u api")), 5);
    rlt__srv_close(s);
}

/* Adding block= grows the state: the store resets the policy's keys whatever its change mode,
 * so the write is destructive and waits for the second pass; a reload that fails before it
 * leaves the used allowance exactly as it was. */
TEST(a_failed_reload_that_adds_a_penalty_box_leaves_the_keys_as_they_were)
{
    char err[600];
    rlt__srv *s = NULL;
    ASSERT_EQ(
        rlt__srv_open(&s, parse("policies:\n  api: fixed_window:10/1h\n"), 0, 0, err, sizeof err),
        RLT_OK);
    for (int k = 0; k < 4; k++)
        run(s, "RL.CHECK u api");
    rlt__config *b = parse("policies:\n  api: fixed_window:10/1h,block=1m\n"
                           "domain: edge\ndescriptors:\n  - key: path\n    rate_limit: "
                           "{unit: minute, requests_per_unit: 2}\n");
    ASSERT(b != NULL);
    /* Writes: 0 default, 1 the rule, then (pass 2) api: the failure is api's own write; had
     * api been written in pass 1 (its keys reset), the rule's write would fail after it. */
    rlt__srv_fail_apply_after = 2;
    ASSERT(rlt__srv_apply_config(s, b, err, sizeof err) != RLT_OK);
    ASSERT(strstr(err, "the previous policies were restored") != NULL);
    rlt__config_free(b);
    ASSERT_EQ(remaining_of(run(s, "RL.CHECK u api")), 5); /* 4 of 10 were still used */
    rlt__srv_close(s);
}
