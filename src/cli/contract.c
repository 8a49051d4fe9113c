/* The simulator's contract check: what each algorithm promises (include/ratelimit/ratelimit.h),
 * tested on the record of what it accepted.  A fixed window letting 2N through across a
 * boundary, or a token bucket a full bucket plus its refill, is what those algorithms promise;
 * only a broken promise is a violation.  Pure: no I/O, no allocation, unit-tested with made-up
 * records that break each contract (tests/cli/test_contract.c). */
#include "cli/cliutil.h"

#include <stdio.h>

int64_t rlt__worst_span(const rlt__accepted *e, size_t m, rlt_ns W, rlt_ns *at)
{
    int64_t best = 0, sum = 0;
    size_t lo = 0;
    rlt_ns from = m ? e[0].t : 0;
    for (size_t hi = 0; hi < m; hi++) {
        sum += e[hi].cost;
        while (e[hi].t - e[lo].t >= W)
            sum -= e[lo++].cost;
        if (sum > best) {
            best = sum;
            from = e[lo].t;
        }
    }
    if (at) *at = from;
    return best;
}

static int per_aligned_window(const rlt__accepted *e, size_t m, rlt_ns W, int64_t N)
{
    int64_t k = INT64_MIN, count = 0;
    for (size_t i = 0; i < m; i++) {
        int64_t ki = rlt__window_of(e[i].t, W);
        count = ki == k ? count + e[i].cost : e[i].cost;
        k = ki;
        if (count > N) return 0;
    }
    return 1;
}

/* From any accepted i to any later j: cost(i..j) <= B + (t_j - t_i) N / W, i.e.
 * S_j W - t_j N <= B W + min over i <= j of (S_{i-1} W - t_i N), in one pass (costs are
 * integers, so the floor of the refill changes nothing). */
static int bucket(const rlt__accepted *e, size_t m, rlt_ns W, int64_t N, int64_t B)
{
    __int128 sum = 0, best = 0;
    for (size_t j = 0; j < m; j++) {
        __int128 cand = sum * W - (__int128)e[j].t * N;
        if (j == 0 || cand < best) best = cand;
        sum += e[j].cost;
        if (sum * W - (__int128)e[j].t * N > (__int128)B * W + best) return 0;
    }
    return 1;
}

static int shaper(const rlt__accepted *e, size_t m, rlt_ns W, int64_t N, int64_t Q, rlt_ns wait)
{
    for (size_t i = 1; i < m; i++)
        if ((__int128)(e[i].t - e[i - 1].t + 1) * N <= (__int128)e[i - 1].cost * W) return 0;
    return (__int128)wait * N <= (__int128)Q * W + N;
}

/* Equal holds end in start order: a sliding count of the holds still running. */
static int in_flight(const rlt__accepted *e, size_t m, int64_t N, rlt_ns hold)
{
    size_t lo = 0;
    int64_t live = 0;
    for (size_t i = 0; i < m; i++) {
        if (e[i].cost == 0) continue; /* a peek holds nothing */
        while (lo < i && (e[lo].cost == 0 || e[lo].t + hold <= e[i].t)) {
            if (e[lo].cost > 0) live--;
            lo++;
        }
        if (++live > N) return 0;
    }
    return 1;
}

int rlt__contract_check(const rlt_policy *p, const rlt__accepted *e, size_t m, rlt_ns max_wait,
                        rlt_ns hold, rlt_ns tick, char *text, size_t cap)
{
    const int64_t N = p->limit;
    const rlt_ns W = p->period;
    char w[RLT__DEC_BUF], a[64];
    rlt__dec_format(w, W, tick);
    switch (p->algo) {
    case RLT_FIXED_WINDOW:
        snprintf(text, cap, "≤ %lld per aligned window", (long long)N);
        return per_aligned_window(e, m, W, N);
    case RLT_SLIDING_LOG:
        snprintf(text, cap, "≤ %lld in any %s ticks", (long long)N, w);
        return rlt__worst_span(e, m, W, NULL) <= N;
    case RLT_SLIDING_WINDOW:
        snprintf(text, cap, "≤ %lld per window, ≤ %lld in any %s ticks", (long long)N,
                 (long long)(2 * N), w);
        return per_aligned_window(e, m, W, N) && rlt__worst_span(e, m, W, NULL) <= 2 * N;
    case RLT_TOKEN_BUCKET:
    case RLT_GCRA:
        rlt__frac_format(a, sizeof a, (__int128)N * tick, W, 2, RLT__ROUND, 1);
        snprintf(text, cap, "≤ %lld + %s per tick over any span", (long long)p->burst, a);
        return bucket(e, m, W, N, p->burst);
    case RLT_LEAKY_BUCKET:
        rlt__frac_format(a, sizeof a, W, (__int128)N * tick, 2, RLT__ROUND, 1);
        snprintf(text, cap, "sends ≥ %s ticks apart, queue ≤ %lld", a, (long long)p->queue);
        return shaper(e, m, W, N, p->queue, max_wait);
    case RLT_CONCURRENCY:
        snprintf(text, cap, "≤ %lld in flight", (long long)N);
        return in_flight(e, m, N, hold < W ? hold : W);
    default:
        snprintf(text, cap, "?");
        return 0;
    }
}
