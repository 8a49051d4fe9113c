/* Replication and persistence of the module's state: the module replicates effects (SET ...
 * PXAT, list and hash edits with PEXPIREAT), never its commands, so a replica WITHOUT the module
 * holds the master's keys, values and absolute expiries exactly; an AOF rewrite and a restart
 * keep them.  Real clock here: the module is loaded without `testing`, so the library's
 * caller-time calls fall back to the scripts. */
#define RTEST_KIND "standalone"
#define RTEST_SERVER_ARGS "--loadmodule " RLT_MODULE_PATH
#include "rtest.h"
#include "test.h"

static const char *const policies[] = {
    "fixed_window:50/1h",
    "sliding_log:20/1h",
    "sliding_window:70/1h",
    "token_bucket:30/1h",
    "token_bucket:10/7h,burst=25",
    "gcra:30/1h",
    "gcra:7/3h,burst=20",
    "leaky_bucket:3/1h,queue=50,delay=2",
    "concurrency:30/1h",
    "fixed_window:2/1h,block=10m*2..1h", /* breached: a companion key (SET ... PXAT) */
    "gcra:2/1h,block=30m",
};
#define NPOL (sizeof policies / sizeof policies[0])

/* Every key of server c as sorted lines "name|type|value|pexpiretime". */
typedef struct snap {
    char lines[256][600];
    int n;
} snap;

static int cmp(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void take(redisContext *c, snap *s)
{
    s->n = 0;
    redisReply *keys = redisCommand(c, "KEYS *");
    for (size_t i = 0; i < keys->elements && s->n < 256; i++) {
        const char *k = keys->element[i]->str;
        redisReply *t = redisCommand(c, "TYPE %s", k);
        const char *cmd = strcmp(t->str, "list") == 0   ? "LRANGE %s 0 -1"
                          : strcmp(t->str, "hash") == 0 ? "HGETALL %s"
                                                        : "GET %s";
        redisReply *v = redisCommand(c, cmd, k), *e = redisCommand(c, "PEXPIRETIME %s", k);
        char val[400] = "";
        size_t n = 0;
        if (v->type == REDIS_REPLY_STRING) snprintf(val, sizeof val, "%s", v->str);
        for (size_t j = 0; v->type == REDIS_REPLY_ARRAY && j < v->elements; j++)
            n += (size_t)snprintf(val + n, sizeof val - n, "%s,", v->element[j]->str);
        snprintf(s->lines[s->n++], sizeof s->lines[0], "%.150s|%s|%s|%lld", k, t->str, val,
                 e->integer);
        freeReplyObject(t);
        freeReplyObject(v);
        freeReplyObject(e);
    }
    freeReplyObject(keys);
    qsort(s->lines, (size_t)s->n, sizeof s->lines[0], cmp);
}

/* A burst through the library (module path, server time) and the raw commands. */
static void burst(rlt_redis *r, redisContext *c, int round)
{
    for (size_t i = 0; i < NPOL; i++) {
        rlt_policy p = rtest_policy(policies[i]);
        for (int k = 0; k < 6; k++) {
            char key[32];
            snprintf(key, sizeof key, "rep%d", k % 3);
            rlt_decision d;
            int64_t cost = p.algo == RLT_CONCURRENCY ? 1 : 1 + k % 2;
            if (rlt_redis_decide(r, &p, 0, key, strlen(key), 0, cost, &d) != RLT_OK) abort();
            if (p.algo == RLT_CONCURRENCY && k == 4) {
                redisReply *x =
                    redisCommand(c, "RL.RELEASE rep1 %s %lld", policies[i], (long long)d.lease);
                freeReplyObject(x);
            }
        }
    }
    freeReplyObject(redisCommand(c, "CL.THROTTLE cell%d 15 30 3600 %d", round, 2));
    freeReplyObject(redisCommand(c, "RL.MULTI {m}:a gcra:5/1h 1 {m}:b sliding_log:9/1h 2"));
    freeReplyObject(redisCommand(c, "RL.CHECK gone gcra:5/1h 1"));
    freeReplyObject(redisCommand(c, "RL.RESET gone gcra:5/1h"));
}

static bool same(const snap *a, const snap *b, const char *what)
{
    if (a->n != b->n) {
        fprintf(stderr, "%s: %d keys, then %d\n", what, a->n, b->n);
        for (int i = 0; i < a->n; i++)
            fprintf(stderr, "  before %s\n", a->lines[i]);
        for (int i = 0; i < b->n; i++)
            fprintf(stderr, "  after  %s\n", b->lines[i]);
        return false;
    }
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->lines[i], b->lines[i]) != 0) {
            fprintf(stderr, "%s:\n  %s\n  %s\n", what, a->lines[i], b->lines[i]);
            return false;
        }
    return true;
}

static int sh(const char *args)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "sh '%s' %s", getenv("RLT_REDIS_SH"), args);
    return system(cmd);
}

static redisContext *connect_port(int port)
{
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (!c || c->err) {
        fprintf(stderr, "cannot connect to %d\n", port);
        exit(1);
    }
    return c;
}

