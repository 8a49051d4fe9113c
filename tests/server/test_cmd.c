/* Tests of ratelimitd's command layer without sockets: CL.THROTTLE against redis-cell's own
 * test vectors on a virtual clock, the RL.* commands, AUTH and tenants, and the answers that
 * redis-cli and redis-benchmark need. */
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

#include "cmd_run.h"

#define S(x) ((rlt_ns)(x)*RLT_NS_PER_S)
#define MS(x) ((rlt_ns)(x)*RLT_NS_PER_MS)

static rlt__srv *open_srv(const char *yaml)
{
    rlt__config *cfg = NULL;
    char err[600];
    if (yaml) {
        if (rlt__config_parse(yaml, strlen(yaml), "test.yaml", &cfg, err, sizeof err) < 0) {
            fprintf(stderr, "%s\n", err);
            return NULL;
        }
    } else {
        cfg = rlt__config_default();
    }
    cfg->set.snapshot[0] = '\0';
    rlt__srv *s = NULL;
    if (rlt__srv_open(&s, cfg, 0, 0, err, sizeof err) < 0) fprintf(stderr, "%s\n", err);
    return s;
}

/* Runs one inline command line at `now` and returns the RESP reply text (cmd_run.h). */
#define run rlt_test_cmd_run

static const char *ints5(long a, long b, long c, long d, long e)
{
    static char t[256];
    snprintf(t, sizeof t, "*5\r\n:%ld\r\n:%ld\r\n:%ld\r\n:%ld\r\n:%ld\r\n", a, b, c, d, e);
    return t;
}

TEST(cl_throttle_matches_redis_cells_test_vectors)
{
    /* redis-cell's it_rate_limits: limit 5 (max_burst 4), 1 per second. */
    rlt__srv *s = open_srv(NULL);
    ASSERT(s != NULL);
    rlt__session ss;
    rlt__session_init(s, &ss);
    rlt_ns t0 = S(1000);
    const char *c1 = "CL.THROTTLE foo 4 1 1 1";
    ASSERT_STR_EQ(run(s, &ss, t0, "CL.THROTTLE foo 4 1 1 6"), ints5(1, 5, 5, -1, 0));
    ASSERT_STR_EQ(run(s, &ss, t0, c1), ints5(0, 5, 4, -1, 1));
    ASSERT_STR_EQ(run(s, &ss, t0, c1), ints5(0, 5, 3, -1, 2));
    ASSERT_STR_EQ(run(s, &ss, t0, c1), ints5(0, 5, 2, -1, 3));
    ASSERT_STR_EQ(run(s, &ss, t0, c1), ints5(0, 5, 1, -1, 4));
    ASSERT_STR_EQ(run(s, &ss, t0, c1), ints5(0, 5, 0, -1, 5));
    ASSERT_STR_EQ(run(s, &ss, t0, c1), ints5(1, 5, 0, 1, 5));
    ASSERT_STR_EQ(run(s, &ss, t0 + MS(3000), c1), ints5(0, 5, 2, -1, 3));
    ASSERT_STR_EQ(run(s, &ss, t0 + MS(3100), c1), ints5(0, 5, 1, -1, 4)); /* 3.9 s, ceiling */
    ASSERT_STR_EQ(run(s, &ss, t0 + MS(4000), c1), ints5(0, 5, 1, -1, 4));
    ASSERT_STR_EQ(run(s, &ss, t0 + MS(8000), c1), ints5(0, 5, 4, -1, 1));
    ASSERT_STR_EQ(run(s, &ss, t0 + MS(9500), c1), ints5(0, 5, 4, -1, 1));
    /* quantity 0 peeks */
    ASSERT_STR_EQ(run(s, &ss, t0 + MS(9500), "CL.THROTTLE foo 4 1 1 0"), ints5(0, 5, 4, -1, 1));
    ASSERT_STR_EQ(run(s, &ss, t0 + MS(9500), "CL.THROTTLE foo 4 1 1 2"), ints5(0, 5, 2, -1, 3));
    ASSERT_STR_EQ(run(s, &ss, t0 + MS(9500), "CL.THROTTLE foo 4 1 1 5"), ints5(1, 5, 2, 3, 3));
    rlt__srv_close(s);
}

TEST(cl_throttle_max_burst_zero_allows_one)
{
    rlt__srv *s = open_srv(NULL);
    rlt__session ss;
    rlt__session_init(s, &ss);
    ASSERT_STR_EQ(run(s, &ss, S(5), "CL.THROTTLE k 0 1 10"), ints5(0, 1, 0, -1, 10));
    ASSERT_STR_EQ(run(s, &ss, S(5), "CL.THROTTLE k 0 1 10"), ints5(1, 1, 0, 10, 10));
    ASSERT_STR_EQ(run(s, &ss, S(15), "CL.THROTTLE k 0 1 10"), ints5(0, 1, 0, -1, 10));
    rlt__srv_close(s);
}

TEST(cl_throttle_readme_example)
{
    rlt__srv *s = open_srv(NULL);
    rlt__session ss;
    rlt__session_init(s, &ss);
    ASSERT_STR_EQ(run(s, &ss, S(1), "CL.THROTTLE user123 15 30 60 1"), ints5(0, 16, 15, -1, 2));
    rlt__srv_close(s);
}

