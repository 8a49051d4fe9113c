/* rlt_store_decide_batch: every item decides exactly as rlt_store_decide called in index order
 * would (a second store with the same secret and caps, driven one call at a time, is the
 * model: duplicates within a batch, long keys, new keys, eviction at the cap, fail-closed
 * refusals, bad items, sweeps), and concurrent batches stay linearizable per key: no refill
 * means exactly the limit, random costs conserve capacity exactly. */
#include <pthread.h>
#include <stdlib.h>

#include "test.h"

#include "store_test_util.h"

#define NK 300
#define MAXN 120

static uint8_t kbytes[NK][RLT_KEY_MAX + 1];
static size_t klens[NK];

/* Keys 1..16 bytes (inline for small states) and 17..512 (out of line), distinct by their
 * first two bytes. */
static void make_keys(uint64_t *rng)
{
    for (int k = 0; k < NK; k++) {
        klens[k] = tu_below(rng, 4) ? 2 + tu_below(rng, 15) : 17 + tu_below(rng, RLT_KEY_MAX - 16);
        for (size_t i = 0; i < klens[k]; i++)
            kbytes[k][i] = (uint8_t)tu_below(rng, 3);
        kbytes[k][0] = (uint8_t)(k & 0xff);
        kbytes[k][1] = (uint8_t)(k >> 8);
    }
}

static int same_decision(const rlt_decision *a, const rlt_decision *b)
{
    return a->allowed == b->allowed && a->limit == b->limit && a->remaining == b->remaining &&
           a->retry_after == b->retry_after && a->reset_after == b->reset_after &&
           a->delay == b->delay && a->lease == b->lease;
}

static int is_zero(const rlt_decision *d)
{
    rlt_decision z;
    memset(&z, 0, sizeof z);
    return same_decision(d, &z);
}

typedef struct model_cfg {
    const char *policy;
    size_t max_keys;
    bool fail_closed;
    unsigned shards;
} model_cfg;

/* Runs `rounds` random batches on store a and the same items one call at a time on store b;
 * returns the number of mismatches (printed) and adds a's stats to *sum. */
