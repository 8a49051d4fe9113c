/* Tests of ratelimitd's Redis backend that need no Redis: the `redis:` config section and
 * per-policy fail modes, the refusal of policies Redis cannot run, and a daemon context
 * pointed at a closed loopback port, where every decision is the policy's fail mode, made at
 * once, counted, and the breaker opens.  (tests/server/redis_integration.py runs the daemons
 * against real Redis servers.) */
#include "test.h"

#include "server/resp/cmd.h"
#include "server/config/config.h"
#include "server/config/load.h"
#include "server/request/decide.h"
#include "server/http/httpin.h"
#include "server/stats/metrics.h"
#include "server/net/pipe.h"
#include "server/request/request.h"
#include "server/request/report.h"
#include "server/request/srv.h"
#include "server/backend/backend.h"
#include "server/backend/redis_check.h"

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
    rlt__report_info(s, &o);
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
    rlt__report_info(s, &o);
    rlt__report_prometheus(s, &o);
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
        {"redis:\n  address: \"h:1\"\n  fail: maybe\n",
         "t.yaml:3: fail must be open, closed or local"},
        {"redis:\n  address: \"h:1\"\n  timeout: 50\n", "t.yaml:3: redis timeout must be"},
        {"redis:\n  address: \"h:1\"\n  timeout: 2m\n", "t.yaml:3: redis timeout must be"},
        {"redis:\n  cluster: true\n", "t.yaml:2: redis needs an address"},
        {"redis:\n  address: \"h:1\"\n  backoff_min: 2s\n  backoff_max: 1s\n",
         "backoff_max is shorter"},
        {"policies:\n  p: {policy: gcra:1/1s, fail: never}\n",
         "fail must be open, closed or local"},
        {"domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, "
         "requests_per_unit: 1, fail: 1}\n",
         "t.yaml:4: fail must be open, closed or local"},
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
    ASSERT_EQ(
        rlt__srv_resolve(s, "concurrency:2/10s", 17, NULL, &conc, &(bool){false}, err, sizeof err),
        RLT_OK);
    ASSERT_EQ(rlt__decide_release(s, conc, "k", 1, 0, 5, -1, 0), RLT_ENOENT);
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
    ASSERT_EQ(rlt__srv_resolve(s, "gcra:1/1500ns", 13, NULL, &id, &(bool){false}, err, sizeof err),
              RLT_OK);
    rlt_decision d;
    ASSERT_EQ(rlt__decide(s, id, false, "k", 1, 0, 1, &d), RLT_EINVAL);
    ASSERT_EQ(rlt__decide(s, 999, false, "k", 1, 0, 1, &d), RLT_ENOENT);
    int conc = -1;
    ASSERT_EQ(
        rlt__srv_resolve(s, "concurrency:2/10s", 17, NULL, &conc, &(bool){false}, err, sizeof err),
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
    rlt__config *c =
        parse("policies:\n  hot: {policy: gcra:10/1s, lease: true}\n", err, sizeof err);
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

/* ---- fail: local (fallback.c) ------------------------------------------------------------ */

#include "server/backend/fallback.h"

static uint64_t fl_rng = 0x9e3779b97f4a7c15u;
static int64_t fl_below(int64_t n)
{
    fl_rng ^= fl_rng >> 12;
    fl_rng ^= fl_rng << 25;
    fl_rng ^= fl_rng >> 27;
    return (int64_t)((fl_rng * 2685821657736338717ULL) % (uint64_t)n);
}

/* Requests admitted by one node under p when it is asked `per_tick` requests every tick of
 * `tick` ns for `ticks` ticks (a node kept saturated). */
static int64_t admitted_under_flood(const rlt_policy *p, rlt_ns tick, int ticks, int per_tick)
{
    void *st = calloc(1, rlt_state_size(p));
    int64_t n = 0;
    for (int t = 0; t < ticks; t++)
        for (int k = 0; k < per_tick; k++) {
            rlt_decision d;
            if (rlt_decide(p, st, (rlt_ns)t * tick, 1, &d) == RLT_OK && d.allowed) n++;
        }
    free(st);
    return n;
}

TEST(a_nodes_share_divides_every_algorithm_and_the_fleet_never_admits_more)
{
    static const rlt_algo algos[] = {RLT_FIXED_WINDOW, RLT_SLIDING_LOG, RLT_SLIDING_WINDOW,
                                     RLT_TOKEN_BUCKET, RLT_GCRA,        RLT_LEAKY_BUCKET};
    for (int iter = 0; iter < 600; iter++) {
        rlt_algo a = algos[fl_below(6)];
        int64_t n = 1 + fl_below(200);
        rlt_ns w = (1 + fl_below(60)) * RLT_NS_PER_S;
        int64_t burst = fl_below(3) ? 0 : 1 + fl_below(300);
        int64_t queue = a == RLT_LEAKY_BUCKET ? fl_below(100) : 0;
        int64_t delay = a == RLT_LEAKY_BUCKET ? fl_below(queue + 1) : 0;
        unsigned fleet = (unsigned)(1 + fl_below(12));
        rlt_policy p, q;
        ASSERT_EQ(rlt_policy_init(&p, a, n, w, burst, queue, delay), RLT_OK);
        int64_t jitter = fl_below(2) ? 0 : 1 + fl_below(100);
        if (jitter) ASSERT_EQ(rlt_policy_set_jitter(&p, jitter), RLT_OK);
        int st = rlt__fallback_divide(&p, fleet, &q);
        /* A share is refused exactly when the node's part of the limit would be 0. */
        int64_t whole = a == RLT_LEAKY_BUCKET                    ? p.queue + 1
                        : a == RLT_TOKEN_BUCKET || a == RLT_GCRA ? p.burst
                                                                 : p.limit;
        if (whole / (int64_t)fleet == 0) {
            ASSERT_EQ(st, RLT_ERANGE);
            char why[384];
            rlt__fallback_explain(&p, fleet, why, sizeof why);
            ASSERT(strstr(why, "leaves 0 per node") != NULL);
            continue;
        }
        ASSERT_EQ(st, RLT_OK);
        ASSERT_EQ(q.algo, p.algo);
        ASSERT_EQ(q.jitter, jitter); /* the share spreads its waits like the whole */
        ASSERT_EQ(rlt_policy_limit(&q), whole / (int64_t)fleet); /* rounded down */
        if (a == RLT_TOKEN_BUCKET || a == RLT_GCRA || a == RLT_LEAKY_BUCKET) {
            /* The rate is exact: N'/W' == N/(F*W). */
            ASSERT_EQ((__int128)q.limit * fleet * p.period, (__int128)p.limit * q.period);
        } else {
            ASSERT_EQ(q.period, p.period);
            ASSERT_EQ(q.limit, p.limit / (int64_t)fleet);
        }
        if (a == RLT_LEAKY_BUCKET)
            ASSERT(q.delay <= q.queue && q.delay <= p.delay / (int64_t)fleet);
        /* F saturated nodes under the share admit no more than one node under the limit. */
        rlt_ns tick = w / 20;
        int64_t one = admitted_under_flood(&p, tick, 100, 3 * (int)whole);
        int64_t share = admitted_under_flood(&q, tick, 100, 3 * (int)whole);
        if ((int64_t)fleet * share > one) {
            char text[128];
            rlt_policy_format(&p, text, sizeof text);
            RLT_FAIL_("iter %d: %s over %u nodes admits %lld x %u > %lld", iter, text, fleet,
                      (long long)share, fleet, (long long)one);
        }
        ASSERT(share >= 1);
    }
    rlt_policy c, q;
    ASSERT_EQ(rlt_policy_init(&c, RLT_CONCURRENCY, 10, RLT_NS_PER_S, 0, 0, 0), RLT_OK);
    ASSERT_EQ(rlt__fallback_divide(&c, 2, &q), RLT_EINVAL); /* leases live in Redis */
    ASSERT_EQ(rlt__fallback_divide(&c, 0, &q), RLT_EINVAL);
    ASSERT_EQ(rlt__fallback_divide(NULL, 2, &q), RLT_EINVAL);
    /* Readable shares: 100/1s over 2 nodes is 50/1s; 5/1s over 10 nodes is 1/2s. */
    rlt_policy g;
    ASSERT_EQ(rlt_policy_parse(&g, "gcra:100/1s,burst=40", 20, NULL, 0), RLT_OK);
    ASSERT_EQ(rlt__fallback_divide(&g, 2, &q), RLT_OK);
    ASSERT(q.limit == 50 && q.period == RLT_NS_PER_S && q.burst == 20);
    ASSERT_EQ(rlt_policy_parse(&g, "gcra:5/1s,burst=10", 18, NULL, 0), RLT_OK);
    ASSERT_EQ(rlt__fallback_divide(&g, 10, &q), RLT_OK);
    ASSERT(q.limit == 1 && q.period == 2 * RLT_NS_PER_S && q.burst == 1);
}

TEST(a_nodes_share_follows_a_change_of_jitter_or_zone_alone)
{
    rlt__fallback *f = NULL;
    ASSERT_EQ(rlt__fallback_open(&f, 1000, 1 << 20), RLT_OK);
    static const char *const texts[] = {"fixed_window:100/1mo,tz=Europe/Paris",
                                        "fixed_window:100/1mo,tz=Asia/Tokyo",
                                        "fixed_window:100/1mo,tz=Asia/Tokyo,jitter=10%"};
    for (size_t i = 0; i < 3; i++) {
        rlt_policy p, got, want;
        char err[128];
        ASSERT_EQ(rlt_policy_parse(&p, texts[i], strlen(texts[i]), err, sizeof err), RLT_OK);
        int lid = -1;
        ASSERT_EQ(rlt__fallback_policy(f, 1, &p, 2, &lid), RLT_OK);
        ASSERT_EQ(rlt_store_get_policy(rlt__fallback_store(f), lid, &got), RLT_OK);
        ASSERT_EQ(rlt__fallback_divide(&p, 2, &want), RLT_OK);
        ASSERT(rlt_policy_equal(&got, &want)); /* the new share, not the one before */
    }
    rlt__fallback_close(f);
}

TEST(fail_local_and_fleet_size_parse_and_bad_fleet_sizes_are_refused)
{
    char err[600] = "";
    rlt__config *c = parse("policies:\n  p: {policy: gcra:10/1s, fail: local}\n"
                           "redis:\n  address: \"h:1\"\n  fail: local\n  fleet_size: 4\n",
                           err, sizeof err);
    ASSERT(c != NULL);
    ASSERT(c->set.redis.fail_local && !c->set.redis.fail_open);
    ASSERT_EQ(c->set.redis.fleet_size, 4);
    ASSERT_EQ(rlt__config_named(c, "p", 1)->fail, RLT__FAIL_LOCAL);
    rlt__config_free(c);
    c = parse("redis: \"h:1\"\n", err, sizeof err);
    ASSERT(c != NULL);
    ASSERT(!c->set.redis.fail_local);
    ASSERT_EQ(c->set.redis.fleet_size, 0); /* a fleet of one */
    rlt__config_free(c);
    static const char *bad[] = {"0", "-2", "65537", "two", "1.5", "[2]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char yaml[128];
        snprintf(yaml, sizeof yaml, "redis:\n  address: \"h:1\"\n  fleet_size: %s\n", bad[i]);
        c = parse(yaml, err, sizeof err);
        if (c != NULL || strstr(err, "t.yaml:3:") == NULL || strstr(err, "fleet_size") == NULL) {
            rlt__config_free(c);
            RLT_FAIL_("fleet_size %s: got \"%s\"", bad[i], err);
        }
    }
}

TEST(a_fail_local_policy_that_divides_to_zero_is_refused_at_config_time)
{
    static const struct {
        const char *yaml, *want;
    } cases[] = {
        {"policies:\n  tiny: {policy: fixed_window:3/1m, fail: local}\n"
         "redis: {address: \"127.0.0.1:1\", fleet_size: 4}\n",
         "policy 'tiny' (fail: local): fixed_window:3/1m over 4 nodes: its limit 3 divided by "
         "4 leaves 0 per node"},
        /* by the default fail mode, and a burst too small though the rate divides */
        {"policies:\n  b: gcra:100/1s,burst=2\n"
         "redis: {address: \"127.0.0.1:1\", fail: local, fleet_size: 3}\n",
         "its burst 2 divided by 3 leaves 0"},
        {"domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, "
         "requests_per_unit: 1, fail: local}\nredis: {address: \"127.0.0.1:1\", fleet_size: 2}\n",
         "rule 'd.a' (line 4, fail: local)"},
        /* the built-in default policy (1000/1s) over more nodes than it has requests */
        {"redis: {address: \"127.0.0.1:1\", fail: local, fleet_size: 1001}\n",
         "policy 'default' (fail: local)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[600] = "";
        rlt__config *c = parse(cases[i].yaml, err, sizeof err);
        ASSERT(c != NULL);
        int st = rlt__backend_redis_check_config(c, err, sizeof err);
        rlt__config_free(c);
        if (st != RLT_EINVAL || strstr(err, cases[i].want) == NULL)
            RLT_FAIL_("case %zu: want \"%s\", got %d \"%s\"", i, cases[i].want, st, err);
    }
    /* The same policies fit a smaller fleet, or another fail mode. */
    static const char *fine[] = {
        "policies:\n  tiny: {policy: fixed_window:3/1m, fail: local}\n"
        "redis: {address: \"127.0.0.1:1\", fleet_size: 3}\n",
        "policies:\n  tiny: {policy: fixed_window:3/1m, fail: open}\n"
        "redis: {address: \"127.0.0.1:1\", fail: local, fleet_size: 4}\n",
        "policies:\n  c: {policy: \"concurrency:1/10s\", fail: local}\n"
        "redis: {address: \"127.0.0.1:1\", fleet_size: 4}\n",
    };
    for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++) {
        char err[600] = "";
        rlt__config *c = parse(fine[i], err, sizeof err);
        ASSERT(c != NULL);
        int st = rlt__backend_redis_check_config(c, err, sizeof err);
        rlt__config_free(c);
        if (st != RLT_OK) RLT_FAIL_("fine %zu: %s", i, err);
    }
}

#define DOWN_LOCAL(fleet)                                                                          \
    "redis: {address: \"127.0.0.1:1\", timeout: 200ms, backoff_min: 1s, fleet_size: " fleet "}\n"

TEST(fail_local_decides_on_the_nodes_share_while_redis_is_unreachable_and_counts_it)
{
    rlt__srv *s = open_srv("policies:\n"
                           "  api: {policy: fixed_window:10/1m, fail: local}\n"
                           "  all: {policy: fixed_window:100/1m, fail: local}\n"
                           "  shut: {policy: fixed_window:10/1m, fail: closed}\n" DOWN_LOCAL("2"));
    ASSERT(s != NULL);
    rlt__config *c = rlt__srv_config(s);
    int api = rlt__config_named(c, "api", 3)->policy_id;
    int all = rlt__config_named(c, "all", 3)->policy_id;
    int shut = rlt__config_named(c, "shut", 4)->policy_id;
    ASSERT_EQ(info_num(s, "redis_local_fallback"), 0);
    rlt_decision d;
    int allowed = 0;
    for (int i = 0; i < 8; i++) {
        ASSERT_EQ(rlt__decide(s, api, false, "k", 1, RLT_NS_PER_S, 1, &d), RLT_OK);
        ASSERT_EQ(d.limit, 5); /* the share: 10 over 2 nodes */
        allowed += d.allowed;
        if (!d.allowed) ASSERT(d.retry_after > 0);
    }
    ASSERT_EQ(allowed, 5);
    /* The batch path: another key, one run of the policy, in order. */
    int pol[7];
    bool shadow[7] = {false};
    rlt_key keys[7];
    int64_t costs[7];
    rlt_decision out[7];
    int status[7];
    for (int i = 0; i < 7; i++) {
        pol[i] = i == 6 ? shut : api;
        keys[i] = (rlt_key){"b", 1};
        costs[i] = 1;
    }
    rlt__decide_batch(s, pol, shadow, keys, 7, RLT_NS_PER_S, costs, out, status);
    for (int i = 0; i < 7; i++) {
        ASSERT_EQ(status[i], RLT_OK);
        ASSERT_EQ(out[i].allowed, i < 5);
    }
    /* Multi-limit, every limit fail: local: all or nothing on the shares. */
    rlt_check ch[2] = {{.policy = api, .key = "m", .klen = 1, .cost = 1},
                       {.policy = all, .key = "m", .klen = 1, .cost = 1}};
    int refused = 7;
    for (int i = 0; i < 6; i++) {
        ASSERT_EQ(rlt__decide_multi(s, ch, 2, RLT_NS_PER_S, &d, &refused), RLT_OK);
        ASSERT_EQ(d.allowed, i < 5);
        ASSERT_EQ(refused, i < 5 ? -1 : 0);
    }
    rlt_decision peek;
    ASSERT_EQ(rlt__decide_peek(s, all, "m", 1, RLT_NS_PER_S, &peek), RLT_OK);
    ASSERT_EQ(peek.remaining, 50 - 5); /* the refused check charged nothing */
    /* One limit that fails closed makes the whole check fail closed. */
    ch[1].policy = shut;
    ch[1].key = "n"; /* shut and api have one text: in Redis, one limit */
    ASSERT_EQ(rlt__decide_multi(s, ch, 2, RLT_NS_PER_S, &d, &refused), RLT_OK);
    ASSERT(!d.allowed && refused == -1);
    /* A reset forgets the local share's count too (Redis's reset itself failed). */
    ASSERT(rlt__decide_reset(s, api, "k", 1) != RLT_OK);
    ASSERT_EQ(rlt__decide(s, api, false, "k", 1, RLT_NS_PER_S, 1, &d), RLT_OK);
    ASSERT(d.allowed && d.remaining == 4);
    /* Concurrency and an inline policy too small to divide fail closed. */
    char err[256];
    int conc = -1;
    ASSERT_EQ(
        rlt__srv_resolve(s, "concurrency:4/10s", 17, NULL, &conc, &(bool){false}, err, sizeof err),
        RLT_OK);
    ASSERT_EQ(rlt__decide(s, conc, false, "k", 1, RLT_NS_PER_S, 1, &d), RLT_OK);
    ASSERT(!d.allowed); /* inline policies take the default, closed */

    /* 8 + 6 + 6 + 1 + 1 local decisions (the peek included; the batch's closed item, the
     * mixed multi and the concurrency check stayed closed). */
    ASSERT_EQ(info_num(s, "redis_fail_local"), 8 + 6 + 6 + 1 + 1);
    ASSERT_EQ(info_num(s, "redis_fail_closed_denied"), 3);
    ASSERT_EQ(info_num(s, "redis_decisions_without_redis"), 25);
    ASSERT_EQ(info_num(s, "redis_local_fallback"), 1);
    ASSERT_EQ(info_num(s, "redis_local_fallback_entered"), 1);
    ASSERT_EQ(info_num(s, "redis_fleet_size"), 2);
    ASSERT(info_has(s, "ratelimitd_redis_decisions_total{by=\"fail_local\"} 22\n"));
    ASSERT(info_has(s, "ratelimitd_redis_decisions_total{by=\"fail_closed\"} 3\n"));
    ASSERT(info_has(s, "ratelimitd_redis_local_fallback 1\n"));
    ASSERT(info_has(s, "ratelimitd_redis_local_fallback_entered_total 1\n"));
    close_srv(s);
}

TEST(the_default_fail_local_covers_inline_policies_and_small_ones_fail_closed)
{
    rlt__srv *s = open_srv("redis: {address: \"127.0.0.1:1\", timeout: 200ms, backoff_min: 1s, "
                           "fleet_size: 3, fail: local}\n");
    ASSERT(s != NULL);
    ASSERT(info_has(s, "\r\nredis_fail_default:local\r\n"));
    char err[256];
    int id = -1, one = -1, conc = -1;
    ASSERT_EQ(rlt__srv_resolve(s, "gcra:9/1m", 9, NULL, &id, &(bool){false}, err, sizeof err),
              RLT_OK);
    ASSERT_EQ(
        rlt__srv_resolve(s, "fixed_window:2/1m", 17, NULL, &one, &(bool){false}, err, sizeof err),
        RLT_OK);
    ASSERT_EQ(
        rlt__srv_resolve(s, "concurrency:9/10s", 17, NULL, &conc, &(bool){false}, err, sizeof err),
        RLT_OK);
    rlt_decision d;
    int allowed = 0;
    for (int i = 0; i < 6; i++) {
        ASSERT_EQ(rlt__decide(s, id, false, "k", 1, 0, 1, &d), RLT_OK);
        allowed += d.allowed;
    }
    ASSERT_EQ(allowed, 3); /* burst 9 over 3 nodes */
    ASSERT_EQ(rlt__decide(s, one, false, "k", 1, 0, 1, &d), RLT_OK);
    ASSERT(!d.allowed); /* 2 over 3 nodes leaves 0: the fail-closed denial stands */
    ASSERT_EQ(rlt__decide(s, conc, false, "k", 1, 0, 1, &d), RLT_OK);
    ASSERT(!d.allowed);
    ASSERT_EQ(info_num(s, "redis_fail_local"), 6);
    ASSERT_EQ(info_num(s, "redis_fail_closed_denied"), 2);
    close_srv(s);
}

TEST(a_reload_changes_the_fleet_size_and_the_share_starts_fresh)
{
    rlt__srv *s =
        open_srv("policies:\n  p: {policy: fixed_window:12/1m, fail: local}\n" DOWN_LOCAL("2"));
    ASSERT(s != NULL);
    int id = rlt__config_named(rlt__srv_config(s), "p", 1)->policy_id;
    rlt_decision d;
    ASSERT_EQ(rlt__decide(s, id, false, "k", 1, 0, 1, &d), RLT_OK);
    ASSERT(d.allowed && d.limit == 6 && d.remaining == 5);
    char err[600];
    rlt__config *c =
        parse("policies:\n  p: {policy: fixed_window:12/1m, fail: local}\n" DOWN_LOCAL("4"), err,
              sizeof err);
    ASSERT(c != NULL);
    c->set.snapshot[0] = '\0';
    ASSERT_EQ(rlt__srv_apply_config(s, c, err, sizeof err), 0);
    ASSERT_EQ(rlt__decide(s, id, false, "k", 1, 0, 1, &d), RLT_OK);
    ASSERT(d.allowed && d.limit == 3 && d.remaining == 2);
    ASSERT_EQ(info_num(s, "redis_fleet_size"), 4);
    close_srv(s);
}

static void *decide_local_from_a_thread(void *arg)
{
    rlt__srv *s = arg;
    int id = rlt__config_named(rlt__srv_config(s), "p", 1)->policy_id;
    intptr_t allowed = 0;
    for (int i = 0; i < 40; i++) {
        rlt_decision d;
        if (rlt__decide(s, id, false, "shared", 6, 0, 1, &d) == RLT_OK && d.allowed) allowed++;
        if (i % 10 == 0) (void)info_num(s, "redis_fail_local");
    }
    return (void *)allowed;
}

TEST(threads_falling_back_locally_share_one_store_and_admit_the_share_exactly)
{
    rlt__srv *s =
        open_srv("policies:\n  p: {policy: fixed_window:100/1m, fail: local}\n" DOWN_LOCAL("2"));
    ASSERT(s != NULL);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        ASSERT_EQ(pthread_create(&th[i], NULL, decide_local_from_a_thread, s), 0);
    intptr_t allowed = 0;
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(th[i], &r);
        allowed += (intptr_t)r;
    }
    ASSERT_EQ(allowed, 50);
    ASSERT_EQ(info_num(s, "redis_fail_local"), 160);
    ASSERT_EQ(info_num(s, "redis_fail_closed_denied"), 0);
    ASSERT_EQ(info_num(s, "redis_local_fallback_entered"), 1);
    close_srv(s);
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
