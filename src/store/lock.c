/* The shard lock's contended wait, and every shard's lock taken in order (lock.h). */
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
