/* `ratelimit replay` reports a jittered wait exactly as the store does for the same key and
 * policy (rlt_jitter of the key's rlt_hash_fnv1a, the one hash every front end uses), so a
 * replayed log shows the waits the daemon would send.  Runs the built command on a trace of
 * several keys and compares every line with a store fed the same requests. */
#define _POSIX_C_SOURCE 200809L
#include "cli/cliutil.h"
#include "ratelimit/store.h"
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define POLICY "gcra:2/1s,burst=2,jitter=50%"

TEST(replay_jitter_equals_the_store_jitter_for_the_same_key_and_policy)
{
    static const char *const keys[] = {"alice", "bob", "carol", "10.0.0.1", "user:42"};
    char path[] = "/tmp/rlt_replay_jitter_XXXXXX";
    int fd = mkstemp(path);
    ASSERT(fd >= 0);
    FILE *t = fdopen(fd, "w");
    ASSERT(t != NULL);
    for (int i = 0; i < 200; i++)
        fprintf(t, "%d.%03d %s\n", i / 20, (i % 20) * 50, keys[(i * 7) % 5]);
    ASSERT_EQ(fclose(t), 0);

    char cmd[512];
    snprintf(cmd, sizeof cmd, "'%s' replay --policy '%s' < '%s'", RLT_CLI_BIN, POLICY, path);
    FILE *out = popen(cmd, "r");
    ASSERT(out != NULL);

    rlt_policy p;
    char err[160];
    ASSERT_EQ(rlt_policy_parse(&p, POLICY, strlen(POLICY), err, sizeof err), RLT_OK);
    rlt_policy plain = p; /* the same policy without jitter: the exact waits */
    plain.jitter = 0;
    rlt_store *store = NULL, *exact_store = NULL;
    int id = 0, exact_id = 0;
    ASSERT_EQ(rlt_store_open(&store, NULL), RLT_OK);
    ASSERT_EQ(rlt_store_open(&exact_store, NULL), RLT_OK);
    ASSERT_EQ(rlt_store_set_policy(store, "replay", &p, RLT_CHANGE_RESET, &id), RLT_OK);
    ASSERT_EQ(rlt_store_set_policy(exact_store, "replay", &plain, RLT_CHANGE_RESET, &exact_id),
              RLT_OK);

    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int lines = 0, jittered = 0;
    while ((len = getline(&line, &cap, out)) > 0) {
        /* TIME KEY COST VERDICT REMAINING RETRY_AFTER RESET_AFTER DELAY, times in seconds */
        char time[64], key[64], verdict[16], retry[64];
        long long cost, remaining;
        ASSERT_EQ(sscanf(line, "%63s %63s %lld %15s %lld %63s", time, key, &cost, verdict,
                         &remaining, retry),
                  6);
        rlt_ns now, got;
        ASSERT_EQ(rlt__dec_parse(time, strlen(time), RLT_NS_PER_S, &now), RLT__DEC_OK);
        ASSERT_EQ(rlt__dec_parse(retry, strlen(retry), RLT_NS_PER_S, &got), RLT__DEC_OK);
        rlt_decision d;
        ASSERT_EQ(rlt_store_decide(store, id, key, strlen(key), now, cost, &d), RLT_OK);
        ASSERT_EQ(strcmp(verdict, d.allowed ? "allow" : "deny"), 0);
        ASSERT_EQ(got, d.retry_after);
        /* ... and the store's wait is the documented rule: the exact wait spread by rlt_jitter
         * of the key's rlt_hash_fnv1a at that instant. */
        rlt_decision e;
        ASSERT_EQ(rlt_store_decide(exact_store, exact_id, key, strlen(key), now, cost, &e), RLT_OK);
        ASSERT_EQ(e.allowed, d.allowed);
        rlt_ns want = e.retry_after > 0
                          ? rlt_jitter(&p, rlt_hash_fnv1a(key, strlen(key)), now, e.retry_after)
                          : e.retry_after;
        ASSERT_EQ(got, want);
        jittered += got != e.retry_after;
        lines++;
    }
    free(line);
    ASSERT_EQ(pclose(out), 0);
    rlt_store_close(store);
    rlt_store_close(exact_store);
    unlink(path);
    ASSERT_EQ(lines, 200);
    ASSERT(jittered > 10); /* the spread is there to compare */
}
