/* The per-algorithm dispatch: one table of operations, indexed by rlt_algo, that the public
 * functions (decide.c, settle.c), the penalty box (block.c) and the policy (policy.c) reach
 * every algorithm through.  Below all of them: it knows the algorithm files, none of them
 * knows it.  Not installed. */
#ifndef RLT_CORE_ALGO_H
#define RLT_CORE_ALGO_H

#include "internal.h"

/* One algorithm's operations (the algorithm files define them; internal.h has the
 * contracts).  settle is NULL where rlt_settle does not apply. */
typedef struct rlt__algo_ops {
    size_t state_fixed; /* state bytes: state_fixed + state_per_slot x limit */
    size_t state_per_slot;
    int (*decide)(const rlt_policy *p, void *st, rlt_ns now, int64_t cost, rlt_decision *d,
                  int commit);
    bool (*fresh)(const rlt_policy *p, const void *st, rlt_ns now);
    int (*shift)(const rlt_policy *p, void *st, rlt_ns delta);
    int (*settle)(const rlt_policy *p, void *st, rlt_ns now, rlt_ns reserved_at, int64_t estimate,
                  int64_t real);
} rlt__algo_ops;

/* Indexed by RLT_FIXED_WINDOW..RLT_CONCURRENCY; the RLT_ALGO_NONE entry is all-NULL. */
extern const rlt__algo_ops rlt__algos[RLT_CONCURRENCY + 1];

/* Whether p->algo names an algorithm (an index of rlt__algos with operations). */
static inline bool rlt__algo_known(const rlt_policy *p)
{
    return p->algo >= RLT_FIXED_WINDOW && p->algo <= RLT_CONCURRENCY;
}

/* Bytes of the algorithm's own state (the penalty box's follow it: block.c); 0 when p is NULL
 * or not initialised. */
size_t rlt__algo_state_size(const rlt_policy *p);

/* The algorithm alone, for a valid policy (rlt_decide's checks passed); `commit` false means:
 * compute the decision only (peek, rlt_when).  A denial whose wait saturated to 0 at the end
 * of int64 time can never be allowed: it says -1, since retry_after 0 means "allowed".
 * Inline: this is every decision's path, about 130 instructions for GCRA, and a call more
 * would be a few per cent of it. */
static inline int rlt__algo_decide(const rlt_policy *p, void *st, rlt_ns now, int64_t cost,
                                   rlt_decision *d, int commit)
{
    int rc = rlt__algos[p->algo].decide(p, st, now, cost, d, commit);
    if (rc == RLT_OK && !d->allowed && d->retry_after == 0) d->retry_after = -1;
    return rc;
}

#endif
