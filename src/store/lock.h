/* The shard lock: a spinlock (a mutex with RLT_STORE_USE_MUTEX) inline for the decision paths,
 * its contended wait out of line (lock.c), and every shard's lock taken in order.  The lock
 * order (sweep mutex, policy mutex, shard locks by increasing index) is in store.c's opening
 * comment. */
#ifndef RLT_STORE_LOCK_H
#define RLT_STORE_LOCK_H

#include "store/store_internal.h"

#ifndef RLT_STORE_USE_MUTEX
/* Waits for sh's lock after a first attempt found it taken, and takes it.  The contended part
 * of the spinlock, out of line: with a call (sched_yield) inside the inlined loop, the
 * compiler saves the caller's live values around the whole loop on every call; out here, only
 * a call that finds the lock taken pays for it. */
void rlt__shard_lock_wait(rlt__shard *sh);
#endif

/* Takes / releases one shard's lock.  Inline for the decision paths (a call there costs a
 * spill of the caller's live values), and the same everywhere else. */
static inline __attribute__((always_inline)) void rlt__shard_lock(rlt__shard *sh)
{
#ifdef RLT_STORE_USE_MUTEX
    pthread_mutex_lock(&sh->lock);
#else
    if (__builtin_expect(__atomic_exchange_n(&sh->lock, 1, __ATOMIC_ACQUIRE), 0))
        rlt__shard_lock_wait(sh);
#endif
}

static inline __attribute__((always_inline)) void rlt__shard_unlock(rlt__shard *sh)
{
#ifdef RLT_STORE_USE_MUTEX
    pthread_mutex_unlock(&sh->lock);
#else
    __atomic_store_n(&sh->lock, 0, __ATOMIC_RELEASE);
#endif
}

/* Takes every shard lock by increasing index / releases them in the reverse order (the
 * caller holds the policy mutex, or owns the store). */
void rlt__lock_all(rlt_store *s);
void rlt__unlock_all(rlt_store *s);

#endif
