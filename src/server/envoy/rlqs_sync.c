/* The Redis mode's exchanges of the RLQS quota state (rlqs_sync.h): one thread, waking every
 * interval (or when a new bucket awaits its first claim), walks the policy buckets a chunk at
 * a time: a snapshot of the chunk under the quota state's lock, its exchanges with Redis
 * without it, its answers applied under it again (a bucket retired meanwhile is skipped). */
#include "server/envoy/rlqs_sync.h"

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
/* The longest an answer waits to be applied: a claim is divided for 900 ms after its call. */
#define APPLY_GAP (20 * RLT_NS_PER_MS)

struct rlt__rlqs_sync {
    rlt__rlqs *q;
    rlt__backend *be;
    uint64_t id;
    pthread_t th;
    pthread_mutex_t mu; /* stop, woken (taken inside the quota state's lock: never the reverse) */
    pthread_cond_t cv;
    bool stop, woken;
    rlt__rlqs_chunk ch; /* the round's chunk, its buffers reused (the thread's alone) */
    /* The gap in this daemon's view of Redis (the thread's alone): failed, the latest exchange
     * failed; back, the time before the first one answered after a failure (0: none yet). */
    bool failed;
    rlt_ns back;
    uint64_t ok, errors, failing; /* atomics */
};

static void wake(void *arg)
{
    rlt__rlqs_sync *s = arg;
    pthread_mutex_lock(&s->mu);
    s->woken = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static bool stopping(rlt__rlqs_sync *s)
{
    pthread_mutex_lock(&s->mu);
    bool stop = s->stop;
    pthread_mutex_unlock(&s->mu);
    return stop;
}

/* One round from `now`: every policy bucket exchanged and its answer applied, a chunk at a
 * time, each chunk snapshotted just before its exchanges.  Each answer is dated by a clock read
 * just before its call and applied at most APPLY_GAP after it returned (a slow Redis, 40 ms a
 * call, would otherwise leave a whole chunk's answers unapplied for 2.5 s, past their
 * deadlines); a stop ends the round between two chunks. */
static void round_trip(rlt__rlqs_sync *s, rlt_ns now)
{
    rlt__rlqs_chunk *ch = &s->ch;
    uint64_t ok = 0, n = 0, failing = 0;
    int first_error = RLT_OK;
    rlt__rlqs_chunk_begin(ch);
    for (;;) {
        /* out of memory: the buckets not reached keep their parts until their deadlines */
        if (rlt__rlqs_claims(s->q, now, 2 * RLT__RLQS_SYNC_INTERVAL, ch) != RLT_OK ||
            ch->n == 0)
            break;
        size_t applied = 0;
        rlt_ns last = now;
        for (size_t i = 0; i < ch->n; i++) {
            ch->c[i].began = now;
            /* Redis may have lost the fleet's claims while this daemon could not see it (a
             * restart is seen as one failed call, or none): for a claim's life after the
             * gap, claims that may have been lost are still being divided */
            if (s->failed || (s->back > 0 && now - s->back < ch->c[i].x.ttl))
                ch->c[i].x.flags |= RLT__QUOTA_X_GAP;
            s->be->ops->quota_exchange(s->be, s->id, &ch->c[i].x, 1);
            if (ch->c[i].x.status != RLT_OK) {
                s->failed = true;
            } else if (s->failed) {
                s->failed = false;
                s->back = ch->c[i].began;
            }
            ok += ch->c[i].x.status == RLT_OK;
            if (first_error == RLT_OK) first_error = ch->c[i].x.status;
            now = rlt__now();
            if (now - last >= APPLY_GAP || i + 1 == ch->n) {
                failing += rlt__rlqs_claims_apply(s->q, ch->c + applied, i + 1 - applied, now);
                applied = i + 1;
                last = now;
            }
        }
        n += ch->n;
        if (stopping(s)) break;
    }
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

static void *run(void *arg)
{
    rlt__rlqs_sync *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        s->woken = false;
        pthread_mutex_unlock(&s->mu);
        rlt_ns began = rlt__now_mono();
        round_trip(s, rlt__now());
        pthread_mutex_lock(&s->mu);
        while (!s->stop) {
            rlt_ns now = rlt__now_mono();
            if (now >= began + RLT__RLQS_SYNC_INTERVAL || (s->woken && now >= began + WAKE_GAP))
                break;
            struct timespec dl =
                deadline_of(s->woken ? began + WAKE_GAP : began + RLT__RLQS_SYNC_INTERVAL);
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
        v = ((uint64_t)rlt__now_mono() ^ (uint64_t)getpid() << 40) * UINT64_C(0x9e3779b97f4a7c15);
    return v;
}

int rlt__rlqs_sync_start(rlt__rlqs_sync **out, rlt__rlqs *q, rlt__backend *be)
{
    rlt__rlqs_sync *s = calloc(1, sizeof *s);
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
    rlt__rlqs_redis_mode(q, wake, s);
    if (pthread_create(&s->th, NULL, run, s) != 0) {
        rlt__rlqs_redis_mode(q, NULL, NULL); /* never reached by a report: still before any */
        pthread_cond_destroy(&s->cv);
        pthread_mutex_destroy(&s->mu);
        free(s);
        return RLT_ENOMEM;
    }
    *out = s;
    return RLT_OK;
}

void rlt__rlqs_sync_stop(rlt__rlqs_sync *s)
{
    if (s == NULL) return;
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->th, NULL);
    rlt__rlqs_redis_mode(s->q, NULL, NULL); /* q->wake must not point at the freed s */
    rlt__rlqs_chunk_free(&s->ch);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

void rlt__rlqs_sync_stats_get(rlt__rlqs_sync *s, rlt__rlqs_sync_stats *out)
{
    out->ok = __atomic_load_n(&s->ok, __ATOMIC_RELAXED);
    out->errors = __atomic_load_n(&s->errors, __ATOMIC_RELAXED);
    out->failing = __atomic_load_n(&s->failing, __ATOMIC_RELAXED);
    out->server = s->id;
}
