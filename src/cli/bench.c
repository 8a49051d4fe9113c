/* `ratelimit bench`: drives the keyed store from T threads with pregenerated keys and a virtual
 * clock, and prints decisions per second, nanoseconds per decision and bytes per key.
 *
 * What is measured is the store call alone: the key streams are generated before the clock
 * starts (no RNG, no formatting inside the loop), and the clock is read once per 256
 * decisions, as the bare table of ../shared/anchors/gcra_bench.c does; `now` is the monotonic
 * time since the start, so refill happens at real speed.
 * --batch N hands the store N requests per call (rlt_store_decide_batch, as a server does with
 * a pipeline of commands); the default, 1, calls rlt_store_decide once per request.
 * Every key is inserted once before the timed run ("prefill"), so the run measures a store
 * holding --keys keys; --fill stops after the prefill (to measure memory at 10M keys). */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "ratelimit/ratelimit.h"
#include "ratelimit/store.h"

#define ROUND 1024
#define TICK 256 /* decisions per clock read (a batch bigger than that reads it once) */
#define MAX_THREADS 256

static const char usage[] =
    "usage: ratelimit bench [--policy SPEC] [--keys N] [--threads T] [--seconds S]\n"
    "                       [--dist uniform|zipf] [--zipf-s X] [--key-len L] [--cost C]\n"
    "                       [--shards N] [--seed N] [--stream N] [--batch N] [--pin] [--fill]\n"
    "Drives the keyed store with pregenerated keys and prints a table that ends with\n"
    "  decisions_per_sec=<n> ns_per_decision=<n> bytes_per_key=<n>\n"
    "  --policy SPEC   policy text (default gcra:100/s)\n"
    "  --keys N        distinct keys, all inserted before the run (default 1000; k/M suffix)\n"
    "  --threads T     threads sharing the store (default 1)\n"
    "  --seconds S     length of the timed run (default 2; decimals allowed)\n"
    "  --dist D        key popularity: uniform (default) or zipf\n"
    "  --zipf-s X      zipf exponent (default 1.0)\n"
    "  --key-len L     key length in bytes, 8..512 (default 16)\n"
    "  --cost C        cost of each request (default 1)\n"
    "  --shards N      store lock shards (default: the store's, 1024)\n"
    "  --seed N        key stream seed (default 1)\n"
    "  --stream N      pregenerated requests per thread (default 4M; cycled)\n"
    "  --batch N       requests per store call (1, 2, 4, ... 1024): 1 (default) calls\n"
    "                  rlt_store_decide per request; N > 1 calls rlt_store_decide_batch\n"
    "  --pin           pin thread t to the t-th CPU this process may run on (modulo their\n"
    "                  count), as the anchor's bare table pins its threads\n"
    "  --fill          insert the keys, print the memory figures, skip the timed run\n"
    "  ns_per_decision is 1e9 / decisions_per_sec (aggregate over threads, wall clock).\n"
    "  cpu_decisions_per_sec sums each thread's decisions per CPU-second it got.\n";

typedef struct bench_cfg {
    rlt_policy policy;
    char policy_text[128];
    uint64_t keys, stream, seed;
    unsigned threads, shards;
    double seconds, zipf_s;
    int zipf;
    size_t key_len;
    int64_t cost;
    int fill;
    int pin;
    unsigned batch;
} bench_cfg;

typedef struct worker {
    pthread_t tid;
    const bench_cfg *cfg;
    rlt_store *store;
    int pid;
    uint8_t *stream; /* cfg->stream keys of key_len bytes */
    uint64_t decisions, allowed, denied, errors;
    double elapsed;
    double cpu; /* the thread's CPU seconds during the run */
    pthread_barrier_t *barrier;
    int64_t t0;
    int cpu_pin; /* the CPU to pin the thread to, or -1 */
} worker;

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * RLT_NS_PER_S + ts.tv_nsec;
}

/* The calling thread's CPU time: on a shared machine a worker that is descheduled loses wall
 * time but no CPU time, so decisions per CPU-second says what the code does per core. */
static int64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * RLT_NS_PER_S + ts.tv_nsec;
}

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* Key number i: key_len bytes, distinct for distinct i (the first 8 bytes are a bijection of i). */
static void make_key(uint8_t *out, size_t len, uint64_t i)
{
    uint64_t x = i * UINT64_C(0xD6E8FEB86659FD93);
    x ^= x >> 32;
    x *= UINT64_C(0xD6E8FEB86659FD93);
    x ^= x >> 32; /* invertible mixing */
    memcpy(out, &x, 8);
    uint64_t st = i;
    for (size_t o = 8; o < len; o += 8) {
        uint64_t r = splitmix(&st);
        memcpy(out + o, &r, len - o < 8 ? len - o : 8);
    }
}

