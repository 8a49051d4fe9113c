/* Tests of ratelimitd's Redis backend that need no Redis: the `redis:` config section and
 * per-policy fail modes, the refusal of policies Redis cannot run, and a daemon context
 * pointed at a closed loopback port, where every decision is the policy's fail mode, made at
 * once, counted, and the breaker opens.  (tests/server/redis_integration.py runs the daemons
 * against real Redis servers.) */
#include "test.h"

#include "server/cmd.h"
#include "server/config.h"
#include "server/decide.h"
#include "server/httpin.h"
#include "server/metrics.h"
#include "server/pipe.h"
#include "server/request.h"
#include "server/srv.h"
#include "server/backend.h"

#include <pthread.h>

static rlt__config *parse(const char *yaml, char *err, size_t errlen)
{
    rlt__config *cfg = NULL;
    if (rlt__config_parse(yaml, strlen(yaml), "t.yaml", &cfg, err, errlen) < 0) return NULL;
    return cfg;
}

static rlt__srv *open_srv(const char *yaml)
{
    char err[600];
    rlt__config *cfg = parse(yaml, err, sizeof err);
    if (cfg == NULL) {
        fprintf(stderr, "%s\n", err);
        return NULL;
    }
    cfg->set.snapshot[0] = '\0';
    rlt__srv *s = NULL;
    if (rlt__srv_open(&s, cfg, 0, 0, err, sizeof err) < 0) {
        fprintf(stderr, "%s\n", err);
        return NULL;
    }
    return s;
}

static void close_srv(rlt__srv *s)
{
    rlt__srv_close(s);
}

/* The value of INFO field `name` (as a number), or -1. */
static long long info_num(rlt__srv *s, const char *name)
{
    rlt__obuf o = {0};
    rlt__metrics_info(s, &o);
    rlt__obuf_put(&o, "", 1);
    char pat[128];
    snprintf(pat, sizeof pat, "\r\n%s:", name);
    const char *at = strstr(o.data, pat);
    long long v = at ? strtoll(at + strlen(pat), NULL, 10) : -1;
    rlt__obuf_free(&o);
    return v;
}

static bool info_has(rlt__srv *s, const char *text)
{
    rlt__obuf o = {0};
    rlt__metrics_info(s, &o);
    rlt__metrics_prometheus(s, &o);
    rlt__obuf_put(&o, "", 1);
    bool r = strstr(o.data, text) != NULL;
    rlt__obuf_free(&o);
    return r;
}

TEST(redis_section_parses_every_setting)
{
    char err[600];
    rlt__config *c = parse("redis:\n"
                           "  address: [\"10.0.0.1:6379\", \"10.0.0.2:6379\"]\n"
                           "  cluster: true\n  password: pw\n  prefix: \"app:\"\n"
                           "  timeout: 30ms\n  fail: open\n  breaker_failures: 5\n"
                           "  backoff_min: 10ms\n  backoff_max: 2s\n",
                           err, sizeof err);
    ASSERT(c != NULL);
    const rlt__redis_settings *r = &c->set.redis;
    ASSERT_STR_EQ(r->address, "10.0.0.1:6379,10.0.0.2:6379");
    ASSERT(r->cluster);
    ASSERT_STR_EQ(r->password, "pw");
    ASSERT_STR_EQ(r->prefix, "app:");
    ASSERT_EQ(r->timeout, 30 * RLT_NS_PER_MS);
    ASSERT(r->fail_open);
    ASSERT_EQ(r->breaker_failures, 5);
    ASSERT_EQ(r->backoff_min, 10 * RLT_NS_PER_MS);
    ASSERT_EQ(r->backoff_max, 2 * RLT_NS_PER_S);
    rlt__config_free(c);

    c = parse("redis: \"127.0.0.1:7000\"\n", err, sizeof err);
    ASSERT(c != NULL);
    ASSERT_STR_EQ(c->set.redis.address, "127.0.0.1:7000");
    ASSERT(!c->set.redis.cluster && !c->set.redis.fail_open);
    ASSERT_EQ(c->set.redis.timeout, 0); /* the library's 50 ms */
    rlt__config_free(c);

    c = parse("redis: {address: \"h:1\", timeout_ms: 7}\n", err, sizeof err);
    ASSERT(c != NULL);
    ASSERT_EQ(c->set.redis.timeout, 7 * RLT_NS_PER_MS);
    rlt__config_free(c);
}

