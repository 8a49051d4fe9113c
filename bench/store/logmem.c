/* store_logmem: the keyed store's bytes per key for a sliding log, by how many entries each
 * key's window holds (docs/performance.md, issue 36 item 7).  K keys ("user:N") under
 * sliding_log:N/1m each get H hits at distinct instants inside one window; then the store's
 * own count (rlt_store_stats_get: tables, out-of-line blocks) over K.  Beside it, the same run
 * under sliding_log:N/1m,block=1s: a penalty box keeps the full log of N slots (logs.h), as
 * every key did before compact logs, plus the box's 16 bytes.  Not timed.
 *
 * Usage: store_logmem [limit=1000] [hits=1] [keys=100000]
 * The last line: logmem limit=... hits=... keys=... bytes_per_key=... full_log_bytes_per_key=... ratio=... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ratelimit/ratelimit.h"
#include "ratelimit/store.h"

static long arg(int argc, char **argv, const char *name, long dflt)
{
    size_t n = strlen(name);
    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], name, n) == 0 && argv[i][n] == '=') return atol(argv[i] + n + 1);
    return dflt;
}

/* Bytes per key held by the store after every key took `hits` hits under `text`. */
static double measure(const char *text, long hits, long keys)
{
    rlt_policy p;
    rlt_store *s = NULL;
    rlt_store_options o = {0};
    int id = -1;
    if (rlt_policy_parse(&p, text, strlen(text), NULL, 0) || rlt_store_open(&s, &o) ||
        rlt_store_set_policy(s, "p", &p, RLT_CHANGE_RESET, &id)) {
        fprintf(stderr, "store_logmem: cannot set up %s\n", text);
        exit(1);
    }
    rlt_store_stats st;
    rlt_store_stats_get(s, &st);
    const uint64_t empty = st.bytes;
    char key[32];
    for (long h = 0; h < hits; h++) /* one instant per round, every key once a round */
        for (long k = 0; k < keys; k++) {
            int kl = snprintf(key, sizeof key, "user:%ld", k);
            rlt_decision d;
            if (rlt_store_decide(s, id, key, (size_t)kl, h * RLT_NS_PER_MS, 1, &d) || !d.allowed) {
                fprintf(stderr, "store_logmem: key %s hit %ld refused\n", key, h);
                exit(1);
            }
        }
    rlt_store_stats_get(s, &st);
    rlt_store_close(s);
    return (double)(st.bytes - empty) / (double)keys;
}

int main(int argc, char **argv)
{
    const long limit = arg(argc, argv, "limit", 1000), hits = arg(argc, argv, "hits", 1),
               keys = arg(argc, argv, "keys", 100000);
    if (limit < 1 || limit > RLT_SLIDING_LOG_MAX || hits < 1 || hits > limit || keys < 1) {
        fprintf(stderr, "usage: store_logmem [limit=1..%lld] [hits=1..limit] [keys>=1]\n",
                (long long)RLT_SLIDING_LOG_MAX);
        return 2;
    }
    char compact[64], full[64];
    snprintf(compact, sizeof compact, "sliding_log:%ld/1m", limit);
    snprintf(full, sizeof full, "sliding_log:%ld/1m,block=1s", limit);
    const double c = measure(compact, hits, keys), f = measure(full, hits, keys);
    printf("logmem limit=%ld hits=%ld keys=%ld bytes_per_key=%.1f full_log_bytes_per_key=%.1f "
           "ratio=%.3f\n",
           limit, hits, keys, c, f, c / f);
    return 0;
}