/* x^-s for x >= 1 without libm (the cli links libc only): exp(-s ln x) by short series.
 * Only the key popularity of --dist zipf depends on it, to ~1e-12. */
static double ln_d(double x)
{
    int e = 0;
    while (x >= 2)
        x /= 2, e++;
    double z = (x - 1) / (x + 1), z2 = z * z, term = z, sum = 0;
    for (int k = 1; k < 40; k += 2, term *= z2)
        sum += term / k;
    return 2 * sum + e * 0.69314718055994530942;
}

static double exp_d(double y)
{
    int k = 0;
    while (y < -0.5)
        y += 0.69314718055994530942, k++;
    double term = 1, sum = 1;
    for (int n = 1; n < 30; n++)
        term *= y / n, sum += term;
    while (k-- > 0)
        sum /= 2;
    return sum;
}

static double pow_neg(double x, double s)
{
    return exp_d(-s * ln_d(x));
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *s == '-') return -1;
    uint64_t mul = 1;
    if (*end == 'k' || *end == 'K')
        mul = 1000, end++;
    else if (*end == 'm' || *end == 'M')
        mul = 1000000, end++;
    if (*end || (mul > 1 && v > UINT64_MAX / mul)) return -1;
    *out = (uint64_t)v * mul;
    return 0;
}

static int parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= 0) || v > 1e6) return -1;
    *out = v;
    return 0;
}

static int bad(const char *msg, const char *arg)
{
    fprintf(stderr, "ratelimit bench: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    fprintf(stderr, "try 'ratelimit bench --help'\n");
    return 2;
}

/* Option a's value v as a whole number in [lo, hi] into *out: 0, or 2 after saying so. */
static int u64_in(const char *a, const char *v, uint64_t lo, uint64_t hi, uint64_t *out)
{
    if (!parse_u64(v, out) && *out >= lo && *out <= hi) return 0;
    char msg[80];
    snprintf(msg, sizeof msg, "%s wants %llu..%llu", a, (unsigned long long)lo,
             (unsigned long long)hi);
    return bad(msg, v);
}

static int parse_args(int argc, char **argv, bench_cfg *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->policy_text, sizeof c->policy_text, "gcra:100/s");
    c->keys = 1000;
    c->threads = 1;
    c->seconds = 2;
    c->zipf_s = 1.0;
    c->key_len = 16;
    c->cost = 1;
    c->seed = 1;
    c->stream = UINT64_C(1) << 22;
    c->batch = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage, stdout);
            return 1;
        }
        if (strcmp(a, "--fill") == 0) {
            c->fill = 1;
            continue;
        }
        if (strcmp(a, "--pin") == 0) {
            c->pin = 1;
            continue;
        }
        if (i + 1 >= argc || strncmp(a, "--", 2) != 0)
            return strncmp(a, "--", 2) ? bad("unexpected argument", a)
                                       : bad("missing value for", a);
        const char *v = argv[++i];
        uint64_t u;
        if (strcmp(a, "--policy") == 0) {
            if (strlen(v) >= sizeof c->policy_text) return bad("policy text too long", v);
            snprintf(c->policy_text, sizeof c->policy_text, "%s", v);
        } else if (strcmp(a, "--keys") == 0) {
            if (u64_in(a, v, 1, UINT64_C(1000000000), &c->keys)) return 2;
        } else if (strcmp(a, "--threads") == 0) {
            if (u64_in(a, v, 1, MAX_THREADS, &u)) return 2;
            c->threads = (unsigned)u;
        } else if (strcmp(a, "--seconds") == 0) {
            if (parse_double(v, &c->seconds) || c->seconds <= 0)
                return bad("--seconds wants a positive number", v);
        } else if (strcmp(a, "--dist") == 0) {
            if (strcmp(v, "uniform") == 0)
                c->zipf = 0;
            else if (strcmp(v, "zipf") == 0)
                c->zipf = 1;
            else
                return bad("--dist wants uniform or zipf", v);
        } else if (strcmp(a, "--zipf-s") == 0) {
            if (parse_double(v, &c->zipf_s) || c->zipf_s <= 0 || c->zipf_s > 10)
                return bad("--zipf-s wants a number in (0, 10]", v);
        } else if (strcmp(a, "--key-len") == 0) {
            if (u64_in(a, v, 8, RLT_KEY_MAX, &u)) return 2;
            c->key_len = (size_t)u;
        } else if (strcmp(a, "--cost") == 0) {
            if (u64_in(a, v, 0, INT32_MAX, &u)) return 2;
            c->cost = (int64_t)u;
        } else if (strcmp(a, "--shards") == 0) {
            if (u64_in(a, v, 1, 65536, &u)) return 2;
            c->shards = (unsigned)u;
        } else if (strcmp(a, "--batch") == 0) {
            if (parse_u64(v, &u) || u < 1 || u > ROUND || ROUND % u)
                return bad("--batch wants a divisor of 1024 (1, 2, 4, ... 1024)", v);
            c->batch = (unsigned)u;
        } else if (strcmp(a, "--seed") == 0) {
            if (parse_u64(v, &c->seed)) return bad("--seed wants an integer", v);
        } else if (strcmp(a, "--stream") == 0) {
            if (u64_in(a, v, ROUND, UINT64_C(1) << 28, &c->stream)) return 2;
        } else {
            return bad("unknown option", a);
        }
    }
    char err[128];
    if (rlt_policy_parse(&c->policy, c->policy_text, strlen(c->policy_text), err, sizeof err))
        return bad(err, c->policy_text);
    if (c->policy.algo == RLT_CONCURRENCY && c->cost > 1)
        return bad("a concurrency policy takes --cost 0 or 1", NULL);
    return 0;
}

