/* Benchmark of libratelimit_redis against one Redis: GCRA decisions per second over one
 * connection, synchronous (one round trip each) and pipelined (rlt_redis_decide_batch), and
 * the local lease mode's round trips saved and measured over-admission.
 * Usage: bench_redis HOST:PORT [SECONDS_PER_CASE] */
#include "ratelimit/redis.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int64_t mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * RLT_NS_PER_S + ts.tv_nsec;
}

static rlt_redis *open_or_die(const char *servers, int64_t lease)
{
    rlt_redis *r;
    rlt_redis_options o = {.servers = servers, .timeout = RLT_NS_PER_S, .lease_units = lease};
    int rc = rlt_redis_open(&r, &o);
    if (rc) {
        fprintf(stderr, "bench_redis: open %s: %s\n", servers, rlt_strerror(rc));
        exit(1);
    }
    return r;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_redis HOST:PORT [SECONDS_PER_CASE]\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    double secs = argc > 2 ? atof(argv[2]) : 2.0;
    int64_t span = (int64_t)(secs * 1e9);
    rlt_policy p;
    rlt_policy_parse(&p, "gcra:1000000/1s,burst=1000", 26, NULL, 0);
    char key[32];

    /* sync: one decision, one round trip */
    rlt_redis *r = open_or_die(argv[1], 0);
    int64_t n = 0, t0 = mono(), errors = 0;
    while (mono() - t0 < span) {
        rlt_decision d;
        snprintf(key, sizeof key, "bench:%lld", (long long)(n & 1023));
        errors += rlt_redis_decide(r, &p, 0, key, strlen(key), 1, 0, &d) != RLT_OK;
        n++;
    }
    double el = (double)(mono() - t0) / 1e9;
    printf("sync      1 connection            %9.0f decisions/s  (%lld calls, %lld errors)\n",
           (double)n / el, (long long)n, (long long)errors);

    /* pipelined: batches of 64 */
    enum { BATCH = 64 };
    rlt_redis_check ck[BATCH];
    char keys[BATCH][32];
    rlt_decision out[BATCH];
    int status[BATCH];
    n = 0, errors = 0, t0 = mono();
    while (mono() - t0 < span) {
        for (int i = 0; i < BATCH; i++) {
            snprintf(keys[i], sizeof keys[i], "bench:%lld", (long long)((n + i) & 1023));
            ck[i] = (rlt_redis_check){&p, keys[i], strlen(keys[i]), 1};
        }
        errors += rlt_redis_decide_batch(r, ck, BATCH, 0, 0, out, status) != RLT_OK;
        n += BATCH;
    }
    el = (double)(mono() - t0) / 1e9;
    printf("pipelined 1 connection, batch %d  %9.0f decisions/s  (%lld calls, %lld errors)\n",
           BATCH, (double)n / el, (long long)n, (long long)errors);
    rlt_redis_close(r);

    /* lease: S handles share one hot key, 100/s fixed windows, traffic ~4x the limit, in
     * virtual time (caller time) so the run is fast and reproducible */
    enum { S = 4 };
    int64_t leases[] = {0, 5, 10, 25};
    rlt_policy fw;
    rlt_policy_parse(&fw, "fixed_window:100/1s", 19, NULL, 0);
    for (size_t li = 0; li < sizeof leases / sizeof leases[0]; li++) {
        rlt_redis *h[S];
        for (int i = 0; i < S; i++)
            h[i] = open_or_die(argv[1], leases[li]);
        snprintf(key, sizeof key, "hot:%lld", (long long)mono());
        int64_t per_window[64] = {0}, decisions = 0, admitted = 0, worst = 0;
        uint64_t x = 12345;
        int64_t t = RLT_NS_PER_S;
        for (; t < 31 * RLT_NS_PER_S;) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            t += (int64_t)(x % 5000000); /* mean 2.5 ms: ~400 requests/s */
            rlt_decision d;
            int i = (int)(x >> 40) % S;
            unsigned flags = RLT_REDIS_CALLER_TIME | (leases[li] ? RLT_REDIS_LEASE : 0);
            if (rlt_redis_decide(h[i], &fw, flags, key, strlen(key), 1, t, &d) == RLT_OK &&
                d.allowed) {
                per_window[(t / RLT_NS_PER_S) % 64]++;
                admitted++;
            }
            decisions++;
        }
        for (int w = 0; w < 64; w++)
            if (per_window[w] > worst) worst = per_window[w];
        uint64_t trips = 0;
        for (int i = 0; i < S; i++) {
            rlt_redis_stats st;
            rlt_redis_stats_get(h[i], &st);
            trips += st.round_trips;
            rlt_redis_close(h[i]);
        }
        printf("lease k=%-3lld %d servers: %lld decisions, %llu round trips (%.1f%%), admitted "
               "%lld in 30 windows of 100, worst window %lld (bound %lld)\n",
               (long long)leases[li], S, (long long)decisions, (unsigned long long)trips,
               100.0 * (double)trips / (double)decisions, (long long)admitted, (long long)worst,
               (long long)(100 + S * (leases[li] ? leases[li] - 1 : 0)));
    }
    return 0;
}
