/* Invariants every algorithm keeps on seeded random traces whose clock may step backwards:
 * a denial, a peek and rlt_when leave the state bytes unchanged; a clock stepping back never
 * raises `remaining`; retry_after is exact even after a backwards step; rlt_is_fresh means a
 * zeroed state decides the same from then on; rlt_state_shift moves the decisions with the
 * clock; rlt_state_convert rounds toward "more used" (never mints). */
#include "core_util.h"

#define TRACES 60
#define STEPS 250

/* A clock that sometimes steps back (by up to two periods). */
static rlt_ns jittery_step(rng *r, const rlt_policy *p)
{
    if (rng_chance(r, 1, 8)) return -rng_range(r, 1, 2 * p->period);
    return random_step(r, p);
}

static void same_decision(uint64_t seed, const rlt_decision *a, const rlt_decision *b,
                          bool with_lease)
{
    CHECK_EQ(seed, a->allowed, b->allowed);
    CHECK_EQ(seed, a->limit, b->limit);
    CHECK_EQ(seed, a->remaining, b->remaining);
    CHECK_EQ(seed, a->retry_after, b->retry_after);
    CHECK_EQ(seed, a->reset_after, b->reset_after);
    CHECK_EQ(seed, a->delay, b->delay);
    if (with_lease) CHECK_EQ(seed, a->lease, b->lease);
}

TEST(rejected_requests_peeks_and_when_consume_nothing_for_every_algorithm)
{
    uint64_t base = test_seed(0xb100);
    for (size_t ai = 0; ai < N_ALGOS; ai++) {
        int denials = 0;
        for (int tr = 0; tr < TRACES; tr++) {
            uint64_t seed = base + ai * 1000 + (uint64_t)tr;
            rng r = {seed};
            rlt_policy p = random_policy(&r, all_algos[ai]);
            size_t size = rlt_state_size(&p);
            void *st = new_state(&p);
            rlt_ns now = rng_range(&r, 0, 4 * p.period);
            for (int i = 0; i < STEPS; i++) {
                now += jittery_step(&r, &p);
                int64_t cost = random_cost(&r, &p);
                void *before = dup_state(&p, st);
                rlt_decision d;
                rlt_ns at;
                if (cost > 0) (void)rlt_when(&p, st, now, cost, &at);
                bool when_same = memcmp(before, st, size) == 0;
                int rc = rlt_decide(&p, st, now, cost, &d);
                bool same = memcmp(before, st, size) == 0;
                free(before);
                CHECK(seed, when_same);
                CHECK_EQ(seed, rc, RLT_OK);
                if (!d.allowed || cost == 0) CHECK(seed, same);
                denials += !d.allowed;
                if (d.lease > 0 && rng_chance(&r, 1, 2)) (void)rlt_release(&p, st, now, d.lease);
            }
            free(st);
            if (rlt_test_failed_now) return;
        }
        ASSERT(denials > 0);
    }
}

TEST(backwards_clock_never_raises_remaining_for_every_algorithm)
{
    uint64_t base = test_seed(0xb200);
    for (size_t ai = 0; ai < N_ALGOS; ai++) {
        for (int tr = 0; tr < TRACES; tr++) {
            uint64_t seed = base + ai * 1000 + (uint64_t)tr;
            rng r = {seed};
            rlt_policy p = random_policy(&r, all_algos[ai]);
            void *st = new_state(&p);
            rlt_ns now = rng_range(&r, 0, 4 * p.period), latest = now;
            for (int i = 0; i < STEPS; i++) {
                rlt_ns step = jittery_step(&r, &p);
                now += step;
                if (step < 0) {
                    /* the same state seen from the latest instant and from the earlier one */
                    rlt_decision fwd, back;
                    CHECK_EQ(seed, rlt_decide(&p, st, latest, 0, &fwd), RLT_OK);
                    CHECK_EQ(seed, rlt_decide(&p, st, now, 0, &back), RLT_OK);
                    CHECK_LE(seed, back.remaining, fwd.remaining);
                    CHECK(seed, !back.allowed || fwd.allowed);
                }
                if (now > latest) latest = now;
                rlt_decision d;
                int64_t cost = random_cost(&r, &p);
                CHECK_EQ(seed, rlt_decide(&p, st, now, cost, &d), RLT_OK);
            }
            free(st);
            if (rlt_test_failed_now) return;
        }
    }
}

