/* The top-offenders sketch (rlt_topk) against an exact counting model: random streams of
 * weighted adds over a few hundred (policy, key) items, checked after every step batch for
 * Space-Saving's guarantees (count - error <= true <= count for every listed item, true <=
 * floor for every other one, floor <= N/K fed by adds, 2N/K merged), a Zipf trace whose true
 * top 10 must be found, merges of per-thread sketches, and the boundary errors. */
#include <math.h>
#include <stdlib.h>

#include "test.h"

#include "ratelimit/topk.h"
#include "store_test_util.h"

#define NKEYS 300
#define NPOL 2
#define NITEMS (NKEYS * NPOL)

static uint8_t keys[NKEYS][RLT_KEY_MAX];
static size_t klens[NKEYS];

/* Distinct keys of every length class: short, medium and the longest (512 bytes) that differ
 * only in their last byte, so identity must compare keys whole. */
static void make_keys(uint64_t *rng)
{
    for (int k = 0; k < NKEYS; k++) {
        klens[k] = k % 10 == 0 ? RLT_KEY_MAX : 2 + tu_below(rng, 40);
        memset(keys[k], 'x', klens[k]);
        for (size_t i = 0; i + 2 < klens[k]; i++)
            keys[k][i] = (uint8_t)tu_below(rng, 3); /* binary, NUL bytes included */
        keys[k][klens[k] - 2] = (uint8_t)(k >> 8);
        keys[k][klens[k] - 1] = (uint8_t)k;
    }
}

static rlt_topk *open_k(size_t k)
{
    rlt_topk_options o;
    memset(&o, 0, sizeof o);
    o.k = k;
    o.has_secret = true;
    for (int i = 0; i < 16; i++)
        o.secret[i] = (uint8_t)(i * 13 + 5);
    rlt_topk *t = NULL;
    return rlt_topk_open(&t, &o) == RLT_OK ? t : NULL;
}

/* The model item of a listed entry, or -1. */
static int item_of(const rlt_topk_entry *e)
{
    if (e->policy < 0 || e->policy >= NPOL) return -1;
    for (int k = 0; k < NKEYS; k++)
        if (klens[k] == e->klen && memcmp(keys[k], e->key, e->klen) == 0)
            return e->policy * NKEYS + k;
    return -1;
}

static rlt_topk_entry listing[RLT_TOPK_MAX];

/* Checks the sketch against the true counts; `floor_div` is K for a sketch fed by adds
 * (floor <= N/K, counts sum to N) and K/2 for a merged one (floor <= 2N/K).  Returns 0 or
 * prints what broke and returns -1. */
static int check(const rlt_topk *t, const uint64_t *truth, uint64_t n, bool merged)
{
    size_t k = rlt_topk_capacity(t);
    size_t got = rlt_topk_list(t, listing, RLT_TOPK_MAX);
    bool listed[NITEMS] = {false};
    uint64_t sum = 0;
    if (got != rlt_topk_size(t) || rlt_topk_total(t) != n) {
        fprintf(stderr, "size %zu listed %zu, total %llu != %llu\n", rlt_topk_size(t), got,
                (unsigned long long)rlt_topk_total(t), (unsigned long long)n);
        return -1;
    }
    for (size_t i = 0; i < got; i++) {
        int it = item_of(&listing[i]);
        if (it < 0 || listed[it]) {
            fprintf(stderr, "entry %zu: unknown or listed twice (item %d)\n", i, it);
            return -1;
        }
        listed[it] = true;
        sum += listing[i].count;
        if (listing[i].count < listing[i].error ||
            listing[i].count - listing[i].error > truth[it] || truth[it] > listing[i].count) {
            fprintf(stderr, "item %d: count %llu error %llu true %llu\n", it,
                    (unsigned long long)listing[i].count, (unsigned long long)listing[i].error,
                    (unsigned long long)truth[it]);
            return -1;
        }
        if (i > 0 && listing[i].count > listing[i - 1].count) {
            fprintf(stderr, "listing not sorted at %zu\n", i);
            return -1;
        }
    }
    uint64_t floor = rlt_topk_floor(t);
    for (int it = 0; it < NITEMS; it++) {
        if (!listed[it] && truth[it] > floor) {
            fprintf(stderr, "item %d: true %llu > floor %llu but not monitored\n", it,
                    (unsigned long long)truth[it], (unsigned long long)floor);
            return -1;
        }
    }
    if (floor * k > (merged ? 2 * n : n)) {
        fprintf(stderr, "floor %llu x K %zu > %sN %llu\n", (unsigned long long)floor, k,
                merged ? "2" : "", (unsigned long long)n);
        return -1;
    }
    if (!merged && sum != n) {
        fprintf(stderr, "counts sum to %llu, N is %llu\n", (unsigned long long)sum,
                (unsigned long long)n);
        return -1;
    }
    return 0;
}

