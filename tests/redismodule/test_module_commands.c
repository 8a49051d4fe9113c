/* The module's commands on a real redis-server: CL.THROTTLE against redis-cell's own test
 * vectors (on the module's test clock, RL.TESTTIME), the RL.* replies of ratelimitd, values and
 * expiries byte-identical to the scripts', every bad argument answered with an error (the server
 * survives), and the loading errors. */
#define RTEST_KIND "standalone"
#define RTEST_SERVER_ARGS "--enable-module-command yes --loadmodule " RLT_MODULE_PATH " testing yes"
#include "rtest.h"
#include "test.h"

#include <sys/wait.h>

/* Runs a command line split at spaces ("''" is an empty argument). */
static redisReply *run(redisContext *c, const char *line)
{
    char buf[1024];
    const char *argv[64];
    size_t lens[64];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", line);
    for (char *tok = strtok(buf, " "); tok && argc < 64; tok = strtok(NULL, " ")) {
        if (strcmp(tok, "''") == 0) tok[0] = '\0';
        argv[argc] = tok;
        lens[argc++] = strlen(tok);
    }
    redisReply *r = redisCommandArgv(c, argc, argv, lens);
    if (!r) {
        fprintf(stderr, "connection lost on: %s\n", line);
        exit(1);
    }
    return r;
}

/* The reply as text: integers of an array joined by spaces, or the error / status. */
static const char *text(redisContext *c, const char *line)
{
    static char out[1024];
    redisReply *r = run(c, line);
    out[0] = '\0';
    if (r->type == REDIS_REPLY_ARRAY) {
        size_t n = 0;
        for (size_t i = 0; i < r->elements; i++)
            n += (size_t)snprintf(out + n, sizeof out - n, "%s%lld", i ? " " : "",
                                  r->element[i]->integer);
    } else if (r->type == REDIS_REPLY_INTEGER) {
        snprintf(out, sizeof out, "%lld", r->integer);
    } else if (r->str) {
        snprintf(out, sizeof out, "%s", r->str);
    }
    freeReplyObject(r);
    return out;
}

static void at(redisContext *c, int64_t us)
{
    char line[64];
    snprintf(line, sizeof line, "RL.TESTTIME %lld", (long long)us);
    freeReplyObject(run(c, line));
}

#define S(x) ((int64_t)(x)*1000000)
#define MS(x) ((int64_t)(x)*1000)

TEST(cl_throttle_matches_redis_cells_test_vectors)
{
    /* redis-cell's it_rate_limits: limit 5 (max_burst 4), 1 per second. */
    redisContext *c = rtest_raw(0);
    int64_t t0 = S(1000);
    const char *c1 = "CL.THROTTLE foo 4 1 1 1";
    at(c, t0);
    ASSERT_STR_EQ(text(c, "CL.THROTTLE foo 4 1 1 6"), "1 5 5 -1 0");
    ASSERT_STR_EQ(text(c, c1), "0 5 4 -1 1");
    ASSERT_STR_EQ(text(c, c1), "0 5 3 -1 2");
    ASSERT_STR_EQ(text(c, c1), "0 5 2 -1 3");
    ASSERT_STR_EQ(text(c, c1), "0 5 1 -1 4");
    ASSERT_STR_EQ(text(c, c1), "0 5 0 -1 5");
    ASSERT_STR_EQ(text(c, c1), "1 5 0 1 5");
    at(c, t0 + MS(3000));
    ASSERT_STR_EQ(text(c, c1), "0 5 2 -1 3");
    at(c, t0 + MS(3100));
    ASSERT_STR_EQ(text(c, c1), "0 5 1 -1 4");
    at(c, t0 + MS(4000));
    ASSERT_STR_EQ(text(c, c1), "0 5 1 -1 4");
    at(c, t0 + MS(8000));
    ASSERT_STR_EQ(text(c, c1), "0 5 4 -1 1");
    at(c, t0 + MS(9500));
    ASSERT_STR_EQ(text(c, c1), "0 5 4 -1 1");
    ASSERT_STR_EQ(text(c, "CL.THROTTLE foo 4 1 1 0"), "0 5 4 -1 1"); /* quantity 0 peeks */
    ASSERT_STR_EQ(text(c, "CL.THROTTLE foo 4 1 1 2"), "0 5 2 -1 3");
    ASSERT_STR_EQ(text(c, "CL.THROTTLE foo 4 1 1 5"), "1 5 2 3 3");
    /* max_burst 0 allows one; the README's example */
    at(c, S(5));
    ASSERT_STR_EQ(text(c, "CL.THROTTLE k 0 1 10"), "0 1 0 -1 10");
    ASSERT_STR_EQ(text(c, "CL.THROTTLE k 0 1 10"), "1 1 0 10 10");
    at(c, S(15));
    ASSERT_STR_EQ(text(c, "CL.THROTTLE k 0 1 10"), "0 1 0 -1 10");
    ASSERT_STR_EQ(text(c, "CL.THROTTLE user123 15 30 60 1"), "0 16 15 -1 2");
    at(c, -1);
    redisFree(c);
}

