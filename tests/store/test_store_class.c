/* rlt_store_decide_class: the store with priority classes against a naive map of core states
 * decided by rlt_decide_class, on seeded random traces over every algorithm (decisions field
 * by field, leases released on both sides); and the classes' ceilings seen through the store. */
#include <stdio.h>
#include <stdlib.h>

#include "test.h"

#include "store_test_util.h"

#define S RLT_NS_PER_S
#define MS RLT_NS_PER_MS
#define KEYS 6

static const char *const policies[] = {
    "gcra:10/1s,burst=12", "token_bucket:8/1s", "fixed_window:10/1s",
    "sliding_window:9/1s", "sliding_log:7/1s",  "leaky_bucket:10/1s,queue=6",
    "concurrency:10/5s",
};
#define NPOL (sizeof policies / sizeof policies[0])

TEST(the_store_with_classes_decides_as_rlt_decide_class_on_a_map_of_states)
{
    uint64_t x = 0x41c1a55;
    rlt_store *s = tu_store(0, false, 4);
    int ids[NPOL];
    rlt_policy pol[NPOL];
    void *model[NPOL][KEYS];
    int64_t leases[KEYS][16];
    int nl[KEYS] = {0};
    for (size_t i = 0; i < NPOL; i++) {
        ids[i] = tu_add(s, policies[i], policies[i]);
        pol[i] = tu_policy(policies[i]);
        for (int k = 0; k < KEYS; k++)
            model[i][k] = calloc(1, rlt_state_size(&pol[i]));
    }
    rlt_ns now = 10 * S;
    int refused = 0, admitted = 0;
    for (int step = 0; step < 20000; step++) {
        now += (rlt_ns)tu_below(&x, 60) * MS;
        size_t i = tu_below(&x, NPOL);
        int k = (int)tu_below(&x, KEYS);
        char key[8];
        snprintf(key, sizeof key, "k%d", k);
        if (pol[i].algo == RLT_CONCURRENCY && nl[k] > 0 && tu_below(&x, 3) == 0) {
            int64_t lease = leases[k][--nl[k]];
            int a = rlt_store_release(s, ids[i], key, 2, now, lease);
            int b = rlt_release(&pol[i], model[i][k], now, lease);
            ASSERT_EQ(a, b);
            continue;
        }
        rlt_class c = (rlt_class)tu_below(&x, RLT_CLASS_COUNT);
        int pct = (int)tu_below(&x, 50);
        int64_t cost = pol[i].algo == RLT_CONCURRENCY ? 1 : 1 + (int64_t)tu_below(&x, 2);
        rlt_decision got, want;
        ASSERT_EQ(rlt_store_decide_class(s, ids[i], key, 2, now, cost, c, pct, &got), RLT_OK);
        ASSERT_EQ(rlt_decide_class(&pol[i], model[i][k], now, cost, c, pct, &want), RLT_OK);
        ASSERT_EQ(got.allowed, want.allowed);
        ASSERT_EQ(got.limit, want.limit);
        ASSERT_EQ(got.remaining, want.remaining);
        ASSERT_EQ(got.retry_after, want.retry_after);
        ASSERT_EQ(got.lease, want.lease);
        if (got.lease && nl[k] < 16) leases[k][nl[k]++] = got.lease;
        if (c != RLT_CLASS_CRITICAL && pct > 0) {
            if (got.allowed)
                admitted++;
            else
                refused++;
        }
    }
    ASSERT(admitted > 1000 && refused > 1000); /* the trace reaches both sides */
    for (size_t i = 0; i < NPOL; i++)
        for (int k = 0; k < KEYS; k++)
            free(model[i][k]);
    rlt_store_close(s);
}

TEST(sheddable_traffic_leaves_the_reserve_to_critical_in_the_store)
{
    rlt_store *s = tu_store(0, false, 4);
    int id = tu_add(s, "c", "concurrency:10/30s");
    rlt_decision d;
    int shed = 0, crit = 0;
    for (int i = 0; i < 20; i++) {
        ASSERT_EQ(rlt_store_decide_class(s, id, "svc", 3, S, 1, RLT_CLASS_SHEDDABLE, 20, &d),
                  RLT_OK);
        shed += d.allowed;
    }
    for (int i = 0; i < 20; i++) {
        ASSERT_EQ(rlt_store_decide_class(s, id, "svc", 3, S, 1, RLT_CLASS_CRITICAL, 20, &d),
                  RLT_OK);
        crit += d.allowed;
    }
    ASSERT_EQ(shed, 6);
    ASSERT_EQ(crit, 4);
    ASSERT_EQ(rlt_store_decide_class(s, id, "svc", 3, S, 1, (rlt_class)9, 20, &d), RLT_EINVAL);
    ASSERT_EQ(rlt_store_decide_class(s, id, "svc", 3, S, 1, RLT_CLASS_DEFAULT, 120, &d),
              RLT_EINVAL);
    ASSERT_EQ(rlt_store_decide_class(s, 99, "svc", 3, S, 1, RLT_CLASS_DEFAULT, 20, &d), RLT_ENOENT);
    ASSERT_EQ(rlt_store_leases(s, S), 10);
    rlt_store_close(s);
}