TEST(without_a_redis_section_the_local_store_decides)
{
    char err[600];
    rlt__config *c = parse("policies:\n  a: gcra:1/1s\n", err, sizeof err);
    ASSERT(c != NULL);
    ASSERT_STR_EQ(c->set.redis.address, "");
    ASSERT_EQ(rlt__backend_redis_check_config(c, err, sizeof err), RLT_OK);
    rlt__config_free(c);
    rlt__srv *s = open_srv("policies:\n  a: gcra:1/1s\n");
    ASSERT(s != NULL);
    ASSERT_STR_EQ(s->be->ops->name, "local");
    ASSERT(info_has(s, "\r\nbackend:local\r\n"));
    ASSERT(info_has(s, "ratelimitd_backend{backend=\"local\"} 1"));
    close_srv(s);
}

TEST(fail_mode_is_parsed_per_named_policy_and_per_rule)
{
    char err[600];
    rlt__config *c = parse("policies:\n"
                           "  o: {policy: gcra:1/1s, fail: open}\n"
                           "  cl: {policy: gcra:1/1s, fail: closed}\n"
                           "  d: gcra:1/1s\n"
                           "domain: web\ndescriptors:\n"
                           "  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, "
                           "fail: open}\n"
                           "  - key: b\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
                           err, sizeof err);
    ASSERT(c != NULL);
    ASSERT_EQ(rlt__config_named(c, "o", 1)->fail, RLT__FAIL_OPEN);
    ASSERT_EQ(rlt__config_named(c, "cl", 2)->fail, RLT__FAIL_CLOSED);
    ASSERT_EQ(rlt__config_named(c, "d", 1)->fail, RLT__FAIL_DEFAULT);
    ASSERT_EQ(c->nrules, 2);
    ASSERT_EQ(c->rules[0].fail, RLT__FAIL_OPEN);
    ASSERT_EQ(c->rules[1].fail, RLT__FAIL_DEFAULT);
    rlt__config_free(c);
}