/* After a denial, re-deciding on a copy at now + retry_after - 1 is denied and at
 * now + retry_after allowed, including right after the clock stepped back. */
/* One algorithm's traces; a failure returns from here (freeing what it holds) so the caller
 * can go on with the next algorithm and report every one that fails. */
static void retry_traces(rlt_algo algo, uint64_t base)
{
    for (int tr = 0; tr < TRACES; tr++) {
        uint64_t seed = base + (uint64_t)tr;
        rng r = {seed};
        rlt_policy p = random_policy(&r, algo);
        void *st = new_state(&p);
        rlt_ns now = rng_range(&r, 0, 4 * p.period);
        bool early = false, ontime = true;
        int i;
        int64_t cost = 0;
        rlt_decision d, e;
        for (i = 0; i < STEPS; i++) {
            now += jittery_step(&r, &p);
            cost = random_cost(&r, &p);
            if (rlt_decide(&p, st, now, cost, &d) != RLT_OK) break;
            if (d.allowed || d.retry_after <= 0 || cost == 0) continue;
            void *c = dup_state(&p, st);
            early = rlt_decide(&p, c, now + d.retry_after - 1, cost, &e) == RLT_OK && e.allowed;
            memcpy(c, st, rlt_state_size(&p));
            ontime = rlt_decide(&p, c, now + d.retry_after, cost, &e) == RLT_OK && e.allowed;
            free(c);
            if (early || !ontime) break;
        }
        free(st);
        if (i < STEPS) {
            char text[128];
            rlt_policy_format(&p, text, sizeof text);
            FAIL_SEED(seed,
                      "%s step %d now=%lld cost=%lld retry_after=%lld: "
                      "allowed 1 ns early=%d, allowed on time=%d",
                      text, i, (long long)now, (long long)cost, (long long)d.retry_after, early,
                      ontime);
        }
    }
}

/* After a denial, re-deciding on a copy at now + retry_after - 1 is denied and at
 * now + retry_after allowed, including right after the clock stepped back. */
TEST(retry_after_is_exact_after_a_backwards_step_for_every_algorithm)
{
    uint64_t base = test_seed(0xb300);
    int failed_any = 0;
    for (size_t ai = 0; ai < N_ALGOS; ai++) {
        rlt_test_failed_now = 0;
        retry_traces(all_algos[ai], base + ai * 1000);
        failed_any |= rlt_test_failed_now;
    }
    rlt_test_failed_now = failed_any;
}

/* Minimal form: token_bucket:1/1s emptied at 10 s; at 9 s (clock back 1 s) a request is
 * denied with retry_after 1 s, but at 10 s it is still denied (refill restarts at 10 s). */
TEST(token_bucket_retry_after_counts_from_the_latest_charge_after_a_backwards_step)
{
    rlt_policy p = parse_policy("token_bucket:1/1s");
    void *st = new_state(&p);
    rlt_decision d, e;
    ASSERT_EQ(rlt_decide(&p, st, 10 * S, 1, &d), RLT_OK);
    ASSERT(d.allowed);
    ASSERT_EQ(rlt_decide(&p, st, 9 * S, 1, &d), RLT_OK);
    ASSERT(!d.allowed);
    void *c = dup_state(&p, st);
    ASSERT_EQ(rlt_decide(&p, c, 9 * S + d.retry_after, 1, &e), RLT_OK);
    bool ontime = e.allowed;
    free(c);
    free(st);
    ASSERT(ontime); /* fails: retry_after is 1 s, the real wait is 2 s */
}

