/* Top offenders: one rlt_topk per metric slot, written on denials only, merged when read (the
 * three renderings, INFO, /v1/top's JSON and Prometheus, are request/report.c's).
 *
 * Each slot has its own lock: its worker is the only thread that takes it on the decision
 * path (slot 0 is shared by the threads that have no worker slot), and a reader takes it only
 * for the O(K) copy of that one sketch, so a read never holds up more than one worker at a
 * time, for microseconds.  The merge (O(slots^2 x K) lookups) runs on the copies, outside
 * every lock.  All sketches share one secret so that they merge. */
#include "server/stats/top.h"

#include "server/stats/metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

typedef struct top_slot {
    pthread_mutex_t lock;
    rlt_topk *sk; /* NULL until the slot's first denial; written under lock, release */
} __attribute__((aligned(64))) top_slot;

struct rlt__top {
    size_t k;
    rlt_topk_options opt; /* k and the shared secret */
    uint64_t dropped;     /* atomic */
    top_slot slots[RLT__METRIC_SLOTS];
};

int rlt__top_open(rlt__top **out, size_t k)
{
    *out = NULL;
    if (k == 0) return RLT_OK;
    if (k > RLT__TOP_KEYS_MAX) return RLT_EINVAL;
    rlt__top *t = aligned_alloc(64, sizeof *t);
    if (t == NULL) return RLT_ENOMEM;
    memset(t, 0, sizeof *t);
    t->k = k;
    t->opt.k = k;
    t->opt.has_secret = true;
    size_t got = 0;
    while (got < sizeof t->opt.secret) {
        ssize_t r = getrandom(t->opt.secret + got, sizeof t->opt.secret - got, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            free(t);
            return RLT_EIO;
        }
        got += (size_t)r;
    }
    for (size_t i = 0; i < RLT__METRIC_SLOTS; i++)
        pthread_mutex_init(&t->slots[i].lock, NULL);
    *out = t;
    return RLT_OK;
}

void rlt__top_close(rlt__top *t)
{
    if (t == NULL) return;
    for (size_t i = 0; i < RLT__METRIC_SLOTS; i++) {
        rlt_topk_close(t->slots[i].sk);
        pthread_mutex_destroy(&t->slots[i].lock);
    }
    free(t);
}

size_t rlt__top_k(const rlt__top *t)
{
    return t ? t->k : 0;
}

uint64_t rlt__top_dropped(const rlt__top *t)
{
    return t ? __atomic_load_n(&t->dropped, __ATOMIC_RELAXED) : 0;
}

void rlt__top_denied(rlt__top *t, int policy, const void *key, size_t klen)
{
    if (t == NULL) return;
    top_slot *sl = &t->slots[rlt__tl_slot < RLT__METRIC_SLOTS ? rlt__tl_slot : 0];
    int st = RLT_ENOMEM;
    pthread_mutex_lock(&sl->lock);
    if (sl->sk == NULL) {
        rlt_topk *sk = NULL;
        if (rlt_topk_open(&sk, &t->opt) == RLT_OK) __atomic_store_n(&sl->sk, sk, __ATOMIC_RELEASE);
    }
    if (sl->sk != NULL) st = rlt_topk_add(sl->sk, policy, key, klen, 1);
    pthread_mutex_unlock(&sl->lock);
    if (st != RLT_OK) __atomic_fetch_add(&t->dropped, 1, __ATOMIC_RELAXED);
}

rlt_topk *rlt__top_merged(rlt__top *t)
{
    if (t == NULL) return NULL;
    rlt_topk *copies[RLT__METRIC_SLOTS], *merged = NULL;
    size_t n = 0;
    bool ok = rlt_topk_open(&merged, &t->opt) == RLT_OK;
    for (size_t i = 0; i < RLT__METRIC_SLOTS && ok; i++) {
        top_slot *sl = &t->slots[i];
        if (__atomic_load_n(&sl->sk, __ATOMIC_ACQUIRE) == NULL) continue;
        if (rlt_topk_open(&copies[n], &t->opt) != RLT_OK) {
            ok = false;
            break;
        }
        pthread_mutex_lock(&sl->lock);
        int st = rlt_topk_copy(copies[n], sl->sk);
        pthread_mutex_unlock(&sl->lock);
        n++;
        ok = st == RLT_OK;
    }
    if (ok) ok = rlt_topk_merge(merged, (const rlt_topk *const *)copies, n) == RLT_OK;
    for (size_t i = 0; i < n; i++)
        rlt_topk_close(copies[i]);
    if (!ok) {
        rlt_topk_close(merged);
        return NULL;
    }
    return merged;
}

int rlt__top_query(const char *q, size_t len, size_t k, size_t *n, char *err, size_t errlen)
{
    *n = k;
    if (len == 0) return RLT_OK;
    if (len < 3 || memcmp(q, "n=", 2) != 0) {
        snprintf(err, errlen, "the only parameter is n=<entries>");
        return RLT_EINVAL;
    }
    uint64_t v = 0;
    for (size_t i = 2; i < len; i++) {
        if (q[i] < '0' || q[i] > '9' || v > UINT64_MAX / 10 - 1) {
            snprintf(err, errlen, "n must be a positive integer");
            return RLT_EINVAL;
        }
        v = v * 10 + (uint64_t)(q[i] - '0');
    }
    if (v == 0) {
        snprintf(err, errlen, "n must be a positive integer");
        return RLT_EINVAL;
    }
    if (v < k) *n = (size_t)v;
    return RLT_OK;
}
