/* The store and a clock that steps back: dropping a fresh entry (sweep, make_room, release) is
 * exact only for instants at or after the drop, so a later call with an earlier `now` is
 * decided at the drop's instant; a peek or a denial drops nothing and changes nothing. */
#include "test.h"

#include "ratelimit/store.h"

#define S RLT_NS_PER_S

static const char *const texts[] = {"fixed_window:3/10s",        "sliding_log:3/10s",
                                    "sliding_window:3/10s",      "gcra:1/1s,burst=3",
                                    "token_bucket:1/1s,burst=3", "leaky_bucket:1/1s,queue=2"};

static int open_with(rlt_store **s, rlt_policy *p, const char *text)
{
    if (rlt_store_open(s, NULL) != RLT_OK) return -1;
    if (rlt_policy_parse(p, text, strlen(text), NULL, 0) != RLT_OK) return -1;
    int id;
    if (rlt_store_set_policy(*s, "p", p, RLT_CHANGE_KEEP, &id) != RLT_OK) return -1;
    return id;
}

/* decide 3 at 0, sweep at 20 s (the key is fresh then: dropped), decide 1 at 2 s.  The store
 * must answer as the undropped state answers at 20 s, with the waits counted from 2 s; the
 * bare state at 2 s would be stricter still, and a zero state at 2 s (what the bug did)
 * looser. */
TEST(a_call_before_a_sweep_instant_is_decided_at_that_instant)
{
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        rlt_store *s;
        rlt_policy p;
        int id = open_with(&s, &p, texts[i]);
        ASSERT(id >= 0);
        unsigned char ref[64] = {0};
        rlt_decision d, want;
        ASSERT_EQ(rlt_store_decide(s, id, "k", 1, 0, 3, &d), RLT_OK);
        ASSERT_EQ(rlt_decide(&p, ref, 0, 3, &want), RLT_OK);
        ASSERT_EQ(d.allowed, want.allowed);
        ASSERT(rlt_is_fresh(&p, ref, 20 * S));
        ASSERT_EQ(rlt_store_sweep(s, 20 * S, 1u << 20), 1);
        ASSERT_EQ(rlt_store_decide(s, id, "k", 1, 2 * S, 1, &d), RLT_OK);
        ASSERT_EQ(rlt_decide(&p, ref, 20 * S, 1, &want), RLT_OK);
        if (d.allowed != want.allowed || d.remaining != want.remaining)
            RLT_FAIL_("%s: store allowed=%d remaining=%lld, reference at 20 s %d %lld", texts[i],
                      d.allowed, (long long)d.remaining, want.allowed, (long long)want.remaining);
        ASSERT_EQ(d.reset_after, want.reset_after + 18 * S);
        rlt_store_close(s);
    }
}

/* A peek consumes nothing and changes nothing: the same trace with and without a peek at a
 * later instant gives the same later answers, even when the later call steps back. */
TEST(a_peek_does_not_change_later_answers_on_a_clock_that_steps_back)
{
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        rlt_store *a, *b;
        rlt_policy p;
        int ia = open_with(&a, &p, texts[i]), ib = open_with(&b, &p, texts[i]);
        ASSERT(ia >= 0 && ib >= 0);
        rlt_decision da, db;
        for (int k = 0; k < 3; k++) {
            ASSERT_EQ(rlt_store_decide(a, ia, "k", 1, 0, 1, &da), RLT_OK);
            ASSERT_EQ(rlt_store_decide(b, ib, "k", 1, 0, 1, &db), RLT_OK);
        }
        ASSERT_EQ(rlt_store_decide(b, ib, "k", 1, 10 * S, 0, &db), RLT_OK); /* the peek */
        ASSERT_EQ(rlt_store_decide(a, ia, "k", 1, 5 * S, 1, &da), RLT_OK);
        ASSERT_EQ(rlt_store_decide(b, ib, "k", 1, 5 * S, 1, &db), RLT_OK);
        if (da.allowed != db.allowed || da.remaining != db.remaining ||
            da.retry_after != db.retry_after)
            RLT_FAIL_("%s: without the peek allowed=%d remaining=%lld retry=%lld, with it "
                      "%d %lld %lld",
                      texts[i], da.allowed, (long long)da.remaining, (long long)da.retry_after,
                      db.allowed, (long long)db.remaining, (long long)db.retry_after);
        rlt_store_close(a);
        rlt_store_close(b);
    }
}

