/* Decisions per second through libratelimit_redis, pipelined (rlt_redis_decide_batch, 64 per
 * batch, random keys of 1 M), on the module (RL.DECIDE) against the Lua scripts, one engine
 * forced per handle, for GCRA, token bucket, sliding window and fixed window.  Never a test:
 * bench/redis/module.sh runs it against a private redis-server with ratelimit.so loaded.
 * Usage: bench_module HOST:PORT SECONDS_PER_CASE ENGINE(module|scripts) */
#include "ratelimit/redis.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: bench_module HOST:PORT SECONDS module|scripts\n");
        return 2;
    }
    double secs = atof(argv[2]);
    bool module = strcmp(argv[3], "module") == 0;
    rlt_redis_options o = {.servers = argv[1],
                           .timeout = RLT_NS_PER_S,
                           .engine = module ? RLT_REDIS_ENGINE_MODULE : RLT_REDIS_ENGINE_SCRIPTS};
    rlt_redis *r;
    if (rlt_redis_open(&r, &o) != RLT_OK) return 1;
    const char *texts[] = {"gcra:100/1s", "token_bucket:100/1s", "sliding_window:100/1s",
                           "fixed_window:100/1s"};
    enum { B = 64 };
    static char keys[B][24];
    rlt_redis_check ck[B];
    rlt_decision out[B];
    int status[B];
    uint64_t seed = 88172645463325252u;
    for (size_t t = 0; t < sizeof texts / sizeof texts[0]; t++) {
        rlt_policy p;
        const char *only = getenv("BENCH_POLICY"); /* one policy alone, for experiments */
        if (only && strcmp(only, texts[t]) != 0) continue;
        if (rlt_policy_parse(&p, texts[t], strlen(texts[t]), NULL, 0) != RLT_OK) return 1;
        long long n = 0;
        double t0 = mono();
        while (mono() - t0 < secs) {
            for (int i = 0; i < B; i++) {
                seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
                snprintf(keys[i], sizeof keys[i], "bm:%llu", (unsigned long long)(seed % 1000000));
                ck[i] = (rlt_redis_check){&p, keys[i], strlen(keys[i]), 1};
            }
            if (rlt_redis_decide_batch(r, ck, B, 0, 0, out, status) != RLT_OK) {
                fprintf(stderr, "bench_module: a batch failed\n");
                return 1;
            }
            n += B;
        }
        double el = mono() - t0;
        rlt_redis_stats st;
        rlt_redis_stats_get(r, &st);
        printf("library pipelined %-8s %-22s %9.0f decisions/s (module calls %llu)\n", argv[3],
               texts[t], (double)n / el, (unsigned long long)st.module_calls);
    }
    rlt_redis_close(r);
    return 0;
}