TEST(fresh_state_decides_like_a_zeroed_one_for_every_algorithm)
{
    uint64_t base = test_seed(0xb400);
    for (size_t ai = 0; ai < N_ALGOS; ai++) {
        int fresh_seen = 0;
        for (int tr = 0; tr < TRACES; tr++) {
            uint64_t seed = base + ai * 1000 + (uint64_t)tr;
            rng r = {seed};
            rlt_policy p = random_policy(&r, all_algos[ai]);
            void *st = new_state(&p);
            rlt_ns now = rng_range(&r, 0, 4 * p.period);
            for (int i = 0; i < STEPS && !rlt_test_failed_now; i++) {
                now += jittery_step(&r, &p);
                rlt_decision d;
                CHECK_EQ(seed, rlt_decide(&p, st, now, random_cost(&r, &p), &d), RLT_OK);
                if (!rlt_is_fresh(&p, st, now) || i % 5) continue;
                fresh_seen++;
                /* from here on (at `now` or later, clock may still jitter), the real state
                 * and a zeroed one must decide alike */
                void *a = dup_state(&p, st), *z = new_state(&p);
                rlt_ns t = now;
                for (int j = 0; j < 40; j++) {
                    rlt_ns step = jittery_step(&r, &p);
                    t = t + step < now ? now : t + step;
                    int64_t cost = random_cost(&r, &p);
                    rlt_decision da, dz;
                    CHECK_EQ(seed, rlt_decide(&p, a, t, cost, &da), RLT_OK);
                    CHECK_EQ(seed, rlt_decide(&p, z, t, cost, &dz), RLT_OK);
                    same_decision(seed, &da, &dz, false);
                    if (rlt_test_failed_now) {
                        char text[128];
                        rlt_policy_format(&p, text, sizeof text);
                        fprintf(stderr, "  %s fresh at %lld, step %d at %lld cost %lld\n", text,
                                (long long)now, j, (long long)t, (long long)cost);
                        break;
                    }
                }
                free(a);
                free(z);
            }
            free(st);
            if (rlt_test_failed_now) return;
        }
        ASSERT(fresh_seen > 0);
    }
}

/* Shifting by delta and deciding at now + delta gives the same decisions.  The window
 * algorithms keep windows aligned to the origin, so for them this holds for deltas that are
 * whole periods; for other deltas a shifted state must never be more permissive. */
TEST(state_shift_moves_decisions_with_the_clock_for_every_algorithm)
{
    uint64_t base = test_seed(0xb500);
    for (size_t ai = 0; ai < N_ALGOS; ai++) {
        for (int tr = 0; tr < TRACES; tr++) {
            uint64_t seed = base + ai * 1000 + (uint64_t)tr;
            rng r = {seed};
            rlt_policy p = random_policy(&r, all_algos[ai]);
            bool windowed = p.algo == RLT_FIXED_WINDOW || p.algo == RLT_SLIDING_WINDOW;
            void *st = new_state(&p);
            rlt_ns now = rng_range(&r, 0, 4 * p.period);
            for (int i = 0; i < 60; i++) {
                now += random_step(&r, &p);
                rlt_decision d;
                CHECK_EQ(seed, rlt_decide(&p, st, now, random_cost(&r, &p), &d), RLT_OK);
            }
            rlt_ns delta = rng_range(&r, -1000, 1000) * p.period;
            if (!windowed && rng_chance(&r, 1, 2)) delta = rng_range(&r, -1000 * S, 1000 * S);
            void *sh = dup_state(&p, st);
            CHECK_EQ(seed, rlt_state_shift(&p, sh, delta), RLT_OK);
            for (int i = 0; i < 100 && !rlt_test_failed_now; i++) {
                now += random_step(&r, &p);
                int64_t cost = random_cost(&r, &p);
                rlt_decision a, b;
                CHECK_EQ(seed, rlt_decide(&p, st, now, cost, &a), RLT_OK);
                CHECK_EQ(seed, rlt_decide(&p, sh, now + delta, cost, &b), RLT_OK);
                same_decision(seed, &a, &b, false);
                CHECK_EQ(seed, rlt_is_fresh(&p, st, now), rlt_is_fresh(&p, sh, now + delta));
            }
            if (windowed) {
                /* a delta that is not a whole number of periods: never more permissive */
                rlt_ns odd = rng_range(&r, 1, p.period * 3);
                if (odd % p.period == 0) odd++;
                if (rng_chance(&r, 1, 2)) odd = -odd;
                void *sh2 = dup_state(&p, st);
                CHECK_EQ(seed, rlt_state_shift(&p, sh2, odd), RLT_OK);
                for (int i = 0; i < 50; i++) {
                    rlt_ns t = now + rng_range(&r, 0, 3 * p.period);
                    rlt_decision a, b;
                    CHECK_EQ(seed, rlt_decide(&p, st, t, 0, &a), RLT_OK);
                    CHECK_EQ(seed, rlt_decide(&p, sh2, t + odd, 0, &b), RLT_OK);
                    CHECK_LE(seed, b.remaining, a.remaining);
                }
                free(sh2);
            }
            free(sh);
            free(st);
            if (rlt_test_failed_now) return;
        }
    }
}