/* Without drops the store is the bare algorithm, backwards steps included. */
TEST(without_drops_a_stepping_back_clock_gets_the_algorithms_answers)
{
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        rlt_store *s;
        rlt_policy p;
        int id = open_with(&s, &p, texts[i]);
        ASSERT(id >= 0);
        unsigned char ref[64] = {0};
        const rlt_ns times[] = {0, 1 * S, 500 * RLT_NS_PER_MS, 3 * S, 2 * S, 2 * S, 12 * S, 4 * S};
        for (size_t k = 0; k < sizeof times / sizeof times[0]; k++) {
            rlt_decision d, want;
            ASSERT_EQ(rlt_store_decide(s, id, "k", 1, times[k], 1, &d), RLT_OK);
            ASSERT_EQ(rlt_decide(&p, ref, times[k], 1, &want), RLT_OK);
            if (memcmp(&d, &want, sizeof d) != 0)
                RLT_FAIL_("%s step %zu: store and algorithm differ", texts[i], k);
        }
        rlt_store_close(s);
    }
}

/* A key still in the table, decided at an instant before a drop made for another key, is
 * decided at the drop's instant too, with its waits counted from the caller's instant: the
 * GCRA hot path takes only calls at or after every drop, and this one must go the general
 * way and still give the algorithm's answer at the drop's instant.  Keys of 1, 8 and 16 bytes
 * (the hot path compares the last two as words). */
TEST(a_kept_key_called_before_another_keys_drop_is_decided_at_the_drop)
{
    static const char *const keys[] = {"b", "user:b:8", "tenant:b:16bytes"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        rlt_store *s;
        rlt_policy p;
        int id = open_with(&s, &p, "gcra:1/10s,burst=3");
        ASSERT(id >= 0);
        const size_t kl = strlen(keys[i]);
        unsigned char ref[64] = {0};
        rlt_decision d, want;
        ASSERT_EQ(rlt_store_decide(s, id, "a", 1, 0, 1, &d), RLT_OK);      /* fresh again at 10 s */
        ASSERT_EQ(rlt_store_decide(s, id, keys[i], kl, 0, 3, &d), RLT_OK); /* until 30 s */
        ASSERT_EQ(rlt_decide(&p, ref, 0, 3, &want), RLT_OK);
        ASSERT(d.allowed && want.allowed);
        ASSERT_EQ(rlt_store_sweep(s, 20 * S, 1u << 20), 1); /* drops "a" only */
        rlt_store_stats st;
        rlt_store_stats_get(s, &st);
        ASSERT_EQ(st.keys, 1);
        ASSERT_EQ(rlt_store_decide(s, id, keys[i], kl, 2 * S, 1, &d), RLT_OK);
        ASSERT_EQ(rlt_decide(&p, ref, 20 * S, 1, &want), RLT_OK);
        ASSERT_EQ(d.allowed, want.allowed);
        ASSERT_EQ(d.remaining, want.remaining);
        ASSERT_EQ(d.reset_after, want.reset_after + 18 * S);
        /* denied at 2 s as at 20 s: the wait counts from 2 s */
        ASSERT_EQ(rlt_store_decide(s, id, keys[i], kl, 2 * S, 3, &d), RLT_OK);
        ASSERT_EQ(rlt_decide(&p, ref, 20 * S, 3, &want), RLT_OK);
        ASSERT(!d.allowed && !want.allowed);
        ASSERT_EQ(d.retry_after, want.retry_after + 18 * S);
        /* and at or after the drop, the hot path's answers are the algorithm's */
        ASSERT_EQ(rlt_store_decide(s, id, keys[i], kl, 25 * S, 1, &d), RLT_OK);
        ASSERT_EQ(rlt_decide(&p, ref, 25 * S, 1, &want), RLT_OK);
        ASSERT(memcmp(&d, &want, sizeof d) == 0);
        rlt_store_close(s);
    }
}
