/* Redis Cluster: keys are routed by hash slot to all three nodes, decisions there are the
 * C library's, multi-limit checks work on keys sharing a hash tag (and are refused across
 * slots), reservations live in their limit's slot, and a slot moved to another node is
 * followed through MOVED. */
#define RTEST_KIND "cluster"
#include "rtest.h"
#include "test.h"

static long long dbsize(int i)
{
    redisContext *c = rtest_raw(i);
    redisReply *rep = redisCommand(c, "DBSIZE");
    long long n = rep && rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1;
    freeReplyObject(rep);
    redisFree(c);
    return n;
}

TEST(cluster_keys_spread_over_all_nodes_with_c_decisions)
{
    rlt_redis *r = rtest_open(
        (rlt_redis_options){.timeout = 2 * RLT_NS_PER_S, .ttl_floor = 60 * RLT_NS_PER_S});
    rlt_policy p = rtest_policy("gcra:5/1s,burst=3");
    for (int k = 0; k < 60; k++) {
        char key[16];
        snprintf(key, sizeof key, "user%d", k);
        void *st = calloc(1, rlt_state_size(&p));
        for (int i = 0; i < 5; i++) {
            rlt_ns t = 1000000000 + (rlt_ns)i * 50000000;
            rlt_decision dc, dr;
            ASSERT_EQ(rlt_decide(&p, st, t, 1, &dc), RLT_OK);
            ASSERT_EQ(rlt_redis_decide(r, &p, RLT_REDIS_CALLER_TIME, key, strlen(key), t, 1, &dr),
                      RLT_OK);
            ASSERT_EQ(dc.allowed, dr.allowed);
            ASSERT_EQ(dc.remaining, dr.remaining);
            ASSERT_EQ(dc.retry_after, dr.retry_after);
        }
        free(st);
    }
    for (int i = 0; i < 3; i++)
        ASSERT(dbsize(i) > 5);
    rlt_redis_stats st;
    rlt_redis_stats_get(r, &st);
    ASSERT_EQ(st.nodes, 3);
    ASSERT_EQ(st.fail_open + st.fail_closed, 0);
    rlt_redis_close(r);
}

/* A reservation's key shares its limit's hash tag, so reserve and settle run on the key's node
 * in one script (no CROSSSLOT) for keys spread over every node, and match the core. */
TEST(cluster_reserve_and_settle_run_on_the_limits_node)
{
    rlt_redis *r = rtest_open((rlt_redis_options){.timeout = 2 * RLT_NS_PER_S});
    rlt_policy p = rtest_policy("token_bucket:10/1s");
    for (int k = 0; k < 60; k++) {
        char key[24];
        snprintf(key, sizeof key, k % 2 ? "res%d" : "{t%d}res", k);
        void *st = calloc(1, rlt_state_size(&p));
        rlt_ns t = 1000000000;
        rlt_decision dc, dr;
        uint64_t id = 0;
        ASSERT_EQ(rlt_redis_reset(r, &p, key, strlen(key)), RLT_OK);
        ASSERT_EQ(rlt_decide(&p, st, t, 6, &dc), RLT_OK);
        ASSERT_EQ(
            rlt_redis_reserve(r, &p, RLT_REDIS_CALLER_TIME, key, strlen(key), t, 6, 0, &dr, &id),
            RLT_OK);
        ASSERT(dr.allowed && id != 0);
        ASSERT_EQ(dc.remaining, dr.remaining);
        t += 100000000;
        ASSERT_EQ(rlt_settle(&p, st, t, 1000000000, 6, (int64_t)(k % 9), &dc), RLT_OK);
        ASSERT_EQ(rlt_redis_settle(r, &p, RLT_REDIS_CALLER_TIME, key, strlen(key), t, id,
                                   (int64_t)(k % 9), &dr),
                  RLT_OK);
        ASSERT_EQ(dc.remaining, dr.remaining);
        ASSERT_EQ(dc.reset_after, dr.reset_after);
        ASSERT_EQ(rlt_redis_settle(r, &p, RLT_REDIS_CALLER_TIME, key, strlen(key), t, id, 0, &dr),
                  RLT_ENOENT);
        free(st);
    }
    rlt_redis_stats st;
    rlt_redis_stats_get(r, &st);
    ASSERT_EQ(st.fail_open + st.fail_closed, 0);
    ASSERT_EQ(st.errors, 0);
    rlt_redis_close(r);
}

