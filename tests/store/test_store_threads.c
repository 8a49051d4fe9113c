/* Linearizability under contention (run these under the TSan build): N threads on one key
 * with no refill get exactly the limit; random costs conserve exactly; multi-limit checks stay
 * all-or-nothing while other threads hammer the same keys; policy changes and sweeps race
 * with decisions safely. */
#include <pthread.h>

#include "test.h"

#include "store_test_util.h"

#define NT 4

typedef struct targ {
    rlt_store *s;
    int id, id2;
    int iters;
    uint64_t seed;
    int64_t accepted_cost;
    int64_t accepted_multi;
    int errors;
} targ;

static pthread_barrier_t barrier;

static void *one_key(void *p)
{
    targ *a = p;
    rlt_decision d;
    pthread_barrier_wait(&barrier);
    for (int i = 0; i < a->iters; i++) {
        /* now stays 0: nothing refills. */
        if (rlt_store_decide(a->s, a->id, "hot", 3, 0, 1, &d) != RLT_OK)
            a->errors++;
        else if (d.allowed)
            a->accepted_cost++;
    }
    return NULL;
}

static int run_threads(void *(*fn)(void *), targ *args)
{
    pthread_t t[NT];
    pthread_barrier_init(&barrier, NULL, NT);
    for (int i = 0; i < NT; i++)
        if (pthread_create(&t[i], NULL, fn, &args[i])) return -1;
    for (int i = 0; i < NT; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&barrier);
    return 0;
}

static void exact_limit(const char *policy, int64_t limit)
{
    rlt_store *s = tu_store(0, false, 0);
    int id = tu_add(s, "p", policy);
    targ a[NT];
    memset(a, 0, sizeof a);
    for (int i = 0; i < NT; i++)
        a[i] = (targ){.s = s, .id = id, .iters = 3000};
    ASSERT_EQ(run_threads(one_key, a), 0);
    int64_t total = 0;
    for (int i = 0; i < NT; i++) {
        total += a[i].accepted_cost;
        ASSERT_EQ(a[i].errors, 0);
    }
    ASSERT_EQ(total, limit);
    rlt_store_close(s);
}

TEST(threads_on_one_key_without_refill_get_exactly_the_limit)
{
    exact_limit("gcra:1000/h", 1000);
    if (rlt_test_failed_now) return;
    exact_limit("fixed_window:777/h", 777);
    if (rlt_test_failed_now) return;
    exact_limit("sliding_log:500/h", 500);
    if (rlt_test_failed_now) return;
    exact_limit("token_bucket:10/h,burst=2500", 2500);
}

static void *random_costs(void *p)
{
    targ *a = p;
    uint64_t rng = a->seed;
    rlt_decision d;
    pthread_barrier_wait(&barrier);
    for (int i = 0; i < a->iters; i++) {
        int64_t cost = 1 + (int64_t)tu_below(&rng, 9);
        if (rlt_store_decide(a->s, a->id, "acct", 4, 0, cost, &d) != RLT_OK)
            a->errors++;
        else if (d.allowed)
            a->accepted_cost += cost;
    }
    return NULL;
}

TEST(random_costs_conserve_capacity_exactly)
{
    const int64_t cap = 5000;
    rlt_store *s = tu_store(0, false, 0);
    int id = tu_add(s, "p", "token_bucket:1/h,burst=5000");
    targ a[NT];
    for (int i = 0; i < NT; i++)
        a[i] = (targ){.s = s, .id = id, .iters = 2000, .seed = 77 + (uint64_t)i};
    ASSERT_EQ(run_threads(random_costs, a), 0);
    int64_t accepted = 0;
    for (int i = 0; i < NT; i++) {
        accepted += a[i].accepted_cost;
        ASSERT_EQ(a[i].errors, 0);
    }
    rlt_decision d;
    ASSERT_EQ(rlt_store_decide(s, id, "acct", 4, 0, 0, &d), RLT_OK);
    ASSERT_EQ(accepted + d.remaining, cap);
    ASSERT_LE(d.remaining, 8); /* the threads drained it to below the largest cost */
    rlt_store_close(s);
}

/* Each thread runs a multi-limit check over a shared key "shared" and its own key, plus
 * single decisions on the shared key.  All-or-nothing means the per-thread key's consumption
 * equals the multi's accepted count, and the shared key never goes over its limit. */
static void *multi_hammer(void *p)
{
    targ *a = p;
    char own[16];
    snprintf(own, sizeof own, "own%llu", (unsigned long long)a->seed);
    rlt_check c[2] = {{a->id, "shared", 6, 1}, {a->id2, own, strlen(own), 1}};
    rlt_decision d;
    int refused;
    uint64_t rng = a->seed;
    pthread_barrier_wait(&barrier);
    for (int i = 0; i < a->iters; i++) {
        if (tu_below(&rng, 2)) {
            if (rlt_store_decide_multi(a->s, c, 2, 0, &d, &refused) != RLT_OK)
                a->errors++;
            else if (d.allowed)
                a->accepted_multi++;
        } else {
            if (rlt_store_decide(a->s, a->id, "shared", 6, 0, 1, &d) != RLT_OK)
                a->errors++;
            else if (d.allowed)
                a->accepted_cost++;
        }
    }
    return NULL;
}

