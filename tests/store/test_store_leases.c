/* rlt_store_leases: the concurrency leases held at an instant, against a model of every
 * lease taken (key, id, expiry) through acquires, releases, expiries, resets, a penalty box
 * and keys of other policies that hold none. */
#include <stdio.h>

#include "test.h"

#include "store_test_util.h"

#define S RLT_NS_PER_S

typedef struct held {
    char key[8];
    int policy;
    int64_t lease;
    rlt_ns expires;
} held;

static size_t model(const held *h, size_t n, rlt_ns now)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += h[i].lease != 0 && h[i].expires > now;
    return c;
}

TEST(no_concurrency_policy_holds_no_lease)
{
    rlt_store *s = tu_store(0, false, 4);
    int g = tu_add(s, "g", "gcra:5/1s");
    rlt_decision d;
    for (int i = 0; i < 5; i++)
        ASSERT_EQ(rlt_store_decide(s, g, "k", 1, 0, 1, &d), RLT_OK);
    ASSERT_EQ(rlt_store_leases(s, 0), 0);
    ASSERT_EQ(rlt_store_leases(NULL, 0), 0);
    rlt_store_close(s);
}

TEST(leases_held_equal_a_model_through_acquires_releases_expiries_and_resets)
{
    rlt_store *s = tu_store(0, false, 8);
    int c = tu_add(s, "c", "concurrency:3/10s");
    int b = tu_add(s, "b", "concurrency:2/5s,block=1m"); /* a denial boxes the key */
    int g = tu_add(s, "g", "fixed_window:4/1s");
    ASSERT(c >= 0 && b >= 0 && g >= 0);
    static held h[4000];
    size_t n = 0;
    uint64_t x = 42;
    rlt_ns now = 0;
    for (int step = 0; step < 4000; step++) {
        now += (rlt_ns)tu_below(&x, 300) * RLT_NS_PER_MS;
        char key[8];
        snprintf(key, sizeof key, "k%u", (unsigned)tu_below(&x, 20));
        int pol = tu_below(&x, 3) == 0 ? b : c;
        unsigned op = (unsigned)tu_below(&x, 10);
        rlt_decision d;
        if (op < 5) {
            ASSERT_EQ(rlt_store_decide(s, pol, key, strlen(key), now, 1, &d), RLT_OK);
            if (d.allowed) {
                h[n] = (held){
                    .policy = pol, .lease = d.lease, .expires = now + (pol == b ? 5 : 10) * S};
                snprintf(h[n++].key, sizeof h[0].key, "%s", key);
            }
        } else if (op < 8 && n > 0) {
            held *e = &h[tu_below(&x, n)];
            int rc = rlt_store_release(s, e->policy, e->key, strlen(e->key), now, e->lease);
            ASSERT_EQ(rc, e->lease != 0 && e->expires > now ? RLT_OK : RLT_ENOENT);
            e->lease = 0;
        } else if (op == 8) {
            ASSERT_EQ(rlt_store_reset(s, pol, key, strlen(key)), RLT_OK);
            for (size_t i = 0; i < n; i++)
                if (h[i].policy == pol && strcmp(h[i].key, key) == 0) h[i].lease = 0;
        } else {
            ASSERT_EQ(rlt_store_decide(s, g, key, strlen(key), now, 1, &d), RLT_OK);
        }
        ASSERT_EQ(rlt_store_leases(s, now), model(h, n, now));
    }
    ASSERT(model(h, n, now) > 0);
    ASSERT_EQ(rlt_store_leases(s, now + 10 * S), 0); /* every one past its timeout */
    rlt_store_close(s);
}

TEST(a_penalty_box_does_not_hide_the_leases_it_holds)
{
    rlt_store *s = tu_store(0, false, 2);
    int b = tu_add(s, "b", "concurrency:2/10s,block=1m");
    rlt_decision d;
    ASSERT_EQ(rlt_store_decide(s, b, "k", 1, 0, 1, &d), RLT_OK);
    ASSERT_EQ(rlt_store_decide(s, b, "k", 1, 0, 1, &d), RLT_OK);
    ASSERT_EQ(rlt_store_decide(s, b, "k", 1, 1, 1, &d), RLT_OK);
    ASSERT(!d.allowed); /* boxed for a minute */
    ASSERT_EQ(rlt_store_leases(s, 2), 2);
    ASSERT_EQ(rlt_store_leases(s, 10 * S), 0);
    rlt_store_close(s);
}
