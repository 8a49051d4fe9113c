/* bench_core: nanoseconds per rlt_decide for each algorithm on one hot state (a single key in
 * L1), with the virtual clock advancing by half a refill interval per call so about half the
 * decisions allow and half deny.  A compiler barrier per iteration and a sink for the result
 * keep the work from being optimised away; nothing is allocated inside the timed loops.
 * Usage: bench_core [iterations-in-millions]  (default 20).  Best of 3 runs is reported. */
#define _POSIX_C_SOURCE 200809L
#include "ratelimit/ratelimit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"

static volatile int64_t sink;

typedef struct result {
    double ns;      /* per decision, best run */
    double allowed; /* share allowed */
} result;

static result run(const rlt_policy *p, void *st, long iters, rlt_ns step, int release)
{
    result best = {1e30, 0};
    for (int rep = 0; rep < 3; rep++) {
        memset(st, 0, rlt_state_size(p));
        rlt_ns t = 1000000000;
        int64_t allowed = 0;
        rlt_decision d;
        int64_t t0 = now_ns();
        for (long i = 0; i < iters; i++) {
            rlt_decide(p, st, t, 1, &d);
            allowed += d.allowed;
            if (release && d.lease) rlt_release(p, st, t, d.lease);
            t += step;
            __asm__ volatile("" ::: "memory");
        }
        int64_t t1 = now_ns();
        sink += allowed;
        double ns = (double)(t1 - t0) / (double)iters;
        if (ns < best.ns) best = (result){ns, (double)allowed / (double)iters};
    }
    return best;
}

int main(int argc, char **argv)
{
    long millions = argc > 1 ? atol(argv[1]) : 20;
    if (millions <= 0) millions = 20;
    static const struct {
        const char *text;
        long div; /* fewer iterations for the O(N) ones */
        int release;
    } cases[] = {
        {"gcra:1000/1s", 1, 0},
        {"token_bucket:1000/1s", 1, 0},
        {"fixed_window:1000/1s", 1, 0},
        {"sliding_window:1000/1s", 1, 0},
        {"leaky_bucket:1000/1s,queue=10", 1, 0},
        {"sliding_log:1000/1s", 1, 0},
        {"concurrency:16/1s", 4, 1},
    };
    printf("%-34s %12s %10s\n", "policy", "ns/decision", "allowed");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rlt_policy p;
        char err[200];
        if (rlt_policy_parse(&p, cases[i].text, strlen(cases[i].text), err, sizeof err)) {
            fprintf(stderr, "bench_core: %s\n", err);
            return 1;
        }
        void *st = calloc(1, rlt_state_size(&p));
        if (!st) return 1;
        /* half the refill interval W/N per call: about half allowed once the burst is spent */
        rlt_ns step = p.period / p.limit / 2;
        result r = run(&p, st, millions * 1000000 / cases[i].div, step, cases[i].release);
        printf("%-34s %12.2f %9.1f%%\n", cases[i].text, r.ns, 100.0 * r.allowed);
        free(st);
    }
    return 0;
}