static int run_model(const model_cfg *cfg, uint64_t seed, int rounds, rlt_store_stats *sum)
{
    uint64_t rng = seed;
    make_keys(&rng);
    rlt_store *a = tu_store(cfg->max_keys, cfg->fail_closed, cfg->shards);
    rlt_store *b = tu_store(cfg->max_keys, cfg->fail_closed, cfg->shards);
    if (!a || !b) return 1;
    int ida = tu_add(a, "p", cfg->policy), idb = tu_add(b, "p", cfg->policy);
    if (ida < 0 || ida != idb) return 1;
    const bool lease = tu_policy(cfg->policy).algo == RLT_CONCURRENCY;
    static uint8_t toolong[RLT_KEY_MAX + 1];
    rlt_key keys[MAXN];
    int64_t costs[MAXN];
    rlt_decision out[MAXN];
    int status[MAXN];
    int bad = 0;
    rlt_ns now = 0;
    for (int round = 0; round < rounds && bad < 5; round++) {
        now += (rlt_ns)tu_below(&rng, 3) * (rlt_ns)tu_below(&rng, 10 * RLT_NS_PER_MS);
        size_t n = tu_below(&rng, 10) == 0 ? tu_below(&rng, MAXN + 1) : tu_below(&rng, 40);
        for (size_t i = 0; i < n; i++) {
            uint64_t r = tu_below(&rng, 100);
            if (i > 0 && r < 15) { /* the same key again in this batch */
                keys[i] = keys[tu_below(&rng, i)];
            } else if (r < 17) {
                keys[i] = (rlt_key){"", 0}; /* empty: RLT_EKEYLEN */
            } else if (r < 18) {
                keys[i] = (rlt_key){toolong, sizeof toolong};
            } else if (r < 19) {
                keys[i] = (rlt_key){NULL, 5}; /* RLT_EINVAL */
            } else {
                /* Half the items on 16 hot keys (denials), half over all of them (new keys). */
                int k = (int)tu_below(&rng, tu_below(&rng, 2) ? 16 : NK);
                keys[i] = (rlt_key){kbytes[k], klens[k]};
            }
            costs[i] = lease ? (int64_t)tu_below(&rng, 2) : (int64_t)tu_below(&rng, 4);
            if (tu_below(&rng, 50) == 0) costs[i] = -1;         /* RLT_EINVAL */
            if (lease && tu_below(&rng, 50) == 0) costs[i] = 2; /* RLT_EINVAL for leases */
        }
        const bool use_costs = tu_below(&rng, 4) != 0;
        const bool use_status = tu_below(&rng, 4) != 0;
        memset(out, 0xa5, sizeof out); /* failed items must come back zeroed */
        int rc = rlt_store_decide_batch(a, ida, keys, n, now, use_costs ? costs : NULL, out,
                                        use_status ? status : NULL);
        int want_rc = RLT_OK;
        for (size_t i = 0; i < n; i++) {
            rlt_decision want;
            int64_t cost = use_costs ? costs[i] : 1;
            int wrc = rlt_store_decide(b, idb, keys[i].key, keys[i].klen, now, cost, &want);
            if (wrc && want_rc == RLT_OK) want_rc = wrc;
            bool ok = (use_status ? status[i] == wrc : true) &&
                      (wrc == RLT_OK ? same_decision(&out[i], &want) : is_zero(&out[i]));
            if (!ok && bad++ < 5)
                fprintf(stderr,
                        "%s seed %llu round %d item %zu/%zu klen %zu cost %lld: status %d/%d "
                        "allowed %d/%d remaining %lld/%lld\n",
                        cfg->policy, (unsigned long long)seed, round, i, n, keys[i].klen,
                        (long long)cost, use_status ? status[i] : 99, wrc, out[i].allowed,
                        want.allowed, (long long)out[i].remaining, (long long)want.remaining);
        }
        if (rc != want_rc && bad++ < 5)
            fprintf(stderr, "seed %llu round %d: batch returned %d, want %d\n",
                    (unsigned long long)seed, round, rc, want_rc);
        if (tu_below(&rng, 20) == 0) {
            size_t budget = tu_below(&rng, 200);
            if (rlt_store_sweep(a, now, budget) != rlt_store_sweep(b, now, budget)) bad++;
        }
    }
    rlt_store_stats sa, sb;
    rlt_store_stats_get(a, &sa);
    rlt_store_stats_get(b, &sb);
    if (memcmp(&sa, &sb, sizeof sa) != 0) {
        fprintf(stderr,
                "%s seed %llu: stats differ: keys %llu/%llu allowed %llu/%llu "
                "forced %llu/%llu refused %llu/%llu\n",
                cfg->policy, (unsigned long long)seed, (unsigned long long)sa.keys,
                (unsigned long long)sb.keys, (unsigned long long)sa.allowed,
                (unsigned long long)sb.allowed, (unsigned long long)sa.evicted_forced,
                (unsigned long long)sb.evicted_forced, (unsigned long long)sa.refused_full,
                (unsigned long long)sb.refused_full);
        bad++;
    }
    sum->allowed += sa.allowed;
    sum->denied += sa.denied;
    sum->evicted_idle += sa.evicted_idle;
    sum->evicted_forced += sa.evicted_forced;
    sum->refused_full += sa.refused_full;
    rlt_store_close(a);
    rlt_store_close(b);
    return bad;
}

TEST(batch_decides_every_item_as_sequential_single_calls)
{
    static const model_cfg cfgs[] = {
        {"gcra:5/100ms,burst=8", 0, false, 4}, /* unbounded, inline and long keys */
        {"token_bucket:7/50ms", 0, false, 0},  /* the default shards (1,024) */
        {"sliding_log:4/60ms", 0, false, 2},   /* large states out of line */
        {"sliding_window:5/70ms", 0, false, 1},
        {"leaky_bucket:5/100ms,queue=3,delay=1", 0, false, 4},
        {"concurrency:3/200ms", 0, false, 4},
    };
    for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++) {
        rlt_store_stats sum;
        memset(&sum, 0, sizeof sum);
        for (uint64_t seed = 1; seed <= 4; seed++)
            ASSERT_EQ(run_model(&cfgs[c], seed, 400, &sum), 0);
        ASSERT(sum.allowed > 1000 && sum.denied > 100); /* both outcomes were compared */
        ASSERT_EQ(sum.evicted_forced, 0);
    }
}

