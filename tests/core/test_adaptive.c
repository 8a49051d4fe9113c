/* Priority classes and adaptive concurrency limits (include/ratelimit/adaptive.h): the class
 * ceilings against their arithmetic written again here, bad input refused with the state
 * untouched, and on seeded random traces of releases the limit never leaving floor..ceiling;
 * then each controller's direction: AIMD grows on success and cuts once per round trip on
 * drops, Vegas settles near a modelled backend's capacity and follows it when it halves. */
#include "core_util.h"

#include "ratelimit/adaptive.h"

TEST(class_names_parse_and_unknown_classes_are_refused)
{
    rlt_class c = RLT_CLASS_DEFAULT;
    ASSERT_EQ(rlt_class_parse("critical", 8, &c), RLT_OK);
    ASSERT_EQ(c, RLT_CLASS_CRITICAL);
    ASSERT_EQ(rlt_class_parse("sheddable", 9, &c), RLT_OK);
    ASSERT_EQ(c, RLT_CLASS_SHEDDABLE);
    ASSERT_EQ(rlt_class_parse("default", 7, &c), RLT_OK);
    ASSERT_EQ(c, RLT_CLASS_DEFAULT);
    ASSERT_EQ(rlt_class_parse("urgent", 6, &c), RLT_EINVAL);
    ASSERT_EQ(rlt_class_parse("critica", 7, &c), RLT_EINVAL);
    ASSERT_EQ(rlt_class_parse("criticalx", 9, &c), RLT_EINVAL);
    ASSERT_EQ(rlt_class_parse("", 0, &c), RLT_EINVAL);
    ASSERT_EQ(c, RLT_CLASS_DEFAULT); /* unchanged by the refusals */
    ASSERT_EQ(rlt_class_parse(NULL, 3, &c), RLT_EINVAL);
    ASSERT_STR_EQ(rlt_class_name(RLT_CLASS_SHEDDABLE), "sheddable");
    ASSERT_STR_EQ(rlt_class_name((rlt_class)7), "?");
}

TEST(a_reserve_of_20_percent_keeps_the_top_fifth_for_critical)
{
    int64_t top;
    ASSERT_EQ(rlt_class_ceiling(100, 20, RLT_CLASS_CRITICAL, &top), RLT_OK);
    ASSERT_EQ(top, 100);
    ASSERT_EQ(rlt_class_ceiling(100, 20, RLT_CLASS_DEFAULT, &top), RLT_OK);
    ASSERT_EQ(top, 80);
    ASSERT_EQ(rlt_class_ceiling(100, 20, RLT_CLASS_SHEDDABLE, &top), RLT_OK);
    ASSERT_EQ(top, 60);
    ASSERT_EQ(rlt_class_ceiling(7, 20, RLT_CLASS_SHEDDABLE, &top), RLT_OK); /* R = ceil(1.4) */
    ASSERT_EQ(top, 3);
    ASSERT_EQ(rlt_class_ceiling(10, 100, RLT_CLASS_DEFAULT, &top), RLT_OK);
    ASSERT_EQ(top, 0);
    bool ok;
    ASSERT_EQ(rlt_class_admits(100, 20, RLT_CLASS_DEFAULT, 79, 1, &ok), RLT_OK);
    ASSERT(ok);
    ASSERT_EQ(rlt_class_admits(100, 20, RLT_CLASS_DEFAULT, 80, 1, &ok), RLT_OK);
    ASSERT(!ok);
    ASSERT_EQ(rlt_class_admits(100, 20, RLT_CLASS_CRITICAL, 99, 1, &ok), RLT_OK);
    ASSERT(ok);
    ASSERT_EQ(rlt_class_admits(100, 20, RLT_CLASS_CRITICAL, 100, 0, &ok), RLT_OK);
    ASSERT(ok); /* a peek (cost 0) at a full limit */
}

