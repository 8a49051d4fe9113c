/* The Redis mode's exchanges of the RLQS quota state (quotas_sync.h): one thread, waking every
 * interval (or when a new bucket awaits its first claim), takes a snapshot of every policy
 * bucket under the quota state's lock, exchanges each with Redis without it, and applies the
 * answers under it again; a bucket retired meanwhile is skipped at the apply. */
#include "server/request/quotas_sync.h"

#include "server/base/clock.h"
#include "server/base/log.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* The least time between two rounds woken by new buckets: a stream of new buckets costs at
 * most 200 rounds a second, and a new bucket waits a few ms for its first claim, not 500. */
#define WAKE_GAP (5 * RLT_NS_PER_MS)

struct rlt__quotas_sync {
    rlt__quotas *q;
    rlt__backend *be;
    uint64_t id;
    pthread_t th;
    pthread_mutex_t mu; /* stop, woken (taken inside the quota state's lock: never the reverse) */
    pthread_cond_t cv;
    bool stop, woken;
    uint64_t ok, errors, failing; /* atomics */
};

static void wake(void *arg)
{
    rlt__quotas_sync *s = arg;
    pthread_mutex_lock(&s->mu);
    s->woken = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* One round: every policy bucket exchanged, the answers applied. */
static void round_trip(rlt__quotas_sync *s)
{
    rlt__quotas_claim *c;
    size_t n;
    if (rlt__quotas_claims(s->q, rlt__now(), 2 * RLT__QUOTAS_SYNC_INTERVAL, &c, &n) != RLT_OK)
        return; /* out of memory: the buckets keep their parts until the next round */
    uint64_t ok = 0;
    for (size_t i = 0; i < n; i++) {
        s->be->ops->quota_exchange(s->be, s->id, &c[i].x, 1);
        ok += c[i].x.status == RLT_OK;
    }
    uint64_t failing = rlt__quotas_claims_apply(s->q, c, n);
    int first_error = RLT_OK;
    for (size_t i = 0; i < n && first_error == RLT_OK; i++)
        first_error = c[i].x.status;
    rlt__quotas_claims_free(c, n);
    __atomic_fetch_add(&s->ok, ok, __ATOMIC_RELAXED);
    __atomic_fetch_add(&s->errors, n - ok, __ATOMIC_RELAXED);
    uint64_t before = __atomic_exchange_n(&s->failing, failing, __ATOMIC_RELAXED);
    if (before == 0 && failing > 0)
        rlt__log(RLT__LOG_WARN,
                 "rlqs: Redis unreachable (%s): %llu quota buckets answer in their fail mode",
                 rlt_strerror(first_error), (unsigned long long)failing);
    else if (before > 0 && failing == 0)
        rlt__log(RLT__LOG_NOTICE, "rlqs: Redis answers again: every quota bucket is claimed");
}

static struct timespec deadline_of(rlt_ns mono)
{
    return (struct timespec){.tv_sec = mono / RLT_NS_PER_S, .tv_nsec = mono % RLT_NS_PER_S};
}

static rlt_ns mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (rlt_ns)ts.tv_sec * RLT_NS_PER_S + ts.tv_nsec;
}

static void *run(void *arg)
{
    rlt__quotas_sync *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        s->woken = false;
        pthread_mutex_unlock(&s->mu);
        rlt_ns began = mono_now();
        round_trip(s);
        pthread_mutex_lock(&s->mu);
        while (!s->stop) {
            rlt_ns now = mono_now();
            if (now >= began + RLT__QUOTAS_SYNC_INTERVAL || (s->woken && now >= began + WAKE_GAP))
                break;
            struct timespec dl =
                deadline_of(s->woken ? began + WAKE_GAP : began + RLT__QUOTAS_SYNC_INTERVAL);
            pthread_cond_timedwait(&s->cv, &s->mu, &dl);
        }
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* 64 random bits naming this daemon's fields in Redis (two daemons drawing the same would
 * share one claim: 2^-64). */
static uint64_t random_id(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v || v == 0)
        v = ((uint64_t)mono_now() ^ (uint64_t)getpid() << 40) * UINT64_C(0x9e3779b97f4a7c15);
    return v;
}

int rlt__quotas_sync_start(rlt__quotas_sync **out, rlt__quotas *q, rlt__backend *be)
{
    rlt__quotas_sync *s = calloc(1, sizeof *s);
    if (s == NULL) return RLT_ENOMEM;
    s->q = q;
    s->be = be;
    s->id = random_id();
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    rlt__quotas_redis_mode(q, wake, s);
    if (pthread_create(&s->th, NULL, run, s) != 0) {
        rlt__quotas_redis_mode(q, NULL, NULL); /* never reached by a report: still before any */
        pthread_cond_destroy(&s->cv);
        pthread_mutex_destroy(&s->mu);
        free(s);
        return RLT_ENOMEM;
    }
    *out = s;
    return RLT_OK;
}

void rlt__quotas_sync_stop(rlt__quotas_sync *s)
{
    if (s == NULL) return;
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->th, NULL);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

void rlt__quotas_sync_stats_get(rlt__quotas_sync *s, rlt__quotas_sync_stats *out)
{
    out->ok = __atomic_load_n(&s->ok, __ATOMIC_RELAXED);
    out->errors = __atomic_load_n(&s->errors, __ATOMIC_RELAXED);
    out->failing = __atomic_load_n(&s->failing, __ATOMIC_RELAXED);
    out->server = s->id;
}
