/* Budgets of events per client (budget.c): one GCRA state per client id in a bounded table, so
 * that a rate of something costly (inline.c: replacing an inline policy) is shared out per
 * client rather than taken first come, first served.
 *
 * The table is exact, without hashing: a client keeps its own entry, and a new client takes an
 * entry whose budget is full again (its state is fresh: forgetting it loses nothing, as an idle
 * key's does).  A table of n entries is never short of one while at most n charges happen
 * within one refill of a whole burst (burst / rate); the caller bounds the charges (inline.c
 * charges a global budget too) and sizes the table from that.
 *
 * Thread-safety: none; the caller holds its lock. */
#ifndef RLT_SERVER_REQUEST_BUDGET_H
#define RLT_SERVER_REQUEST_BUDGET_H

#include "ratelimit/ratelimit.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RLT__BUDGET_STATE 16 /* bytes of GCRA state (rlt_state_size, asserted at open) */

typedef struct rlt__budget {
    uint64_t id;    /* the client; meaningful only while full_at > now */
    rlt_ns full_at; /* when its budget is whole again (0: fresh) */
    unsigned char st[RLT__BUDGET_STATE];
} rlt__budget;

typedef struct rlt__budgets {
    rlt_policy pol; /* gcra:per_s/1s,burst=burst */
    size_t n;
    rlt__budget *e;
} rlt__budgets;

/* Opens a table of n (>= 1) budgets of `per_s` events per second with bursts of `burst`
 * (>= 1), every one fresh.  Returns RLT_OK, RLT_EINVAL for numbers rlt_policy_init refuses,
 * RLT_ENOMEM. */
int rlt__budgets_open(rlt__budgets *b, int64_t per_s, int64_t burst, size_t n);
/* Frees the table; a zeroed or closed table is a no-op. */
void rlt__budgets_close(rlt__budgets *b);

/* The budget of client `id` at `now`: its entry, else an entry whose budget is full at `now`,
 * given to `id` (fresh).  NULL when every entry belongs to a client still refilling (the
 * caller's bound on charges was passed): treat it as an exhausted budget. */
rlt__budget *rlt__budgets_get(rlt__budgets *b, uint64_t id, rlt_ns now);
/* Whether one more event fits budget e at `now`; nothing is charged.  NULL: false. */
bool rlt__budget_fits(const rlt__budgets *b, const rlt__budget *e, rlt_ns now);
/* Charges one event to e at `now` (call only after rlt__budget_fits said yes at `now`). */
void rlt__budget_charge(const rlt__budgets *b, rlt__budget *e, rlt_ns now);

#endif