/* Key numbers for one thread: uniform, or zipf by inverting a precomputed CDF. */
static int fill_stream(const bench_cfg *c, const double *cdf, unsigned t, uint8_t *out)
{
    uint64_t rng = c->seed * UINT64_C(1000003) + t;
    for (uint64_t i = 0; i < c->stream; i++) {
        uint64_t r = splitmix(&rng), k;
        if (!cdf) {
            k = (uint64_t)(((unsigned __int128)r * c->keys) >> 64);
        } else {
            double u = (double)(r >> 11) * 0x1.0p-53;
            uint64_t lo = 0, hi = c->keys - 1;
            while (lo < hi) {
                uint64_t mid = lo + (hi - lo) / 2;
                if (cdf[mid] < u)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            k = lo;
        }
        make_key(out + i * c->key_len, c->key_len, k);
    }
    return 0;
}

static void *run_worker(void *arg)
{
    worker *w = arg;
    const bench_cfg *c = w->cfg;
    const int64_t limit = (int64_t)(c->seconds * 1e9);
    const size_t kl = c->key_len;
    uint64_t pos = 0, allowed = 0, denied = 0, errors = 0, n = 0;
    rlt_decision d;
    /* Batch mode: the per-call arrays a server would fill from one pipeline read. */
    rlt_key keys[ROUND];
    rlt_decision out[ROUND];
    int status[ROUND];
    int64_t costs[ROUND];
    for (int j = 0; j < ROUND; j++)
        costs[j] = c->cost;
    const int64_t *cost_arg = c->cost == 1 ? NULL : costs;
    if (w->cpu_pin >= 0) {
        /* Before the barrier, so every thread runs the whole timed loop on its CPU. */
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(w->cpu_pin, &one);
        int prc = pthread_setaffinity_np(pthread_self(), sizeof one, &one);
        if (prc) {
            fprintf(stderr, "ratelimit bench: cannot pin a thread to CPU %d: %s\n", w->cpu_pin,
                    strerror(prc));
            exit(1); /* the barrier would wait forever */
        }
    }
    pthread_barrier_wait(w->barrier);
    const int64_t start = mono_ns(), cpu0 = thread_cpu_ns();
    int64_t el = 0;
    rlt_ns now = start - w->t0 + RLT_NS_PER_S;
    while (el < limit) {
        const uint8_t *k = w->stream + pos * kl;
        if (c->batch == 1) {
            for (int j = 0; j < ROUND; j++, k += kl) {
                /* The clock once per TICK decisions, as the anchor's bare table does. */
                if (j % TICK == 0) now = mono_ns() - w->t0 + RLT_NS_PER_S;
                int rc = rlt_store_decide(w->store, w->pid, k, kl, now, c->cost, &d);
                if (rc)
                    errors++;
                else if (d.allowed)
                    allowed++;
                else
                    denied++;
            }
        } else {
            for (unsigned j0 = 0; j0 < ROUND; j0 += c->batch) {
                if (j0 % TICK == 0) now = mono_ns() - w->t0 + RLT_NS_PER_S;
                for (unsigned j = 0; j < c->batch; j++, k += kl)
                    keys[j] = (rlt_key){k, kl};
                rlt_store_decide_batch(w->store, w->pid, keys, c->batch, now, cost_arg, out,
                                       status);
                for (unsigned j = 0; j < c->batch; j++) {
                    if (status[j])
                        errors++;
                    else if (out[j].allowed)
                        allowed++;
                    else
                        denied++;
                }
            }
        }
        n += ROUND;
        pos += ROUND;
        if (pos + ROUND > c->stream) pos = 0;
        el = now - RLT_NS_PER_S + w->t0 - start; /* the last clock read of the round */
    }
    el = mono_ns() - start;
    w->decisions = n;
    w->allowed = allowed;
    w->denied = denied;
    w->errors = errors;
    w->elapsed = (double)el / 1e9;
    w->cpu = (double)(thread_cpu_ns() - cpu0) / 1e9;
    return NULL;
}

static void fmt_rate(char *buf, size_t cap, double r)
{
    if (r >= 1e6)
        snprintf(buf, cap, "%.2fM/s", r / 1e6);
    else
        snprintf(buf, cap, "%.0f/s", r);
}

int rlt__cli_bench(int argc, char **argv)
{
    bench_cfg c;
    int prc = parse_args(argc, argv, &c);
    if (prc == 1) return 0; /* --help */
    if (prc) return prc;

    rlt_store_options o;
    memset(&o, 0, sizeof o);
    o.shards = c.shards;
    rlt_store *s;
    int rc = rlt_store_open(&s, &o);
    int pid;
    if (!rc) rc = rlt_store_set_policy(s, "bench", &c.policy, RLT_CHANGE_RESET, &pid);
    if (rc) {
        fprintf(stderr, "ratelimit bench: cannot set up the store: %s\n", rlt_strerror(rc));
        return 1;
    }

    /* Prefill: every key once, on the same virtual clock as the run. */
    const int64_t t0 = mono_ns();
    uint8_t key[RLT_KEY_MAX];
    rlt_decision d;
    uint64_t fill_err = 0;
    rlt_ns now = RLT_NS_PER_S;
    for (uint64_t i = 0; i < c.keys; i++) {
        if ((i & (ROUND - 1)) == 0) now = mono_ns() - t0 + RLT_NS_PER_S;
        make_key(key, c.key_len, i);
        if (rlt_store_decide(s, pid, key, c.key_len, now, c.cost ? c.cost : 1, &d)) fill_err++;
    }
    const double fill_s = (double)(mono_ns() - t0) / 1e9;
    rlt_store_stats st;
    rlt_store_stats_get(s, &st);
    const uint64_t fill_keys = st.keys, fill_bytes = st.bytes;

    worker *ws = calloc(c.threads, sizeof *ws);
    double *cdf = NULL;
    if (!ws) {
        fprintf(stderr, "ratelimit bench: out of memory\n");
        rlt_store_close(s);
        return 1;
    }
    uint64_t decisions = 0, allowed = 0, denied = 0, errors = 0;
    double wall = 0;
    if (!c.fill) {
        if (c.zipf) {
            cdf = malloc(c.keys * sizeof *cdf);
            if (!cdf) {
                fprintf(stderr, "ratelimit bench: out of memory for the zipf table\n");
                free(ws);
                rlt_store_close(s);
                return 1;
            }
            double sum = 0;
            for (uint64_t i = 0; i < c.keys; i++) {
                sum += pow_neg((double)(i + 1), c.zipf_s);
                cdf[i] = sum;
            }
            for (uint64_t i = 0; i < c.keys; i++)
                cdf[i] /= sum;
            cdf[c.keys - 1] = 1.0;
        }
        /* --pin: the CPUs this process may run on, in order; thread t gets the t-th (mod). */
        int cpus[CPU_SETSIZE], ncpu = 0;
        if (c.pin) {
            cpu_set_t mine;
            if (sched_getaffinity(0, sizeof mine, &mine)) {
                fprintf(stderr, "ratelimit bench: --pin: cannot read the CPU affinity: %s\n",
                        strerror(errno));
                free(ws);
                free(cdf);
                rlt_store_close(s);
                return 1;
            }
            for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
                if (CPU_ISSET(cpu, &mine)) cpus[ncpu++] = cpu;
        }
        pthread_barrier_t barrier;
        pthread_barrier_init(&barrier, NULL, c.threads);
        for (unsigned t = 0; t < c.threads; t++) {
            ws[t].stream = malloc(c.stream * c.key_len);
            if (!ws[t].stream) {
                fprintf(stderr, "ratelimit bench: out of memory for the key stream\n");
                for (unsigned u = 0; u <= t; u++)
                    free(ws[u].stream);
                free(ws);
                free(cdf);
                rlt_store_close(s);
                return 1;
            }
            fill_stream(&c, cdf, t, ws[t].stream);
        }
        for (unsigned t = 0; t < c.threads; t++) {
            ws[t].cfg = &c;
            ws[t].store = s;
            ws[t].pid = pid;
            ws[t].barrier = &barrier;
            ws[t].t0 = t0;
            ws[t].cpu_pin = ncpu ? cpus[t % (unsigned)ncpu] : -1;
            if (pthread_create(&ws[t].tid, NULL, run_worker, &ws[t])) {
                fprintf(stderr, "ratelimit bench: cannot start thread %u\n", t);
                exit(1); /* the barrier would wait forever */
            }
        }
        for (unsigned t = 0; t < c.threads; t++) {
            pthread_join(ws[t].tid, NULL);
            decisions += ws[t].decisions;
            allowed += ws[t].allowed;
            denied += ws[t].denied;
            errors += ws[t].errors;
            if (ws[t].elapsed > wall) wall = ws[t].elapsed;
            free(ws[t].stream);
        }
        pthread_barrier_destroy(&barrier);
        rlt_store_stats_get(s, &st);
    }

    const double rate = wall > 0 ? (double)decisions / wall : 0;
    const uint64_t keys_now = c.fill ? fill_keys : st.keys;
    const uint64_t bytes_now = c.fill ? fill_bytes : st.bytes;
    const double bpk = keys_now ? (double)bytes_now / (double)keys_now : 0;
    char rbuf[32];
    printf("policy          %s\n", c.policy_text);
    printf("keys            %" PRIu64 " (key length %zu, prefilled in %.2f s, %" PRIu64
           " errors)\n",
           c.keys, c.key_len, fill_s, fill_err);
    printf("store keys      %" PRIu64 "\n", keys_now);
    printf("store bytes     %" PRIu64 "\n", bytes_now);
    if (!c.fill) {
        printf("threads         %u", c.threads);
        if (c.pin) {
            printf(" (pinned to CPU");
            for (unsigned t = 0; t < c.threads; t++)
                printf("%s%d", t ? "," : " ", ws[t].cpu_pin);
            printf(")");
        }
        printf("\n");
        printf("batch           %u%s\n", c.batch,
               c.batch == 1 ? " (rlt_store_decide per request)" : " (rlt_store_decide_batch)");
        printf("dist            %s", c.zipf ? "zipf" : "uniform");
        if (c.zipf) printf(" (s=%.2f)", c.zipf_s);
        printf("\nseconds         %.2f\n", wall);
        printf("decisions       %" PRIu64 "\n", decisions);
        printf("allowed         %" PRIu64 "\n", allowed);
        printf("denied          %" PRIu64 "\n", denied);
        printf("errors          %" PRIu64 "\n", errors);
        double cpu_rate = 0;
        for (unsigned t = 0; t < c.threads; t++) {
            const double per_cpu = ws[t].cpu > 0 ? (double)ws[t].decisions / ws[t].cpu : 0;
            cpu_rate += per_cpu;
            fmt_rate(rbuf, sizeof rbuf,
                     ws[t].elapsed > 0 ? (double)ws[t].decisions / ws[t].elapsed : 0);
            printf("thread %-8u %s wall", t, rbuf);
            fmt_rate(rbuf, sizeof rbuf, per_cpu);
            printf(", %s per CPU-second (on CPU %.0f%% of the run)\n", rbuf,
                   ws[t].elapsed > 0 ? 100 * ws[t].cpu / ws[t].elapsed : 0.0);
        }
        /* What the threads would do with a core each, all the time: a machine shared with
         * other jobs takes CPU time away, and this figure does not count what was taken. */
        printf("cpu_decisions_per_sec=%.0f\n", cpu_rate);
    }
    printf("decisions_per_sec=%.0f ns_per_decision=%.2f bytes_per_key=%.2f\n", rate,
           rate > 0 ? 1e9 / rate : 0.0, bpk);
    free(ws);
    free(cdf);
    rlt_store_close(s);
    return errors ? 1 : 0;
}