TEST(rl_commands_answer_as_ratelimitd)
{
    redisContext *c = rtest_raw(0);
    at(c, S(1));
    ASSERT_STR_EQ(text(c, "RL.CHECK a gcra:2/1s"), "1 2 1 0 500 0");
    ASSERT_STR_EQ(text(c, "RL.CHECK a gcra:2/1s"), "1 2 0 0 1000 0");
    ASSERT_STR_EQ(text(c, "RL.CHECK a gcra:2/1s"), "0 2 0 500 1000 0");
    ASSERT_STR_EQ(text(c, "RL.PEEK a gcra:2/1s"), "0 2 0 500 1000 0");
    ASSERT_STR_EQ(text(c, "RL.CHECK a gcra:2/1s 3"), "0 2 0 -1 1000 0"); /* never fits */
    ASSERT_STR_EQ(text(c, "RL.RESET a gcra:2/1s"), "1");
    ASSERT_STR_EQ(text(c, "RL.CHECK a gcra:2/1s 2"), "1 2 0 0 1000 0");
    ASSERT_STR_EQ(text(c, "RL.CHECK b leaky_bucket:2/1s,queue=2"), "1 3 2 0 500 0");
    ASSERT_STR_EQ(text(c, "RL.CHECK b leaky_bucket:2/1s,queue=2"), "1 3 1 0 1000 500");
    /* all-or-nothing: the second limit refuses, the first is not charged */
    ASSERT_STR_EQ(text(c, "RL.MULTI {u}:x fixed_window:5/1s 1 {u}:y fixed_window:1/1s 1"),
                  "1 1 0 0 1000 0 -1");
    ASSERT_STR_EQ(text(c, "RL.MULTI {u}:x fixed_window:5/1s 1 {u}:y fixed_window:1/1s 1"),
                  "0 1 0 1000 1000 0 1");
    ASSERT_STR_EQ(text(c, "RL.PEEK {u}:x fixed_window:5/1s"), "1 5 4 0 1000 0");
    /* leases */
    ASSERT_STR_EQ(text(c, "RL.ACQUIRE j concurrency:1/30s"), "1 1 0 0 1000000");
    ASSERT_STR_EQ(text(c, "RL.ACQUIRE j concurrency:1/30s"), "0 1 0 30000 0");
    ASSERT_STR_EQ(text(c, "RL.RELEASE j concurrency:1/30s 7"), "0");
    ASSERT_STR_EQ(text(c, "RL.RELEASE j concurrency:1/30s 1000000"), "1");
    ASSERT_STR_EQ(text(c, "RL.RELEASE j concurrency:1/30s 1000000"), "0");
    at(c, -1);
    redisFree(c);
}

/* RL.CHECK and RL.MULTI spread a denied wait by jitter= as the library does (rlt_jitter of the
 * user key at the command's instant; the reply is in ms, rounded up); block= runs: a breach
 * blocks the key to the block's end whatever the algorithm says, RL.RESET lifts it, and in
 * RL.MULTI the limit that denied starts its block while the others are charged nothing. */
