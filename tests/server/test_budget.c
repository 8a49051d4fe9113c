/* The per-client budgets of new inline texts (src/server/request/budget.c) without a server:
 * a client's burst then its rate, an entry taken over only once its budget is whole, and the
 * bounded table against a naive unbounded map under inline.c's budgets, on seeded random
 * traces (RLT_TEST_SEED replays one). */
#include "test.h"

#include "server/request/budget.h"
#include "server/request/inline.h"

#include <stdio.h>
#include <stdlib.h>

#define MS (RLT_NS_PER_S / 1000)

static uint64_t rng_state;
static uint64_t next_rand(void)
{
    uint64_t z = (rng_state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static uint64_t seed(void)
{
    const char *e = getenv("RLT_TEST_SEED");
    return e ? strtoull(e, NULL, 0) : 42;
}

TEST(a_client_gets_its_burst_at_once_then_its_rate)
{
    rlt__budgets b;
    ASSERT_EQ(rlt__budgets_open(&b, 2, 10, 4), RLT_OK);
    rlt_ns now = 5 * RLT_NS_PER_S;
    for (int i = 0; i < 10; i++) {
        rlt__budget *e = rlt__budgets_get(&b, 7, now);
        ASSERT(rlt__budget_fits(&b, e, now));
        rlt__budget_charge(&b, e, now);
    }
    rlt__budget *e = rlt__budgets_get(&b, 7, now);
    ASSERT(!rlt__budget_fits(&b, e, now));
    ASSERT(!rlt__budget_fits(&b, e, now + 499 * MS)); /* 2 a second: one every 500 ms */
    ASSERT(rlt__budget_fits(&b, e, now + 500 * MS));
    /* Another client is not touched by 7's spending. */
    ASSERT(rlt__budget_fits(&b, rlt__budgets_get(&b, 8, now), now));
    rlt__budgets_close(&b);
    rlt__budgets_close(&b); /* a closed table is a no-op */
}

TEST(an_entry_goes_to_a_new_client_only_once_its_budget_is_whole)
{
    rlt__budgets b;
    ASSERT_EQ(rlt__budgets_open(&b, 1, 1, 2), RLT_OK);
    rlt_ns now = RLT_NS_PER_S;
    for (uint64_t id = 1; id <= 2; id++) {
        rlt__budget *e = rlt__budgets_get(&b, id, now);
        ASSERT(rlt__budget_fits(&b, e, now));
        rlt__budget_charge(&b, e, now);
    }
    /* Both entries refill until now + 1 s: a third client finds none (an exhausted budget). */
    ASSERT(rlt__budgets_get(&b, 3, now + RLT_NS_PER_S - 1) == NULL);
    ASSERT(!rlt__budget_fits(&b, NULL, now));
    /* Client 1 still finds its own, spent. */
    ASSERT(!rlt__budget_fits(&b, rlt__budgets_get(&b, 1, now + 1), now + 1));
    /* Whole again: the third client takes an entry, fresh. */
    rlt__budget *e = rlt__budgets_get(&b, 3, now + RLT_NS_PER_S);
    ASSERT(e != NULL);
    ASSERT(rlt__budget_fits(&b, e, now + RLT_NS_PER_S));
    rlt__budgets_close(&b);
}

/* A naive budget: one GCRA state per id, never forgotten. */
#define IDS 4096
typedef struct naive {
    rlt_policy pol;
    unsigned char st[IDS][RLT__BUDGET_STATE];
} naive;

static bool naive_fits(naive *m, uint64_t id, rlt_ns now)
{
    unsigned char st[RLT__BUDGET_STATE];
    memcpy(st, m->st[id], sizeof st);
    rlt_decision d;
    return rlt_decide(&m->pol, st, now, 1, &d) == RLT_OK && d.allowed;
}

static void naive_charge(naive *m, uint64_t id, rlt_ns now)
{
    rlt_decision d;
    rlt_decide(&m->pol, m->st[id], now, 1, &d);
}

TEST(the_bounded_tables_decide_as_unbounded_maps_under_the_inline_budgets)
{
    /* inline.c's three budgets (connection, address, global) with its table size, against
     * maps that never forget, on traces mixing a few steady clients, floods that reconnect
     * (a new id each time) and bursts at one instant: the same admissions, and the tables
     * never run out (budget.h's bound). */
    static naive mc, ma, mg;
    uint64_t s0 = seed();
    rng_state = s0;
    for (int round = 0; round < 20; round++) {
        rlt__budgets bc, ba, bg;
        ASSERT_EQ(rlt__budgets_open(&bc, RLT__INLINE_CLIENT_PER_S, RLT__INLINE_CLIENT_BURST,
                                    RLT__INLINE_BUDGETS),
                  RLT_OK);
        ASSERT_EQ(rlt__budgets_open(&ba, RLT__INLINE_ADDR_PER_S, RLT__INLINE_ADDR_BURST,
                                    RLT__INLINE_BUDGETS),
                  RLT_OK);
        ASSERT_EQ(rlt__budgets_open(&bg, RLT__INLINE_ALL_PER_S, RLT__INLINE_ALL_BURST, 1), RLT_OK);
        memset(&mc, 0, sizeof mc);
        memset(&ma, 0, sizeof ma);
        memset(&mg, 0, sizeof mg);
        mc.pol = bc.pol;
        ma.pol = ba.pol;
        mg.pol = bg.pol;
        rlt_ns now = 1;
        uint64_t fresh = 100; /* ids from 100 up: one per reconnection */
        for (int i = 0; i < 20000 && fresh < IDS; i++) {
            uint64_t r = next_rand();
            if (r % 4 == 0) now += (rlt_ns)(next_rand() % (300 * MS)); /* else the same instant */
            uint64_t client = r % 3 == 0 ? fresh++ : 1 + (r >> 8) % 20;
            uint64_t addr = 1 + (r >> 16) % 5;
            rlt__budget *c = rlt__budgets_get(&bc, client, now);
            rlt__budget *a = rlt__budgets_get(&ba, addr, now);
            rlt__budget *g = rlt__budgets_get(&bg, 0, now);
            if (c == NULL || a == NULL || g == NULL)
                RLT_FAIL_("a table ran out at event %d (seed %llu)", i, (unsigned long long)s0);
            bool fits = rlt__budget_fits(&bc, c, now) && rlt__budget_fits(&ba, a, now) &&
                        rlt__budget_fits(&bg, g, now);
            bool want = naive_fits(&mc, client, now) && naive_fits(&ma, addr, now) &&
                        naive_fits(&mg, 0, now);
            if (fits != want)
                RLT_FAIL_("event %d: table %d, map %d (seed %llu)", i, fits, want,
                          (unsigned long long)s0);
            if (!fits) continue;
            rlt__budget_charge(&bc, c, now);
            rlt__budget_charge(&ba, a, now);
            rlt__budget_charge(&bg, g, now);
            naive_charge(&mc, client, now);
            naive_charge(&ma, addr, now);
            naive_charge(&mg, 0, now);
        }
        rlt__budgets_close(&bc);
        rlt__budgets_close(&ba);
        rlt__budgets_close(&bg);
    }
}
