/* The daemon's top-offenders registry (src/server/stats/top.c) without sockets: worker threads
 * counting denials in their own sketches while readers merge (run under TSan: label
 * `threads`), slot 0 shared by threads without a worker slot, the /v1/top query parser, and
 * the off switch. */
#include "test.h"

#include "server/stats/metrics.h"
#include "server/stats/top.h"

#include <pthread.h>
#include <stdio.h>

#define WORKERS 4
#define PER_WORKER 20000
#define NKEYS 50

typedef struct job {
    rlt__top *t;
    unsigned slot;
    int stop;
} job;

static void key_of(int i, char *buf, size_t *len)
{
    *len = (size_t)snprintf(buf, 16, "user:%d", i);
}

/* Worker w denies key i (i = 0..NKEYS-1) (i + 1) x (w + 1) times in total, interleaved. */
static void *worker(void *arg)
{
    job *j = arg;
    rlt__metrics_bind_thread(j->slot);
    for (int round = 0; round < PER_WORKER; round++) {
        int i = round % NKEYS;
        if (round / NKEYS >= (i + 1) * (int)(j->slot)) continue;
        char k[16];
        size_t n;
        key_of(i, k, &n);
        rlt__top_denied(j->t, 7, k, n);
    }
    return NULL;
}

static void *reader(void *arg)
{
    job *j = arg;
    while (!__atomic_load_n(&j->stop, __ATOMIC_ACQUIRE)) {
        rlt_topk *m = rlt__top_merged(j->t);
        if (m == NULL) abort();
        /* Each copy is a consistent sketch: its counts sum to its total (no K overflow). */
        rlt_topk_entry e[NKEYS];
        size_t n = rlt_topk_list(m, e, NKEYS);
        uint64_t sum = 0;
        for (size_t i = 0; i < n; i++)
            sum += e[i].count;
        if (sum != rlt_topk_total(m)) abort();
        rlt_topk_close(m);
    }
    return NULL;
}

TEST(workers_deny_in_their_own_sketches_while_readers_merge_and_nothing_is_lost)
{
    rlt__top *t;
    ASSERT_EQ(rlt__top_open(&t, 100), RLT_OK);
    job jobs[WORKERS], rj = {.t = t};
    pthread_t th[WORKERS], rt[2];
    for (int r = 0; r < 2; r++)
        ASSERT_EQ(pthread_create(&rt[r], NULL, reader, &rj), 0);
    for (int w = 0; w < WORKERS; w++) {
        jobs[w] = (job){.t = t, .slot = (unsigned)w + 1};
        ASSERT_EQ(pthread_create(&th[w], NULL, worker, &jobs[w]), 0);
    }
    for (int w = 0; w < WORKERS; w++)
        pthread_join(th[w], NULL);
    __atomic_store_n(&rj.stop, 1, __ATOMIC_RELEASE);
    for (int r = 0; r < 2; r++)
        pthread_join(rt[r], NULL);
    rlt_topk *m = rlt__top_merged(t);
    ASSERT(m != NULL);
    rlt_topk_entry e[NKEYS];
    ASSERT_EQ(rlt_topk_list(m, e, NKEYS), NKEYS);
    uint64_t total = 0;
    for (int i = NKEYS - 1; i >= 0; i--) {
        /* Key i: (i + 1) x w denials from worker w, for w = 1..4, capped by the rounds. */
        uint64_t want = 0;
        for (int w = 1; w <= WORKERS; w++) {
            int per = (i + 1) * w, max = PER_WORKER / NKEYS;
            want += (uint64_t)(per < max ? per : max);
        }
        total += want;
        char k[16];
        size_t n;
        key_of(i, k, &n);
        int found = 0;
        for (int x = 0; x < NKEYS; x++) {
            if (e[x].klen == n && memcmp(e[x].key, k, n) == 0) {
                ASSERT_EQ(e[x].count, want);
                ASSERT_EQ(e[x].error, 0);
                ASSERT_EQ(e[x].policy, 7);
                found = 1;
            }
        }
        ASSERT(found);
    }
    ASSERT_EQ(rlt_topk_total(m), total);
    ASSERT_EQ(rlt__top_dropped(t), 0);
    rlt_topk_close(m);
    rlt__top_close(t);
}

