/* What a real Envoy makes of the quota state's answers (rlqs_envoy.c), kept apart from the
 * table in rlqs.c: Envoy's RLQS client (rate_limit_quota/global_client_impl.cc) reads
 * durations in whole seconds only, sends time_elapsed truncated to whole seconds (its first
 * report of a bucket always 0), and a bucket's TTL can only be known from a report that shows
 * the interval.  These helpers turn a quota rule into a budget in those terms, move a bucket
 * to the division of its real TTL, and say when a penalty box is due and how many requests a
 * shadowed bucket would have denied.  Called under the quotas lock; no clock read. */
#ifndef RLT_SERVER_ENVOY_RLQS_ENVOY_H
#define RLT_SERVER_ENVOY_RLQS_ENVOY_H

#include "quota/quota.h"
#include "ratelimit/ratelimit.h"

#include <stdbool.h>
#include <stdint.h>

/* The fill interval F sent for a policy of period `period` (> 0): the period rounded up to
 * whole seconds (Envoy divides tokens_per_fill by fill_interval's whole seconds, so 100 ms
 * would be a division by zero). */
rlt_ns rlt__rlqs_fill(rlt_ns period);

/* The division budget of policy p: Q = floor(N x F / P) tokens per F (so sum(r_i) <= R still
 * holds exactly), burst B (the limit when none), all in per-F units (limit Q, period F,
 * fill_interval F), so that Redis mode's exchanged figures and the ledger's share a unit.
 * RLT_OK, or RLT_ERANGE when Q passes RLT__QUOTA_TOKENS_MAX (the config refuses it). */
int rlt__rlqs_budget_of(const rlt_policy *p, rlt__quota_budget *out);

/* A TTL as Envoy will enforce it: rounded down to whole seconds (never longer than the ledger
 * counts it); 0 when under one second (the caller must not send it: Envoy would expire it
 * at once). */
rlt_ns rlt__rlqs_whole_ttl(rlt_ns ttl);

/* Moves a bucket from division bucket (from, fqb) to a new one in `to` with budget *full at
 * `now`, on a report of stream `mover` (its id in `from`): opens the new one, then closes the
 * old (its members leave; its ledger keeps their live assignments until they expire, as their
 * Envoys enforce them).  While they live the new bucket's budget is *full less the old
 * ledger's live sums at the move, the mover's own excepted (its Envoy replaces it with the
 * answer to this report); the old sums only decrease since, so both ledgers together stay
 * within Q and B.  *until gets the time from which the full budget may be restored
 * (now + old_ttl; 0 when nothing else was live).  Returns RLT_OK and *qb; else what
 * rlt__quota_bucket_open returns, and nothing changed. */
int rlt__rlqs_move(rlt__quota *from, uint32_t fqb, uint32_t mover, rlt_ns old_ttl, rlt__quota *to,
                     const rlt__quota_budget *full, rlt_ns now, uint32_t *qb, rlt_ns *until);

/* Whether a policy bucket's penalty box is due: the bucket's total demand (its active
 * members' demands, over their recent reports) reached its budget Q.  An Envoy denying with
 * its share while the fleet is under the budget is not a breach. */
bool rlt__rlqs_box_due(const rlt__quota *dv, uint32_t qb, rlt_ns now);

/* Shadow mode: of `count` requests over `elapsed` ns, those beyond what assignment *a (the
 * member's would-be share from the division, enforced were the rule not shadowed) admits over
 * that time: count - floor(q_i x elapsed / F), at least 0 (deny-all: all of them).  None when
 * *a is not live at `now` or elapsed <= 0 (no rate to compare with). */
uint64_t rlt__rlqs_shadow_denied(const rlt__quota_assignment *a, rlt_ns now, uint64_t count,
                                   rlt_ns elapsed);

#endif
