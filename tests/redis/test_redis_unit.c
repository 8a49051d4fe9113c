/* Unit tests of the Redis part that need no server: hash slots (Redis Cluster's CRC16 and
 * hash tags), key names, policy bounds, option validation, and the fail-mode decision of an
 * unreachable server. */
#include "test.h"

#include "redis/internal.h"

#include <signal.h>

TEST(key_slot_is_crc16_of_the_hash_tag)
{
    /* Values from the Redis Cluster specification and CLUSTER KEYSLOT. */
    ASSERT_EQ(rlt__key_slot("123456789", 9), 0x31C3 & 16383);
    ASSERT_EQ(rlt__key_slot("foo", 3), 12182);
    ASSERT_EQ(rlt__key_slot("{user1000}.following", 20), rlt__key_slot("user1000", 8));
    ASSERT_EQ(rlt__key_slot("foo{}{bar}", 10), rlt__key_slot("foo{}{bar}", 10));
    ASSERT_NE(rlt__key_slot("foo{}{bar}", 10), rlt__key_slot("bar", 3)); /* empty tag: whole key */
    ASSERT_EQ(rlt__key_slot("foo{{bar}}zap", 13), rlt__key_slot("{bar", 4));
}

TEST(key_names_carry_a_hash_tag_and_the_policy)
{
    rlt_redis *r;
    ASSERT_EQ(rlt_redis_open(&r, &(rlt_redis_options){.servers = "127.0.0.1:1"}), RLT_OK);
    rlt_policy p;
    ASSERT_EQ(rlt_policy_parse(&p, "gcra:10/1s", 10, NULL, 0), RLT_OK);
    char buf[1024];
    int n = rlt_redis_key_name(r, &p, "alice", 5, buf, sizeof buf);
    ASSERT(n > 0);
    buf[n] = 0;
    ASSERT_STR_EQ(buf, "rlt:{alice}alice:5:10:1000000000:10:0:0");
    n = rlt_redis_key_name(r, &p, "{acct}:ip", 9, buf, sizeof buf);
    buf[n] = 0;
    ASSERT_STR_EQ(buf, "rlt:{acct}{acct}%3Aip:5:10:1000000000:10:0:0");
    rlt_policy q;
    ASSERT_EQ(rlt_policy_parse(&q, "gcra:20/1s", 10, NULL, 0), RLT_OK);
    char buf2[1024];
    int m = rlt_redis_key_name(r, &q, "{acct}:ip", 9, buf2, sizeof buf2);
    ASSERT(m != n || memcmp(buf, buf2, (size_t)n) != 0); /* another policy, another key */
    ASSERT_EQ(rlt_redis_key_name(r, &p, "", 0, buf, sizeof buf), RLT_EKEYLEN);
    ASSERT_EQ(rlt_redis_key_name(r, &p, "alice", 5, buf, 8), RLT_ENOSPC);
    rlt_redis_close(r);
}

TEST(key_names_never_alias_two_keys)
{
    /* "x" and "{x}" share a hash tag (one slot), never a state; nor do keys that differ only
     * where a ':' or '%' could be read as the policy's tail. */
    rlt_redis *r;
    ASSERT_EQ(rlt_redis_open(&r, &(rlt_redis_options){.servers = "127.0.0.1:1"}), RLT_OK);
    rlt_policy p, q;
    ASSERT_EQ(rlt_policy_parse(&p, "fixed_window:5/1h", 17, NULL, 0), RLT_OK);
    ASSERT_EQ(rlt_policy_parse(&q, "fixed_window:5/1m", 17, NULL, 0), RLT_OK);
    static const char *const keys[] = {"x", "{x}", "{x}x", "x:1", "x%3A1", "{x}:y", "x}", "{x"};
    char a[1024], b[1024];
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        for (size_t j = 0; j < sizeof keys / sizeof keys[0]; j++)
            for (int pp = 0; pp < 2; pp++) {
                int n = rlt_redis_key_name(r, &p, keys[i], strlen(keys[i]), a, sizeof a);
                int m = rlt_redis_key_name(r, pp ? &q : &p, keys[j], strlen(keys[j]), b, sizeof b);
                ASSERT(n > 0 && m > 0);
                bool same = n == m && memcmp(a, b, (size_t)n) == 0;
                ASSERT_EQ(same, i == j && pp == 0);
            }
    /* And the name lands in the key's own slot, as cluster clients route it. */
    int n = rlt_redis_key_name(r, &p, "{x}", 3, a, sizeof a);
    ASSERT(n > 0);
    rlt_redis_close(r);
}

