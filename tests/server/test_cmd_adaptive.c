/* An adaptive concurrency limit at ratelimitd's RESP door, without sockets: RL.ACQUIRE admits
 * the learned limit, RL.RELEASE's LATENCY and OUTCOME move it (RL.PEEK reports it), and bad
 * reports are clear errors that release nothing. */
#include "test.h"

#include "server/config/config.h"
#include "server/http/httpin.h"
#include "server/request/request.h"
#include "server/request/srv.h"
#include "server/resp/cmd.h"

#include "cmd_run.h"

#define S(x) ((rlt_ns)(x)*RLT_NS_PER_S)
#define POL "concurrency:50/1h,adaptive=aimd,min=2,init=4"

static rlt__srv *open_srv(void)
{
    rlt__config *cfg = rlt__config_default();
    char err[600];
    cfg->set.snapshot[0] = '\0';
    rlt__srv *s = NULL;
    if (rlt__srv_open(&s, cfg, 0, 0, err, sizeof err) < 0) fprintf(stderr, "%s\n", err);
    return s;
}

#define run rlt_test_cmd_run

/* The lease of an admitted RL.ACQUIRE reply, 0 when refused. */
static long long lease_of(const char *reply)
{
    long long v[5];
    if (sscanf(reply, "*5\r\n:%lld\r\n:%lld\r\n:%lld\r\n:%lld\r\n:%lld", &v[0], &v[1], &v[2],
               &v[3], &v[4]) != 5)
        return -1;
    return v[0] ? v[4] : 0;
}

static long long peek_limit(rlt__srv *s, rlt__session *ss, rlt_ns now)
{
    long long a, l;
    if (sscanf(run(s, ss, now, "RL.PEEK api " POL), "*6\r\n:%lld\r\n:%lld", &a, &l) != 2) return -1;
    return l;
}

TEST(releases_with_latency_move_the_limit_and_peek_reports_it)
{
    rlt__srv *s = open_srv();
    ASSERT(s != NULL);
    rlt__session ss;
    rlt__session_init(s, &ss);
    long long held[50];
    int n = 0;
    for (int i = 0; i < 10; i++) {
        long long l = lease_of(run(s, &ss, S(1), "RL.ACQUIRE api " POL));
        ASSERT(l >= 0);
        if (l > 0) held[n++] = l;
    }
    ASSERT_EQ(n, 4); /* init=4, not the 50 slots */
    ASSERT_EQ(peek_limit(s, &ss, S(1)), 4);
    char line[256];
    for (int round = 0; round < 30; round++) {
        for (int i = 0; i < n; i++) {
            snprintf(line, sizeof line, "RL.RELEASE api " POL " %lld LATENCY 20 OUTCOME success",
                     held[i]);
            ASSERT_STR_EQ(run(s, &ss, S(2), line), ":1\r\n");
        }
        n = 0;
        for (int i = 0; i < 50; i++) {
            long long l = lease_of(run(s, &ss, S(2), "RL.ACQUIRE api " POL));
            if (l > 0) held[n++] = l;
        }
    }
    long long grown = peek_limit(s, &ss, S(2));
    ASSERT(grown > 10);
    ASSERT_EQ(grown, n);
    /* a drop cuts it */
    snprintf(line, sizeof line, "RL.RELEASE api " POL " %lld LATENCY 850us OUTCOME dropped",
             held[--n]);
    ASSERT_STR_EQ(run(s, &ss, S(3), line), ":1\r\n");
    ASSERT(peek_limit(s, &ss, S(3)) < grown);
    /* a plain release teaches nothing and still works */
    long long before = peek_limit(s, &ss, S(3));
    snprintf(line, sizeof line, "RL.RELEASE api " POL " %lld", held[--n]);
    ASSERT_STR_EQ(run(s, &ss, S(3), line), ":1\r\n");
    ASSERT_EQ(peek_limit(s, &ss, S(3)), before);

    /* bad reports: clear errors, the lease still held */
    const char *bad[] = {"LATENCY -5", "LATENCY 2h", "LATENCY x", "OUTCOME dropped",
                         "LATENCY 5 OUTCOME maybe", "LATENCY 5 LATENCY 6", "LATENCY"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(line, sizeof line, "RL.RELEASE api " POL " %lld %s", held[0], bad[i]);
        const char *r = run(s, &ss, S(3), line);
        ASSERT(strncmp(r, "-ERR", 4) == 0);
    }
    snprintf(line, sizeof line, "RL.RELEASE api " POL " %lld LATENCY 5", held[0]);
    ASSERT_STR_EQ(run(s, &ss, S(3), line), ":1\r\n"); /* it was still held */
    ASSERT_STR_EQ(run(s, &ss, S(3), line), ":0\r\n"); /* and now it is not */
    ASSERT_EQ(peek_limit(s, &ss, S(3)), before);      /* the unknown lease taught nothing */
    rlt__srv_close(s);
}

TEST(a_class_without_reserve_takes_the_policys_reserve)
{
    rlt__srv *s = open_srv();
    ASSERT(s != NULL);
    rlt__session ss;
    rlt__session_init(s, &ss);
    int shed = 0, plain = 0;
    for (int i = 0; i < 20; i++)
        shed += lease_of(run(s, &ss, S(1), "RL.ACQUIRE k concurrency:10/30s,reserve=20% CLASS "
                                           "sheddable")) > 0;
    ASSERT_EQ(shed, 6); /* 10 - 2 x 20 % */
    /* no CLASS: not classed, the whole limit; an explicit RESERVE overrides the policy's */
    for (int i = 0; i < 20; i++)
        plain += lease_of(run(s, &ss, S(1), "RL.ACQUIRE k concurrency:10/30s,reserve=20%")) > 0;
    ASSERT_EQ(plain, 4);
    ASSERT_EQ(lease_of(run(s, &ss, S(1), "RL.ACQUIRE k2 concurrency:10/30s,reserve=20% CLASS "
                                         "sheddable RESERVE 100")),
              0);
    rlt__srv_close(s);
}

TEST(http_class_without_class_reserve_asks_for_the_policys)
{
    rlt__check_req r;
    char err[300];
    const char *q = "key=u&policy=gcra:10/1s,reserve=20%25&class=sheddable";
    ASSERT_EQ(rlt__check_parse(q, strlen(q), &r, err, sizeof err), RLT_OK);
    ASSERT_EQ(r.class_reserve, -1);
    q = "key=u&policy=gcra:10/1s,reserve=20%25";
    ASSERT_EQ(rlt__check_parse(q, strlen(q), &r, err, sizeof err), RLT_OK);
    ASSERT_EQ(r.class_reserve, 0);
}

TEST(bad_adaptive_policies_are_refused_with_the_reason)
{
    rlt__srv *s = open_srv();
    ASSERT(s != NULL);
    rlt__session ss;
    rlt__session_init(s, &ss);
    const char *r = run(s, &ss, S(1), "RL.ACQUIRE api concurrency:10,adaptive=vegas,min=20");
    ASSERT(strncmp(r, "-ERR", 4) == 0);
    ASSERT(strstr(r, "min") != NULL);
    r = run(s, &ss, S(1), "RL.CHECK api gcra:10/s,adaptive=aimd");
    ASSERT(strncmp(r, "-ERR", 4) == 0);
    rlt__srv_close(s);
}
