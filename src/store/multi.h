/* The multi-limit check's internal variant (multi.c) for multi-limit reservations
 * (budget.c): the same decision, and what a reservation needs to settle each limit later. */
#ifndef RLT_STORE_MULTI_H
#define RLT_STORE_MULTI_H

#include "ratelimit/store.h"

/* Out-parameters of rlt__store_decide_multi_ex, each array n entries (the caller's). */
typedef struct rlt__multi_extra {
    rlt_decision *each; /* every limit's own decision (after its charge when allowed) */
    uint64_t *epoch;    /* its shard's resv_epoch, read before the charge */
    rlt_ns at;          /* the effective instant the limits were decided at */
    uint64_t pgen;      /* the store's budget_pgen then */
} rlt__multi_extra;

/* rlt_store_decide_multi, and with x (may be NULL) also x's fields and x->pgen, read under the same
 * locks; with x, a policy that cannot settle (rlt_settle_supported) is refused with RLT_EINVAL
 * before anything is charged.  Returns as rlt_store_decide_multi. */
int rlt__store_decide_multi_ex(rlt_store *s, const rlt_check *checks, size_t n, rlt_ns now,
                               rlt_decision *combined, int *refused, rlt__multi_extra *x);

#endif