TEST(rl_check_applies_jitter_and_runs_the_penalty_box)
{
    redisContext *c = rtest_raw(0);
    at(c, S(5));
    rlt_policy p = rtest_policy("gcra:1/42s,jitter=10%");
    for (int k = 0; k < 8; k++) {
        char cmd[96], want[96];
        snprintf(cmd, sizeof cmd, "RL.CHECK jit%d gcra:1/42s,jitter=10%%", k);
        ASSERT_STR_EQ(text(c, cmd), "1 1 0 0 42000 0");
        char key[16];
        int kl = snprintf(key, sizeof key, "jit%d", k);
        rlt_ns j = rlt_jitter(&p, rlt_hash_fnv1a(key, (size_t)kl), S(5) * 1000, 42 * RLT_NS_PER_S);
        snprintf(want, sizeof want, "0 1 0 %lld 42000 0", (long long)rlt_retry_after_ms(j));
        ASSERT_STR_EQ(text(c, cmd), want);
        snprintf(cmd, sizeof cmd, "RL.MULTI jit%d gcra:1/42s,jitter=10%% 1", k);
        snprintf(want, sizeof want, "0 1 0 %lld 42000 0 0", (long long)rlt_retry_after_ms(j));
        ASSERT_STR_EQ(text(c, cmd), want);
    }
    ASSERT_STR_EQ(text(c, "RL.CHECK blk gcra:1/1s,block=1m"), "1 1 0 0 1000 0");
    ASSERT_STR_EQ(text(c, "RL.CHECK blk gcra:1/1s,block=1m"), "0 1 0 60000 60000 0");
    at(c, S(35));
    ASSERT_STR_EQ(text(c, "RL.PEEK blk gcra:1/1s,block=1m"), "0 1 0 30000 30000 0");
    ASSERT_STR_EQ(text(c, "RL.CHECK blk gcra:1/1s,block=1m"), "0 1 0 30000 30000 0");
    ASSERT_STR_EQ(text(c, "RL.RESET blk gcra:1/1s,block=1m"), "1");
    ASSERT_STR_EQ(text(c, "RL.CHECK blk gcra:1/1s,block=1m"), "1 1 0 0 1000 0");
    /* RL.MULTI: {u}b is full, so it breaches and blocks; {u}a allowed but charged nothing. */
    ASSERT_STR_EQ(text(c, "RL.CHECK {u}b fixed_window:1/1m,block=2m"), "1 1 0 0 25000 0");
    const char *m = text(c, "RL.MULTI {u}a gcra:5/1s 1 {u}b fixed_window:1/1m,block=2m 1");
    if (strncmp(m, "0 ", 2) != 0 || !strstr(m, " 120000 ")) RLT_FAIL_("RL.MULTI: %s", m);
    ASSERT_STR_EQ(text(c, "RL.PEEK {u}a gcra:5/1s"), "1 5 5 0 0 0");
    ASSERT_STR_EQ(text(c, "RL.PEEK {u}b fixed_window:1/1m,block=2m"), "0 1 0 120000 120000 0");
    /* RL.DECIDE takes full names from the caller, of any length: the companion key's name is
     * that name + the block tail (here 30000 bytes + the tail). */
    enum { LONG = 30000 };
    char *name = malloc(LONG);
    memset(name, 'n', LONG);
    const char *pol = "gcra:1/1s,block=1m";
    for (int i = 0; i < 2; i++) {
        redisReply *r = redisCommand(c, "RL.DECIDE -1 0 %b %s 1", name, (size_t)LONG, pol);
        ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 1);
        ASSERT_STR_EQ(r->element[0]->str,
                      i == 0 ? "1 1 0 0 1000000000 0 0" : "0 1 0 60000000000 60000000000 0 0");
        freeReplyObject(r);
    }
    free(name);
    at(c, -1);
    redisFree(c);
}