TEST(batch_at_a_full_store_evicts_as_sequential_calls_do)
{
    /* 300 keys into 64 (one shard) and 256 (four shards): new keys evict by CLOCK. */
    static const model_cfg cfgs[] = {
        {"gcra:5/100ms,burst=8", 64, false, 0},
        {"fixed_window:6/20s", 256, false, 4},
        {"sliding_log:4/90ms", 64, false, 0},
    };
    for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++) {
        rlt_store_stats sum;
        memset(&sum, 0, sizeof sum);
        for (uint64_t seed = 10; seed <= 13; seed++)
            ASSERT_EQ(run_model(&cfgs[c], seed, 400, &sum), 0);
        ASSERT(sum.evicted_forced > 100); /* the cap was really hit */
    }
}

TEST(batch_at_a_full_fail_closed_store_refuses_as_sequential_calls_do)
{
    static const model_cfg cfgs[] = {
        {"gcra:5/10s,burst=8", 64, true, 0}, /* slow refill: keys stay busy, new keys EFULL */
        {"token_bucket:3/20s,burst=6", 256, true, 4},
    };
    for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++) {
        rlt_store_stats sum;
        memset(&sum, 0, sizeof sum);
        for (uint64_t seed = 20; seed <= 23; seed++)
            ASSERT_EQ(run_model(&cfgs[c], seed, 400, &sum), 0);
        ASSERT(sum.refused_full > 100);
        ASSERT_EQ(sum.evicted_forced, 0);
    }
    /* And the refusals really happened. */
    rlt_store *s = tu_store(64, true, 0);
    int id = tu_add(s, "p", "gcra:1/h");
    rlt_key k[100];
    char names[100][8];
    int status[100];
    rlt_decision out[100];
    for (int i = 0; i < 100; i++) {
        snprintf(names[i], sizeof names[i], "k%d", i);
        k[i] = (rlt_key){names[i], strlen(names[i])};
    }
    ASSERT_EQ(rlt_store_decide_batch(s, id, k, 100, 0, NULL, out, status), RLT_EFULL);
    for (int i = 0; i < 64; i++)
        ASSERT_EQ(status[i], RLT_OK);
    for (int i = 64; i < 100; i++)
        ASSERT_EQ(status[i], RLT_EFULL);
    rlt_store_close(s);
}

TEST(batch_rejects_bad_arguments_and_unknown_policies)
{
    rlt_store *s = tu_store(0, false, 0);
    int id = tu_add(s, "p", "gcra:10/s");
    rlt_key k[2] = {{"a", 1}, {"b", 1}};
    rlt_decision out[2];
    int status[2] = {7, 7};
    ASSERT_EQ(rlt_store_decide_batch(NULL, id, k, 2, 0, NULL, out, status), RLT_EINVAL);
    ASSERT_EQ(rlt_store_decide_batch(s, id, NULL, 2, 0, NULL, out, status), RLT_EINVAL);
    ASSERT_EQ(rlt_store_decide_batch(s, id, k, 2, 0, NULL, NULL, status), RLT_EINVAL);
    ASSERT_EQ(status[0], 7); /* nothing decided */
    ASSERT_EQ(rlt_store_decide_batch(s, id, NULL, 0, 0, NULL, NULL, NULL), RLT_OK);
    ASSERT_EQ(rlt_store_decide_batch(s, id + 1, k, 2, 0, NULL, out, status), RLT_ENOENT);
    ASSERT_EQ(status[0], RLT_ENOENT);
    ASSERT_EQ(status[1], RLT_ENOENT);
    ASSERT_EQ(rlt_store_decide_batch(s, -1, k, 2, 0, NULL, out, NULL), RLT_ENOENT);
    /* A bad item fails alone; the batch returns the first failure. */
    int64_t costs[2] = {-1, 1};
    ASSERT_EQ(rlt_store_decide_batch(s, id, k, 2, 0, costs, out, status), RLT_EINVAL);
    ASSERT_EQ(status[0], RLT_EINVAL);
    ASSERT_EQ(status[1], RLT_OK);
    ASSERT(out[1].allowed);
    ASSERT_EQ(out[1].remaining, 9);
    rlt_store_stats st;
    rlt_store_stats_get(s, &st);
    ASSERT_EQ(st.keys, 1);
    ASSERT_EQ(st.allowed, 1);
    rlt_store_close(s);
}