/* A skewed random item: a few hot ones, a warm band, and a long flat tail. */
static int skewed_item(uint64_t *rng)
{
    uint64_t r = tu_below(rng, 100);
    if (r < 30) return (int)tu_below(rng, 5);
    if (r < 60) return (int)tu_below(rng, 40);
    return (int)tu_below(rng, NITEMS);
}

static int add_item(rlt_topk *t, int it, uint64_t c)
{
    int k = it % NKEYS;
    return rlt_topk_add(t, it / NKEYS, keys[k], klens[k], c);
}

TEST(adds_keep_space_saving_bounds_against_an_exact_model)
{
    uint64_t rng = 42;
    make_keys(&rng);
    static const size_t ks[] = {1, 2, 7, 32, 100, 700};
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
        rlt_topk *t = open_k(ks[ki]);
        ASSERT(t != NULL);
        uint64_t truth[NITEMS] = {0}, n = 0;
        for (int step = 0; step < 20000; step++) {
            int it = skewed_item(&rng);
            uint64_t c = tu_below(&rng, 8) == 0 ? 1 + tu_below(&rng, 50) : 1;
            ASSERT_EQ(add_item(t, it, c), RLT_OK);
            truth[it] += c;
            n += c;
            if (step % 997 == 0 || step == 19999) ASSERT_EQ(check(t, truth, n, false), 0);
        }
        /* With room for every item the counts are exact. */
        if (ks[ki] >= NITEMS) {
            size_t got = rlt_topk_list(t, listing, RLT_TOPK_MAX);
            for (size_t i = 0; i < got; i++) {
                ASSERT_EQ(listing[i].error, 0);
                ASSERT_EQ(listing[i].count, truth[item_of(&listing[i])]);
            }
        }
        rlt_topk_close(t);
    }
}

TEST(items_above_n_over_k_are_always_monitored)
{
    uint64_t rng = 7;
    make_keys(&rng);
    rlt_topk *t = open_k(10);
    ASSERT(t != NULL);
    uint64_t truth[NITEMS] = {0}, n = 0;
    for (int step = 0; step < 50000; step++) {
        /* Item 3 gets 1/5 of the stream, item 17 1/8; the rest is uniform noise. */
        int it = step % 5 == 0 ? 3 : step % 8 == 1 ? 17 : (int)tu_below(&rng, NITEMS);
        ASSERT_EQ(add_item(t, it, 1), RLT_OK);
        truth[it]++;
        n++;
        if (step % 1000 == 999) {
            ASSERT_EQ(check(t, truth, n, false), 0);
            size_t got = rlt_topk_list(t, listing, 2);
            ASSERT_EQ(got, 2);
            ASSERT_EQ(item_of(&listing[0]), 3);
            ASSERT_EQ(item_of(&listing[1]), 17);
        }
    }
    rlt_topk_close(t);
}

/* Zipf(s) over `m` ranks by inverse CDF: rank r (0-based) with probability ~ 1/(r+1)^s. */
static double *zipf_cdf(size_t m, double s)
{
    double *cdf = malloc(m * sizeof *cdf), acc = 0;
    if (cdf == NULL) return NULL;
    for (size_t r = 0; r < m; r++)
        cdf[r] = (acc += 1.0 / pow((double)(r + 1), s));
    for (size_t r = 0; r < m; r++)
        cdf[r] /= acc;
    return cdf;
}

