/* The concurrency limiter: at most N leases in flight, release frees a slot, a double or late
 * release is RLT_ENOENT, an expired lease is reclaimed, lease ids are unique and increasing;
 * and the whole thing against a plain list model on seeded random traces. */
#include "core_util.h"

TEST(concurrency_allows_at_most_n_leases)
{
    rlt_policy p = parse_policy("concurrency:3/10s");
    void *st = new_state(&p);
    rlt_decision d;
    int64_t leases[3];
    for (int i = 0; i < 3; i++) {
        ASSERT_EQ(rlt_decide(&p, st, i * S, 1, &d), RLT_OK);
        ASSERT(d.allowed);
        ASSERT(d.lease > 0);
        ASSERT_EQ(d.remaining, 2 - i);
        ASSERT_EQ(d.limit, 3);
        ASSERT_EQ(d.reset_after, 10 * S); /* the newest lease expires 10 s from now */
        leases[i] = d.lease;
    }
    ASSERT_EQ(rlt_decide(&p, st, 3 * S, 1, &d), RLT_OK);
    ASSERT(!d.allowed);
    ASSERT_EQ(d.lease, 0);
    ASSERT_EQ(d.remaining, 0);
    ASSERT_EQ(d.retry_after, 7 * S); /* the oldest lease expires at 10 s */
    ASSERT_EQ(d.reset_after, 9 * S); /* the newest at 12 s */
    rlt_ns at;
    ASSERT_EQ(rlt_when(&p, st, 3 * S, 1, &at), RLT_OK);
    ASSERT_EQ(at, 10 * S);
    /* a peek reports without taking a slot */
    ASSERT_EQ(rlt_release(&p, st, 3 * S, leases[1]), RLT_OK);
    ASSERT_EQ(rlt_decide(&p, st, 3 * S, 0, &d), RLT_OK);
    ASSERT(d.allowed);
    ASSERT_EQ(d.lease, 0);
    ASSERT_EQ(d.remaining, 1);
    ASSERT_EQ(rlt_decide(&p, st, 3 * S, 1, &d), RLT_OK); /* release freed the slot */
    ASSERT(d.allowed);
    ASSERT_EQ(d.remaining, 0);
    free(st);
}

TEST(concurrency_double_release_is_enoent)
{
    rlt_policy p = parse_policy("concurrency:2/10s");
    void *st = new_state(&p);
    rlt_decision d;
    ASSERT_EQ(rlt_decide(&p, st, S, 1, &d), RLT_OK);
    int64_t lease = d.lease;
    ASSERT_EQ(rlt_release(&p, st, 2 * S, lease), RLT_OK);
    ASSERT_EQ(rlt_release(&p, st, 2 * S, lease), RLT_ENOENT);
    ASSERT_EQ(rlt_release(&p, st, 2 * S, lease + 1), RLT_ENOENT); /* never issued */
    ASSERT_EQ(rlt_release(&p, st, 2 * S, 0), RLT_ENOENT);
    ASSERT_EQ(rlt_release(&p, st, 2 * S, -1), RLT_ENOENT);
    ASSERT(rlt_is_fresh(&p, st, 2 * S));
    free(st);
}

TEST(concurrency_expired_lease_is_reclaimed_and_its_late_release_is_enoent)
{
    rlt_policy p = parse_policy("concurrency:1/10s");
    void *st = new_state(&p);
    rlt_decision d;
    ASSERT_EQ(rlt_decide(&p, st, 0, 1, &d), RLT_OK);
    int64_t old = d.lease;
    ASSERT_EQ(rlt_decide(&p, st, 10 * S - 1, 1, &d), RLT_OK); /* still live 1 ns before */
    ASSERT(!d.allowed);
    ASSERT_EQ(d.retry_after, 1);
    ASSERT(!rlt_is_fresh(&p, st, 10 * S - 1));
    ASSERT(rlt_is_fresh(&p, st, 10 * S)); /* a lease lives [acquired, acquired + timeout) */
    /* late release before the slot is reused: the lease is gone */
    void *c = dup_state(&p, st);
    ASSERT_EQ(rlt_release(&p, c, 10 * S, old), RLT_ENOENT);
    free(c);
    /* reclaimed: a new lease takes the slot; the late release cannot free it */
    ASSERT_EQ(rlt_decide(&p, st, 10 * S, 1, &d), RLT_OK);
    ASSERT(d.allowed);
    int64_t fresh = d.lease;
    ASSERT(fresh != old);
    ASSERT_EQ(rlt_release(&p, st, 11 * S, old), RLT_ENOENT);
    ASSERT_EQ(rlt_decide(&p, st, 11 * S, 1, &d), RLT_OK);
    ASSERT(!d.allowed); /* `fresh` still holds the only slot */
    ASSERT_EQ(rlt_release(&p, st, 11 * S, fresh), RLT_OK);
    free(st);
}

