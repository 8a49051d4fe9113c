/* Priority classes at ratelimitd's doors, without sockets: RL.ACQUIRE through the command
 * layer (sheddable requests stop at their ceiling while critical ones take the reserve, a
 * class's refusal holds no slot, bad CLASS and RESERVE arguments are clear errors that change
 * nothing), and /v1/check's class= and class_reserve= parameters as parsed. */
#include "test.h"

#include "server/config/config.h"
#include "server/http/httpin.h"
#include "server/request/request.h"
#include "server/request/srv.h"
#include "server/resp/cmd.h"

#include "cmd_run.h"

#define S(x) ((rlt_ns)(x)*RLT_NS_PER_S)

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

static bool admitted(const char *reply)
{
    return strncmp(reply, "*5\r\n:1\r\n", 8) == 0;
}

TEST(sheddable_acquires_stop_at_their_ceiling_and_critical_takes_the_reserve)
{
    rlt__srv *s = open_srv();
    ASSERT(s != NULL);
    rlt__session ss;
    rlt__session_init(s, &ss);
    int shed = 0, def = 0, crit = 0;
    for (int i = 0; i < 20; i++)
        shed += admitted(run(s, &ss, S(1),
                             "RL.ACQUIRE api concurrency:10/30s CLASS sheddable "
                             "RESERVE 20"));
    for (int i = 0; i < 20; i++)
        def += admitted(run(s, &ss, S(1), "RL.ACQUIRE api concurrency:10/30s RESERVE 20"));
    for (int i = 0; i < 20; i++)
        crit += admitted(run(s, &ss, S(1),
                             "rl.acquire api concurrency:10/30s reserve 20 "
                             "class critical"));
    ASSERT_EQ(shed, 6); /* 10 - 2 x 20 % */
    ASSERT_EQ(def, 2);  /* up to 8, the default class's ceiling */
    ASSERT_EQ(crit, 2); /* the last two slots */
    /* a refusal by the class reports the class's ceiling as the limit */
    ASSERT(strncmp(run(s, &ss, S(1),
                       "RL.ACQUIRE api concurrency:10/30s CLASS sheddable "
                       "RESERVE 20"),
                   "*5\r\n:0\r\n:6\r\n:0\r\n", 16) == 0);
    /* without RESERVE every class is equal: the limit is full */
    ASSERT(!admitted(run(s, &ss, S(1), "RL.ACQUIRE api concurrency:10/30s CLASS sheddable")));
    rlt__srv_close(s);
}

TEST(bad_class_and_reserve_arguments_are_clear_errors_that_hold_nothing)
{
    rlt__srv *s = open_srv();
    ASSERT(s != NULL);
    rlt__session ss;
    rlt__session_init(s, &ss);
    static const char *const bad[] = {
        "RL.ACQUIRE k concurrency:2/30s CLASS urgent",
        "RL.ACQUIRE k concurrency:2/30s CLASS",
        "RL.ACQUIRE k concurrency:2/30s RESERVE 101",
        "RL.ACQUIRE k concurrency:2/30s RESERVE -1",
        "RL.ACQUIRE k concurrency:2/30s RESERVE x",
        "RL.ACQUIRE k concurrency:2/30s PRIORITY 1",
        "RL.ACQUIRE k concurrency:2/30s CLASS critical RESERVE 20 CLASS default RESERVE 1",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *r = run(s, &ss, S(1), bad[i]);
        if (r[0] != '-') RLT_FAIL_("'%s' answered %s", bad[i], r);
    }
    ASSERT(strstr(run(s, &ss, S(1), bad[0]), "unknown class") != NULL);
    ASSERT(strstr(run(s, &ss, S(1), bad[2]), "0..100") != NULL);
    /* nothing was held: both slots are free */
    ASSERT(admitted(run(s, &ss, S(1), "RL.ACQUIRE k concurrency:2/30s")));
    ASSERT(admitted(run(s, &ss, S(1), "RL.ACQUIRE k concurrency:2/30s")));
    rlt__srv_close(s);
}

TEST(check_parameters_take_a_class_and_a_class_reserve)
{
    rlt__check_req r;
    char err[300];
    const char *q = "key=u&policy=gcra:10/1s&class=sheddable&class_reserve=20";
    ASSERT_EQ(rlt__check_parse(q, strlen(q), &r, err, sizeof err), RLT_OK);
    ASSERT_EQ(r.klass, RLT_CLASS_SHEDDABLE);
    ASSERT_EQ(r.class_reserve, 20);
    q = "key=u&policy=gcra:10/1s";
    ASSERT_EQ(rlt__check_parse(q, strlen(q), &r, err, sizeof err), RLT_OK);
    ASSERT_EQ(r.klass, RLT_CLASS_DEFAULT);
    ASSERT_EQ(r.class_reserve, 0);
    static const char *const bad[] = {
        "key=u&policy=gcra:10/1s&class=urgent",
        "key=u&policy=gcra:10/1s&class=critical&class=default",
        "key=u&policy=gcra:10/1s&class_reserve=101",
        "key=u&policy=gcra:10/1s&class_reserve=-1",
        "key=u&policy=gcra:10/1s&class_reserve=5&class_reserve=5",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (rlt__check_parse(bad[i], strlen(bad[i]), &r, err, sizeof err) != RLT_EINVAL ||
            strstr(err, "class") == NULL)
            RLT_FAIL_("'%s' was not refused with a message naming the class (%s)", bad[i], err);
}