TEST(reserves_outside_0_to_100_and_bad_counts_are_refused)
{
    int64_t top = 42;
    bool ok = true;
    ASSERT_EQ(rlt_class_ceiling(100, -1, RLT_CLASS_DEFAULT, &top), RLT_EINVAL);
    ASSERT_EQ(rlt_class_ceiling(100, 101, RLT_CLASS_DEFAULT, &top), RLT_EINVAL);
    ASSERT_EQ(rlt_class_ceiling(-1, 20, RLT_CLASS_DEFAULT, &top), RLT_EINVAL);
    ASSERT_EQ(rlt_class_ceiling(100, 20, (rlt_class)3, &top), RLT_EINVAL);
    ASSERT_EQ(rlt_class_ceiling(INT64_MAX, 20, RLT_CLASS_DEFAULT, &top), RLT_EINVAL);
    ASSERT_EQ(top, 42);
    ASSERT_EQ(rlt_class_admits(100, 20, RLT_CLASS_DEFAULT, -1, 1, &ok), RLT_EINVAL);
    ASSERT_EQ(rlt_class_admits(100, 20, RLT_CLASS_DEFAULT, 1, -1, &ok), RLT_EINVAL);
    ASSERT_EQ(rlt_class_admits(100, 120, RLT_CLASS_DEFAULT, 1, 1, &ok), RLT_EINVAL);
    ASSERT(ok);
}

TEST(class_ceilings_match_their_arithmetic_and_fall_with_the_class)
{
    uint64_t seed = test_seed(0xc1a55);
    rng r = {seed};
    for (int i = 0; i < 20000; i++) {
        int64_t limit = rng_chance(&r, 1, 2) ? rng_range(&r, 0, 200) : rng_range(&r, 0, 1 << 30);
        int pct = (int)rng_range(&r, 0, 100);
        int64_t prev = INT64_MAX;
        for (int c = 0; c < RLT_CLASS_COUNT; c++) {
            int64_t top;
            CHECK_EQ(seed, rlt_class_ceiling(limit, pct, (rlt_class)c, &top), RLT_OK);
            int64_t reserve = (limit * pct + 99) / 100, want = limit - c * reserve;
            CHECK_EQ(seed, top, want > 0 ? want : 0);
            CHECK_LE(seed, top, prev);
            CHECK_LE(seed, 0, top);
            prev = top;
            int64_t in_use = rng_range(&r, 0, limit + 2), cost = rng_range(&r, 0, 3);
            bool ok;
            CHECK_EQ(seed, rlt_class_admits(limit, pct, (rlt_class)c, in_use, cost, &ok), RLT_OK);
            CHECK_EQ(seed, ok, in_use + cost <= top);
        }
        if (rlt_test_failed_now) return;
    }
}

static rlt_adapt_policy policy(rlt_adapt_algo algo, int64_t floor, int64_t ceiling, int64_t initial)
{
    rlt_adapt_policy p = {.algo = algo, .floor = floor, .ceiling = ceiling, .initial = initial};
    int rc = rlt_adapt_policy_check(&p);
    if (rc != RLT_OK) abort();
    return p;
}

