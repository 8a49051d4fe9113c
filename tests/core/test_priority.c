/* rlt_decide_class on seeded random traces of every algorithm, against a model built from
 * rlt_decide alone: a request of a class is admitted exactly when rlt_decide would admit it
 * and leave at least the reserve R (limit - the class's ceiling) remaining (for concurrency:
 * when the leases in flight plus its cost stay within the ceiling); then its state is the one
 * rlt_decide leaves, and a refused one leaves the state as a peek does (nothing consumed).
 * Critical traffic, or a reserve of 0, is rlt_decide itself. */
#include "core_util.h"

#include "ratelimit/adaptive.h"

#define TRACES 80
#define STEPS 300

TEST(a_class_is_admitted_exactly_when_the_reserve_stays_free_for_every_algorithm)
{
    uint64_t base = test_seed(0x9710);
    for (size_t ai = 0; ai < N_ALGOS; ai++) {
        int refused_by_class = 0, admitted_below_critical = 0;
        for (int tr = 0; tr < TRACES; tr++) {
            uint64_t seed = base + ai * 1000 + (uint64_t)tr;
            rng r = {seed};
            rlt_policy p = random_policy(&r, all_algos[ai]);
            size_t size = rlt_state_size(&p);
            void *st = new_state(&p);
            rlt_ns now = rng_range(&r, 0, 10 * S);
            int64_t leases[64];
            int nl = 0;
            for (int i = 0; i < STEPS; i++) {
                now += random_step(&r, &p);
                if (p.algo == RLT_CONCURRENCY && nl > 0 && rng_chance(&r, 1, 3)) {
                    int k = (int)rng_range(&r, 0, nl - 1);
                    (void)rlt_release(&p, st, now, leases[k]);
                    leases[k] = leases[--nl];
                    continue;
                }
                int64_t cost = random_cost(&r, &p);
                rlt_class c = (rlt_class)rng_range(&r, 0, RLT_CLASS_COUNT - 1);
                int pct = (int)(rng_chance(&r, 1, 4) ? 0 : rng_range(&r, 1, 60));
                int64_t top, reserve;
                /* the model: rlt_decide on a copy, the ceiling a share of the limit it reports */
                void *plain = dup_state(&p, st), *peeked = dup_state(&p, st);
                rlt_decision want, got, peek;
                CHECK_EQ(seed, rlt_decide(&p, plain, now, cost, &want), RLT_OK);
                CHECK_EQ(seed, rlt_decide(&p, peeked, now, 0, &peek), RLT_OK);
                CHECK_EQ(seed, rlt_class_ceiling(peek.limit, pct, c, &top), RLT_OK);
                reserve = peek.limit - top;
                bool admit;
                if (p.algo == RLT_CONCURRENCY) {
                    int64_t in_use = p.limit - peek.remaining;
                    admit = in_use < top && (cost == 0 || in_use + cost <= top);
                } else {
                    admit = want.allowed && want.remaining >= reserve;
                }
                if (cost == 0)
                    admit = p.algo == RLT_CONCURRENCY
                                ? admit
                                : peek.allowed && peek.remaining >= reserve + 1;
                int rc = rlt_decide_class(&p, st, now, cost, c, pct, &got);
                CHECK_EQ(seed, rc, RLT_OK);
                if (reserve == 0) {
                    CHECK_EQ(seed, got.allowed, want.allowed);
                    CHECK(seed, memcmp(st, plain, size) == 0);
                } else if (cost > 0) {
                    CHECK_EQ(seed, got.allowed, admit);
                    CHECK_EQ(seed, got.limit, top);
                    CHECK_LE(seed, got.remaining, top);
                    if (admit) {
                        CHECK(seed, memcmp(st, plain, size) == 0);
                        admitted_below_critical++;
                    } else {
                        CHECK(seed, memcmp(st, peeked, size) == 0);
                        CHECK_EQ(seed, got.lease, 0);
                        CHECK(seed, got.retry_after != 0);
                        if (want.allowed) refused_by_class++;
                    }
                }
                if (got.allowed && got.lease && nl < 64) leases[nl++] = got.lease;
                free(plain);
                free(peeked);
                if (rlt_test_failed_now) {
                    free(st);
                    return;
                }
            }
            free(st);
        }
        /* the traces reach both sides of the rule */
        if (refused_by_class == 0 || admitted_below_critical == 0)
            RLT_FAIL_("%s: %d refused by the class, %d admitted below critical",
                      rlt_algo_name(all_algos[ai]), refused_by_class, admitted_below_critical);
    }
}

TEST(a_class_decision_refuses_bad_reserves_and_classes_and_changes_nothing)
{
    rlt_policy p = parse_policy("gcra:10/1s");
    void *st = new_state(&p);
    rlt_decision d;
    ASSERT_EQ(rlt_decide_class(&p, st, S, 1, RLT_CLASS_DEFAULT, 20, &d), RLT_OK);
    void *before = dup_state(&p, st);
    ASSERT_EQ(rlt_decide_class(&p, st, S, 1, RLT_CLASS_DEFAULT, 101, &d), RLT_EINVAL);
    ASSERT_EQ(rlt_decide_class(&p, st, S, 1, RLT_CLASS_DEFAULT, -5, &d), RLT_EINVAL);
    ASSERT_EQ(rlt_decide_class(&p, st, S, 1, (rlt_class)5, 20, &d), RLT_EINVAL);
    ASSERT_EQ(rlt_decide_class(&p, st, S, -1, RLT_CLASS_DEFAULT, 20, &d), RLT_EINVAL);
    ASSERT_EQ(rlt_decide_class(NULL, st, S, 1, RLT_CLASS_DEFAULT, 20, &d), RLT_EINVAL);
    ASSERT(memcmp(st, before, rlt_state_size(&p)) == 0);
    free(before);
    free(st);
}

TEST(sheddable_traffic_cannot_take_the_last_fifth_of_a_concurrency_limit)
{
    rlt_policy p = parse_policy("concurrency:10/10s");
    void *st = new_state(&p);
    rlt_decision d;
    int shed = 0;
    for (int i = 0; i < 20; i++) {
        ASSERT_EQ(rlt_decide_class(&p, st, S, 1, RLT_CLASS_SHEDDABLE, 20, &d), RLT_OK);
        shed += d.allowed;
    }
    ASSERT_EQ(shed, 6); /* 10 - 2 x ceil(10 x 20 %) */
    ASSERT_EQ(rlt_decide_class(&p, st, S, 1, RLT_CLASS_DEFAULT, 20, &d), RLT_OK);
    ASSERT(d.allowed);
    ASSERT_EQ(rlt_decide_class(&p, st, S, 1, RLT_CLASS_DEFAULT, 20, &d), RLT_OK);
    ASSERT(d.allowed);
    ASSERT_EQ(rlt_decide_class(&p, st, S, 1, RLT_CLASS_DEFAULT, 20, &d), RLT_OK);
    ASSERT(!d.allowed);
    ASSERT_EQ(d.limit, 8);
    for (int i = 0; i < 2; i++) {
        ASSERT_EQ(rlt_decide_class(&p, st, S, 1, RLT_CLASS_CRITICAL, 20, &d), RLT_OK);
        ASSERT(d.allowed);
    }
    ASSERT_EQ(rlt_decide_class(&p, st, S, 1, RLT_CLASS_CRITICAL, 20, &d), RLT_OK);
    ASSERT(!d.allowed);
    free(st);
}