TEST(multi_limit_stays_all_or_nothing_under_contention)
{
    rlt_store *s = tu_store(0, false, 0);
    int shared = tu_add(s, "shared", "fixed_window:3000/h");
    int own = tu_add(s, "own", "fixed_window:100000/h");
    targ a[NT];
    for (int i = 0; i < NT; i++)
        a[i] = (targ){.s = s, .id = shared, .id2 = own, .iters = 2500, .seed = (uint64_t)i + 1};
    ASSERT_EQ(run_threads(multi_hammer, a), 0);
    int64_t total = 0;
    for (int i = 0; i < NT; i++) {
        ASSERT_EQ(a[i].errors, 0);
        total += a[i].accepted_cost + a[i].accepted_multi;
        char ownkey[16];
        snprintf(ownkey, sizeof ownkey, "own%d", i + 1);
        rlt_decision d;
        ASSERT_EQ(rlt_store_decide(s, own, ownkey, strlen(ownkey), 0, 0, &d), RLT_OK);
        ASSERT_EQ(100000 - d.remaining, a[i].accepted_multi);
    }
    ASSERT_EQ(total, 3000);
    rlt_store_close(s);
}

/* Threads deciding on keys of 8..16 bytes (the single call's hot path on the AES entry),
 * some allowed and some denied, counting what they were told. */
static void *counted(void *p)
{
    targ *a = p;
    uint64_t rng = a->seed;
    rlt_decision d;
    char key[16];
    pthread_barrier_wait(&barrier);
    for (int i = 0; i < a->iters; i++) {
        const size_t len = 8 + (size_t)tu_below(&rng, 9);
        memset(key, 'k', sizeof key);
        const uint32_t k = (uint32_t)tu_below(&rng, 300);
        memcpy(key, &k, sizeof k);
        const rlt_ns now = (rlt_ns)(i / 8) * RLT_NS_PER_MS;
        if (rlt_store_decide(a->s, a->id, key, len, now, 1, &d) != RLT_OK)
            a->errors++;
        else if (d.allowed)
            a->accepted_cost++;
        else
            a->accepted_multi++; /* here: the denied ones */
    }
    return NULL;
}

/* The stats count every decision of the hot path exactly, allowed and denied apart, with the
 * threads deciding at once (the counters are written under the shard lock and read without
 * it). */
TEST(stats_count_every_hot_path_decision_across_threads)
{
    rlt_store *s = tu_store(0, false, 16);
    ASSERT(s != NULL);
    int id = tu_add(s, "p", "gcra:5/s");
    targ a[NT];
    for (int i = 0; i < NT; i++)
        a[i] = (targ){.s = s, .id = id, .iters = 20000, .seed = (uint64_t)i + 11};
    ASSERT_EQ(run_threads(counted, a), 0);
    int64_t allowed = 0, denied = 0;
    for (int i = 0; i < NT; i++) {
        ASSERT_EQ(a[i].errors, 0);
        allowed += a[i].accepted_cost;
        denied += a[i].accepted_multi;
    }
    ASSERT(allowed > 0 && denied > 0);
    rlt_store_stats st;
    rlt_store_stats_get(s, &st);
    ASSERT_EQ((int64_t)st.allowed, allowed);
    ASSERT_EQ((int64_t)st.denied, denied);
    rlt_store_close(s);
}

static void *churn(void *p)
{
    targ *a = p;
    uint64_t rng = a->seed;
    rlt_decision d;
    pthread_barrier_wait(&barrier);
    for (int i = 0; i < a->iters; i++) {
        uint32_t k = (uint32_t)tu_below(&rng, 5000);
        rlt_ns now = (rlt_ns)i * RLT_NS_PER_MS;
        if (rlt_store_decide(a->s, a->id, &k, sizeof k, now, 1, &d) != RLT_OK) a->errors++;
        if (a->seed == 1 && i % 512 == 0) rlt_store_sweep(a->s, now, 256);
        if (a->seed == 2 && i % 1024 == 0) {
            rlt_policy np = tu_policy(i % 2048 ? "gcra:20/s" : "gcra:10/s");
            rlt_store_set_policy(a->s, "p", &np, RLT_CHANGE_SCALE, NULL);
        }
        if (a->seed == 3 && i % 256 == 0) {
            rlt_store_stats st;
            rlt_store_stats_get(a->s, &st);
        }
    }
    return NULL;
}

TEST(sweeps_policy_changes_and_stats_race_safely_with_decisions)
{
    rlt_store_options o;
    memset(&o, 0, sizeof o);
    o.max_keys = 2048; /* forces evictions too */
    o.shards = 4;
    rlt_store *s;
    ASSERT_EQ(rlt_store_open(&s, &o), RLT_OK);
    int id = tu_add(s, "p", "gcra:10/s");
    targ a[NT];
    for (int i = 0; i < NT; i++)
        a[i] = (targ){.s = s, .id = id, .iters = 6000, .seed = (uint64_t)i + 1};
    ASSERT_EQ(run_threads(churn, a), 0);
    for (int i = 0; i < NT; i++)
        ASSERT_EQ(a[i].errors, 0);
    rlt_store_stats st;
    rlt_store_stats_get(s, &st);
    ASSERT_LE(st.keys, 2048);
    rlt_store_close(s);
}