TEST(floors_above_ceilings_and_fields_out_of_range_are_refused)
{
    rlt_adapt_policy bad[] = {
        {.algo = 0, .floor = 1, .ceiling = 10, .initial = 5},
        {.algo = 3, .floor = 1, .ceiling = 10, .initial = 5},
        {.algo = RLT_ADAPT_VEGAS, .floor = 20, .ceiling = 10, .initial = 15},
        {.algo = RLT_ADAPT_VEGAS, .floor = 0, .ceiling = 10, .initial = 5},
        {.algo = RLT_ADAPT_VEGAS, .floor = 1, .ceiling = RLT_CONCURRENCY_MAX + 1, .initial = 5},
        {.algo = RLT_ADAPT_VEGAS, .floor = 5, .ceiling = 10, .initial = 4},
        {.algo = RLT_ADAPT_VEGAS, .floor = 5, .ceiling = 10, .initial = 11},
        {.algo = RLT_ADAPT_AIMD, .floor = 1, .ceiling = 10, .initial = 5, .backoff_pm = 1000},
        {.algo = RLT_ADAPT_AIMD, .floor = 1, .ceiling = 10, .initial = 5, .backoff_pm = 499},
        {.algo = RLT_ADAPT_AIMD, .floor = 1, .ceiling = 10, .initial = 5, .slow_ns = -1},
        {.algo = RLT_ADAPT_AIMD,
         .floor = 1,
         .ceiling = 10,
         .initial = 5,
         .slow_ns = RLT_ADAPT_LATENCY_MAX + 1},
        {.algo = RLT_ADAPT_VEGAS, .floor = 1, .ceiling = 10, .initial = 5, .probe_ns = 1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rlt_adapt_policy before = bad[i];
        if (rlt_adapt_policy_check(&bad[i]) != RLT_EINVAL) RLT_FAIL_("policy %zu accepted", i);
        if (memcmp(&before, &bad[i], sizeof before) != 0) RLT_FAIL_("policy %zu changed", i);
    }
    ASSERT_EQ(rlt_adapt_policy_check(NULL), RLT_EINVAL);
    rlt_adapt_policy p = policy(RLT_ADAPT_AIMD, 1, 10, 5);
    ASSERT_EQ(p.backoff_pm, 900);
    ASSERT_EQ(p.probe_ns, 30 * S);
}

TEST(negative_or_absurd_latencies_are_refused_and_change_nothing)
{
    rlt_adapt_policy p = policy(RLT_ADAPT_VEGAS, 2, 100, 10);
    rlt_adapt_state s = {0};
    ASSERT_EQ(rlt_adapt_update(&p, &s, 1 * S, 10 * MS, 10, RLT_OUTCOME_SUCCESS), RLT_OK);
    rlt_adapt_state before = s;
    ASSERT_EQ(rlt_adapt_update(&p, &s, 2 * S, -1, 10, RLT_OUTCOME_SUCCESS), RLT_EINVAL);
    ASSERT_EQ(rlt_adapt_update(&p, &s, 2 * S, RLT_ADAPT_LATENCY_MAX + 1, 10, RLT_OUTCOME_SUCCESS),
              RLT_ERANGE);
    ASSERT_EQ(rlt_adapt_update(&p, &s, 2 * S, 10 * MS, -3, RLT_OUTCOME_SUCCESS), RLT_EINVAL);
    ASSERT_EQ(rlt_adapt_update(&p, &s, 2 * S, 10 * MS, 10, (rlt_outcome)9), RLT_EINVAL);
    ASSERT_EQ(rlt_adapt_update(&p, &s, -1, 10 * MS, 10, RLT_OUTCOME_SUCCESS), RLT_ERANGE);
    ASSERT_EQ(rlt_adapt_update(&p, NULL, 2 * S, 10 * MS, 10, RLT_OUTCOME_SUCCESS), RLT_EINVAL);
    rlt_adapt_policy unchecked = p;
    unchecked.floor = 200; /* above its ceiling */
    ASSERT_EQ(rlt_adapt_update(&unchecked, &s, 2 * S, 10 * MS, 10, RLT_OUTCOME_SUCCESS),
              RLT_EINVAL);
    ASSERT(memcmp(&before, &s, sizeof s) == 0);
}

TEST(the_limit_never_leaves_floor_to_ceiling_on_random_releases)
{
    uint64_t base = test_seed(0xada97);
    for (int tr = 0; tr < 400; tr++) {
        uint64_t seed = base + (uint64_t)tr;
        rng r = {seed};
        int64_t floor = rng_range(&r, 1, 50), ceiling = floor + rng_range(&r, 0, 2000);
        rlt_adapt_policy p = {.algo = rng_chance(&r, 1, 2) ? RLT_ADAPT_AIMD : RLT_ADAPT_VEGAS,
                              .floor = floor,
                              .ceiling = ceiling,
                              .initial = rng_range(&r, floor, ceiling),
                              .slow_ns = rng_chance(&r, 1, 2) ? rng_range(&r, 1, 100 * MS) : 0,
                              .backoff_pm = (int)rng_range(&r, 500, 999),
                              .probe_ns = rng_range(&r, 1 * MS, 10 * S)};
        CHECK_EQ(seed, rlt_adapt_policy_check(&p), RLT_OK);
        rlt_adapt_state s = {0};
        CHECK_EQ(seed, rlt_adapt_limit(&p, &s), p.initial);
        rlt_ns now = rng_range(&r, 0, 1000 * S);
        for (int i = 0; i < 3000; i++) {
            now += rng_chance(&r, 1, 20) ? -rng_range(&r, 0, S) : rng_range(&r, 0, 50 * MS);
            if (now < 0) now = 0;
            rlt_ns lat = rng_chance(&r, 1, 50) ? rng_range(&r, 0, RLT_ADAPT_LATENCY_MAX)
                                               : rng_range(&r, 0, 200 * MS);
            int64_t inflight = rng_range(&r, 0, 2 * ceiling + 2);
            rlt_outcome o = (rlt_outcome)rng_range(&r, 0, 2);
            CHECK_EQ(seed, rlt_adapt_update(&p, &s, now, lat, inflight, o), RLT_OK);
            int64_t l = rlt_adapt_limit(&p, &s);
            CHECK_LE(seed, p.floor, l);
            CHECK_LE(seed, l, p.ceiling);
            if (s.limit_milli != 0) { /* 0: still fresh (only ignored outcomes so far) */
                CHECK_LE(seed, p.floor * 1000, s.limit_milli);
                CHECK_LE(seed, s.limit_milli, p.ceiling * 1000);
            }
            if (rlt_test_failed_now) return;
        }
    }
}

TEST(aimd_grows_by_one_per_round_trip_and_cuts_once_per_round_trip)
{
    rlt_adapt_policy p = policy(RLT_ADAPT_AIMD, 5, 1000, 100);
    rlt_adapt_state s = {0};
    rlt_ns now = 10 * S;
    for (int i = 0; i < 100; i++) /* one round trip at the limit: +1 */
        ASSERT_EQ(rlt_adapt_update(&p, &s, now += MS / 10, 10 * MS, 100, RLT_OUTCOME_SUCCESS),
                  RLT_OK);
    ASSERT_EQ(rlt_adapt_limit(&p, &s), 101);
    int64_t before = s.limit_milli;
    ASSERT_EQ(rlt_adapt_update(&p, &s, now, 10 * MS, 10, RLT_OUTCOME_SUCCESS), RLT_OK);
    ASSERT_EQ(s.limit_milli, before); /* a tenth in use: the client is the bottleneck */
    for (int i = 0; i < 50; i++)      /* a burst of drops within one round trip: one cut */
        ASSERT_EQ(rlt_adapt_update(&p, &s, now += MS / 10, 10 * MS, 100, RLT_OUTCOME_DROPPED),
                  RLT_OK);
    ASSERT_EQ(rlt_adapt_limit(&p, &s), 90); /* 101 x 0.9 = 90.9 */
    now += 20 * MS;
    ASSERT_EQ(rlt_adapt_update(&p, &s, now, 10 * MS, 100, RLT_OUTCOME_DROPPED), RLT_OK);
    ASSERT_EQ(rlt_adapt_limit(&p, &s), 81);
    p.slow_ns = 15 * MS;
    now += 20 * MS;
    ASSERT_EQ(rlt_adapt_update(&p, &s, now, 16 * MS, 100, RLT_OUTCOME_SUCCESS), RLT_OK);
    ASSERT_EQ(rlt_adapt_limit(&p, &s), 73); /* a slow success is a drop */
    for (int i = 0; i < 200; i++)           /* ignored outcomes move nothing */
        ASSERT_EQ(rlt_adapt_update(&p, &s, now, 50 * MS, 100, RLT_OUTCOME_IGNORE), RLT_OK);
    ASSERT_EQ(rlt_adapt_limit(&p, &s), 73);
}

/* A backend of `cap` servers with service time 10 ms, in fluid form: with L requests in flight,
 * the latency is 10 ms while L <= cap, else 10 ms x L / cap (the queue). */
static rlt_ns modelled_latency(int64_t l, int64_t cap)
{
    return l <= cap ? 10 * MS : 10 * MS * l / cap;
}

TEST(vegas_settles_just_above_the_backends_capacity_and_follows_it_when_it_halves)
{
    rlt_adapt_policy p = policy(RLT_ADAPT_VEGAS, 4, 1000, 20);
    rlt_adapt_state s = {0};
    rlt_ns now = 0;
    int64_t cap = 100;
    for (int i = 0; i < 200000; i++) {
        int64_t l = rlt_adapt_limit(&p, &s);
        ASSERT_EQ(rlt_adapt_update(&p, &s, now += 50 * US, modelled_latency(l, cap), l,
                                   RLT_OUTCOME_SUCCESS),
                  RLT_OK);
        if (i == 100000) {
            int64_t got = rlt_adapt_limit(&p, &s);
            ASSERT_LE(cap, got + 1);  /* uses the capacity */
            ASSERT_LE(got, cap + 13); /* and queues at most beta (12) beyond it */
            cap = 50;
        }
    }
    int64_t got = rlt_adapt_limit(&p, &s);
    ASSERT_LE(cap, got + 1);
    ASSERT_LE(got, cap + 13);
}
