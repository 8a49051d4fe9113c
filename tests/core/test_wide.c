/* The core's 128-bit helpers (src/core/internal.h) against the plain 128-bit forms, with the
 * 64-bit first paths that WebAssembly takes switched on here (RLT__NARROW_FIRST): every pair
 * of edge values (0, +-1, powers of two and their neighbours, int32's and int64's limits,
 * products either side of 2^63), then random operands of random bit lengths. */
#define RLT__NARROW_FIRST 1
#include "core_util.h"

#include "core/internal.h"

/* 0, +-1, +-2^k and +-(2^k +- 1) for k < 63, int64's and int32's limits, and the square root
 * of 2^63 either side (3037000499^2 < 2^63 < 3037000500^2). */
static int edges(int64_t *v)
{
    int n = 0;
    v[n++] = 0;
    for (int k = 0; k < 63; k++) {
        int64_t p = INT64_C(1) << k;
        int64_t near[3] = {p, p - 1, p + 1};
        for (int i = 0; i < 3; i++) {
            v[n++] = near[i];
            v[n++] = -near[i];
        }
    }
    int64_t more[] = {INT64_MAX,        INT64_MIN,           INT64_MIN + 1,       INT64_MAX - 1,
                      INT32_MAX,        INT32_MIN,           3037000499,          3037000500,
                      -3037000499,      -3037000500,         INT64_MAX / 3,       RLT_NS_PER_S,
                      INT64_MAX / 1000, -(INT64_MAX / 1000), 4611686018427387903, 6074000999};
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++)
        v[n++] = more[i];
    return n;
}

static int64_t random_bits(rng *r)
{
    int bits = (int)rng_range(r, 0, 63);
    int64_t x = bits == 0 ? 0 : (int64_t)(rng_next(r) >> (64 - bits));
    return rng_chance(r, 1, 2) ? x : -x;
}

/* One pair through all three helpers, against __builtin_mul_overflow and __int128. */
#define CHECK_PAIR(seed, a, b)                                                                     \
    do {                                                                                           \
        int64_t got, want;                                                                         \
        bool o_got = rlt__mul_overflow(a, b, &got), o_want = __builtin_mul_overflow(a, b, &want);  \
        CHECK_EQ(seed, o_got, o_want);                                                             \
        CHECK_EQ(seed, got, want);                                                                 \
        if (rlt__product_small(a, b)) CHECK(seed, !o_want);                                        \
        i128 w = rlt__mul_wide(a, b);                                                              \
        CHECK(seed, w == (i128)(a) * (b));                                                         \
        if ((b) > 0) {                                                                             \
            CHECK(seed, rlt__div_wide(w, b) == w / (b));                                           \
            CHECK(seed, rlt__div_wide((i128)(a), b) == (i128)(a) / (b));                           \
        }                                                                                          \
    } while (0)

TEST(wide_helpers_equal_the_128_bit_forms_on_every_pair_of_edge_values)
{
    int64_t v[512]; /* edges() gives 395 */
    int n = edges(v);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            int64_t a = v[i], b = v[j];
            CHECK_PAIR((uint64_t)i << 32 | (uint64_t)j, a, b); /* the "seed" names the pair */
            if (rlt_test_failed_now) return;
        }
}

TEST(wide_helpers_equal_the_128_bit_forms_on_random_operands_and_products_near_2_63)
{
    uint64_t seed = test_seed(0x3d1);
    rng r = {seed};
    for (int i = 0; i < 1000000; i++) {
        int64_t a = random_bits(&r), b = random_bits(&r);
        if (rng_chance(&r, 1, 4) && a != 0 && a != INT64_MIN) /* |a x b| within a few |a| of 2^63 */
            b = rlt__sat_add(INT64_MAX / a, rng_range(&r, -2, 2));
        CHECK_PAIR(seed, a, b);
        if (rlt_test_failed_now) return;
    }
}

TEST(mul_wide_takes_factors_beyond_int64)
{
    i128 big[] = {(i128)INT64_MAX + 1, (i128)INT64_MIN - 1, (i128)INT64_MAX * 3, -((i128)1 << 100)};
    int64_t b[] = {0, 1, -1, 2, INT64_MAX, INT64_MIN};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++)
        for (size_t j = 0; j < sizeof b / sizeof b[0]; j++) {
            i128 a = big[i] / (b[j] == INT64_MIN || b[j] == INT64_MAX ? ((i128)1 << 40) : 1);
            ASSERT(rlt__mul_wide(a, b[j]) == a * b[j]);
            if (b[j] > 0) ASSERT(rlt__div_wide(big[i], b[j]) == big[i] / b[j]);
        }
}

TEST(decision_sized_operands_take_the_64_bit_path)
{
    /* A century in ns times a scale of a million, a window count times a period of a day:
     * what decisions multiply fits the test, so WebAssembly skips compiler-rt's __multi3. */
    ASSERT(rlt__product_small(INT64_C(100) * 365 * 86400 * RLT_NS_PER_S / 1000000, 1000000));
    ASSERT(rlt__product_small(-(INT64_C(1) << 40), (INT64_C(1) << 22) - 1));
    ASSERT(rlt__product_small(INT64_MIN, 0));
    ASSERT(!rlt__product_small(INT64_C(1) << 32, INT64_C(1) << 31));
    ASSERT(!rlt__product_small(INT64_MIN, 1)); /* sufficient, not necessary */
}
