/* The module on a real 3-node Redis Cluster: commands declare their key positions, so the
 * library routes its RL.DECIDE calls and clients route RL.* by the key argument; RL.MULTI runs
 * with a shared hash tag and is refused with CROSSSLOT across slots; a key whose state would
 * live in another slot than its argument is refused. */
#define RTEST_KIND "cluster"
#define RTEST_SERVER_ARGS "--loadmodule " RLT_MODULE_PATH
#include "rtest.h"
#include "test.h"

/* Sends one command to every node: returns how many answered other than MOVED, and the last
 * such reply's text in out. */
static int on_every_node(const char *fmt, const char *a, const char *b, char *out, size_t cap)
{
    int answered = 0;
    for (int i = 0; i < 3; i++) {
        redisContext *c = rtest_raw(i);
        redisReply *r = redisCommand(c, fmt, a, b);
        if (!(r->type == REDIS_REPLY_ERROR && strncmp(r->str, "MOVED", 5) == 0)) {
            answered++;
            if (r->type == REDIS_REPLY_ERROR)
                snprintf(out, cap, "%s", r->str);
            else if (r->type == REDIS_REPLY_ARRAY)
                snprintf(out, cap, "array %zu first %lld", r->elements,
                         r->elements ? r->element[0]->integer : -1);
            else
                snprintf(out, cap, "type %d", r->type);
        }
        freeReplyObject(r);
        redisFree(c);
    }
    return answered;
}

TEST(the_library_routes_module_calls_across_the_cluster)
{
    rlt_redis *r = rtest_open((rlt_redis_options){.timeout = 2 * RLT_NS_PER_S});
    rlt_policy p = rtest_policy("gcra:3/1h");
    int allowed = 0;
    for (int k = 0; k < 60; k++) {
        char key[32];
        snprintf(key, sizeof key, "cl%d", k % 20);
        rlt_decision d;
        ASSERT_EQ(rlt_redis_decide(r, &p, 0, key, strlen(key), 0, 1, &d), RLT_OK);
        allowed += d.allowed;
    }
    ASSERT_EQ(allowed, 60); /* 3 per key, 20 keys */
    rlt_decision d;
    ASSERT_EQ(rlt_redis_decide(r, &p, 0, "cl0", 3, 0, 1, &d), RLT_OK);
    ASSERT(!d.allowed);
    rlt_redis_stats st;
    rlt_redis_stats_get(r, &st);
    ASSERT_EQ(st.module_calls, 61);
    ASSERT(st.nodes >= 3);
    int modules = 0;
    for (unsigned i = 0; i < st.nodes; i++) {
        rlt_redis_node_info ni;
        ASSERT_EQ(rlt_redis_node_info_get(r, i, &ni), RLT_OK);
        modules += ni.engine == RLT_REDIS_ENGINE_MODULE;
    }
    ASSERT_EQ(modules, 3); /* every node served a call */
    /* all-or-nothing over one hash tag, through the library */
    rlt_policy q = rtest_policy("fixed_window:1/1h");
    rlt_redis_check ck[2] = {{&p, "{u7}:a", 6, 1}, {&q, "{u7}:b", 6, 1}};
    int refused;
    ASSERT_EQ(rlt_redis_decide_multi(r, ck, 2, 0, 0, &d, &refused), RLT_OK);
    ASSERT(d.allowed);
    ASSERT_EQ(rlt_redis_decide_multi(r, ck, 2, 0, 0, &d, &refused), RLT_OK);
    ASSERT(!d.allowed);
    ASSERT_EQ(refused, 1);
    /* block= on every node: each key's companion key lives in its slot, on its node */
    rlt_policy b = rtest_policy("gcra:1/1s,block=10m*2..1h");
    int lifted = 0;
    for (int k = 0; k < 20; k++) {
        char key[32];
        snprintf(key, sizeof key, "bx%d", k);
        ASSERT_EQ(rlt_redis_decide(r, &b, 0, key, strlen(key), 0, 1, &d), RLT_OK);
        ASSERT(d.allowed);
        ASSERT_EQ(rlt_redis_decide(r, &b, 0, key, strlen(key), 0, 1, &d), RLT_OK);
        ASSERT(!d.allowed);
        ASSERT_EQ(d.retry_after, 600 * RLT_NS_PER_S);
        ASSERT_EQ(d.reset_after, 601 * RLT_NS_PER_S); /* the block's end + W: it escalates */
        ASSERT_EQ(rlt_redis_reset(r, &b, key, strlen(key)), RLT_OK);
        ASSERT_EQ(rlt_redis_decide(r, &b, 0, key, strlen(key), 0, 1, &d), RLT_OK);
        lifted += d.allowed;
    }
    ASSERT_EQ(lifted, 20); /* each reset lifted its key's block (and its bucket) */
    rlt_redis_close(r);
}

TEST(rl_multi_runs_on_the_node_of_its_hash_tag_and_refuses_crossslot)
{
    char out[256] = "";
    ASSERT_EQ(on_every_node("RL.MULTI %s gcra:5/1h 1 %s sliding_window:5/1h 1", "{user42}:api",
                            "{user42}:upload", out, sizeof out),
              1);
    ASSERT_STR_EQ(out, "array 7 first 1");
    out[0] = '\0';
    int n =
        on_every_node("RL.MULTI %s gcra:5/1h 1 %s gcra:5/1h 1", "{a}:x", "{b}:y", out, sizeof out);
    ASSERT(n >= 1);
    ASSERT(strncmp(out, "CROSSSLOT", 9) == 0);
    out[0] = '\0';
    ASSERT_EQ(on_every_node("CL.THROTTLE %s 15 30 60 %s", "user:42", "1", out, sizeof out), 1);
    ASSERT_STR_EQ(out, "array 5 first 0");
}

TEST(a_key_whose_state_would_live_in_another_slot_is_refused)
{
    char out[256] = "";
    ASSERT_EQ(on_every_node("RL.CHECK %s %s", "a{}b", "gcra:5/1h", out, sizeof out), 1);
    ASSERT(strstr(out, "hash tag") != NULL);
}
