/* The reservations' internal entry points for the rest of the store (store.c's lifecycle,
 * policy.c's changes): the public rlt_store_reserve / rlt_store_settle are in
 * include/ratelimit/store.h.  Reservations depend on the table, the lock and the single
 * call's decision, never on these callers. */
#ifndef RLT_STORE_RESERVE_H
#define RLT_STORE_RESERVE_H

#include <stdbool.h>
#include <stddef.h>

#include "store/siphash.h"
#include "store/store_internal.h"

/* Takes one from counter *c if it stays within `cap`.  true: taken.  (The bounds of single
 * and multi-limit reservations, budget.c.) */
static inline bool rlt__take64(uint64_t *c, uint64_t cap)
{
    if (__atomic_fetch_add(c, 1, __ATOMIC_RELAXED) < cap) return true;
    __atomic_fetch_sub(c, 1, __ATOMIC_RELAXED);
    return false;
}

static inline bool rlt__take32(uint32_t *c, uint64_t cap)
{
    if (__atomic_fetch_add(c, 1, __ATOMIC_RELAXED) < cap) return true;
    __atomic_fetch_sub(c, 1, __ATOMIC_RELAXED);
    return false;
}

/* The bucket of holder `h` (0: the anonymous one, RLT__RESV_BUCKETS): a keyed hash, so no
 * client can aim at another's bucket. */
static inline uint32_t rlt__resv_bucket(const rlt_store *s, uint64_t h)
{
    return h == 0 ? RLT__RESV_BUCKETS
                  : (uint32_t)(rlt__siphash13(s->resv_secret, &h, sizeof h) % RLT__RESV_BUCKETS);
}

/* Sets the store-wide bound on outstanding reservations from `max` (0: the default, 65536),
 * the bound per holder (0: none) and draws the secret their ids are made under.  At open,
 * before the store is shared. */
void rlt__resv_init(rlt_store *s, size_t max, size_t per_holder);

/* Frees a shard's reservation table (its lock held, or the shard private). */
void rlt__resv_free(rlt_store *s, rlt__shard *sh);

/* Ends every outstanding reservation of policy `pid` (every shard lock held): its estimate
 * was charged under numbers that changed, so refunding it under the new ones could mint. */
void rlt__resv_drop_policy(rlt_store *s, int pid);

/* Whether two policies have the same numbers (a reservation made under one may be settled
 * under the other). */
bool rlt__policy_same(const rlt_policy *a, const rlt_policy *b);

/* rlt_settle on `key`'s state under policy `id` for a reservation made at effective instant
 * `at` holding `estimate`, at `now`, under the shard's lock, as rlt_store_settle does for one
 * of its own (the latest instant for GCRA; no refund when `epoch` is not the shard's now or
 * a policy changed since: `pgen` is not budget_pgen).  For the multi-limit reservations of
 * budget.c, which keep their own records.  Returns rlt_settle's and the store's codes (RLT_ENOENT:
 * the policy is gone). */
int rlt__resv_apply(rlt_store *s, int id, const void *key, size_t klen, rlt_ns now, rlt_ns at,
                    uint64_t epoch, uint64_t pgen, int64_t estimate, int64_t real_cost,
                    rlt_decision *d);

#endif
