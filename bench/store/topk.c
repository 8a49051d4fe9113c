/* store_topk: what the top-offenders sketch costs.  rlt_topk_add per denial on a Zipf(1.1)
 * stream of "user:<n>" keys over `keys` distinct keys (mostly hits on monitored keys, and an
 * eviction for each miss), and the read side: the merge of `sketches` full sketches of K
 * counters, as ratelimitd merges one per worker (O(sketches^2 x K) lookups).
 * Usage: store_topk [K=100] [sketches=4] [keys=100000] [adds=5000000]. */
#include "ratelimit/topk.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

int main(int argc, char **argv)
{
    size_t k = argc > 1 ? (size_t)atol(argv[1]) : 100;
    size_t w = argc > 2 ? (size_t)atol(argv[2]) : 4;
    size_t m = argc > 3 ? (size_t)atol(argv[3]) : 100000;
    size_t n = argc > 4 ? (size_t)atol(argv[4]) : 5000000;
    if (k < 1 || w < 1 || w > 64 || m < 1 || n < 1) return 2;
    /* The stream first (keys drawn by inverse CDF), so that the timing is the sketch's. */
    double *cdf = malloc(m * sizeof *cdf), acc = 0;
    uint32_t *ids = malloc(n * sizeof *ids);
    rlt_topk **sk = calloc(w, sizeof *sk), *merged = NULL;
    if (cdf == NULL || ids == NULL || sk == NULL) return 1;
    for (size_t r = 0; r < m; r++)
        cdf[r] = (acc += 1.0 / pow((double)(r + 1), 1.1));
    uint64_t rng = 1;
    for (size_t i = 0; i < n; i++) {
        double u = (double)(splitmix(&rng) >> 11) / 9007199254740992.0 * acc;
        size_t lo = 0, hi = m - 1;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (cdf[mid] < u)
                lo = mid + 1;
            else
                hi = mid;
        }
        ids[i] = (uint32_t)lo;
    }
    rlt_topk_options o = {.k = k, .has_secret = true};
    for (size_t i = 0; i < w; i++)
        if (rlt_topk_open(&sk[i], &o) != RLT_OK) return 1;
    if (rlt_topk_open(&merged, &o) != RLT_OK) return 1;
    int64_t t0 = mono_ns();
    for (size_t i = 0; i < n; i++) {
        char key[32];
        int len = snprintf(key, sizeof key, "user:%u", ids[i]);
        if (rlt_topk_add(sk[i % w], 0, key, (size_t)len, 1) != RLT_OK) return 1;
    }
    int64_t t1 = mono_ns();
    int reps = 20;
    for (int r = 0; r < reps; r++)
        if (rlt_topk_merge(merged, (const rlt_topk *const *)sk, w) != RLT_OK) return 1;
    int64_t t2 = mono_ns();
    rlt_topk_entry top[1];
    rlt_topk_list(merged, top, 1);
    printf("K=%zu sketches=%zu keys=%zu adds=%zu: add_ns=%.1f merge_us=%.1f floor=%llu "
           "top1=%.*s:%llu\n",
           k, w, m, n, (double)(t1 - t0) / (double)n, (double)(t2 - t1) / reps / 1000.0,
           (unsigned long long)rlt_topk_floor(merged), (int)top[0].klen, (const char *)top[0].key,
           (unsigned long long)top[0].count);
    for (size_t i = 0; i < w; i++)
        rlt_topk_close(sk[i]);
    rlt_topk_close(merged);
    free(sk);
    free(ids);
    free(cdf);
    return 0;
}
