/* The native half of bench/web/run.sh: rlt_decide per second for each policy of cases.txt on
 * one hot state, the virtual clock advancing by half a refill interval per call (about half
 * allow, half deny), best of 3 runs; the same loop decide.mjs runs through ratelimit.wasm.
 * Usage: decide < cases.txt  ->  lines "POLICY DECISIONS_PER_SECOND ALLOWED" */
#define _POSIX_C_SOURCE 200809L
#include "ratelimit/ratelimit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int main(void)
{
    char text[256];
    long iters;
    while (scanf("%255s %ld", text, &iters) == 2) {
        rlt_policy p;
        char err[256];
        if (rlt_policy_parse(&p, text, strlen(text), err, sizeof err) != RLT_OK) {
            fprintf(stderr, "decide: %s: %s\n", text, err);
            return 1;
        }
        void *st = malloc(rlt_state_size(&p));
        if (!st) return 1;
        rlt_ns step = p.period / p.limit / 2;
        double best = 0;
        int64_t allowed = 0;
        for (int rep = 0; rep < 3; rep++) {
            memset(st, 0, rlt_state_size(&p));
            rlt_ns t = 1000000000;
            rlt_decision d;
            allowed = 0;
            int64_t t0 = now_ns();
            for (long i = 0; i < iters; i++) {
                rlt_decide(&p, st, t, 1, &d);
                allowed += d.allowed;
                if (d.lease) rlt_release(&p, st, t, d.lease);
                t += step;
                __asm__ volatile("" ::: "memory");
            }
            double rate = (double)iters * 1e9 / (double)(now_ns() - t0);
            if (rate > best) best = rate;
        }
        printf("%s %.0f %ld\n", text, best, (long)allowed);
        free(st);
    }
    return 0;
}
