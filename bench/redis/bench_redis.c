/* Benchmark of libratelimit_redis against one Redis: GCRA decisions per second over one
 * connection, synchronous (one round trip each) and pipelined (rlt_redis_decide_batch); every
 * algorithm pipelined, with the server's CPU time per script call (INFO commandstats
 * usec_per_call of EVALSHA, reset before each case) and the client's CPU time per decision;
 * and the local lease mode's round trips saved and measured over-admission.
 * Usage: bench_redis HOST:PORT [SECONDS_PER_CASE] */
#include "ratelimit/redis.h"

#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static int64_t mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * RLT_NS_PER_S + ts.tv_nsec;
}

static int64_t cpu_ns(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * RLT_NS_PER_S +
           ((int64_t)ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000;
}

/* A plain connection for CONFIG RESETSTAT and INFO commandstats. */
static redisContext *raw_connect(const char *servers)
{
    char host[256];
    const char *colon = strrchr(servers, ':');
    size_t hl = colon ? (size_t)(colon - servers) : 0;
    if (!colon || hl >= sizeof host) return NULL;
    memcpy(host, servers, hl);
    host[hl] = 0;
    redisContext *c = redisConnect(host, atoi(colon + 1));
    if (c && c->err) {
        redisFree(c);
        return NULL;
    }
    return c;
}

static void reset_stats(redisContext *c)
{
    redisReply *rep = c ? redisCommand(c, "CONFIG RESETSTAT") : NULL;
    if (rep) freeReplyObject(rep);
}

/* usec_per_call of the EVALSHA command since the last reset, or -1. */
static double evalsha_usec(redisContext *c)
{
    redisReply *rep = c ? redisCommand(c, "INFO commandstats") : NULL;
    double v = -1;
    if (rep && rep->type == REDIS_REPLY_STRING) {
        const char *at = strstr(rep->str, "cmdstat_evalsha:");
        at = at ? strstr(at, "usec_per_call=") : NULL;
        if (at) v = atof(at + 14);
    }
    if (rep) freeReplyObject(rep);
    return v;
}

/* Pipelined batches of 64 under `policy` over 1024 keys for `span` ns: one line of figures. */
static void pipelined_case(rlt_redis *r, redisContext *raw, const char *label, const char *policy,
                           int64_t span)
{
    enum { BATCH = 64 };
    rlt_policy p;
    if (rlt_policy_parse(&p, policy, strlen(policy), NULL, 0)) {
        fprintf(stderr, "bench_redis: bad policy %s\n", policy);
        exit(1);
    }
    rlt_redis_check ck[BATCH];
    char keys[BATCH][32];
    rlt_decision out[BATCH];
    int status[BATCH];
    int64_t n = 0, errors = 0, allowed = 0;
    reset_stats(raw);
    int64_t t0 = mono(), c0 = cpu_ns();
    while (mono() - t0 < span) {
        for (int i = 0; i < BATCH; i++) {
            snprintf(keys[i], sizeof keys[i], "bench:%lld", (long long)((n + i) & 1023));
            ck[i] = (rlt_redis_check){&p, keys[i], strlen(keys[i]), 1};
        }
        errors += rlt_redis_decide_batch(r, ck, BATCH, 0, 0, out, status) != RLT_OK;
        for (int i = 0; i < BATCH; i++)
            allowed += out[i].allowed;
        n += BATCH;
    }
    double el = (double)(mono() - t0) / 1e9;
    double client_us = (double)(cpu_ns() - c0) / 1e3 / (double)n;
    printf("%-15s %-34s %9.0f decisions/s  server %5.2f us/call  client %5.2f us/decision"
           "  (%lld calls, %.0f%% allowed, %lld errors)\n",
           label, policy, (double)n / el, evalsha_usec(raw), client_us, (long long)n,
           100.0 * (double)allowed / (double)n, (long long)errors);
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
    redisContext *raw = raw_connect(argv[1]);
    rlt_decision warm;
    rlt_redis_decide(r, &p, 0, "warm", 4, 0, 1, &warm); /* loads the script */
    reset_stats(raw);
    int64_t n = 0, t0 = mono(), c0 = cpu_ns(), errors = 0;
    while (mono() - t0 < span) {
        rlt_decision d;
        snprintf(key, sizeof key, "bench:%lld", (long long)(n & 1023));
        errors += rlt_redis_decide(r, &p, 0, key, strlen(key), 0, 1, &d) != RLT_OK;
        n++;
    }
    double el = (double)(mono() - t0) / 1e9;
    printf("%-15s %-34s %9.0f decisions/s  server %5.2f us/call  client %5.2f us/decision"
           "  (%lld calls, %lld errors)\n",
           "sync", "gcra:1000000/1s,burst=1000", (double)n / el, evalsha_usec(raw),
           (double)(cpu_ns() - c0) / 1e3 / (double)n, (long long)n, (long long)errors);

    /* pipelined: batches of 64, GCRA then every algorithm (limits high enough that most
     * requests are allowed and written, the expensive case) */
    pipelined_case(r, raw, "pipelined", "gcra:1000000/1s,burst=1000", span);
    static const char *const algos[] = {
        "fixed_window:1000000/1s",
        "sliding_log:1000/1s",
        "sliding_window:1000000/1s",
        "token_bucket:1000000/1s,burst=1000",
        "gcra:1000000/1s,burst=1000",
        "gcra:3000/7s,burst=1000",
        "leaky_bucket:1000000/1s,queue=1000",
        "concurrency:1000/1s",
    };
    for (size_t i = 0; i < sizeof algos / sizeof algos[0]; i++)
        pipelined_case(r, raw, "per algorithm", algos[i], span / 2);
    if (raw) redisFree(raw);
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
            if (rlt_redis_decide(h[i], &fw, flags, key, strlen(key), t, 1, &d) == RLT_OK &&
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