static void *unbound(void *arg)
{
    rlt__top *t = arg;
    rlt__metrics_bind_thread(0);
    for (int i = 0; i < 5000; i++)
        rlt__top_denied(t, 1, "shared", 6);
    return NULL;
}

TEST(threads_without_a_worker_slot_share_slot_0_safely)
{
    rlt__top *t;
    ASSERT_EQ(rlt__top_open(&t, 4), RLT_OK);
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        ASSERT_EQ(pthread_create(&th[i], NULL, unbound, t), 0);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    rlt_topk *m = rlt__top_merged(t);
    ASSERT(m != NULL);
    rlt_topk_entry e[1];
    ASSERT_EQ(rlt_topk_list(m, e, 1), 1);
    ASSERT_EQ(e[0].count, 15000);
    rlt_topk_close(m);
    rlt__top_close(t);
}

TEST(invalid_keys_are_dropped_and_counted_not_crashed_on)
{
    rlt__top *t;
    ASSERT_EQ(rlt__top_open(&t, 4), RLT_OK);
    static char big[RLT_KEY_MAX + 1];
    rlt__top_denied(t, 0, big, sizeof big);
    rlt__top_denied(t, 0, "", 0);
    rlt__top_denied(t, 0, "ok", 2);
    ASSERT_EQ(rlt__top_dropped(t), 2);
    rlt_topk *m = rlt__top_merged(t);
    ASSERT(m != NULL);
    ASSERT_EQ(rlt_topk_total(m), 1);
    rlt_topk_close(m);
    rlt__top_close(t);
}

TEST(top_keys_0_is_off_and_every_function_takes_null)
{
    rlt__top *t = (rlt__top *)1;
    ASSERT_EQ(rlt__top_open(&t, 0), RLT_OK);
    ASSERT(t == NULL);
    rlt__top_denied(NULL, 0, "k", 1);
    ASSERT(rlt__top_merged(NULL) == NULL);
    ASSERT_EQ(rlt__top_k(NULL), 0);
    ASSERT_EQ(rlt__top_dropped(NULL), 0);
    rlt__top_close(NULL);
    ASSERT_EQ(rlt__top_open(&t, RLT__TOP_KEYS_MAX + 1), RLT_EINVAL);
    ASSERT_EQ(rlt__top_open(&t, RLT__TOP_KEYS_MAX), RLT_OK);
    ASSERT_EQ(rlt__top_k(t), RLT__TOP_KEYS_MAX);
    rlt__top_close(t);
}

TEST(top_query_takes_n_clamped_to_k_and_refuses_anything_else)
{
    char err[128];
    size_t n;
    ASSERT_EQ(rlt__top_query("", 0, 100, &n, err, sizeof err), RLT_OK);
    ASSERT_EQ(n, 100);
    ASSERT_EQ(rlt__top_query("n=7", 3, 100, &n, err, sizeof err), RLT_OK);
    ASSERT_EQ(n, 7);
    ASSERT_EQ(rlt__top_query("n=1000", 6, 100, &n, err, sizeof err), RLT_OK);
    ASSERT_EQ(n, 100);
    ASSERT_EQ(rlt__top_query("n=18446744073709551615", 22, 100, &n, err, sizeof err), RLT_EINVAL);
    ASSERT_EQ(rlt__top_query("n=1844674407370955161", 21, 100, &n, err, sizeof err), RLT_OK);
    ASSERT_EQ(n, 100);
    static const char *bad[] = {"n=", "n=0", "n=-1", "n=+1", "n=1x", "m=1", "n=1&n=2", "n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        ASSERT_EQ(rlt__top_query(bad[i], strlen(bad[i]), 100, &n, err, sizeof err), RLT_EINVAL);
        ASSERT(err[0] != '\0');
    }
}