TEST(a_replica_without_the_module_holds_the_masters_keys_values_and_expiries)
{
    redisContext *m0 = rtest_raw(0);
    freeReplyObject(redisCommand(m0, "CONFIG SET repl-diskless-sync-delay 0")); /* not 5 s */
    redisFree(m0);
    char args[2400];
    snprintf(args, sizeof args, "start '%s' 0 --replicaof 127.0.0.1 %d", rtest_dir(1),
             rtest_port(0));
    ASSERT_EQ(sh(args), 0);
    redisContext *m = rtest_raw(0), *rep = rtest_raw(1);
    /* the replica has no module: a replicated command would fail there */
    redisReply *x = redisCommand(rep, "COMMAND INFO RL.CHECK");
    ASSERT(x->type == REDIS_REPLY_ARRAY && x->element[0]->type == REDIS_REPLY_NIL);
    freeReplyObject(x);
    rlt_redis *r = rtest_open((rlt_redis_options){.timeout = 2 * RLT_NS_PER_S});
    burst(r, m, 0);
    rlt_redis_stats st;
    rlt_redis_stats_get(r, &st);
    ASSERT(st.module_calls >= NPOL * 6);
    /* WAIT for the replica (bounded: 5 s), then compare */
    bool ok = false;
    for (int i = 0; i < 50 && !ok; i++) {
        x = redisCommand(m, "WAIT 1 100");
        ok = x->type == REDIS_REPLY_INTEGER && x->integer == 1;
        freeReplyObject(x);
    }
    ASSERT(ok);
    static snap a, b;
    take(m, &a);
    take(rep, &b);
    ASSERT(a.n > 20);
    ASSERT(same(&a, &b, "master then replica"));
    rlt_redis_close(r);
    redisFree(m);
    redisFree(rep);
    rtest_sh("stop", 1);
}

TEST(an_aof_rewrite_and_a_restart_keep_the_state)
{
    char args[2400];
    snprintf(args, sizeof args, "start '%s' 0 --appendonly yes --loadmodule %s", rtest_dir(2),
             RLT_MODULE_PATH);
    ASSERT_EQ(sh(args), 0);
    int port = rtest_port(2);
    redisContext *c = connect_port(port);
    char servers[64];
    snprintf(servers, sizeof servers, "127.0.0.1:%d", port);
    rlt_redis *r = NULL;
    ASSERT_EQ(
        rlt_redis_open(&r, &(rlt_redis_options){.servers = servers, .timeout = 2 * RLT_NS_PER_S}),
        RLT_OK);
    burst(r, c, 1);
    freeReplyObject(redisCommand(c, "BGREWRITEAOF"));
    bool done = false;
    for (int i = 0; i < 100 && !done; i++) { /* bounded: 5 s */
        redisReply *x = redisCommand(c, "INFO persistence");
        done = strstr(x->str, "aof_rewrite_in_progress:0") &&
               strstr(x->str, "aof_rewrite_scheduled:0");
        freeReplyObject(x);
        if (!done) usleep(50000);
    }
    ASSERT(done);
    burst(r, c, 2); /* after the rewrite: in the incremental file */
    static snap before, after;
    take(c, &before);
    redisFree(c);
    rlt_redis_close(r);
    ASSERT_EQ(rtest_sh("restart", 2), 0);
    c = connect_port(rtest_port(2));
    take(c, &after);
    ASSERT(before.n > 20);
    ASSERT(same(&before, &after, "before then after the restart"));
    redisFree(c);
    rtest_sh("stop", 2);
}

TEST(caller_time_falls_back_to_the_scripts_without_testing)
{
    rlt_redis *r = rtest_open((rlt_redis_options){.timeout = 2 * RLT_NS_PER_S});
    rlt_policy p = rtest_policy("gcra:5/1s");
    rlt_decision d;
    ASSERT_EQ(rlt_redis_decide(r, &p, RLT_REDIS_CALLER_TIME, "ct", 2, 5 * RLT_NS_PER_S, 1, &d),
              RLT_OK);
    ASSERT(d.allowed);
    rlt_redis_stats st;
    rlt_redis_stats_get(r, &st);
    ASSERT_EQ(st.module_calls, 0);
    rlt_redis_node_info ni;
    ASSERT_EQ(rlt_redis_node_info_get(r, 0, &ni), RLT_OK);
    ASSERT_EQ(ni.engine, RLT_REDIS_ENGINE_MODULE);
    ASSERT(!ni.caller_time);
    ASSERT_EQ(rlt_redis_decide(r, &p, 0, "ct2", 3, 0, 1, &d), RLT_OK);
    rlt_redis_stats_get(r, &st);
    ASSERT_EQ(st.module_calls, 1);
    rlt_redis_close(r);
    redisContext *c = rtest_raw(0);
    redisReply *x = redisCommand(c, "RL.DECIDE 5 0 k gcra:5/1s 1");
    ASSERT(x->type == REDIS_REPLY_ERROR && strstr(x->str, "testing"));
    freeReplyObject(x);
    x = redisCommand(c, "RL.TESTTIME 5");
    ASSERT(x->type == REDIS_REPLY_ERROR); /* not registered without testing */
    freeReplyObject(x);
    redisFree(c);
}