TEST(cl_throttle_refuses_bad_numbers)
{
    rlt__srv *s = open_srv(NULL);
    rlt__session ss;
    rlt__session_init(s, &ss);
    const char *bad[] = {"CL.THROTTLE k -1 1 1",
                         "CL.THROTTLE k 1 0 1",
                         "CL.THROTTLE k 1 -5 1",
                         "CL.THROTTLE k 1 1 0",
                         "CL.THROTTLE k 1 1 1 -1",
                         "CL.THROTTLE k 1e309 1 1",
                         "CL.THROTTLE k 0x10 1 1",
                         "CL.THROTTLE k -0 1 1",
                         "CL.THROTTLE k 9223372036854775807 1 1",
                         "CL.THROTTLE k 1 1 9223372036854775807",
                         "CL.THROTTLE k 1 99999999999999999999 1",
                         "CL.THROTTLE k 1 1",
                         "CL.THROTTLE k 1 1 1 1 1",
                         "CL.THROTTLE \"\" 1 1 1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *r = run(s, &ss, S(1), bad[i]);
        if (strncmp(r, "-ERR ", 5) != 0) RLT_FAIL_("%s answered %s", bad[i], r);
    }
    rlt__srv_close(s);
}

TEST(rl_check_reports_decision_in_milliseconds)
{
    rlt__srv *s = open_srv(NULL);
    rlt__session ss;
    rlt__session_init(s, &ss);
    ASSERT_STR_EQ(run(s, &ss, S(1), "RL.CHECK a gcra:2/1s"),
                  "*6\r\n:1\r\n:2\r\n:1\r\n:0\r\n:500\r\n:0\r\n");
    ASSERT_STR_EQ(run(s, &ss, S(1), "RL.CHECK a gcra:2/1s"),
                  "*6\r\n:1\r\n:2\r\n:0\r\n:0\r\n:1000\r\n:0\r\n");
    ASSERT_STR_EQ(run(s, &ss, S(1), "RL.CHECK a gcra:2/1s"),
                  "*6\r\n:0\r\n:2\r\n:0\r\n:500\r\n:1000\r\n:0\r\n");
    /* Half a second later one unit is back; a peek shows it and consumes nothing. */
    ASSERT_STR_EQ(run(s, &ss, S(1) + MS(500), "RL.PEEK a gcra:2/1s"),
                  "*6\r\n:1\r\n:2\r\n:1\r\n:0\r\n:500\r\n:0\r\n");
    ASSERT_STR_EQ(run(s, &ss, S(1) + MS(500), "RL.PEEK a gcra:2/1s"),
                  "*6\r\n:1\r\n:2\r\n:1\r\n:0\r\n:500\r\n:0\r\n");
    ASSERT_STR_EQ(run(s, &ss, S(1), "RL.CHECK a gcra:2/1s 3"),
                  "*6\r\n:0\r\n:2\r\n:0\r\n:-1\r\n:1000\r\n:0\r\n");
    rlt__srv_close(s);
}

TEST(rl_check_uses_named_policies_and_refuses_unknown_ones)
{
    rlt__srv *s = open_srv("policies:\n  api: fixed_window:2/1m\n");
    ASSERT(s != NULL);
    rlt__session ss;
    rlt__session_init(s, &ss);
    ASSERT_STR_EQ(run(s, &ss, S(0), "RL.CHECK u api"),
                  "*6\r\n:1\r\n:2\r\n:1\r\n:0\r\n:60000\r\n:0\r\n");
    ASSERT(strncmp(run(s, &ss, S(0), "RL.CHECK u nope"), "-ERR unknown policy", 19) == 0);
    ASSERT(strncmp(run(s, &ss, S(0), "RL.CHECK u gcra:0/1s"), "-ERR invalid policy", 19) == 0);
    ASSERT(strncmp(run(s, &ss, S(0), "RL.CHECK u gcra:5/-1s"), "-ERR invalid policy", 19) == 0);
    ASSERT(strncmp(run(s, &ss, S(0), "RL.CHECK u api -1"), "-ERR cost", 9) == 0);
    ASSERT(strstr(run(s, &ss, S(0), "RL.POLICY api"), "fixed_window:2/1m") != NULL);
    rlt__srv_close(s);
}

TEST(rl_multi_is_all_or_nothing)
{
    rlt__srv *s = open_srv(NULL);
    rlt__session ss;
    rlt__session_init(s, &ss);
    /* b allows one; a allows many. */
    ASSERT(strncmp(run(s, &ss, S(1), "RL.MULTI a gcra:10/1s 1 b gcra:1/1m 1"), "*7\r\n:1\r\n", 8) ==
           0);
    const char *r = run(s, &ss, S(1), "RL.MULTI a gcra:10/1s 1 b gcra:1/1m 1");
    ASSERT(strncmp(r, "*7\r\n:0\r\n", 8) == 0);
    ASSERT(strstr(r, ":1\r\n") != NULL); /* refused index 1 */
    /* a was charged once only: 9 left before this peek. */
    ASSERT_STR_EQ(run(s, &ss, S(1), "RL.PEEK a gcra:10/1s"),
                  "*6\r\n:1\r\n:10\r\n:9\r\n:0\r\n:100\r\n:0\r\n");
    ASSERT(strncmp(run(s, &ss, S(1), "RL.MULTI a gcra:10/1s"), "-ERR wrong number", 17) == 0);
    rlt__srv_close(s);
}

TEST(rl_reset_forgets_a_key)
{
    rlt__srv *s = open_srv(NULL);
    rlt__session ss;
    rlt__session_init(s, &ss);
    run(s, &ss, S(1), "RL.CHECK r gcra:1/1h");
    ASSERT(strncmp(run(s, &ss, S(1), "RL.CHECK r gcra:1/1h"), "*6\r\n:0", 6) == 0);
    ASSERT_STR_EQ(run(s, &ss, S(1), "RL.RESET r gcra:1/1h"), ":1\r\n");
    ASSERT(strncmp(run(s, &ss, S(1), "RL.CHECK r gcra:1/1h"), "*6\r\n:1", 6) == 0);
    rlt__srv_close(s);
}