TEST(open_validates_options)
{
    rlt_redis *r = (rlt_redis *)1;
    ASSERT_EQ(rlt_redis_open(&r, &(rlt_redis_options){.servers = "nohost"}), RLT_EINVAL);
    ASSERT(r == NULL);
    ASSERT_EQ(rlt_redis_open(&r, &(rlt_redis_options){.servers = "h:0"}), RLT_EINVAL);
    ASSERT_EQ(rlt_redis_open(&r, &(rlt_redis_options){.servers = "a:1,b:2"}), RLT_EINVAL);
    ASSERT_EQ(rlt_redis_open(&r, &(rlt_redis_options){.prefix = "x{"}), RLT_EINVAL);
    ASSERT_EQ(rlt_redis_open(&r, &(rlt_redis_options){.timeout = -1}), RLT_EINVAL);
    ASSERT_EQ(rlt_redis_open(&r, &(rlt_redis_options){.servers = "a:1,b:2", .cluster = true}),
              RLT_OK);
    rlt_redis_close(r);
    rlt_redis_close(NULL);
    ASSERT_EQ(rlt_redis_open(NULL, NULL), RLT_EINVAL);
}

TEST(unreachable_server_gives_the_fail_mode_decision_and_opens_the_breaker)
{
    signal(SIGPIPE, SIG_IGN);
    rlt_redis *r;
    /* Port 1 on loopback: connection refused at once. */
    ASSERT_EQ(
        rlt_redis_open(&r, &(rlt_redis_options){.servers = "127.0.0.1:1", .breaker_failures = 2}),
        RLT_OK);
    rlt_policy p;
    ASSERT_EQ(rlt_policy_parse(&p, "gcra:10/1s,burst=20", 19, NULL, 0), RLT_OK);
    rlt_decision d;
    ASSERT_EQ(rlt_redis_decide(r, &p, 0, "k", 1, 0, 1, &d), RLT_EBACKEND);
    ASSERT(!d.allowed);
    ASSERT_EQ(d.limit, 20);
    ASSERT(d.retry_after >= RLT_NS_PER_MS);
    ASSERT_EQ(rlt_redis_decide(r, &p, RLT_REDIS_FAIL_OPEN, "k", 1, 0, 1, &d), RLT_EBACKEND);
    ASSERT(d.allowed);
    rlt_redis_stats st;
    rlt_redis_stats_get(r, &st);
    ASSERT_EQ(st.breaker_opened, 1);
    ASSERT_EQ(st.nodes_open, 1);
    ASSERT_EQ(rlt_redis_decide(r, &p, 0, "k", 1, 0, 1, &d), RLT_EBACKEND);
    rlt_redis_stats_get(r, &st);
    ASSERT_EQ(st.short_circuited, 1);
    ASSERT_EQ(st.fail_open, 1);
    ASSERT_EQ(st.fail_closed, 2);
    ASSERT_EQ(st.decisions, 3);
    rlt_redis_close(r);
}

TEST(calendar_windows_run_in_redis_under_key_names_of_their_own)
{
    rlt_redis *r;
    ASSERT_EQ(rlt_redis_open(&r, &(rlt_redis_options){.servers = "127.0.0.1:1"}), RLT_OK);
    static const char *const texts[] = {"fixed_window:10/1y,tz=Australia/Lord_Howe",
                                        "fixed_window:10/12mo,tz=Europe/Paris",
                                        "fixed_window:10/1y", "fixed_window:10/31556952s",
                                        "fixed_window:10/1y,tz=America/Argentina/ComodRivadavia"};
    char names[5][1024];
    for (int i = 0; i < 5; i++) {
        rlt_policy p;
        ASSERT_EQ(rlt_policy_parse(&p, texts[i], strlen(texts[i]), NULL, 0), RLT_OK);
        ASSERT_EQ(rlt_redis_policy_check(&p), RLT_OK);
        int n = rlt_redis_key_name(r, &p, "k", 1, names[i], sizeof names[i]);
        ASSERT(n > 0);
        names[i][n] = '\0';
        for (int j = 0; j < i; j++)
            if (strcmp(names[i], names[j]) == 0)
                RLT_FAIL_("%s and %s share a key", texts[i], texts[j]);
    }
    ASSERT(strstr(names[0], ":cal12:Australia/Lord_Howe:") != NULL);
    rlt_redis_close(r);
}