TEST(bad_redis_settings_are_refused_with_file_and_line)
{
    static const struct {
        const char *yaml, *want;
    } cases[] = {
        {"redis:\n  address: \"h:1\"\n  colour: blue\n", "t.yaml:3: unknown redis setting"},
        {"redis:\n  address: \"h:1\"\n  fail: maybe\n", "t.yaml:3: fail must be open or closed"},
        {"redis:\n  address: \"h:1\"\n  timeout: 50\n", "t.yaml:3: redis timeout must be"},
        {"redis:\n  address: \"h:1\"\n  timeout: 2m\n", "t.yaml:3: redis timeout must be"},
        {"redis:\n  cluster: true\n", "t.yaml:2: redis needs an address"},
        {"redis:\n  address: \"h:1\"\n  backoff_min: 2s\n  backoff_max: 1s\n",
         "backoff_max is shorter"},
        {"policies:\n  p: {policy: gcra:1/1s, fail: never}\n", "fail must be open or closed"},
        {"domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, "
         "requests_per_unit: 1, fail: 1}\n",
         "t.yaml:4: fail must be open or closed"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[600] = "";
        rlt__config *c = parse(cases[i].yaml, err, sizeof err);
        if (c != NULL || strstr(err, cases[i].want) == NULL) {
            rlt__config_free(c);
            RLT_FAIL_("case %zu: want \"%s\", got \"%s\"", i, cases[i].want, err);
        }
    }
}

TEST(policies_redis_cannot_run_are_refused_before_start)
{
    char err[600] = "";
    /* 1500 ns is not a whole number of microseconds: the scripts' clock is in µs. */
    rlt__config *c = parse("policies:\n  tiny: fixed_window:10/1500ns\n"
                           "redis: \"127.0.0.1:1\"\n",
                           err, sizeof err);
    ASSERT(c != NULL);
    ASSERT_EQ(rlt__backend_redis_check_config(c, err, sizeof err), RLT_EINVAL);
    ASSERT(strstr(err, "policy 'tiny'") != NULL);
    ASSERT(strstr(err, "cannot run in Redis") != NULL);
    rlt__config_free(c);

    c = parse("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {policy: "
              "\"gcra:1/1500ns\"}\nredis: \"127.0.0.1:1\"\n",
              err, sizeof err);
    ASSERT(c != NULL);
    ASSERT_EQ(rlt__backend_redis_check_config(c, err, sizeof err), RLT_EINVAL);
    ASSERT(strstr(err, "rule 'd.a'") != NULL);
    rlt__config_free(c);

    c = parse("redis: {address: \"127.0.0.1:1\", prefix: \"a{b\"}\n", err, sizeof err);
    ASSERT(c != NULL);
    ASSERT_EQ(rlt__backend_redis_check_config(c, err, sizeof err), RLT_EINVAL);
    ASSERT(strstr(err, "redis: invalid settings") != NULL);
    rlt__config_free(c);
}

/* Port 1 on loopback: nothing listens, every connect is refused at once. */
#define DOWN "redis: {address: \"127.0.0.1:1\", timeout: 200ms, backoff_min: 1s}\n"

TEST(unreachable_redis_answers_with_each_policys_fail_mode_and_counts_it)
{
    rlt__srv *s = open_srv("policies:\n"
                           "  shut: {policy: fixed_window:5/1m, fail: closed}\n"
                           "  wide: {policy: fixed_window:5/1m, fail: open}\n"
                           "  dflt: fixed_window:5/1m\n" DOWN);
    ASSERT(s != NULL);
    ASSERT_STR_EQ(s->be->ops->name, "redis");
    rlt__config *c = rlt__srv_config(s);
    int shut = rlt__config_named(c, "shut", 4)->policy_id;
    int wide = rlt__config_named(c, "wide", 4)->policy_id;
    int dflt = rlt__config_named(c, "dflt", 4)->policy_id;
    rlt_decision d;
    for (int i = 0; i < 4; i++) {
        ASSERT_EQ(rlt__decide(s, shut, false, "k", 1, 0, 1, &d), RLT_OK);
        ASSERT(!d.allowed);
        ASSERT_EQ(d.limit, 5);
        ASSERT(d.retry_after >= RLT_NS_PER_MS);
        ASSERT_EQ(rlt__decide(s, wide, false, "k", 1, 0, 1, &d), RLT_OK);
        ASSERT(d.allowed);
        ASSERT_EQ(rlt__decide(s, dflt, false, "k", 1, 0, 1, &d), RLT_OK);
        ASSERT(!d.allowed); /* the default is closed */
    }
    /* Shadow mode still applies to a fail-closed denial: reported allowed, counted. */
    ASSERT_EQ(rlt__decide(s, shut, true, "k", 1, 0, 1, &d), RLT_OK);
    ASSERT(d.allowed);
    /* Multi-limit: open only when every limit fails open. */
    rlt_check ch[2] = {{.policy = wide, .key = "a", .klen = 1, .cost = 1},
                       {.policy = shut, .key = "b", .klen = 1, .cost = 1}};
    int refused = 7;
    ASSERT_EQ(rlt__decide_multi(s, ch, 2, 0, &d, &refused), RLT_OK);
    ASSERT(!d.allowed);
    ASSERT_EQ(refused, -1);
    ASSERT_EQ(rlt__decide_multi(s, ch, 1, 0, &d, &refused), RLT_OK);
    ASSERT(d.allowed);
    /* A release Redis cannot take is "not released" (the lease expires by itself); a reset
     * it cannot take is an error. */
    char err[256];
    int conc = -1;
    ASSERT_EQ(rlt__srv_resolve(s, "concurrency:2/10s", 17, NULL, &conc, &(bool){false}, err, sizeof err), RLT_OK);
    ASSERT_EQ(rlt__decide_release(s, conc, "k", 1, 0, 5), RLT_ENOENT);
    ASSERT(rlt__decide_reset(s, shut, "k", 1) != RLT_OK);

    ASSERT_EQ(info_num(s, "redis_fail_closed_denied"), 4 + 4 + 1 + 1);
    ASSERT_EQ(info_num(s, "redis_fail_open_allowed"), 4 + 1);
    ASSERT_EQ(info_num(s, "redis_decisions_without_redis"), 15);
    ASSERT_EQ(info_num(s, "redis_decisions"), 0);
    ASSERT_EQ(info_num(s, "redis_release_lost"), 1);
    ASSERT_EQ(info_num(s, "redis_handles"), 1);
    ASSERT(info_num(s, "redis_short_circuited") >= 10); /* the breaker opened after 3 */
    ASSERT(info_has(s, "\r\nbackend:redis\r\n"));
    ASSERT(info_has(s, "\r\nredis_breaker:open\r\n"));
    ASSERT(info_has(s, "ratelimitd_backend{backend=\"redis\"} 1"));
    ASSERT(info_has(s, "ratelimitd_redis_decisions_total{by=\"fail_closed\"} 10"));
    ASSERT(info_has(s, "ratelimitd_redis_breaker_open 1"));
    /* Per-policy counters count fail-mode decisions like any other. */
    ASSERT(info_has(s, ":name=p%3Awide,allowed=5,denied=0"));
    close_srv(s);
}

TEST(inline_policies_redis_cannot_run_are_refused_per_request)
{
    rlt__srv *s = open_srv(DOWN);
    ASSERT(s != NULL);
    char err[256];
    int id = -1;
    ASSERT_EQ(rlt__srv_resolve(s, "gcra:1/1500ns", 13, NULL, &id, &(bool){false}, err, sizeof err), RLT_OK);
    rlt_decision d;
    ASSERT_EQ(rlt__decide(s, id, false, "k", 1, 0, 1, &d), RLT_EINVAL);
    ASSERT_EQ(rlt__decide(s, 999, false, "k", 1, 0, 1, &d), RLT_ENOENT);
    int conc = -1;
    ASSERT_EQ(rlt__srv_resolve(s, "concurrency:2/10s", 17, NULL, &conc, &(bool){false}, err, sizeof err),
              RLT_OK);
    rlt_check ch[1] = {{.policy = conc, .key = "a", .klen = 1, .cost = 1}};
    ASSERT_EQ(rlt__decide_multi(s, ch, 1, 0, &d, NULL), RLT_EINVAL);
    close_srv(s);
}

TEST(a_reload_changes_fail_modes_for_the_next_decision)
{
    rlt__srv *s = open_srv("policies:\n  p: {policy: fixed_window:5/1m, fail: closed}\n" DOWN);
    ASSERT(s != NULL);
    int id = rlt__config_named(rlt__srv_config(s), "p", 1)->policy_id;
    rlt_decision d;
    ASSERT_EQ(rlt__decide(s, id, false, "k", 1, 0, 1, &d), RLT_OK);
    ASSERT(!d.allowed);
    char err[600];
    rlt__config *c =
        parse("policies:\n  p: {policy: fixed_window:5/1m, fail: open}\n" DOWN, err, sizeof err);
    ASSERT(c != NULL);
    c->set.snapshot[0] = '\0';
    ASSERT_EQ(rlt__srv_apply_config(s, c, err, sizeof err), 0);
    ASSERT_EQ(rlt__decide(s, id, false, "k", 1, 0, 1, &d), RLT_OK);
    ASSERT(d.allowed);
    close_srv(s);
}

static void *decide_from_a_thread(void *arg)
{
    rlt__srv *s = arg;
    int id = rlt__config_named(rlt__srv_config(s), "default", 7)->policy_id;
    intptr_t wrong = 0;
    for (int i = 0; i < 20; i++) {
        rlt_decision d;
        if (rlt__decide(s, id, false, "k", 1, 0, 1, &d) != RLT_OK || d.allowed) wrong++;
        /* INFO from another thread while this one decides (run under TSan too). */
        if (i % 5 == 0) (void)info_num(s, "redis_fail_closed_denied");
    }
    return (void *)wrong;
}

TEST(each_thread_gets_its_own_handle_and_counters_sum_up)
{
    rlt__srv *s = open_srv(DOWN);
    ASSERT(s != NULL);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        ASSERT_EQ(pthread_create(&th[i], NULL, decide_from_a_thread, s), 0);
    intptr_t wrong = 0;
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(th[i], &r);
        wrong += (intptr_t)r;
    }
    ASSERT_EQ(wrong, 0);
    ASSERT_EQ(info_num(s, "redis_handles"), 4);
    ASSERT_EQ(info_num(s, "redis_fail_closed_denied"), 80);
    close_srv(s);
}