/* block= on a cluster: each key's companion key shares its slot (else the script would fail
 * with CROSSSLOT), so blocks, escalations and resets run on whichever node holds the key, and
 * a multi-limit check on one hash tag starts the denying limit's block. */
TEST(cluster_penalty_box_keys_stay_in_their_limits_slot_with_c_decisions)
{
    rlt_redis *r = rtest_open(
        (rlt_redis_options){.timeout = 2 * RLT_NS_PER_S, .ttl_floor = 60 * RLT_NS_PER_S});
    rlt_policy p = rtest_policy("gcra:2/1s,block=300ms*2..2s");
    for (int k = 0; k < 30; k++) {
        char key[16];
        snprintf(key, sizeof key, "boxed%d", k);
        ASSERT_EQ(rlt_redis_reset(r, &p, key, strlen(key)), RLT_OK);
        void *st = calloc(1, rlt_state_size(&p));
        for (int i = 0; i < 12; i++) {
            rlt_ns t = 1000000000 + (rlt_ns)i * 150000000;
            if (i == 9) {
                memset(st, 0, rlt_state_size(&p));
                ASSERT_EQ(rlt_redis_reset(r, &p, key, strlen(key)), RLT_OK);
            }
            rlt_decision dc, dr;
            ASSERT_EQ(rlt_decide(&p, st, t, 1, &dc), RLT_OK);
            ASSERT_EQ(rlt_redis_decide(r, &p, RLT_REDIS_CALLER_TIME, key, strlen(key), t, 1, &dr),
                      RLT_OK);
            ASSERT_EQ(dc.allowed, dr.allowed);
            ASSERT_EQ(dc.remaining, dr.remaining);
            ASSERT_EQ(dc.retry_after, dr.retry_after);
            ASSERT_EQ(dc.reset_after, dr.reset_after);
        }
        free(st);
    }
    rlt_policy a = rtest_policy("fixed_window:1/1m,block=10m"), b = rtest_policy("gcra:5/1h");
    rlt_redis_check ck[2] = {{&a, "{acct9}:login", 13, 1}, {&b, "{acct9}:api", 11, 1}};
    for (int i = 0; i < 2; i++)
        ASSERT_EQ(rlt_redis_reset(r, ck[i].policy, ck[i].key, ck[i].klen), RLT_OK);
    rlt_decision d;
    int refused;
    ASSERT_EQ(rlt_redis_decide_multi(r, ck, 2, RLT_REDIS_CALLER_TIME, RLT_NS_PER_S, &d, &refused),
              RLT_OK);
    ASSERT(d.allowed);
    ASSERT_EQ(
        rlt_redis_decide_multi(r, ck, 2, RLT_REDIS_CALLER_TIME, 2 * RLT_NS_PER_S, &d, &refused),
        RLT_OK);
    ASSERT(!d.allowed);
    ASSERT_EQ(refused, 0);
    ASSERT_EQ(d.retry_after, 600 * RLT_NS_PER_S);
    /* gcra charged once only; login blocked for 10 minutes though its window would not say so */
    ASSERT_EQ(
        rlt_redis_decide(r, &b, RLT_REDIS_CALLER_TIME, "{acct9}:api", 11, 2 * RLT_NS_PER_S, 0, &d),
        RLT_OK);
    ASSERT_EQ(d.remaining, 4);
    ASSERT_EQ(rlt_redis_decide(r, &a, RLT_REDIS_CALLER_TIME, "{acct9}:login", 13,
                               3601 * RLT_NS_PER_S / 6, 0, &d),
              RLT_OK);
    ASSERT(!d.allowed);
    rlt_redis_close(r);
}

