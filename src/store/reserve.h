/* The reservations' internal entry points for the rest of the store (store.c's lifecycle,
 * policy.c's changes): the public rlt_store_reserve / rlt_store_settle are in
 * include/ratelimit/store.h.  Reservations depend on the table, the lock and the single
 * call's decision, never on these callers. */
#ifndef RLT_STORE_RESERVE_H
#define RLT_STORE_RESERVE_H

#include <stdbool.h>
#include <stddef.h>

#include "store/store_internal.h"

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
 * a policy changed since: `pgen` is not budget_pgen).  For the multi-limit reservations of budget.c,
 * which keep their own records.  Returns rlt_settle's and the store's codes (RLT_ENOENT: the
 * policy is gone). */
int rlt__resv_apply(rlt_store *s, int id, const void *key, size_t klen, rlt_ns now, rlt_ns at,
                    uint64_t epoch, uint64_t pgen, int64_t estimate, int64_t real_cost,
                    rlt_decision *d);

#endif