TEST(every_bad_argument_is_an_error_and_the_server_survives)
{
    redisContext *c = rtest_raw(0);
    const char *bad[] = {"CL.THROTTLE k -1 1 1",
                         "CL.THROTTLE k 1 0 1",
                         "CL.THROTTLE k 1 -5 1",
                         "CL.THROTTLE k 1 1 0",
                         "CL.THROTTLE k 1 1 1 -1",
                         "CL.THROTTLE k 1e309 1 1",
                         "CL.THROTTLE k 0x10 1 1",
                         "CL.THROTTLE k -0 1 1",
                         "CL.THROTTLE k 1.5 1 1",
                         "CL.THROTTLE k 9223372036854775807 1 1",
                         "CL.THROTTLE k 1 1 9223372036854775807",
                         "CL.THROTTLE k 1 99999999999999999999 1",
                         "CL.THROTTLE k 1 1",
                         "CL.THROTTLE k 1 1 1 1 1",
                         "CL.THROTTLE '' 1 1 1",
                         "CL.THROTTLE k 2147483646 9223372036854775807 1",
                         "RL.CHECK k gcra:1/1s -1",
                         "RL.CHECK k gcra:1/1s -0",
                         "RL.CHECK k gcra:1/1s 1.5",
                         "RL.CHECK k gcra:1/1s 1e3",
                         "RL.CHECK k gcra:1/1s 99999999999999999999",
                         "RL.CHECK k gcra:1/1s ''",
                         "RL.CHECK k gcra:0/1s",
                         "RL.CHECK k gcra:-1/1s",
                         "RL.CHECK k gcra:1.5/1s",
                         "RL.CHECK k gcra:1/-1s",
                         "RL.CHECK k gcra:1/0s",
                         "RL.CHECK k gcra:3/1500ns",
                         "RL.CHECK k token_bucket:1/1000s,burst=2000000",
                         "RL.CHECK k gcra:9223372036854775807/1s",
                         "RL.CHECK k gcra:1/9223372036854775807d",
                         "RL.CHECK k sliding_log:2000000/1s",
                         "RL.CHECK k sliding_window:100000000/1000d",
                         "RL.CHECK k nope:1/1s",
                         "RL.CHECK k ''",
                         "RL.CHECK k concurrency:3/1s 2",
                         "RL.CHECK '' gcra:1/1s",
                         "RL.CHECK k",
                         "RL.CHECK k gcra:1/1s 1 1",
                         "RL.PEEK k gcra:1/1s 1",
                         "RL.MULTI k gcra:1/1s",
                         "RL.MULTI k gcra:1/1s 1 k gcra:1/1s 1",
                         "RL.MULTI a concurrency:1/1s 1 b gcra:1/1s 1",
                         "RL.MULTI a gcra:1/1s -1",
                         "RL.ACQUIRE k gcra:1/1s",
                         "RL.RELEASE k concurrency:1/1s 0",
                         "RL.RELEASE k concurrency:1/1s -3",
                         "RL.RELEASE k gcra:1/1s 5",
                         "RL.RESET k",
                         "RL.DECIDE -2 0 k gcra:1/1s 1",
                         "RL.DECIDE -1 -1 k gcra:1/1s 1",
                         "RL.DECIDE 4503599627370497 0 k gcra:1/1s 1",
                         "RL.DECIDE -1 0 k gcra:1/1s",
                         "RL.TESTTIME -2",
                         "RL.TESTTIME x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        redisReply *r = run(c, bad[i]);
        if (r->type != REDIS_REPLY_ERROR || strncmp(r->str, "ERR", 3) != 0)
            RLT_FAIL_("%s answered type %d %s", bad[i], r->type, r->str ? r->str : "");
        freeReplyObject(r);
    }
    char many[1024] = "RL.MULTI";
    for (int i = 0; i < 17; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), " {m}%d gcra:1/1s 1", i);
    ASSERT(strncmp(text(c, many), "ERR at most 16", 14) == 0);
    ASSERT_STR_EQ(text(c, "PING"), "PONG");
    redisFree(c);
}

