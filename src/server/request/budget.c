/* Budgets of events per client: GCRA states in a bounded, exact table (budget.h says why an
 * entry can be reused once its budget is full again). */
#include "server/request/budget.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

int rlt__budgets_open(rlt__budgets *b, int64_t per_s, int64_t burst, size_t n)
{
    memset(b, 0, sizeof *b);
    if (n == 0) return RLT_EINVAL;
    int st = rlt_policy_init(&b->pol, RLT_GCRA, per_s, RLT_NS_PER_S, burst, 0, 0);
    if (st != RLT_OK) return st;
    assert(rlt_state_size(&b->pol) <= RLT__BUDGET_STATE);
    b->e = calloc(n, sizeof *b->e);
    if (b->e == NULL) return RLT_ENOMEM;
    b->n = n;
    return RLT_OK;
}

void rlt__budgets_close(rlt__budgets *b)
{
    free(b->e);
    memset(b, 0, sizeof *b);
}

rlt__budget *rlt__budgets_get(rlt__budgets *b, uint64_t id, rlt_ns now)
{
    rlt__budget *whole = NULL;
    for (size_t i = 0; i < b->n; i++) {
        rlt__budget *e = &b->e[i];
        bool full = e->full_at <= now;
        if (!full && e->id == id) return e;
        if (full && whole == NULL) whole = e;
    }
    if (whole != NULL) {
        memset(whole, 0, sizeof *whole);
        whole->id = id;
    }
    return whole;
}

bool rlt__budget_fits(const rlt__budgets *b, const rlt__budget *e, rlt_ns now)
{
    if (e == NULL) return false;
    unsigned char st[RLT__BUDGET_STATE];
    memcpy(st, e->st, sizeof st);
    rlt_decision d;
    return rlt_decide(&b->pol, st, now, 1, &d) == RLT_OK && d.allowed;
}

void rlt__budget_charge(const rlt__budgets *b, rlt__budget *e, rlt_ns now)
{
    rlt_decision d;
    int st = rlt_decide(&b->pol, e->st, now, 1, &d);
    assert(st == RLT_OK && d.allowed);
    (void)st;
    /* reset_after <= burst / rate (5 s here): no overflow short of the end of int64 time. */
    e->full_at = now > INT64_MAX - d.reset_after ? INT64_MAX : now + d.reset_after;
}
