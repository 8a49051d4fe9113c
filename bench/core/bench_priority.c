/* bench_priority: what a class and an adaptive limit add to a decision, each beside the plain
 * call in one run, interleaved (A B A B ... over --rounds rounds) and reported as the median
 * ns per operation of each side and their ratio:
 *   concurrency  rlt_decide + rlt_release  against  rlt_decide_class (default, reserve 20 %)
 *                + rlt_release, on concurrency:64/10s with 40 leases held (the class's
 *                ceiling, 51, is not reached: both sides admit every request)
 *   gcra         rlt_decide  against  rlt_decide_class (default, 20 %) on gcra:1000/1s
 *                (two passes for a non-concurrency policy)
 *   release      rlt_decide + rlt_release  against  the same + rlt_adapt_update (Vegas, and
 *                AIMD), on the concurrency policy above
 *   report       rlt_decide + rlt_release on it  against  rlt_decide + rlt_release_report on
 *                concurrency:64/10s,adaptive=vegas,min=1,init=64 (the adaptive limit in the
 *                policy, as the store and ratelimitd run it), 40 leases held on each
 * The clock is virtual (one step per call); a compiler barrier per iteration and a sink keep
 * the work.  Usage: bench_priority [millions-per-round] [rounds]  (default 2, 9). */
#define _POSIX_C_SOURCE 200809L
#include "ratelimit/adaptive.h"
#include "ratelimit/ratelimit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"

static volatile int64_t sink;

enum { PLAIN, CLASS, VEGAS, AIMD, REPORT };

typedef struct bench {
    rlt_policy p;
    void *st;
    rlt_adapt_policy ap[2];
    rlt_adapt_state as[2];
    struct bench *alt; /* REPORT runs on this one's policy and state */
} bench;

/* ns per operation of `kind` over n iterations on b's state. */
static double once(bench *b, int kind, long n)
{
    rlt_decision d;
    rlt_ns t = 1000000000;
    int64_t ok = 0;
    if (kind == REPORT) {
        bench *a = b->alt;
        int64_t t0 = now_ns();
        for (long i = 0; i < n; i++) {
            rlt_decide(&a->p, a->st, t, 1, &d);
            ok += d.allowed;
            if (d.lease)
                rlt_release_report(&a->p, a->st, t, d.lease, (rlt_ns)(10000000 + (i & 1023)),
                                   RLT_OUTCOME_SUCCESS);
            t += 1000;
            __asm__ volatile("" ::: "memory");
        }
        sink += ok;
        return (double)(now_ns() - t0) / (double)n;
    }
    int64_t t0 = now_ns();
    for (long i = 0; i < n; i++) {
        if (kind == CLASS)
            rlt_decide_class(&b->p, b->st, t, 1, RLT_CLASS_DEFAULT, 20, &d);
        else
            rlt_decide(&b->p, b->st, t, 1, &d);
        ok += d.allowed;
        if (d.lease) {
            rlt_release(&b->p, b->st, t, d.lease);
            if (kind >= VEGAS)
                rlt_adapt_update(&b->ap[kind - VEGAS], &b->as[kind - VEGAS], t,
                                 (rlt_ns)(10000000 + (i & 1023)), 41, RLT_OUTCOME_SUCCESS);
        }
        t += 1000;
        __asm__ volatile("" ::: "memory");
    }
    sink += ok;
    return (double)(now_ns() - t0) / (double)n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Interleaves kinds a and b over `rounds` and prints the medians and b / a. */
static void pair(bench *bn, const char *name, int a, int b, long n, int rounds)
{
    double *va = calloc((size_t)rounds, sizeof *va), *vb = calloc((size_t)rounds, sizeof *vb);
    if (!va || !vb) exit(1);
    once(bn, a, n / 4); /* warm */
    once(bn, b, n / 4);
    for (int r = 0; r < rounds; r++) {
        va[r] = once(bn, a, n);
        vb[r] = once(bn, b, n);
    }
    double ma = median(va, rounds), mb = median(vb, rounds);
    printf("%-44s %10.2f %10.2f %8.3fx\n", name, ma, mb, mb / ma);
    free(va);
    free(vb);
}

static void setup(bench *b, const char *text, int held)
{
    char err[200];
    memset(b, 0, sizeof *b);
    if (rlt_policy_parse(&b->p, text, strlen(text), err, sizeof err)) {
        fprintf(stderr, "bench_priority: %s\n", err);
        exit(1);
    }
    b->st = calloc(1, rlt_state_size(&b->p));
    if (!b->st) exit(1);
    rlt_decision d;
    for (int i = 0; i < held; i++)
        rlt_decide(&b->p, b->st, 1000000000, 1, &d);
    for (int k = 0; k < 2; k++) {
        b->ap[k] = (rlt_adapt_policy){.algo = k == 0 ? RLT_ADAPT_VEGAS : RLT_ADAPT_AIMD,
                                      .floor = 1,
                                      .ceiling = 64,
                                      .initial = 64,
                                      .slow_ns = 50000000};
        if (rlt_adapt_policy_check(&b->ap[k])) exit(1);
    }
}

int main(int argc, char **argv)
{
    long millions = argc > 1 ? atol(argv[1]) : 2;
    int rounds = argc > 2 ? atoi(argv[2]) : 9;
    if (millions <= 0) millions = 2;
    if (rounds <= 0) rounds = 9;
    long n = millions * 1000000;
    bench cc, g, ad;
    setup(&cc, "concurrency:64/10s", 40);
    setup(&ad, "concurrency:64/10s,adaptive=vegas,min=1,init=64", 40);
    cc.alt = &ad;
    setup(&g, "gcra:1000/1s", 0);
    bench ga;
    setup(&ga, "gcra:2000000/1s", 0); /* 2 per us of virtual time: every call admitted */
    printf("%-44s %10s %10s %9s\n", "median ns per operation", "plain", "with", "ratio");
    pair(&cc, "concurrency decide+release, class default", PLAIN, CLASS, n, rounds);
    pair(&g, "gcra decide, class default (two passes, denied)", PLAIN, CLASS, n, rounds);
    pair(&ga, "gcra decide, class default (two passes, admitted)", PLAIN, CLASS, n, rounds);
    pair(&cc, "concurrency release, + Vegas update", PLAIN, VEGAS, n, rounds);
    pair(&cc, "concurrency release, + AIMD update", PLAIN, AIMD, n, rounds);
    pair(&cc, "static release, adaptive release_report", PLAIN, REPORT, n, rounds);
    free(cc.st);
    free(g.st);
    free(ad.st);
    free(ga.st);
    return 0;
}
