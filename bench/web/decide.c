/* The native half of bench/web/run.sh, the same work as decide.mjs's through ratelimit.wasm: for
 * each policy of cases.txt, on one fresh state a repeat, the virtual clock advancing by half a
 * refill interval per call (about half allow, half deny):
 *   batch: web/wasm/export.c's rlt_wasm_decide_batch (linked here natively: the very loop the
 *          module runs) over the trace's times and costs arrays, written before the timing,
 *          each decision's verdict and delay written to the results array;
 *   loop:  rlt_decide once per decision (and rlt_release of a lease), the verdict counted.
 * One repeat to warm up, not counted, then 5; the median of the 5.
 * Usage: decide < cases.txt  ->  lines "POLICY BATCH_PER_SECOND LOOP_PER_SECOND ALLOWED" */
#define _POSIX_C_SOURCE 200809L
#include "ratelimit/ratelimit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REPEATS 5

/* web/wasm/export.c's batch call (its contract there). */
int32_t rlt_wasm_decide_batch(const rlt_policy *p, void *st, const int64_t *now,
                              const int64_t *cost, int32_t n, int64_t *res);

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *r)
{
    qsort(r, REPEATS, sizeof *r, by_value);
    return r[REPEATS / 2];
}

/* One repeat of the batch on a fresh state: decisions per second; *allowed from the results. */
static double batch(const rlt_policy *p, void *st, const int64_t *times, const int64_t *costs,
                    int32_t n, int64_t *res, int64_t *allowed)
{
    memset(st, 0, rlt_state_size(p));
    int64_t t0 = now_ns();
    int32_t made = rlt_wasm_decide_batch(p, st, times, costs, n, res);
    double rate = (double)n * 1e9 / (double)(now_ns() - t0);
    *allowed = 0;
    for (int32_t i = 0; i < made; i++) *allowed += res[2 * i] == 1;
    return made == n ? rate : 0;
}

/* One repeat of one call per decision on a fresh state; *allowed counted as it goes. */
static double loop(const rlt_policy *p, void *st, long n, rlt_ns step, int64_t *allowed)
{
    memset(st, 0, rlt_state_size(p));
    rlt_ns t = 1000000000;
    rlt_decision d;
    *allowed = 0;
    int64_t t0 = now_ns();
    for (long i = 0; i < n; i++) {
        rlt_decide(p, st, t, 1, &d);
        *allowed += d.allowed;
        if (d.lease) rlt_release(p, st, t, d.lease);
        t += step;
        __asm__ volatile("" ::: "memory");
    }
    return (double)n * 1e9 / (double)(now_ns() - t0);
}

int main(void)
{
    char text[256];
    long n;
    while (scanf("%255s %ld", text, &n) == 2) {
        rlt_policy p;
        char err[256];
        if (n <= 0 || n > INT32_MAX / 32 ||
            rlt_policy_parse(&p, text, strlen(text), err, sizeof err) != RLT_OK) {
            fprintf(stderr, "decide: %s %ld: bad case\n", text, n);
            return 1;
        }
        void *st = malloc(rlt_state_size(&p));
        int64_t *times = malloc(sizeof(int64_t) * (size_t)n);
        int64_t *costs = malloc(sizeof(int64_t) * (size_t)n);
        int64_t *res = malloc(2 * sizeof(int64_t) * (size_t)n);
        if (!st || !times || !costs || !res) return 1;
        rlt_ns step = p.period / p.limit / 2;
        for (long i = 0; i < n; i++) {
            times[i] = 1000000000 + i * step;
            costs[i] = 1;
        }
        double bat[REPEATS], one[REPEATS];
        int64_t b_allowed = -1, allowed = 0;
        /* The concurrency limiter must release leases between decisions: no batch (as the page). */
        int batched = p.algo != RLT_CONCURRENCY;
        for (int rep = -1; rep < REPEATS; rep++) {
            double r = batched ? batch(&p, st, times, costs, (int32_t)n, res, &b_allowed) : 0;
            if (rep >= 0) bat[rep] = r;
        }
        for (int rep = -1; rep < REPEATS; rep++) {
            double r = loop(&p, st, n, step, &allowed);
            if (rep >= 0) one[rep] = r;
        }
        if (batched && b_allowed != allowed) {
            fprintf(stderr, "decide: %s: batch allowed %ld, one by one %ld\n", text,
                    (long)b_allowed, (long)allowed);
            return 1;
        }
        printf("%s %.0f %.0f %ld\n", text, median(bat), median(one), (long)allowed);
        free(st);
        free(times);
        free(costs);
        free(res);
    }
    return 0;
}
