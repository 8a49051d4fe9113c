/* Helpers of the Redis tests: each test executable runs itself under redis-servers.sh (which
 * starts private servers on ephemeral loopback ports and always stops them), then reaches the
 * servers through the environment that script exports.  Define RTEST_KIND ("standalone",
 * "cluster", "cluster6" or "sentinel") before including, and RTEST_SERVER_ARGS for extra
 * redis-server arguments. */
#ifndef RLT_RTEST_H
#define RLT_RTEST_H

#include "ratelimit/redis.h"

#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef RTEST_KIND
#define RTEST_KIND "standalone"
#endif

/* Before main: without servers, exec `redis-servers.sh run KIND -- this-program args...`. */
__attribute__((constructor)) static void rtest_reexec(void)
{
    signal(SIGPIPE, SIG_IGN); /* a server killed mid-write must not kill the test */
    if (getenv("RLT_REDIS_SERVERS")) return;
#ifdef RTEST_SERVER_ARGS
    setenv("RLT_REDIS_EXTRA_ARGS", RTEST_SERVER_ARGS, 1); /* e.g. --loadmodule PATH */
#endif
    static char cmdline[8192], self[4096];
    FILE *f = fopen("/proc/self/cmdline", "rb");
    size_t n = f ? fread(cmdline, 1, sizeof cmdline - 1, f) : 0;
    if (f) fclose(f);
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl <= 0) {
        fprintf(stderr, "rtest: cannot find my own executable\n");
        exit(1);
    }
    self[sl] = '\0';
    char *argv[64];
    int argc = 0;
    argv[argc++] = "sh";
    argv[argc++] = RLT_REDIS_SERVERS_SH;
    argv[argc++] = "run";
    argv[argc++] = RTEST_KIND;
    argv[argc++] = "--";
    argv[argc++] = self;
    size_t first = strlen(cmdline) + 1; /* skip argv[0] */
    for (size_t i = first; i < n && argc < 63; i += strlen(cmdline + i) + 1)
        argv[argc++] = cmdline + i;
    argv[argc] = NULL;
    execv("/bin/sh", argv);
    perror("rtest: exec /bin/sh");
    exit(1);
}

static inline const char *rtest_servers(void)
{
    return getenv("RLT_REDIS_SERVERS");
}

/* Directory of server i ($RLT_REDIS_BASE/sI). */
static inline const char *rtest_dir(int i)
{
    static char buf[4][512];
    snprintf(buf[i & 3], sizeof buf[0], "%.400s/s%d", getenv("RLT_REDIS_BASE"), i);
    return buf[i & 3];
}

static inline long rtest_read_num(int i, const char *file)
{
    char path[600];
    snprintf(path, sizeof path, "%.500s/%.50s", rtest_dir(i), file);
    FILE *f = fopen(path, "r");
    long v = -1;
    if (f) {
        if (fscanf(f, "%ld", &v) != 1) v = -1;
        fclose(f);
    }
    return v;
}

static inline int rtest_port(int i)
{
    return (int)rtest_read_num(i, "port");
}
static inline pid_t rtest_pid(int i)
{
    return (pid_t)rtest_read_num(i, "pid");
}

/* Runs `redis-servers.sh WHAT DIR-of-server-i`; returns its exit status. */
static inline int rtest_sh(const char *what, int i)
{
    char cmd[2400];
    snprintf(cmd, sizeof cmd, "sh '%s' %s '%s'", getenv("RLT_REDIS_SH"), what, rtest_dir(i));
    return system(cmd);
}

/* A plain hiredis connection to server i, for inspecting what the library wrote. */
static inline redisContext *rtest_raw(int i)
{
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", rtest_port(i), tv);
    if (!c || c->err) {
        fprintf(stderr, "rtest: cannot connect to server %d\n", i);
        exit(1);
    }
    return c;
}

/* Opens a handle on the test servers with the given options (servers filled in). */
static inline rlt_redis *rtest_open(rlt_redis_options o)
{
    o.servers = rtest_servers();
    o.cluster = strncmp(RTEST_KIND, "cluster", 7) == 0;
    if (strcmp(RTEST_KIND, "sentinel") == 0) {
        o.sentinels = getenv("RLT_REDIS_SENTINELS");
        o.master_name = "mymaster";
    }
    rlt_redis *r = NULL;
    int rc = rlt_redis_open(&r, &o);
    if (rc) {
        fprintf(stderr, "rtest: rlt_redis_open: %s\n", rlt_strerror(rc));
        exit(1);
    }
    return r;
}

static inline rlt_policy rtest_policy(const char *text)
{
    rlt_policy p;
    char err[200];
    int rc = rlt_policy_parse(&p, text, strlen(text), err, sizeof err);
    if (rc) {
        fprintf(stderr, "rtest: policy %s: %s\n", text, err);
        exit(1);
    }
    return p;
}

/* Waits, when the UTC hour ends within `margin_s` seconds, until it has ended: the tests that
 * count a fixed_window:N/1h key across a failover or a reshard read its count at the end, and
 * the key expires with its window (Redis's clock, the machine's here): a test run across the
 * hour's end would read 0. */
static inline void rtest_away_from_hour_end(int margin_s)
{
    long left = 3600 - (long)(time(NULL) % 3600);
    if (left <= margin_s) sleep((unsigned)left + 1);
}

static inline int64_t rtest_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* xorshift64*: seeded, reproducible traces. */
static inline uint64_t rtest_rand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * UINT64_C(2685821657736338717);
}

static inline int64_t rtest_below(uint64_t *s, int64_t n)
{
    return n <= 0 ? 0 : (int64_t)(rtest_rand(s) % (uint64_t)n);
}

/* The differential traces' next clock step, in microseconds, for a window of W us and a
 * request gap of `gap` us: 35% none, 35% within two gaps, 20% within a window, 5% one to three
 * windows, 5% back by up to a gap (the clock steps back a little). */
static inline int64_t rtest_trace_dt(uint64_t *s, int64_t W, int64_t gap)
{
    int64_t pick = rtest_below(s, 100);
    if (pick < 35) return 0;
    if (pick < 70) return rtest_below(s, 2 * gap + 1);
    if (pick < 90) return rtest_below(s, W + 1);
    if (pick < 95) return W + rtest_below(s, 2 * W);
    return -rtest_below(s, gap + 1);
}

#endif