TEST(a_key_that_holds_something_else_is_an_error_not_a_crash)
{
    redisContext *c = rtest_raw(0);
    freeReplyObject(run(c, "SET rlt:{w}w:5:1:1000000000:1:0:0 garbage"));
    ASSERT(strstr(text(c, "RL.CHECK w gcra:1/1s"), "no state of this policy") != NULL);
    freeReplyObject(run(c, "SET rlt:{w}w:5:1:1000000000:1:0:0 99999999999999999999:1"));
    ASSERT(strstr(text(c, "RL.CHECK w gcra:1/1s"), "no state of this policy") != NULL);
    freeReplyObject(run(c, "SET rlt:{w}w:2:3:1000000000:3:0:0 x"));
    ASSERT(strncmp(text(c, "RL.CHECK w sliding_log:3/1s"), "WRONGTYPE", 9) == 0);
    freeReplyObject(run(c, "RPUSH rlt:{w}w:1:3:1000000000:3:0:0 x"));
    ASSERT(strncmp(text(c, "RL.CHECK w fixed_window:3/1s"), "WRONGTYPE", 9) == 0);
    freeReplyObject(run(c, "RPUSH rlt:{w}w:2:4:1000000000:4:0:0 1:9"));
    ASSERT(strstr(text(c, "RL.CHECK w sliding_log:4/1s"), "no state") != NULL);
    freeReplyObject(run(c, "HSET rlt:{w}w:7:2:1000000000:2:0:0 s5 1:2"));
    ASSERT(strstr(text(c, "RL.ACQUIRE w concurrency:2/1s"), "no state") != NULL);
    ASSERT(strstr(text(c, "RL.RELEASE w concurrency:2/1s 1"), "no state") != NULL);
    ASSERT_STR_EQ(text(c, "RL.RESET w concurrency:2/1s"), "1");
    ASSERT_STR_EQ(text(c, "PING"), "PONG");
    redisFree(c);
}

static const char *const policies[] = {
    "fixed_window:5/1s",
    "sliding_log:5/1s",
    "sliding_window:7/3s",
    "token_bucket:3/1s",
    "token_bucket:10/7s,burst=25",
    "gcra:3/1s",
    "gcra:7/3s,burst=2",
    "leaky_bucket:3/1s,queue=5,delay=2",
    "concurrency:3/2s",
};

/* The raw value of a Redis key as text, whatever its type. */
static void raw_value(redisContext *c, const char *name, char *out, size_t cap)
{
    redisReply *t = redisCommand(c, "TYPE %s", name);
    const char *cmd = strcmp(t->str, "list") == 0   ? "LRANGE %s 0 -1"
                      : strcmp(t->str, "hash") == 0 ? "HGETALL %s"
                                                    : "GET %s";
    freeReplyObject(t);
    redisReply *r = redisCommand(c, cmd, name);
    size_t n = 0;
    out[0] = '\0';
    if (r->type == REDIS_REPLY_STRING) snprintf(out, cap, "%s", r->str);
    if (r->type == REDIS_REPLY_ARRAY) {
        /* HGETALL's order is the hash's, not ours: sort-insensitive enough for <= 4 fields */
        for (size_t i = 0; i < r->elements; i++)
            n += (size_t)snprintf(out + n, cap - n, "%s|", r->element[i]->str);
    }
    freeReplyObject(r);
}

TEST(module_and_scripts_write_the_same_values_and_expiries)
{
    rlt_redis *s = rtest_open(
        (rlt_redis_options){.timeout = 2 * RLT_NS_PER_S, .engine = RLT_REDIS_ENGINE_SCRIPTS});
    rlt_redis *m = rtest_open(
        (rlt_redis_options){.timeout = 2 * RLT_NS_PER_S, .engine = RLT_REDIS_ENGINE_MODULE});
    redisContext *c = rtest_raw(0);
    /* Server time: both engines read the same clock, so the same requests a few microseconds
     * apart may differ only in the last digits of instants; compare at one caller instant. */
    int64_t now = (int64_t)time(NULL) * RLT_NS_PER_S;
    for (size_t i = 0; i < sizeof policies / sizeof policies[0]; i++) {
        rlt_policy p = rtest_policy(policies[i]);
        char ks[64], km[64];
        snprintf(ks, sizeof ks, "same:s:%zu", i);
        snprintf(km, sizeof km, "same:m:%zu", i);
        for (int k = 0; k < 4; k++) {
            rlt_decision ds, dm;
            int64_t cost = k == 2 && p.algo != RLT_CONCURRENCY ? 2 : 1;
            ASSERT_EQ(rlt_redis_decide(s, &p, RLT_REDIS_CALLER_TIME, ks, strlen(ks), now + k * 1000,
                                       cost, &ds),
                      RLT_OK);
            ASSERT_EQ(rlt_redis_decide(m, &p, RLT_REDIS_CALLER_TIME, km, strlen(km), now + k * 1000,
                                       cost, &dm),
                      RLT_OK);
            ASSERT_EQ(ds.allowed, dm.allowed);
            ASSERT_EQ(ds.remaining, dm.remaining);
        }
        char ns[800], nm[800], vs[512], vm[512];
        int ls = rlt_redis_key_name(s, &p, ks, strlen(ks), ns, sizeof ns - 1);
        int lm = rlt_redis_key_name(m, &p, km, strlen(km), nm, sizeof nm - 1);
        ASSERT(ls > 0 && lm > 0);
        ns[ls] = nm[lm] = '\0';
        raw_value(c, ns, vs, sizeof vs);
        raw_value(c, nm, vm, sizeof vm);
        if (strcmp(vs, vm) != 0) RLT_FAIL_("%s: scripts wrote %s, module %s", policies[i], vs, vm);
        redisReply *a = redisCommand(c, "PTTL %s", ns), *b = redisCommand(c, "PTTL %s", nm);
        ASSERT(a->integer > 0 && b->integer > 0);
        ASSERT_LE(llabs(a->integer - b->integer), 50); /* written a few ms apart */
        freeReplyObject(a);
        freeReplyObject(b);
    }
    rlt_redis_stats st;
    rlt_redis_stats_get(m, &st);
    ASSERT(st.module_calls > 0);
    redisFree(c);
    rlt_redis_close(s);
    rlt_redis_close(m);
}