TEST(concurrency_default_timeout_is_one_minute)
{
    rlt_policy p = parse_policy("concurrency:1");
    void *st = new_state(&p);
    rlt_decision d;
    ASSERT_EQ(rlt_decide(&p, st, 0, 1, &d), RLT_OK);
    ASSERT_EQ(d.reset_after, 60 * S);
    free(st);
}

typedef struct held {
    int64_t lease;
    rlt_ns expires;
} held;

/* Random acquire / release / peek traces against a list of live leases. */
TEST(concurrency_matches_lease_list_model_and_ids_increase)
{
    uint64_t base = test_seed(0xcc00);
    enum { MAXN = 16 };
    for (int tr = 0; tr < 300; tr++) {
        uint64_t seed = base + (uint64_t)tr;
        rng r = {seed};
        int64_t n = rng_range(&r, 1, MAXN);
        rlt_ns timeout = rng_range(&r, 1, 20) * MS;
        rlt_policy p = make_policy(RLT_CONCURRENCY, n, timeout, 0, 0, 0);
        void *st = new_state(&p);
        held live[MAXN];
        int nlive = 0;
        int64_t issued[600], nissued = 0, last_lease = 0;
        rlt_ns now = rng_range(&r, -S, S);
        for (int i = 0; i < 300 && !rlt_test_failed_now; i++) {
            now += rng_range(&r, 0, 2 * MS);
            /* the model drops what expired (a lease lives while expires > now) */
            int k = 0;
            for (int j = 0; j < nlive; j++)
                if (live[j].expires > now) live[k++] = live[j];
            nlive = k;
            if (rng_chance(&r, 1, 3) && nissued > 0) {
                /* release a random lease ever issued: OK iff it is live in the model */
                int64_t lease = issued[rng_range(&r, 0, nissued - 1)];
                int want = RLT_ENOENT;
                for (int j = 0; j < nlive; j++)
                    if (live[j].lease == lease) {
                        want = RLT_OK;
                        live[j] = live[--nlive];
                        break;
                    }
                CHECK_EQ(seed, rlt_release(&p, st, now, lease), want);
                continue;
            }
            int64_t cost = rng_chance(&r, 1, 6) ? 0 : 1;
            rlt_decision d;
            CHECK_EQ(seed, rlt_decide(&p, st, now, cost, &d), RLT_OK);
            CHECK_EQ(seed, d.allowed, nlive < n);
            rlt_ns soonest = INT64_MAX, latest = now;
            for (int j = 0; j < nlive; j++) {
                if (live[j].expires < soonest) soonest = live[j].expires;
                if (live[j].expires > latest) latest = live[j].expires;
            }
            if (!d.allowed) CHECK_EQ(seed, d.retry_after, soonest - now);
            if (d.allowed && cost == 1) {
                CHECK(seed, d.lease > last_lease); /* unique and increasing */
                last_lease = d.lease;
                issued[nissued++] = d.lease;
                live[nlive++] = (held){d.lease, now + timeout};
                if (now + timeout > latest) latest = now + timeout;
            } else {
                CHECK_EQ(seed, d.lease, 0);
            }
            CHECK_EQ(seed, d.remaining, n - nlive);
            CHECK_EQ(seed, d.reset_after, latest - now);
            CHECK_EQ(seed, rlt_is_fresh(&p, st, now), nlive == 0);
        }
        free(st);
        if (rlt_test_failed_now) return;
    }
}
