/* Shared helpers of the core tests: a seeded PRNG (splitmix64) whose seed is printed on
 * failure, policy construction that aborts on a bad literal, and heap state blocks. */
#ifndef RLT_TESTS_CORE_UTIL_H
#define RLT_TESTS_CORE_UTIL_H

#include "test.h"

#include "ratelimit/ratelimit.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S RLT_NS_PER_S
#define MS RLT_NS_PER_MS
#define US RLT_NS_PER_US

typedef __int128 i128;

/* splitmix64: tiny, good enough, and reproducible from one 64-bit seed. */
typedef struct rng {
    uint64_t s;
} rng;

static inline uint64_t rng_next(rng *r)
{
    uint64_t z = (r->s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi] (hi - lo < 2^63). */
static inline int64_t rng_range(rng *r, int64_t lo, int64_t hi)
{
    uint64_t span = (uint64_t)(hi - lo) + 1;
    return lo + (int64_t)(rng_next(r) % span);
}

/* True with probability num/den. */
static inline int rng_chance(rng *r, int num, int den)
{
    return (int)(rng_next(r) % (uint64_t)den) < num;
}

/* Base seed: RLT_TEST_SEED from the environment when set (to replay a failure), else fixed. */
static inline uint64_t test_seed(uint64_t fixed)
{
    const char *e = getenv("RLT_TEST_SEED");
    return e ? strtoull(e, NULL, 0) : fixed;
}

/* Prints which seed/trace failed, then fails the test (in the calling test function). */
#define FAIL_SEED(seed, ...)                                                                       \
    do {                                                                                           \
        fprintf(stderr,                                                                            \
                "  seed 0x%llx (replay: RLT_TEST_SEED=0x%llx): ", (unsigned long long)(seed),      \
                (unsigned long long)(seed));                                                       \
        RLT_FAIL_(__VA_ARGS__);                                                                    \
    } while (0)

/* ASSERT_EQ with the seed printed on failure. */
#define CHECK_EQ(seed, a, b)                                                                       \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        if (a_ != b_) FAIL_SEED(seed, "%s == %s: %lld != %lld", #a, #b, a_, b_);                   \
    } while (0)
#define CHECK_LE(seed, a, b)                                                                       \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        if (!(a_ <= b_)) FAIL_SEED(seed, "%s <= %s: %lld > %lld", #a, #b, a_, b_);                 \
    } while (0)
#define CHECK(seed, cond)                                                                          \
    do {                                                                                           \
        if (!(cond)) FAIL_SEED(seed, "assertion failed: %s", #cond);                               \
    } while (0)

static inline rlt_policy parse_policy(const char *text)
{
    rlt_policy p;
    char err[256];
    int rc = rlt_policy_parse(&p, text, strlen(text), err, sizeof err);
    if (rc) {
        fprintf(stderr, "parse %s: %s\n", text, err);
        abort();
    }
    return p;
}

static inline rlt_policy make_policy(rlt_algo algo, int64_t n, rlt_ns w, int64_t burst,
                                     int64_t queue, int64_t delay)
{
    rlt_policy p;
    int rc = rlt_policy_init(&p, algo, n, w, burst, queue, delay);
    if (rc) {
        fprintf(stderr, "rlt_policy_init(%d, %lld, %lld, %lld, %lld, %lld): %s\n", (int)algo,
                (long long)n, (long long)w, (long long)burst, (long long)queue, (long long)delay,
                rlt_strerror(rc));
        abort();
    }
    return p;
}

/* A zeroed (fresh) state block for `p`; free() it. */
static inline void *new_state(const rlt_policy *p)
{
    size_t n = rlt_state_size(p);
    void *st = calloc(1, n ? n : 1);
    if (!st) abort();
    return st;
}

static inline void *dup_state(const rlt_policy *p, const void *st)
{
    size_t n = rlt_state_size(p);
    void *c = malloc(n);
    if (!c) abort();
    memcpy(c, st, n);
    return c;
}

static const rlt_algo all_algos[] = {RLT_FIXED_WINDOW, RLT_SLIDING_LOG, RLT_SLIDING_WINDOW,
                                     RLT_TOKEN_BUCKET, RLT_GCRA,        RLT_LEAKY_BUCKET,
                                     RLT_CONCURRENCY};
#define N_ALGOS (sizeof all_algos / sizeof all_algos[0])

/* A random valid policy of `algo` with small numbers (N <= 12) and a period of a few ms to a
 * few s, sometimes not a multiple of N, so rates are genuine fractions. */
static inline rlt_policy random_policy(rng *r, rlt_algo algo)
{
    static const rlt_ns periods[] = {7, 1000, 999983, 3 * MS, 10 * MS, 1 * S, 7 * S, 1 * S + 1};
    int64_t n = rng_range(r, 1, 12);
    rlt_ns w = periods[rng_range(r, 0, (int64_t)(sizeof periods / sizeof periods[0]) - 1)];
    int64_t burst = 0, queue = 0, delay = 0;
    if ((algo == RLT_TOKEN_BUCKET || algo == RLT_GCRA) && rng_chance(r, 1, 2))
        burst = rng_range(r, 1, 15);
    if (algo == RLT_LEAKY_BUCKET) {
        queue = rng_range(r, 0, 8);
        delay = rng_range(r, 0, queue);
    }
    return make_policy(algo, n, w, burst, queue, delay);
}

/* A random step of the clock relative to the policy's period: mostly small, sometimes zero,
 * sometimes a whole period or more. */
static inline rlt_ns random_step(rng *r, const rlt_policy *p)
{
    rlt_ns w = p->period;
    switch (rng_range(r, 0, 5)) {
    case 0:
        return 0;
    case 1:
        return rng_range(r, 0, 3);
    case 2:
        return rng_range(r, 0, w / p->limit + 1);
    case 3:
        return rng_range(r, 0, w / 4 + 1);
    case 4:
        return rng_range(r, 0, w);
    default:
        return rng_range(r, 0, 2 * w + 2);
    }
}

/* A random cost: mostly 1, sometimes 0 (a peek) or a few units; never > 1 for concurrency. */
static inline int64_t random_cost(rng *r, const rlt_policy *p)
{
    if (p->algo == RLT_CONCURRENCY) return rng_chance(r, 1, 8) ? 0 : 1;
    switch (rng_range(r, 0, 9)) {
    case 0:
        return 0;
    case 1:
    case 2:
        return rng_range(r, 2, 4);
    case 3:
        return rng_range(r, 1, p->limit + 2);
    default:
        return 1;
    }
}

#endif