TEST(loading_twice_is_refused_and_the_loaded_module_keeps_working)
{
    redisContext *c = rtest_raw(0);
    redisReply *r = redisCommand(c, "MODULE LOAD %s", RLT_MODULE_PATH);
    ASSERT_EQ(r->type, REDIS_REPLY_ERROR);
    freeReplyObject(r);
    ASSERT_STR_EQ(text(c, "RL.CHECK twice gcra:5/1s"), text(c, "RL.PEEK twice2 gcra:5/1s"));
    ASSERT_STR_EQ(text(c, "PING"), "PONG");
    redisFree(c);
}

/* Starts redis-server with the module and `args`; returns its exit status (it must refuse to
 * start: a server that did start is stopped at once and counts as 0). */
static int start_with(const char *args, const char *log)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "timeout 10 redis-server --port 0 --unixsocket %s.sock --save '' --appendonly no "
             "--logfile %s --loadmodule %s %s",
             log, log, RLT_MODULE_PATH, args);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static bool log_has(const char *log, const char *what)
{
    FILE *f = fopen(log, "r");
    char line[1024];
    bool found = false;
    while (f && fgets(line, sizeof line, f))
        if (strstr(line, what)) found = true;
    if (f) fclose(f);
    return found;
}

TEST(bad_module_arguments_stop_the_server_from_starting)
{
    char log[600];
    snprintf(log, sizeof log, "%s/badargs.log", getenv("RLT_REDIS_BASE"));
    const struct {
        const char *args, *msg;
    } cases[] = {{"bogus yes", "unknown argument 'bogus'"},
                 {"testing maybe", "testing: yes or no"},
                 {"prefix a{b", "prefix: at most 64 bytes"},
                 {"testing", "arguments come in pairs"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        remove(log);
        int st = start_with(cases[i].args, log);
        if (st == 0 || st == 124) RLT_FAIL_("redis-server started with '%s'", cases[i].args);
        if (!log_has(log, cases[i].msg)) RLT_FAIL_("no '%s' in the log", cases[i].msg);
    }
}

TEST(a_denied_request_does_not_touch_the_key)
{
    /* WATCH sees a key as modified when a command writes it: a denial must not. */
    redisContext *a = rtest_raw(0), *b = rtest_raw(0);
    at(b, S(50));
    ASSERT_STR_EQ(text(b, "RL.CHECK w1 gcra:1/1h"), "1 1 0 0 3600000 0");
    freeReplyObject(run(a, "WATCH rlt:{w1}w1:5:1:3600000000000:1:0:0"));
    ASSERT_STR_EQ(text(b, "RL.CHECK w1 gcra:1/1h"), "0 1 0 3600000 3600000 0");
    freeReplyObject(run(a, "MULTI"));
    freeReplyObject(run(a, "PING"));
    redisReply *r = run(a, "EXEC");
    ASSERT_EQ(r->type, REDIS_REPLY_ARRAY); /* not aborted (nil) */
    freeReplyObject(r);
    at(b, -1);
    redisFree(a);
    redisFree(b);
}