TEST(cluster_multi_limit_needs_a_shared_hash_tag)
{
    rlt_redis *r = rtest_open((rlt_redis_options){0});
    rlt_policy a = rtest_policy("fixed_window:3/1h"), b = rtest_policy("fixed_window:5/1h");
    rlt_redis_check ok[2] = {{&a, "{acct7}:api", 11, 1}, {&b, "{acct7}:upload", 14, 1}};
    rlt_decision d;
    int refused;
    for (int i = 0; i < 4; i++) {
        ASSERT_EQ(rlt_redis_decide_multi(r, ok, 2, 0, 0, &d, &refused), RLT_OK);
        ASSERT_EQ(d.allowed, i < 3);
        ASSERT_EQ(refused, i < 3 ? -1 : 0);
    }
    ASSERT_EQ(d.remaining, 0);
    rlt_redis_check bad[2] = {{&a, "alice", 5, 1}, {&b, "bob", 3, 1}};
    ASSERT_EQ(rlt_redis_decide_multi(r, bad, 2, 0, 0, &d, &refused), RLT_EINVAL);
    rlt_redis_close(r);
}

TEST(cluster_moved_slot_is_followed)
{
    rlt_redis *r = rtest_open((rlt_redis_options){.timeout = 2 * RLT_NS_PER_S});
    rlt_policy p = rtest_policy("token_bucket:10/1s");
    rlt_decision d;
    ASSERT_EQ(rlt_redis_decide(r, &p, 0, "warm", 4, 0, 1, &d), RLT_OK); /* loads the slot map */
    /* Move the (empty) slot of a fresh key to another node behind the handle's back. */
    char name[256];
    int n = rlt_redis_key_name(r, &p, "mover", 5, name, sizeof name);
    redisContext *c0 = rtest_raw(0);
    redisReply *rep = redisCommand(c0, "CLUSTER KEYSLOT %b", name, (size_t)n);
    long long slot = rep->integer;
    freeReplyObject(rep);
    redisFree(c0);
    int owner = -1;
    char ids[3][64];
    for (int i = 0; i < 3; i++) {
        redisContext *c = rtest_raw(i);
        rep = redisCommand(c, "CLUSTER MYID");
        snprintf(ids[i], sizeof ids[i], "%s", rep->str);
        freeReplyObject(rep);
        rep = redisCommand(c, "CLUSTER COUNTKEYSINSLOT %lld", slot);
        freeReplyObject(rep);
        rep = redisCommand(c, "CLUSTER NODES");
        /* the line with "myself" lists this node's slot ranges */
        const char *line = strstr(rep->str, "myself");
        const char *end = line ? strchr(line, '\n') : NULL;
        for (const char *s = line; s && s < end; s++) {
            long lo, hi;
            if (*s == ' ' && sscanf(s + 1, "%ld-%ld", &lo, &hi) == 2 && lo <= slot && slot <= hi)
                owner = i;
            else if (*s == ' ' && sscanf(s + 1, "%ld", &lo) == 1 && lo == slot &&
                     (s[1 + snprintf(NULL, 0, "%ld", lo)] == ' ' ||
                      s[1 + snprintf(NULL, 0, "%ld", lo)] == '\n'))
                owner = i;
        }
        freeReplyObject(rep);
        redisFree(c);
    }
    ASSERT(owner >= 0);
    int target = (owner + 1) % 3;
    for (int i = 0; i < 3; i++) {
        redisContext *c = rtest_raw(i);
        rep = redisCommand(c, "CLUSTER SETSLOT %lld NODE %s", slot, ids[target]);
        ASSERT(rep && rep->type != REDIS_REPLY_ERROR);
        freeReplyObject(rep);
        redisFree(c);
    }
    ASSERT_EQ(rlt_redis_decide(r, &p, 0, "mover", 5, 0, 1, &d), RLT_OK);
    ASSERT(d.allowed);
    rlt_redis_stats st;
    rlt_redis_stats_get(r, &st);
    ASSERT(st.redirects >= 1);
    redisContext *c = rtest_raw(target);
    rep = redisCommand(c, "EXISTS %b", name, (size_t)n);
    ASSERT_EQ(rep->integer, 1); /* the state lives on the new owner */
    freeReplyObject(rep);
    redisFree(c);
    rlt_redis_close(r);
}