TEST(rl_acquire_and_release_bound_concurrency)
{
    rlt__srv *s = open_srv(NULL);
    rlt__session ss;
    rlt__session_init(s, &ss);
    const char *r1 = run(s, &ss, S(1), "RL.ACQUIRE job concurrency:1/30s");
    ASSERT(strncmp(r1, "*5\r\n:1\r\n", 8) == 0);
    char lease[32];
    const char *last = strrchr(r1, ':');
    ASSERT(last != NULL);
    snprintf(lease, sizeof lease, "%.*s", (int)strcspn(last + 1, "\r"), last + 1);
    ASSERT(strncmp(run(s, &ss, S(1), "RL.ACQUIRE job concurrency:1/30s"), "*5\r\n:0\r\n", 8) == 0);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "RL.RELEASE job concurrency:1/30s %s", lease);
    ASSERT_STR_EQ(run(s, &ss, S(1), cmd), ":1\r\n");
    ASSERT_STR_EQ(run(s, &ss, S(1), cmd), ":0\r\n");
    ASSERT(strncmp(run(s, &ss, S(1), "RL.ACQUIRE job concurrency:1/30s"), "*5\r\n:1\r\n", 8) == 0);
    ASSERT(strncmp(run(s, &ss, S(1), "RL.ACQUIRE job gcra:1/1s"), "-ERR", 4) == 0);
    rlt__srv_close(s);
}

TEST(inline_policies_are_capped)
{
    rlt__config *cfg = rlt__config_default();
    cfg->set.snapshot[0] = '\0';
    cfg->set.max_inline_policies = 3;
    rlt__srv *s;
    char err[300];
    ASSERT_EQ(rlt__srv_open(&s, cfg, 0, 0, err, sizeof err), 0);
    rlt__session ss;
    rlt__session_init(s, &ss);
    ASSERT(strncmp(run(s, &ss, S(1), "CL.THROTTLE k 1 1 1"), "*5", 2) == 0);
    ASSERT(strncmp(run(s, &ss, S(1), "CL.THROTTLE k 1 1 2"), "*5", 2) == 0);
    /* The same policy written differently is the same canonical text. */
    ASSERT(strncmp(run(s, &ss, S(1), "RL.CHECK k gcra:1/1s,burst=2"), "*6", 2) == 0);
    ASSERT(strncmp(run(s, &ss, S(1), "RL.CHECK k gcra:1/1000ms,burst=2"), "*6", 2) == 0);
    ASSERT(strncmp(run(s, &ss, S(1), "RL.CHECK k gcra:7/1s"), "*6", 2) == 0);
    ASSERT(strncmp(run(s, &ss, S(1), "RL.CHECK k gcra:8/1s"), "-ERR too many distinct", 22) == 0);
    ASSERT(strncmp(run(s, &ss, S(1), "CL.THROTTLE k 1 1 1"), "*5", 2) == 0);
    rlt__srv_close(s);
}

TEST(auth_is_required_when_a_password_is_set)
{
    rlt__srv *s = open_srv("server:\n  password: s3cret\n");
    ASSERT(s != NULL);
    rlt__session ss;
    rlt__session_init(s, &ss);
    ASSERT(strncmp(run(s, &ss, S(1), "CL.THROTTLE k 1 1 1"), "-NOAUTH", 7) == 0);
    ASSERT(strncmp(run(s, &ss, S(1), "PING"), "-NOAUTH", 7) == 0);
    ASSERT(strncmp(run(s, &ss, S(1), "AUTH wrong"), "-WRONGPASS", 10) == 0);
    ASSERT_STR_EQ(run(s, &ss, S(1), "AUTH s3cret"), "+OK\r\n");
    ASSERT_STR_EQ(run(s, &ss, S(1), "PING"), "+PONG\r\n");
    rlt__srv_close(s);
}

TEST(tenants_cannot_touch_each_others_keys)
{
    rlt__srv *s = open_srv("tenants:\n  - name: a\n    password: pa\n  - name: b\n"
                           "    password: pb\n");
    ASSERT(s != NULL);
    rlt__session sa, sb;
    rlt__session_init(s, &sa);
    rlt__session_init(s, &sb);
    ASSERT_STR_EQ(run(s, &sa, S(1), "AUTH pa"), "+OK\r\n");
    ASSERT_STR_EQ(run(s, &sb, S(1), "AUTH b pb"), "+OK\r\n");
    ASSERT(strncmp(run(s, &sa, S(1), "CL.THROTTLE k 0 1 60"), "*5\r\n:0", 6) == 0);
    ASSERT(strncmp(run(s, &sa, S(1), "CL.THROTTLE k 0 1 60"), "*5\r\n:1", 6) == 0);
    /* Same key name, other tenant: a separate limiter. */
    ASSERT(strncmp(run(s, &sb, S(1), "CL.THROTTLE k 0 1 60"), "*5\r\n:0", 6) == 0);
    /* Tenant a cannot reach b's key by writing b's prefix. */
    ASSERT(strncmp(run(s, &sa, S(1), "CL.THROTTLE b:k 0 1 60"), "*5\r\n:0", 6) == 0);
    ASSERT(strncmp(run(s, &sb, S(1), "CL.THROTTLE k 0 1 60"), "*5\r\n:1", 6) == 0);
    rlt__srv_close(s);
}

