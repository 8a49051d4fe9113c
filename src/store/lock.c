/* The shard lock's contended wait, every shard's lock taken in order (lock.h), and the store's
 * fork handlers (store.h): every lock of the store around a fork(). */
#include <sched.h>

#include "store/lock.h"

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#ifndef RLT_STORE_USE_MUTEX
__attribute__((noinline)) void rlt__shard_lock_wait(rlt__shard *sh)
{
    /* Test-and-test-and-set; yield after a while so a preempted holder can run. */
    for (;;) {
        unsigned spins = 0;
        while (__atomic_load_n(&sh->lock, __ATOMIC_RELAXED)) {
            if (++spins < 64) {
                cpu_relax();
            } else {
                sched_yield();
                spins = 0;
            }
        }
        if (!__atomic_exchange_n(&sh->lock, 1, __ATOMIC_ACQUIRE)) return;
    }
}
#endif

void rlt__lock_all(rlt_store *s)
{
    for (uint32_t i = 0; i < s->nshards; i++)
        rlt__shard_lock(&s->shards[i]);
}

void rlt__unlock_all(rlt_store *s)
{
    for (uint32_t i = s->nshards; i-- > 0;)
        rlt__shard_unlock(&s->shards[i]);
}

/* The lock order of store.c's opening comment: sweep mutex, policy mutex, shards. */
void rlt_store_fork_prepare(rlt_store *s)
{
    if (!s) return;
    pthread_mutex_lock(&s->sweep_mu);
    pthread_mutex_lock(&s->pol_mu);
    rlt__lock_all(s);
}

void rlt_store_fork_parent(rlt_store *s)
{
    if (!s) return;
    rlt__unlock_all(s);
    pthread_mutex_unlock(&s->pol_mu);
    pthread_mutex_unlock(&s->sweep_mu);
}

/* In the child the forking thread holds every lock; the mutexes are made anew rather than
 * unlocked, which POSIX leaves undefined for a mutex locked by a thread of another process
 * image (the child's thread has a new id). */
void rlt_store_fork_child(rlt_store *s)
{
    if (!s) return;
    for (uint32_t i = 0; i < s->nshards; i++) {
#ifdef RLT_STORE_USE_MUTEX
        pthread_mutex_init(&s->shards[i].lock, NULL);
#else
        __atomic_store_n(&s->shards[i].lock, 0, __ATOMIC_RELEASE);
#endif
    }
    pthread_mutex_init(&s->pol_mu, NULL);
    pthread_mutex_init(&s->sweep_mu, NULL);
}