TEST(lease_mode_needs_redis_and_a_lease_size)
{
    char err[600];
    rlt__config *c = parse("policies:\n  hot: {policy: gcra:10/1s, lease: true}\n", err, sizeof err);
    ASSERT(c != NULL);
    ASSERT_EQ(rlt__backend_redis_check_config(c, err, sizeof err), RLT_EINVAL);
    ASSERT_STR_EQ(err, "policy 'hot': lease: true needs the redis: section (leases are local "
                       "shares of a Redis limit)");
    rlt__config_free(c);
    c = parse("policies:\n  hot: {policy: gcra:10/1s, lease: true}\nredis:\n  address: "
              "127.0.0.1:1\n",
              err, sizeof err);
    ASSERT(c != NULL);
    ASSERT_EQ(rlt__backend_redis_check_config(c, err, sizeof err), RLT_EINVAL);
    ASSERT_STR_EQ(err, "policy 'hot': lease: true needs redis.lease_units");
    rlt__config_free(c);
    c = parse("policies:\n  hot: {policy: gcra:10/1s, lease: true}\nredis:\n  address: "
              "127.0.0.1:1\n  lease_units: 5\n",
              err, sizeof err);
    ASSERT(c != NULL);
    ASSERT_EQ(rlt__backend_redis_check_config(c, err, sizeof err), RLT_OK);
    rlt__config_free(c);
}