/* ---- rlt_state_convert ------------------------------------------------------------------- */

static i128 ceil128(i128 a, i128 b) /* b > 0 */
{
    i128 q = a / b;
    return (a % b != 0 && a > 0) ? q + 1 : q;
}

/* Token bucket / GCRA / leaky bucket: build a state whose used amount U is known exactly (c
 * units charged at now - dt, so U = c - dt x N/W at now), convert, and compare rlt_when for
 * each cost with the exact wait computed from U: never sooner, and at most 1 ns later. */
static void convert_bucket(uint64_t seed, rng *r, rlt_algo algo, rlt_convert how)
{
    rlt_policy f = random_policy(r, algo), t = random_policy(r, algo);
    void *st = new_state(&f);
    rlt_ns now = rng_range(r, 10 * S, 20 * S);
    int64_t cap_f = algo == RLT_LEAKY_BUCKET ? f.queue + 1 : f.burst;
    int64_t c = rng_range(r, 1, cap_f);
    rlt_ns dt = rng_range(r, 0, f.period);
    rlt_decision d;
    CHECK_EQ(seed, rlt_decide(&f, st, now - dt, c, &d), RLT_OK);
    CHECK(seed, d.allowed);
    /* U x W_f x N_f... keep U as the fraction u_num / W_f (units of one request) */
    i128 u_num = (i128)c * f.period - (i128)dt * f.limit;
    if (u_num < 0) u_num = 0;
    CHECK_EQ(seed, rlt_state_convert(&f, &t, st, now, how), RLT_OK);
    /* U_to as a fraction ut_num / ut_den of requests */
    i128 ut_num = u_num, ut_den = f.period;
    int64_t cap_t = algo == RLT_LEAKY_BUCKET ? t.queue + 1 : t.burst;
    if (how == RLT_CONVERT_SCALE) {
        ut_num *= cap_t;
        ut_den *= cap_f;
    }
    if (algo != RLT_LEAKY_BUCKET && ut_num > (i128)t.burst * ut_den)
        ut_num = (i128)t.burst * ut_den; /* a bucket is at most empty */
    for (int64_t k = 1; k <= cap_t; k++) {
        /* a cost k fits when U_to - elapsed x N_t/W_t <= cap_t - k (token bucket) or
         * backlog <= (Q - k + 1) requests (leaky bucket: cap_t - k as well, cap_t = Q + 1) */
        i128 over = ut_num - (i128)(cap_t - k) * ut_den; /* in 1/ut_den requests */
        i128 wait = over <= 0 ? 0 : ceil128(over * t.period, ut_den * t.limit);
        rlt_ns at;
        CHECK_EQ(seed, rlt_when(&t, st, now, k, &at), RLT_OK);
        CHECK(seed, (i128)(at - now) >= wait);
        CHECK(seed, (i128)(at - now) <= wait + 1);
        if (rlt_test_failed_now) {
            char a[128], b[128];
            rlt_policy_format(&f, a, sizeof a);
            rlt_policy_format(&t, b, sizeof b);
            fprintf(stderr, "  %s -> %s (%s) c=%lld dt=%lld k=%lld: wait %lld, exact %lld\n", a, b,
                    how == RLT_CONVERT_KEEP ? "keep" : "scale", (long long)c, (long long)dt,
                    (long long)k, (long long)(at - now), (long long)wait);
            break;
        }
    }
    free(st);
}