/* ---- threads -------------------------------------------------------------------------- */

#define NT 4
#define HOT 8

typedef struct targ {
    rlt_store *s;
    int id;
    int iters;
    uint64_t seed;
    int64_t accepted[HOT];
    int errors;
} targ;

static pthread_barrier_t barrier;

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

static void *one_key_batches(void *p)
{
    targ *a = p;
    rlt_key k[16];
    rlt_decision out[16];
    int status[16];
    for (int j = 0; j < 16; j++)
        k[j] = (rlt_key){"hot", 3};
    pthread_barrier_wait(&barrier);
    for (int i = 0; i < a->iters; i++) {
        /* now stays 0: nothing refills. */
        if (rlt_store_decide_batch(a->s, a->id, k, 16, 0, NULL, out, status) != RLT_OK) a->errors++;
        for (int j = 0; j < 16; j++)
            a->accepted[0] += status[j] == RLT_OK && out[j].allowed;
    }
    return NULL;
}

static void exact_limit(const char *policy, int64_t limit)
{
    rlt_store *s = tu_store(0, false, 0);
    int id = tu_add(s, "p", policy);
    targ a[NT];
    memset(a, 0, sizeof a);
    for (int i = 0; i < NT; i++)
        a[i] = (targ){.s = s, .id = id, .iters = 200};
    ASSERT_EQ(run_threads(one_key_batches, a), 0);
    int64_t total = 0;
    for (int i = 0; i < NT; i++) {
        ASSERT_EQ(a[i].errors, 0);
        total += a[i].accepted[0];
    }
    ASSERT_EQ(total, limit);
    rlt_store_close(s);
}

TEST(threads_batching_one_key_without_refill_get_exactly_the_limit)
{
    exact_limit("gcra:1000/h", 1000);
    if (rlt_test_failed_now) return;
    exact_limit("sliding_log:700/h", 700);
    if (rlt_test_failed_now) return;
    exact_limit("fixed_window:2345/h", 2345);
}

static const char *hot_name[HOT] = {"h0",
                                    "h1",
                                    "hot-2",
                                    "hot-3",
                                    "hot-key-number-four",
                                    "h5",
                                    "a-long-hot-key-that-lives-out-of-line-6",
                                    "h7"};

/* Batches of 1..40 items over HOT shared keys (duplicates within a batch included), random
 * costs, interleaved with single calls on the same keys. */
static void *overlapping(void *p)
{
    targ *a = p;
    uint64_t rng = a->seed;
    rlt_key k[40];
    int idx[40];
    int64_t costs[40];
    rlt_decision out[40];
    int status[40];
    pthread_barrier_wait(&barrier);
    for (int i = 0; i < a->iters; i++) {
        if (tu_below(&rng, 4) == 0) {
            int h = (int)tu_below(&rng, HOT);
            int64_t cost = 1 + (int64_t)tu_below(&rng, 9);
            rlt_decision d;
            if (rlt_store_decide(a->s, a->id, hot_name[h], strlen(hot_name[h]), 0, cost, &d))
                a->errors++;
            else if (d.allowed)
                a->accepted[h] += cost;
            continue;
        }
        size_t n = 1 + tu_below(&rng, 40);
        for (size_t j = 0; j < n; j++) {
            idx[j] = (int)tu_below(&rng, HOT);
            k[j] = (rlt_key){hot_name[idx[j]], strlen(hot_name[idx[j]])};
            costs[j] = 1 + (int64_t)tu_below(&rng, 9);
        }
        if (rlt_store_decide_batch(a->s, a->id, k, n, 0, costs, out, status) != RLT_OK) a->errors++;
        for (size_t j = 0; j < n; j++)
            if (status[j] == RLT_OK && out[j].allowed) a->accepted[idx[j]] += costs[j];
    }
    return NULL;
}