TEST(client_tool_commands_get_harmless_answers)
{
    rlt__srv *s = open_srv(NULL);
    rlt__session ss;
    rlt__session_init(s, &ss);
    ASSERT_STR_EQ(run(s, &ss, 0, "PING"), "+PONG\r\n");
    ASSERT_STR_EQ(run(s, &ss, 0, "PING hi"), "$2\r\nhi\r\n");
    ASSERT_STR_EQ(run(s, &ss, 0, "COMMAND DOCS"), "*0\r\n");
    ASSERT_STR_EQ(run(s, &ss, 0, "CLIENT SETINFO lib-name x"), "+OK\r\n");
    ASSERT(strncmp(run(s, &ss, 0, "HELLO"), "*14\r\n", 5) == 0);
    ASSERT(strncmp(run(s, &ss, 0, "HELLO 4"), "-NOPROTO", 8) == 0);
    /* RESP3: HELLO answers a map, and nulls are "_". */
    ASSERT(strncmp(run(s, &ss, 0, "HELLO 3"), "%7\r\n$6\r\nserver\r\n", 16) == 0);
    ASSERT_STR_EQ(run(s, &ss, 0, "CLIENT GETNAME"), "_\r\n");
    ASSERT_STR_EQ(run(s, &ss, 0, "CLIENT SETNAME app1"), "+OK\r\n");
    ASSERT_STR_EQ(run(s, &ss, 0, "CLIENT GETNAME"), "$4\r\napp1\r\n");
    ASSERT(strncmp(run(s, &ss, 0, "CLIENT SETNAME a b"), "-ERR wrong number", 17) == 0);
    ASSERT_STR_EQ(run(s, &ss, 0, "CONFIG GET appendonly"), "%1\r\n$10\r\nappendonly\r\n$2\r\nno\r\n");
    ASSERT(strncmp(run(s, &ss, 0, "HELLO 2"), "*14\r\n", 5) == 0);
    ASSERT_STR_EQ(run(s, &ss, 0, "CONFIG GET save"), "*2\r\n$4\r\nsave\r\n$0\r\n\r\n");
    ASSERT(strncmp(run(s, &ss, 0, "INFO"), "$", 1) == 0);
    ASSERT(strncmp(run(s, &ss, 0, "INFO stats"), "$", 1) == 0);
    ASSERT(strstr(run(s, &ss, 0, "INFO stats"), "# Stats\r\n") != NULL);
    ASSERT(strstr(run(s, &ss, 0, "INFO stats"), "# Server") == NULL);
    ASSERT(strstr(run(s, &ss, 0, "COMMAND INFO rl.check nosuch"), "rl.check") != NULL);
    ASSERT(strncmp(run(s, &ss, 0, "GET x"), "-ERR unknown command 'GET'", 26) == 0);
    ASSERT(!ss.close);
    ASSERT_STR_EQ(run(s, &ss, 0, "QUIT"), "+OK\r\n");
    ASSERT(ss.close);
    rlt__srv_close(s);
}

TEST(shadow_mode_counts_but_never_denies)
{
    rlt__srv *s = open_srv("policies:\n  soft:\n    policy: fixed_window:1/1h\n"
                           "    shadow_mode: true\n");
    ASSERT(s != NULL);
    rlt__session ss;
    rlt__session_init(s, &ss);
    ASSERT(strncmp(run(s, &ss, S(1), "RL.CHECK u soft"), "*6\r\n:1", 6) == 0);
    ASSERT(strncmp(run(s, &ss, S(1), "RL.CHECK u soft"), "*6\r\n:1", 6) == 0);
    rlt__obuf o = {0};
    rlt__report_prometheus(s, &o);
    rlt__obuf_put(&o, "", 1);
    ASSERT(strstr(o.data, "outcome=\"shadow_denied\"} 1") != NULL);
    rlt__obuf_free(&o);
    rlt__srv_close(s);
}

typedef struct count_arg {
    rlt__srv *s;
    unsigned slot; /* 0: the shared slot (not bound) */
} count_arg;

static void *count_worker(void *arg)
{
    count_arg *a = arg;
    if (a->slot != 0) rlt__metrics_bind_thread(a->slot);
    rlt__session ss;
    rlt__session_init(a->s, &ss);
    for (int i = 0; i < 5000; i++) {
        rlt_decision d;
        rlt__decide(a->s, rlt__srv_config(a->s)->named[0].policy_id, false, "k", 1, S(1), 1, &d);
    }
    return NULL;
}