TEST(state_convert_keep_and_scale_never_mint_for_buckets)
{
    uint64_t base = test_seed(0xb600);
    static const rlt_algo algos[] = {RLT_TOKEN_BUCKET, RLT_GCRA, RLT_LEAKY_BUCKET};
    for (int ai = 0; ai < 3; ai++) {
        for (int tr = 0; tr < 200; tr++) {
            uint64_t seed = base + (uint64_t)ai * 1000 + (uint64_t)tr;
            rng r = {seed};
            convert_bucket(seed, &r, algos[ai], tr % 2 ? RLT_CONVERT_SCALE : RLT_CONVERT_KEEP);
            if (rlt_test_failed_now) return;
        }
    }
}

/* Window counters: fill c of N_from in the current window (and p of the previous one for the
 * sliding counter), convert, and compare `remaining` with the exact carried amount rounded
 * up: KEEP keeps c (at most N_to), SCALE keeps ceil(c x N_to / N_from). */
TEST(state_convert_keep_and_scale_never_mint_for_window_counters)
{
    uint64_t base = test_seed(0xb700);
    for (int tr = 0; tr < 400; tr++) {
        uint64_t seed = base + (uint64_t)tr;
        rng r = {seed};
        rlt_algo algo = tr % 2 ? RLT_FIXED_WINDOW : RLT_SLIDING_WINDOW;
        rlt_convert how = (tr / 2) % 2 ? RLT_CONVERT_SCALE : RLT_CONVERT_KEEP;
        int64_t nf = rng_range(&r, 1, 30), nt = rng_range(&r, 1, 30);
        rlt_policy f = make_policy(algo, nf, 10 * S, 0, 0, 0);
        rlt_policy t = make_policy(algo, nt, 10 * S, 0, 0, 0);
        void *st = new_state(&f);
        int64_t c = rng_range(&r, 0, nf);
        rlt_decision d;
        rlt_ns now = 100 * S; /* the start of window 10 */
        if (c > 0) CHECK_EQ(seed, rlt_decide(&f, st, now, c, &d), RLT_OK);
        CHECK_EQ(seed, rlt_state_convert(&f, &t, st, now, how), RLT_OK);
        i128 carried = how == RLT_CONVERT_KEEP ? c : ceil128((i128)c * nt, nf);
        if (carried > nt) carried = nt;
        CHECK_EQ(seed, rlt_decide(&t, st, now, 0, &d), RLT_OK);
        CHECK_EQ(seed, d.remaining, nt - (int64_t)carried);
        /* sliding counter: the same count one window later weighs as `prev` */
        if (algo == RLT_SLIDING_WINDOW) {
            rlt_ns later = now + 15 * S; /* halfway into the next window */
            CHECK_EQ(seed, rlt_decide(&t, st, later, 0, &d), RLT_OK);
            CHECK_EQ(seed, d.remaining, (int64_t)(((i128)nt * 10 - carried * 5) / 10));
        }
        free(st);
        if (rlt_test_failed_now) return;
    }
}

TEST(state_convert_refuses_other_algorithms_and_other_slot_counts)
{
    rlt_policy a = parse_policy("gcra:10/1s"), b = parse_policy("token_bucket:10/1s");
    rlt_policy l1 = parse_policy("sliding_log:10/1s"), l2 = parse_policy("sliding_log:11/1s");
    rlt_policy l3 = parse_policy("sliding_log:10/5s");
    uint64_t st[64] = {0};
    ASSERT_EQ(rlt_state_convert(&a, &b, st, 0, RLT_CONVERT_KEEP), RLT_EINVAL);
    ASSERT_EQ(rlt_state_convert(&l1, &l2, st, 0, RLT_CONVERT_KEEP), RLT_EINVAL);
    ASSERT_EQ(rlt_state_convert(&l1, &l3, st, 0, RLT_CONVERT_SCALE), RLT_OK);
    ASSERT_EQ(rlt_state_convert(NULL, &b, st, 0, RLT_CONVERT_KEEP), RLT_EINVAL);
    ASSERT_EQ(rlt_state_convert(&a, &a, NULL, 0, RLT_CONVERT_KEEP), RLT_EINVAL);
}