TEST(concurrent_batches_on_overlapping_keys_conserve_capacity_exactly)
{
    const int64_t cap = 4000;
    rlt_store *s = tu_store(0, false, 4);
    int id = tu_add(s, "p", "token_bucket:1/h,burst=4000");
    targ a[NT];
    memset(a, 0, sizeof a);
    for (int i = 0; i < NT; i++)
        a[i] = (targ){.s = s, .id = id, .iters = 400, .seed = 101 + (uint64_t)i};
    ASSERT_EQ(run_threads(overlapping, a), 0);
    for (int h = 0; h < HOT; h++) {
        int64_t accepted = 0;
        for (int i = 0; i < NT; i++)
            accepted += a[i].accepted[h];
        rlt_decision d;
        ASSERT_EQ(rlt_store_decide(s, id, hot_name[h], strlen(hot_name[h]), 0, 0, &d), RLT_OK);
        ASSERT_EQ(accepted + d.remaining, cap);
        ASSERT_LE(d.remaining, 8); /* drained below the largest cost */
    }
    for (int i = 0; i < NT; i++)
        ASSERT_EQ(a[i].errors, 0);
    rlt_store_close(s);
}

/* Many new keys from every thread at once: tables grow (and are swapped for bigger ones)
 * while other threads hash, prefetch and decide.  Every decision is counted exactly once. */
#define GROW_KEYS 30000

static void *growers(void *p)
{
    targ *a = p;
    uint64_t rng = a->seed;
    uint32_t ids[32];
    rlt_key k[32];
    rlt_decision out[32];
    int status[32];
    pthread_barrier_wait(&barrier);
    for (int i = 0; i < a->iters; i++) {
        if (tu_below(&rng, 2)) {
            for (int j = 0; j < 32; j++) {
                ids[j] = (uint32_t)tu_below(&rng, GROW_KEYS);
                k[j] = (rlt_key){&ids[j], sizeof ids[j]};
            }
            if (rlt_store_decide_batch(a->s, a->id, k, 32, 0, NULL, out, status)) a->errors++;
            for (int j = 0; j < 32; j++)
                a->accepted[0] += status[j] == RLT_OK && out[j].allowed;
        } else {
            for (int j = 0; j < 32; j++) {
                uint32_t id = (uint32_t)tu_below(&rng, GROW_KEYS);
                rlt_decision d;
                if (rlt_store_decide(a->s, a->id, &id, sizeof id, 0, 1, &d))
                    a->errors++;
                else
                    a->accepted[0] += d.allowed;
            }
        }
    }
    return NULL;
}

TEST(batches_and_single_calls_race_safely_with_table_growth)
{
    rlt_store *s = tu_store(0, false, 2); /* two shards: tables of 15k keys, grown ~20 times */
    int id = tu_add(s, "p", "fixed_window:100000/h");
    targ a[NT];
    memset(a, 0, sizeof a);
    for (int i = 0; i < NT; i++)
        a[i] = (targ){.s = s, .id = id, .iters = 1000, .seed = 500 + (uint64_t)i};
    ASSERT_EQ(run_threads(growers, a), 0);
    int64_t decided = 0, used = 0;
    for (int i = 0; i < NT; i++) {
        ASSERT_EQ(a[i].errors, 0);
        decided += a[i].accepted[0];
    }
    ASSERT_EQ(decided, (int64_t)NT * 1000 * 32); /* nothing is ever denied here */
    for (uint32_t k = 0; k < GROW_KEYS; k++) {
        rlt_decision d;
        ASSERT_EQ(rlt_store_decide(s, id, &k, sizeof k, 0, 0, &d), RLT_OK);
        used += 100000 - d.remaining;
    }
    ASSERT_EQ(used, decided);
    rlt_store_close(s);
}