static size_t zipf_draw(const double *cdf, size_t m, uint64_t *rng)
{
    double u = (double)(tu_rand(rng) >> 11) / 9007199254740992.0;
    size_t lo = 0, hi = m - 1;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cdf[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The Zipf trace's keys: "tenant:user:<perm(rank)>", the ranks shuffled so that key order
 * says nothing about frequency. */
#define ZM 100000
#define ZN 1000000

static int cmp_desc(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Runs a Zipf(s) trace of ZN denials over ZM keys through `w` sketches of `k` counters (item i
 * to sketch i % w, as a daemon's workers would see them), merges them when w > 1, and
 * returns how many of the true top 10 the listing's first 10 hold (10 = all found). */
static int zipf_top10(double s, size_t k, size_t w, uint64_t seed)
{
    double *cdf = zipf_cdf(ZM, s);
    uint32_t *perm = malloc(ZM * sizeof *perm);
    uint64_t *truth = calloc(ZM, sizeof *truth);
    rlt_topk *sk[8] = {NULL}, *merged = open_k(k);
    if (cdf == NULL || perm == NULL || truth == NULL || merged == NULL || w > 8) return -1;
    for (size_t i = 0; i < w; i++)
        if ((sk[i] = open_k(k)) == NULL) return -1;
    uint64_t rng = seed;
    for (uint32_t i = 0; i < ZM; i++)
        perm[i] = i;
    for (uint32_t i = ZM - 1; i > 0; i--) {
        uint32_t j = (uint32_t)tu_below(&rng, i + 1), x = perm[i];
        perm[i] = perm[j];
        perm[j] = x;
    }
    for (size_t i = 0; i < ZN; i++) {
        uint32_t id = perm[zipf_draw(cdf, ZM, &rng)];
        char key[32];
        int len = snprintf(key, sizeof key, "tenant:user:%u", id);
        truth[id]++;
        if (rlt_topk_add(sk[i % w], 0, key, (size_t)len, 1) != RLT_OK) return -1;
    }
    const rlt_topk *res = sk[0];
    if (w > 1) {
        if (rlt_topk_merge(merged, (const rlt_topk *const *)sk, w) != RLT_OK) return -1;
        res = merged;
    }
    /* The true top 10, and the 10th's count (ties with the 11th would make "the" top 10
     * ambiguous: the trace's seed is one where they are apart). */
    uint64_t *sorted = malloc(ZM * sizeof *sorted);
    if (sorted == NULL) return -1;
    memcpy(sorted, truth, ZM * sizeof *truth);
    qsort(sorted, ZM, sizeof *sorted, cmp_desc);
    if (sorted[9] == sorted[10]) return -2;
    rlt_topk_entry top[10];
    size_t got = rlt_topk_list(res, top, 10);
    int found = 0;
    for (size_t i = 0; i < got; i++) {
        char key[32];
        memcpy(key, top[i].key, top[i].klen);
        key[top[i].klen] = '\0';
        unsigned id = (unsigned)strtoul(key + strlen("tenant:user:"), NULL, 10);
        if (id < ZM && truth[id] >= sorted[9]) found++;
        /* The bounds hold on the real trace too. */
        if (id >= ZM || top[i].count < truth[id] || top[i].count - top[i].error > truth[id])
            return -3;
    }
    for (size_t i = 0; i < w; i++)
        rlt_topk_close(sk[i]);
    rlt_topk_close(merged);
    free(sorted);
    free(cdf);
    free(perm);
    free(truth);
    return found;
}

TEST(zipf_trace_true_top_10_found_with_100_counters)
{
    ASSERT_EQ(zipf_top10(1.1, 100, 1, 1), 10);
    ASSERT_EQ(zipf_top10(1.0, 100, 1, 2), 10);
}

TEST(zipf_trace_true_top_10_found_after_merging_four_worker_sketches)
{
    ASSERT_EQ(zipf_top10(1.1, 100, 4, 3), 10);
    ASSERT_EQ(zipf_top10(1.0, 100, 4, 4), 10);
}

TEST(merge_of_per_thread_sketches_keeps_both_bounds)
{
    uint64_t rng = 99;
    make_keys(&rng);
    static const size_t ws[] = {1, 2, 3, 8};
    for (size_t wi = 0; wi < sizeof ws / sizeof ws[0]; wi++) {
        size_t w = ws[wi];
        rlt_topk *sk[8];
        for (size_t i = 0; i < w; i++)
            ASSERT((sk[i] = open_k(20)) != NULL);
        rlt_topk *m = open_k(20);
        ASSERT(m != NULL);
        uint64_t truth[NITEMS] = {0}, n = 0;
        for (int step = 0; step < 30000; step++) {
            int it = skewed_item(&rng);
            uint64_t c = 1 + tu_below(&rng, 3);
            ASSERT_EQ(add_item(sk[tu_below(&rng, w)], it, c), RLT_OK);
            truth[it] += c;
            n += c;
            if (step % 2999 == 0) {
                ASSERT_EQ(rlt_topk_merge(m, (const rlt_topk *const *)sk, w), RLT_OK);
                ASSERT_EQ(check(m, truth, n, true), 0);
                /* A merged sketch goes on counting with the same bounds. */
                rlt_topk *m2 = open_k(20);
                ASSERT(m2 != NULL);
                ASSERT_EQ(rlt_topk_copy(m2, m), RLT_OK);
                uint64_t t2[NITEMS];
                memcpy(t2, truth, sizeof t2);
                for (int extra = 0; extra < 500; extra++) {
                    int x = skewed_item(&rng);
                    ASSERT_EQ(add_item(m2, x, 1), RLT_OK);
                    t2[x]++;
                }
                /* Its floor is the merge's 2N/K one, so check the weak bound. */
                ASSERT_EQ(check(m2, t2, n + 500, true), 0);
                rlt_topk_close(m2);
            }
        }
        for (size_t i = 0; i < w; i++)
            rlt_topk_close(sk[i]);
        rlt_topk_close(m);
    }
}

TEST(merge_of_one_sketch_lists_the_same_items)
{
    uint64_t rng = 5;
    make_keys(&rng);
    rlt_topk *a = open_k(30), *m = open_k(30);
    ASSERT(a != NULL && m != NULL);
    for (int step = 0; step < 5000; step++)
        ASSERT_EQ(add_item(a, skewed_item(&rng), 1), RLT_OK);
    const rlt_topk *one[1] = {a};
    ASSERT_EQ(rlt_topk_merge(m, one, 1), RLT_OK);
    rlt_topk_entry x[30], y[30];
    ASSERT_EQ(rlt_topk_list(a, x, 30), 30);
    ASSERT_EQ(rlt_topk_list(m, y, 30), 30);
    for (int i = 0; i < 30; i++) {
        ASSERT_EQ(item_of(&x[i]), item_of(&y[i]));
        ASSERT_EQ(x[i].count, y[i].count);
        ASSERT_EQ(x[i].error, y[i].error);
    }
    ASSERT_EQ(rlt_topk_floor(m), rlt_topk_floor(a));
    ASSERT_EQ(rlt_topk_total(m), rlt_topk_total(a));
    /* Merging nothing empties dst. */
    ASSERT_EQ(rlt_topk_merge(m, NULL, 0), RLT_OK);
    ASSERT_EQ(rlt_topk_size(m), 0);
    ASSERT_EQ(rlt_topk_total(m), 0);
    rlt_topk_close(a);
    rlt_topk_close(m);
}

TEST(merge_and_copy_refuse_another_secret_and_the_destination_itself)
{
    rlt_topk *a = open_k(4), *b = NULL;
    rlt_topk_options o = {.k = 4}; /* a random secret */
    ASSERT(a != NULL);
    ASSERT_EQ(rlt_topk_open(&b, &o), RLT_OK);
    ASSERT_EQ(rlt_topk_add(a, 0, "k", 1, 5), RLT_OK);
    ASSERT_EQ(rlt_topk_add(b, 0, "k", 1, 5), RLT_OK);
    const rlt_topk *src[2] = {b, a};
    ASSERT_EQ(rlt_topk_merge(a, src + 1, 1), RLT_EINVAL); /* itself */
    ASSERT_EQ(rlt_topk_merge(a, src, 1), RLT_EINVAL);     /* another secret */
    ASSERT_EQ(rlt_topk_copy(a, b), RLT_EINVAL);
    ASSERT_EQ(rlt_topk_copy(a, a), RLT_EINVAL);
    ASSERT_EQ(rlt_topk_total(a), 5); /* unchanged */
    rlt_topk *c = open_k(5);
    ASSERT(c != NULL);
    ASSERT_EQ(rlt_topk_copy(c, a), RLT_EINVAL); /* another K */
    rlt_topk_close(a);
    rlt_topk_close(b);
    rlt_topk_close(c);
}

TEST(merge_overflow_is_erange_and_leaves_dst_empty)
{
    rlt_topk *a = open_k(2), *b = open_k(2), *m = open_k(2);
    ASSERT(a && b && m);
    ASSERT_EQ(rlt_topk_add(a, 0, "k", 1, UINT64_MAX - 1), RLT_OK);
    ASSERT_EQ(rlt_topk_add(b, 0, "k", 1, 2), RLT_OK);
    ASSERT_EQ(rlt_topk_add(m, 0, "z", 1, 1), RLT_OK);
    const rlt_topk *src[2] = {a, b};
    ASSERT_EQ(rlt_topk_merge(m, src, 2), RLT_ERANGE);
    ASSERT_EQ(rlt_topk_size(m), 0);
    ASSERT_EQ(rlt_topk_total(m), 0);
    rlt_topk_close(a);
    rlt_topk_close(b);
    rlt_topk_close(m);
}

TEST(copy_is_exact_and_independent)
{
    uint64_t rng = 11;
    make_keys(&rng);
    rlt_topk *a = open_k(16), *b = open_k(16);
    ASSERT(a && b);
    uint64_t truth[NITEMS] = {0};
    for (int step = 0; step < 4000; step++) {
        int it = skewed_item(&rng);
        ASSERT_EQ(add_item(a, it, 1), RLT_OK);
        truth[it]++;
    }
    ASSERT_EQ(rlt_topk_copy(b, a), RLT_OK);
    rlt_topk_entry x[16], y[16];
    ASSERT_EQ(rlt_topk_list(a, x, 16), rlt_topk_list(b, y, 16));
    for (int i = 0; i < 16; i++) {
        ASSERT_EQ(item_of(&x[i]), item_of(&y[i]));
        ASSERT_EQ(x[i].count, y[i].count);
    }
    /* The copy's index works: it goes on counting against the model. */
    for (int step = 0; step < 4000; step++) {
        int it = skewed_item(&rng);
        ASSERT_EQ(add_item(b, it, 1), RLT_OK);
        truth[it]++;
    }
    ASSERT_EQ(check(b, truth, 8000, false), 0);
    ASSERT_EQ(rlt_topk_total(a), 4000);
    rlt_topk_close(a);
    rlt_topk_close(b);
}

TEST(add_refuses_bad_input_and_changes_nothing)
{
    rlt_topk *t = open_k(2);
    ASSERT(t != NULL);
    static uint8_t big[RLT_KEY_MAX + 1];
    ASSERT_EQ(rlt_topk_add(t, 0, "", 0, 1), RLT_EKEYLEN);
    ASSERT_EQ(rlt_topk_add(t, 0, big, RLT_KEY_MAX + 1, 1), RLT_EKEYLEN);
    ASSERT_EQ(rlt_topk_add(t, 0, big, RLT_KEY_MAX, 1), RLT_OK);
    ASSERT_EQ(rlt_topk_add(t, 0, "a", 1, 0), RLT_EINVAL);
    ASSERT_EQ(rlt_topk_add(t, 0, NULL, 1, 1), RLT_EINVAL);
    ASSERT_EQ(rlt_topk_add(NULL, 0, "a", 1, 1), RLT_EINVAL);
    ASSERT_EQ(rlt_topk_add(t, 0, "a", 1, UINT64_MAX), RLT_ERANGE); /* total */
    ASSERT_EQ(rlt_topk_total(t), 1);
    ASSERT_EQ(rlt_topk_size(t), 1);
    rlt_topk_clear(t);
    ASSERT_EQ(rlt_topk_add(t, 0, "a", 1, UINT64_MAX), RLT_OK);
    ASSERT_EQ(rlt_topk_add(t, 0, "a", 1, 1), RLT_ERANGE);
    ASSERT_EQ(rlt_topk_total(t), UINT64_MAX);
    rlt_topk_close(t);
    rlt_topk_options o = {.k = 0};
    ASSERT_EQ(rlt_topk_open(&t, &o), RLT_EINVAL);
    o.k = RLT_TOPK_MAX + 1;
    ASSERT_EQ(rlt_topk_open(&t, &o), RLT_EINVAL);
    ASSERT_EQ(rlt_topk_open(NULL, &o), RLT_EINVAL);
    rlt_topk_close(NULL);
}

TEST(items_differ_by_policy_and_by_every_key_byte)
{
    rlt_topk *t = open_k(8);
    ASSERT(t != NULL);
    static uint8_t k1[RLT_KEY_MAX], k2[RLT_KEY_MAX];
    memset(k1, 'a', sizeof k1);
    memset(k2, 'a', sizeof k2);
    k2[RLT_KEY_MAX - 1] = 'b';
    ASSERT_EQ(rlt_topk_add(t, 0, k1, RLT_KEY_MAX, 3), RLT_OK);
    ASSERT_EQ(rlt_topk_add(t, 0, k2, RLT_KEY_MAX, 2), RLT_OK);
    ASSERT_EQ(rlt_topk_add(t, 1, k1, RLT_KEY_MAX, 1), RLT_OK);
    ASSERT_EQ(rlt_topk_add(t, 0, k1, RLT_KEY_MAX - 1, 4), RLT_OK);
    ASSERT_EQ(rlt_topk_add(t, 0, "a\0b", 3, 5), RLT_OK);
    ASSERT_EQ(rlt_topk_add(t, 0, "a\0c", 3, 6), RLT_OK);
    rlt_topk_entry e[8];
    ASSERT_EQ(rlt_topk_list(t, e, 8), 6);
    static const uint64_t want[] = {6, 5, 4, 3, 2, 1};
    for (int i = 0; i < 6; i++) {
        ASSERT_EQ(e[i].count, want[i]);
        ASSERT_EQ(e[i].error, 0);
    }
    ASSERT_EQ(e[0].klen, 3);
    ASSERT(memcmp(e[0].key, "a\0c", 3) == 0);
    ASSERT_EQ(e[5].policy, 1);
    rlt_topk_close(t);
}

TEST(list_orders_by_count_then_error_then_policy_then_key)
{
    rlt_topk *t = open_k(3);
    ASSERT(t != NULL);
    ASSERT_EQ(rlt_topk_add(t, 0, "b", 1, 2), RLT_OK);
    ASSERT_EQ(rlt_topk_add(t, 0, "a", 1, 2), RLT_OK);
    ASSERT_EQ(rlt_topk_add(t, 0, "ab", 1, 5), RLT_OK); /* klen 1: the key "a" again */
    ASSERT_EQ(rlt_topk_add(t, 1, "a", 1, 7), RLT_OK);
    /* Full: "c" replaces the smallest (b: 2) and starts at 2 + 5 = 7 with error 2. */
    ASSERT_EQ(rlt_topk_add(t, 0, "c", 1, 5), RLT_OK);
    rlt_topk_entry e[3];
    ASSERT_EQ(rlt_topk_list(t, e, 3), 3);
    ASSERT_EQ(e[0].policy, 0); /* 7, error 0, policy 0 */
    ASSERT_EQ(e[0].key[0], 'a');
    ASSERT_EQ(e[0].count, 7);
    ASSERT_EQ(e[1].policy, 1); /* 7, error 0, policy 1 */
    ASSERT_EQ(e[1].error, 0);
    ASSERT_EQ(e[2].key[0], 'c'); /* 7, error 2 */
    ASSERT_EQ(e[2].count, 7);
    ASSERT_EQ(e[2].error, 2);
    ASSERT_EQ(rlt_topk_floor(t), 2);
    /* A shorter listing is the longer one's prefix. */
    ASSERT_EQ(rlt_topk_list(t, e, 1), 1);
    ASSERT_EQ(e[0].policy, 0);
    ASSERT_EQ(e[0].key[0], 'a');
    ASSERT_EQ(rlt_topk_list(t, e, 0), 0);
    rlt_topk_clear(t);
    ASSERT_EQ(rlt_topk_list(t, e, 3), 0);
    ASSERT_EQ(rlt_topk_floor(t), 0);
    rlt_topk_close(t);
}