TEST(redis_sentinel_settings_parse_and_bad_ones_are_refused)
{
    char err[600] = "";
    rlt__config *c = parse("redis:\n  sentinel: [\"127.0.0.1:26379\", \"127.0.0.1:26380\"]\n"
                           "  master_name: mymaster\n  timeout: 20ms\n",
                           err, sizeof err);
    ASSERT(c != NULL);
    ASSERT_STR_EQ(c->set.redis.address, "127.0.0.1:26379,127.0.0.1:26380");
    ASSERT_STR_EQ(c->set.redis.master_name, "mymaster");
    ASSERT_EQ(rlt__backend_redis_check_config(c, err, sizeof err), RLT_OK);
    rlt__config_free(c);
    c = parse("redis: {sentinel: \"h:1,h:2\", master_name: m}\n", err, sizeof err);
    ASSERT(c != NULL);
    ASSERT_STR_EQ(c->set.redis.address, "h:1,h:2");
    rlt__config_free(c);
    static const struct {
        const char *yaml, *want;
    } cases[] = {
        {"redis:\n  sentinel: \"h:1\"\n", "t.yaml:2: redis sentinel needs master_name"},
        {"redis:\n  address: \"h:1\"\n  master_name: m\n", "redis master_name needs sentinel"},
        {"redis:\n  address: \"h:1\"\n  sentinel: \"h:2\"\n  master_name: m\n",
         "address or sentinel, not both"},
        {"redis:\n  sentinel: \"h:1\"\n  master_name: m\n  cluster: true\n",
         "cluster or sentinel, not both"},
        {"redis:\n  sentinel: \"h:1\"\n  master_name: \"a b\"\n", "t.yaml:3: redis master_name"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        err[0] = '\0';
        c = parse(cases[i].yaml, err, sizeof err);
        if (c != NULL || strstr(err, cases[i].want) == NULL) {
            rlt__config_free(c);
            RLT_FAIL_("case %zu: want \"%s\", got \"%s\"", i, cases[i].want, err);
        }
    }
    /* A sentinel list the library refuses (no port) is refused before start. */
    c = parse("redis: {sentinel: \"nohost\", master_name: m}\n", err, sizeof err);
    ASSERT(c != NULL);
    ASSERT_EQ(rlt__backend_redis_check_config(c, err, sizeof err), RLT_EINVAL);
    ASSERT(strstr(err, "redis: invalid settings (sentinels 'nohost'") != NULL);
    rlt__config_free(c);
}

TEST(unreachable_sentinels_answer_with_the_fail_mode)
{
    rlt__srv *s = open_srv("policies:\n  wide: {policy: fixed_window:5/1m, fail: open}\n"
                           "redis: {sentinel: \"127.0.0.1:1\", master_name: mymaster, "
                           "timeout: 200ms}\n");
    ASSERT(s != NULL);
    ASSERT_STR_EQ(s->be->ops->name, "redis");
    int wide = rlt__config_named(rlt__srv_config(s), "wide", 4)->policy_id;
    rlt_decision d;
    for (int i = 0; i < 3; i++) {
        ASSERT_EQ(rlt__decide(s, wide, false, "k", 1, 0, 1, &d), RLT_OK);
        ASSERT(d.allowed);
    }
    ASSERT_EQ(info_num(s, "redis_fail_open_allowed"), 3);
    ASSERT(info_has(s, "\r\nredis_sentinel_master:mymaster\r\n"));
    ASSERT(info_num(s, "redis_topology_reads") >= 1);
    close_srv(s);
}