TEST(decision_counters_are_exact_with_worker_slots_and_the_shared_slot)
{
    /* Workers 1 and 2 write their own slots (relaxed load + store); two unbound threads share
     * slot 0 (atomic add): every decision is counted once. */
    rlt__srv *s = open_srv(NULL);
    ASSERT(s != NULL);
    pthread_t th[4];
    count_arg args[4] = {{s, 1}, {s, 2}, {s, 0}, {s, 0}};
    for (int i = 0; i < 4; i++)
        ASSERT_EQ(pthread_create(&th[i], NULL, count_worker, &args[i]), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    rlt__obuf o = {0};
    rlt__report_info(s, &o);
    rlt__obuf_put(&o, "", 1);
    const char *p = strstr(o.data, "decisions_allowed:");
    const char *q = strstr(o.data, "decisions_denied:");
    ASSERT(p != NULL && q != NULL);
    ASSERT_EQ(strtoll(p + 18, NULL, 10) + strtoll(q + 17, NULL, 10), 20000);
    rlt__obuf_free(&o);
    rlt__srv_close(s);
}

TEST(errors_name_what_is_out_of_range_or_wrong)
{
    rlt__srv *s = open_srv(NULL);
    ASSERT(s != NULL);
    rlt__session ss;
    rlt__session_init(s, &ss);
    /* count/period so fine that GCRA's arithmetic would overflow: the daemon runs them as
     * the equivalent token bucket (docs/server.md "Time"), so they are answered. */
    const char *r = run(s, &ss, S(1000), "CL.THROTTLE k 15 9223372036854775807 60 1");
    ASSERT_STR_EQ(r, ints5(0, 16, 15, -1, 1));
    r = run(s, &ss, S(1000), "RL.CHECK k gcra:1000000007/1s");
    ASSERT(strncmp(r, "*6\r\n:1\r\n", 8) == 0);
    r = run(s, &ss, S(1000), "RL.CHECK k concurrency:10/30s 2");
    ASSERT(strncmp(r, "-ERR cost must be 0 or 1 for a concurrency policy", 49) == 0);
    r = run(s, &ss, S(1000), "RL.RELEASE k gcra:1/1s 5");
    ASSERT(strncmp(r, "-ERR RL.RELEASE needs a concurrency policy", 42) == 0);
    r = run(s, &ss, S(1000), "RL.MULTI k gcra:1/1s 1 j gcra:1000000007/1s 1");
    ASSERT(strncmp(r, "*", 1) == 0);
    rlt__srv_close(s);
}

TEST(cl_throttle_with_a_fine_rate_works_late_in_the_utc_day_as_gcra_would)
{
    /* N = 1000003 per 3600 s reduces to scale_ 1000003: GCRA's |now| x scale_ overflows int64
     * after 02:33 of the daemon's clock (ns since UTC midnight).  The daemon runs it as the
     * token bucket of the same numbers, which must decide exactly as GCRA does. */
    rlt__srv *s = open_srv(NULL);
    ASSERT(s != NULL);
    rlt__session ss;
    rlt__session_init(s, &ss);
    rlt_ns late = S(23 * 3600 + 59 * 60); /* 23:59 UTC, and 10 years of uptime beyond */
    ASSERT_STR_EQ(run(s, &ss, late, "CL.THROTTLE k 10 1000003 3600"), ints5(0, 11, 10, -1, 1));
    rlt_ns decade = late + S(10LL * 31557600);
    ASSERT_STR_EQ(run(s, &ss, decade, "CL.THROTTLE k2 10 1000003 3600"), ints5(0, 11, 10, -1, 1));

    rlt_policy g;
    ASSERT_EQ(rlt_policy_init(&g, RLT_GCRA, 1000003, S(3600), 11, 0, 0), RLT_OK);
    ASSERT(rlt__srv_gcra_needs_bucket(&g));
    char err[256];
    int id = -1;
    ASSERT_EQ(rlt__srv_intern(s, &g, NULL, &id, err, sizeof err), RLT_OK);
    rlt_policy run_p;
    ASSERT_EQ(rlt__registry_policy(&s->reg, id, &run_p), RLT_OK);
    ASSERT_EQ(run_p.algo, RLT_TOKEN_BUCKET);
    ASSERT_EQ(run_p.limit, 1000003);
    ASSERT_EQ(run_p.period, S(3600));
    ASSERT_EQ(run_p.burst, 11);

    /* The same trace: the daemon late in the day vs GCRA itself on a small clock. */
    unsigned char state[256] = {0};
    ASSERT(rlt_state_size(&g) <= sizeof state);
    uint64_t x = 12345;
    rlt_ns small = S(1), big = late;
    for (int i = 0; i < 3000; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        rlt_ns step = (rlt_ns)((x >> 33) % 9000000); /* 0..9 ms: around the 3.6 ms emission */
        int64_t cost = (int64_t)((x >> 20) % 4);     /* 0..3, 0 peeks */
        small += step;
        big += step;
        rlt_decision want, got;
        ASSERT_EQ(rlt_decide(&g, state, small, cost, &want), RLT_OK);
        ASSERT_EQ(rlt__decide(s, id, false, "trace", 5, big, cost, &got), RLT_OK);
        ASSERT_EQ(got.allowed, want.allowed);
        ASSERT_EQ(got.limit, want.limit);
        ASSERT_EQ(got.remaining, want.remaining);
        ASSERT_EQ(got.retry_after, want.retry_after);
        ASSERT_EQ(got.reset_after, want.reset_after);
    }
    /* A coarse GCRA stays GCRA. */
    ASSERT_EQ(rlt_policy_init(&g, RLT_GCRA, 100, S(1), 0, 0, 0), RLT_OK);
    ASSERT(!rlt__srv_gcra_needs_bucket(&g));
    rlt__srv_close(s);
}

TEST(an_inline_policy_that_can_never_decide_is_refused_when_parsed)
{
    rlt__srv *s = open_srv(NULL);
    ASSERT(s != NULL);
    rlt__session ss;
    rlt__session_init(s, &ss);
    const char *r = run(s, &ss, S(10), "RL.CHECK k gcra:1/9223372036854775807ns");
    ASSERT(strncmp(r, "-ERR policy can never decide: its arithmetic overflows", 54) == 0);
    /* A policy that decides is still fine right next to it. */
    ASSERT(run(s, &ss, S(10), "RL.CHECK k gcra:1/1h")[0] == '*');
    rlt__srv_close(s);
    /* The same policy named in a config is refused at start (and so by --check-config). */
    rlt__config *cfg = NULL;
    char err[600];
    const char *y = "policies:\n  never: gcra:1/9223372036854775807ns\n";
    ASSERT_EQ(rlt__config_parse(y, strlen(y), "t.yaml", &cfg, err, sizeof err), RLT_OK);
    ASSERT_EQ(rlt__srv_check_config(cfg, err, sizeof err), RLT_EINVAL);
    ASSERT(strstr(err, "policy 'never' can never decide") != NULL);
    rlt__config_free(cfg);
}

TEST(an_inline_policy_larger_than_the_per_key_ceiling_needs_a_name)
{
    rlt__srv *s = open_srv(NULL);
    ASSERT(s != NULL);
    rlt__session ss;
    rlt__session_init(s, &ss);
    const char *r = run(s, &ss, S(10), "RL.CHECK k sliding_log:1048576/1h");
    ASSERT(strncmp(r, "-ERR an inline policy keeps at most 4096 bytes of state per key", 63) == 0);
    ASSERT(strstr(r, "name it in the config's policies") != NULL);
    ASSERT(run(s, &ss, S(10), "RL.CHECK k sliding_log:100/1h")[0] == '*');
    rlt__srv_close(s);
}

TEST(a_tenant_password_equal_to_another_secret_is_refused)
{
    /* The server password as a tenant's: refused before the store changes (start, reload and
     * --check-config run this). */
    const char *y = "server:\n  password: same\ntenants:\n  - {name: a, password: same}\n";
    rlt__config *cfg = NULL;
    char err[600];
    ASSERT_EQ(rlt__config_parse(y, strlen(y), "t.yaml", &cfg, err, sizeof err), RLT_OK);
    ASSERT_EQ(rlt__srv_check_config(cfg, err, sizeof err), RLT_EINVAL);
    ASSERT_STR_EQ(err, "tenant 'a': its password is the server password (every secret must be "
                       "distinct)");
    rlt__config_free(cfg);
    /* Two tenants with one password are refused by the reader itself. */
    y = "tenants:\n  - {name: a, password: p1}\n  - {name: b, password: p1}\n";
    ASSERT_EQ(rlt__config_parse(y, strlen(y), "t.yaml", &cfg, err, sizeof err), RLT_EPARSE);
    ASSERT(strstr(err, "two tenants share a password") != NULL);
}

TEST(multi_exec_runs_the_queued_commands_in_order)
{
    rlt__srv *s = open_srv(NULL);
    rlt__session ss;
    rlt__session_init(s, &ss);
    ASSERT_STR_EQ(run(s, &ss, S(1), "EXEC"), "-ERR EXEC without MULTI\r\n");
    ASSERT_STR_EQ(run(s, &ss, S(1), "MULTI"), "+OK\r\n");
    ASSERT_STR_EQ(run(s, &ss, S(1), "MULTI"), "-ERR MULTI calls can not be nested\r\n");
    ASSERT_STR_EQ(run(s, &ss, S(1), "CL.THROTTLE k 0 1 60"), "+QUEUED\r\n");
    ASSERT_STR_EQ(run(s, &ss, S(1), "CL.THROTTLE k 0 1 60"), "+QUEUED\r\n");
    ASSERT_STR_EQ(run(s, &ss, S(1), "PING"), "+QUEUED\r\n");
    /* One array: allowed, then limited, then PONG. */
    ASSERT_STR_EQ(run(s, &ss, S(1), "EXEC"),
                  "*3\r\n*5\r\n:0\r\n:1\r\n:0\r\n:-1\r\n:60\r\n"
                  "*5\r\n:1\r\n:1\r\n:0\r\n:60\r\n:60\r\n+PONG\r\n");
    /* DISCARD drops the queue; WATCH is refused with a reason. */
    ASSERT_STR_EQ(run(s, &ss, S(1), "MULTI"), "+OK\r\n");
    ASSERT_STR_EQ(run(s, &ss, S(1), "CL.THROTTLE j 0 1 60"), "+QUEUED\r\n");
    ASSERT_STR_EQ(run(s, &ss, S(1), "DISCARD"), "+OK\r\n");
    ASSERT(strncmp(run(s, &ss, S(1), "CL.THROTTLE j 0 1 60"), "*5\r\n:0\r\n", 8) == 0);
    ASSERT(strncmp(run(s, &ss, S(1), "WATCH k"), "-ERR WATCH is not supported", 27) == 0);
    rlt__session_free(&ss);
    rlt__srv_close(s);
}

TEST(one_tenant_cannot_fill_the_inline_policies_of_the_others)
{
    /* 30 slots, 2 tenants: each may hold 10; the admin may use any. */
    rlt__srv *s = open_srv("server:\n  max_inline_policies: 30\n  password: admin\n"
                           "tenants:\n  - {name: a, password: pa}\n  - {name: b, password: pb}\n");
    ASSERT(s != NULL);
    rlt__session sa, sb, sx;
    rlt__session_init(s, &sa);
    rlt__session_init(s, &sb);
    rlt__session_init(s, &sx);
    ASSERT_STR_EQ(run(s, &sa, S(1), "AUTH pa"), "+OK\r\n");
    ASSERT_STR_EQ(run(s, &sb, S(1), "AUTH pb"), "+OK\r\n");
    ASSERT_STR_EQ(run(s, &sx, S(1), "AUTH admin"), "+OK\r\n");
    char line[96];
    for (int i = 1; i <= 10; i++) {
        snprintf(line, sizeof line, "CL.THROTTLE k 1 %d 60", i);
        ASSERT(strncmp(run(s, &sa, S(1), line), "*5", 2) == 0);
    }
    ASSERT(strncmp(run(s, &sa, S(1), "CL.THROTTLE k 1 11 60"),
                   "-ERR this tenant has 10 inline policies in use, its quota", 57) == 0);
    /* The other tenant and the admin are not locked out. */
    ASSERT(strncmp(run(s, &sb, S(1), "CL.THROTTLE k 1 11 60"), "*5", 2) == 0);
    for (int i = 100; i < 115; i++) {
        snprintf(line, sizeof line, "RL.CHECK k gcra:%d/1m", i);
        ASSERT(strncmp(run(s, &sx, S(1), line), "*6", 2) == 0);
    }
    /* A text another owner already interned is shared, not counted again. */
    ASSERT(strncmp(run(s, &sa, S(1), "CL.THROTTLE q 1 11 60"), "*5", 2) == 0);
    rlt__srv_close(s);
}

TEST(idle_inline_policies_are_reused_and_busy_ones_are_not)
{
    rlt__srv *s = open_srv("server:\n  max_inline_policies: 3\n");
    ASSERT(s != NULL);
    rlt__session ss;
    rlt__session_init(s, &ss);
    /* Horizon of gcra:1/1s: 2 x 1 s + 1 s. */
    ASSERT(strncmp(run(s, &ss, S(10), "RL.CHECK k gcra:1/1s"), "*6\r\n:1", 6) == 0);
    ASSERT(strncmp(run(s, &ss, S(10), "RL.CHECK k gcra:2/1s"), "*6\r\n:1", 6) == 0);
    ASSERT(strncmp(run(s, &ss, S(10), "RL.CHECK k gcra:3/1s"), "*6\r\n:1", 6) == 0);
    /* All three in use: no room. */
    ASSERT(strncmp(run(s, &ss, S(11), "RL.CHECK k gcra:4/1s"),
                   "-ERR too many distinct inline policies in use (max 3)", 53) == 0);
    /* Later, gcra:2/1s and gcra:3/1s are idle past their horizon; gcra:1/1s was used again. */
    ASSERT(strncmp(run(s, &ss, S(13), "RL.CHECK k gcra:1/1s"), "*6\r\n:1", 6) == 0);
    ASSERT(strncmp(run(s, &ss, S(14), "RL.CHECK k gcra:4/1s"), "*6\r\n:1", 6) == 0);
    ASSERT(strncmp(run(s, &ss, S(14), "RL.CHECK k gcra:5/1s"), "*6\r\n:1", 6) == 0);
    /* gcra:1/1s kept its slot and its state: its second request within the second is denied. */
    ASSERT(strncmp(run(s, &ss, S(14), "RL.CHECK k gcra:1/1s"), "*6\r\n:1", 6) == 0);
    ASSERT(strncmp(run(s, &ss, S(14), "RL.CHECK k gcra:1/1s"), "*6\r\n:0", 6) == 0);
    /* And the reused slots decide as their new policies. */
    ASSERT_STR_EQ(run(s, &ss, S(14), "RL.POLICY gcra:5/1s"), "$9\r\ngcra:5/1s\r\n");
    rlt__srv_close(s);
}

TEST(busy_inline_policies_go_least_recently_used_first_with_their_keys_past_a_grace)
{
    rlt__srv *s = open_srv("server:\n  max_inline_policies: 2\n");
    ASSERT(s != NULL);
    rlt__session ss;
    rlt__session_init(s, &ss);
    /* Two slots whose keys hold state for a day. */
    ASSERT(strncmp(run(s, &ss, S(10), "RL.CHECK k gcra:1/1d"), "*6\r\n:1", 6) == 0);
    ASSERT(strncmp(run(s, &ss, S(10) + 1000, "RL.CHECK k gcra:2/1d"), "*6\r\n:1", 6) == 0);
    /* Both used within the last second: a request resolved this turn keeps its policy. */
    ASSERT(strncmp(run(s, &ss, S(11), "RL.CHECK k gcra:3/1d"),
                   "-ERR too many distinct inline policies in use (max 2)", 53) == 0);
    /* Later, the least recently used (gcra:1/1d) goes with its key's state. */
    ASSERT(strncmp(run(s, &ss, S(20), "RL.CHECK k gcra:3/1d"), "*6\r\n:1", 6) == 0);
    ASSERT(strncmp(run(s, &ss, S(20), "RL.CHECK k gcra:2/1d"), "*6\r\n:1", 6) == 0);
    ASSERT(strncmp(run(s, &ss, S(20), "RL.CHECK k gcra:2/1d"), "*6\r\n:0", 6) == 0); /* kept */
    ASSERT(strncmp(run(s, &ss, S(30), "RL.CHECK k gcra:1/1d"), "*6\r\n:1", 6) == 0); /* fresh */
    rlt__srv_close(s);
    /* A store that refuses rather than evict keys refuses here too. */
    s = open_srv("server:\n  max_inline_policies: 1\n  fail_closed: true\n");
    ASSERT(s != NULL);
    rlt__session_init(s, &ss);
    ASSERT(strncmp(run(s, &ss, S(10), "RL.CHECK k gcra:1/1d"), "*6\r\n:1", 6) == 0);
    ASSERT(strncmp(run(s, &ss, S(20), "RL.CHECK k gcra:2/1d"), "-ERR too many distinct", 22) == 0);
    rlt__srv_close(s);
}

TEST(inline_policy_replacements_wait_for_an_idle_slot)
{
    rlt__srv *s = open_srv("server:\n  max_inline_policies: 1\n");
    ASSERT(s != NULL);
    rlt__session ss;
    rlt__session_init(s, &ss);
    char line[96];
    int replaced = 0, refused = 0;
    for (int i = 1; i <= 20; i++) {
        /* Each new text at a time when the previous one is long idle (horizon 3 s). */
        snprintf(line, sizeof line, "RL.CHECK k gcra:%d/1s", i);
        const char *r = run(s, &ss, S(1000) + i, line);
        if (r[0] == '*') replaced++;
        if (strncmp(r, "-ERR inline policies change too fast", 36) == 0) refused++;
        run(s, &ss, S(1000) + i, "PING");
    }
    ASSERT_EQ(replaced, 0 + 1); /* the first takes the free slot; the rest are within 3 s */
    (void)refused;
    /* One a second apart, past each horizon: every one replaces the previous. */
    replaced = refused = 0;
    for (int i = 0; i < 30; i++) {
        snprintf(line, sizeof line, "RL.CHECK k gcra:%d/1s", 100 + i);
        const char *r = run(s, &ss, S(2000 + 4 * i), line);
        if (r[0] == '*') replaced++;
    }
    ASSERT_EQ(replaced, 30);
    rlt__srv_close(s);
}

/* Sends `n` new texts (gcra:*next/1s, then the next ...) on ss at `now`; returns how many were
 * interned, and checks that every refusal names `whose` budget. */
static int new_texts(rlt__srv *s, rlt__session *ss, rlt_ns now, int *next, int n, const char *whose,
                     bool *named)
{
    char line[96];
    int replaced = 0;
    for (int i = 0; i < n; i++) {
        snprintf(line, sizeof line, "RL.CHECK k gcra:%d/1s", (*next)++);
        const char *r = run(s, ss, now, line);
        if (r[0] == '*')
            replaced++;
        else if (strncmp(r, "-ERR inline policies change too fast", 36) != 0 ||
                 strstr(r, whose) == NULL)
            *named = false;
    }
    return replaced;
}

/* A server whose `max` slots one session filled at 1 s with texts idle by 100 s. */
static rlt__srv *full_of_idle_texts(const char *yaml, int max, rlt__session *ss)
{
    rlt__srv *s = open_srv(yaml);
    if (s == NULL) return NULL;
    rlt__session_init(s, ss);
    int next = 1;
    bool named = true;
    if (new_texts(s, ss, S(1), &next, max, "", &named) != max) {
        rlt__srv_close(s);
        return NULL;
    }
    return s;
}

TEST(inline_policy_replacements_are_budgeted_per_connection_address_tenant_and_in_all)
{
    /* 60 idle candidates at one instant: a connection replaces its burst (10), then is
     * refused naming its own budget; other connections go on until all clients' burst (30)
     * is spent.  Free slots cost nothing (the 60 above). */
    rlt__session ss, c[4];
    rlt__srv *s = full_of_idle_texts("server:\n  max_inline_policies: 60\n", 60, &ss);
    ASSERT(s != NULL);
    int next = 500;
    bool named = true;
    for (int i = 0; i < 4; i++) {
        rlt__session_init(s, &c[i]);
        int got = new_texts(s, &c[i], S(100), &next, 15,
                            i < 3 ? "(this connection's new texts replace more than 2 per second)"
                                  : "(all clients' new texts replace more than 10 per second)",
                            &named);
        ASSERT_EQ(got, i < 3 ? RLT__INLINE_CLIENT_BURST : 0);
        ASSERT(named);
    }
    /* A refused text charged nothing: a second later the global budget holds 10, and a
     * connection that was refused gets the 2 its own refilled. */
    ASSERT_EQ(new_texts(s, &c[0], S(101), &next, 5, "this connection's", &named), 2);
    ASSERT(named);
    rlt__srv_close(s);

    /* One address, several connections: 30 at once, then 5 a second for the address while
     * all clients together get 10. */
    s = full_of_idle_texts("server:\n  max_inline_policies: 60\n", 60, &ss);
    ASSERT(s != NULL);
    for (int i = 0; i < 4; i++) {
        rlt__session_init(s, &c[i]);
        c[i].addr = i < 3 ? 77 : 79;
        ASSERT_EQ(new_texts(s, &c[i], S(100), &next, 10, "", &named), i < 3 ? 10 : 0);
    }
    rlt__session d;
    rlt__session_init(s, &d);
    d.addr = 77;
    ASSERT_EQ(new_texts(s, &d, S(101), &next, 8, "this address's", &named), 5);
    ASSERT(named);
    ASSERT_EQ(new_texts(s, &c[3], S(101), &next, 8, "all clients'", &named), 5);
    ASSERT(named);
    rlt__srv_close(s);

    /* One tenant, two connections: the second finds the tenant's burst spent. */
    s = full_of_idle_texts("server:\n  max_inline_policies: 60\n  password: admin\n"
                           "tenants:\n  - {name: a, password: pa}\n",
                           0, &ss);
    ASSERT(s != NULL);
    rlt__session_init(s, &c[0]);
    rlt__session_init(s, &c[1]);
    ASSERT_STR_EQ(run(s, &c[0], S(1), "AUTH pa"), "+OK\r\n");
    ASSERT_STR_EQ(run(s, &c[1], S(1), "AUTH pa"), "+OK\r\n");
    next = 1;
    ASSERT_EQ(new_texts(s, &c[0], S(1), &next, 30, "", &named), 30); /* its quota: free slots */
    ASSERT_EQ(new_texts(s, &c[0], S(100), &next, 15, "this connection's", &named), 10);
    ASSERT(named);
    ASSERT_EQ(new_texts(s, &c[1], S(100), &next, 5, "this tenant's", &named), 0);
    ASSERT(named);
    rlt__srv_close(s);
}
