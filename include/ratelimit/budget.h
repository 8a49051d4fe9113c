/* Usage budgets: one reservation over several limits of a keyed store (up to 16 (key, policy,
 * weighting) limits, all or nothing, one id), settled with the real usage, each limit charged
 * its own cost by its weighting (include/ratelimit/usage.h), in one settle or in partial
 * settles while a response streams.  For LLM traffic: a user's tokens, an organisation's
 * tokens, a model's output tokens and a monthly money budget charged from one usage. */
#ifndef RATELIMIT_BUDGET_H
#define RATELIMIT_BUDGET_H

#include <stdbool.h>

#include "ratelimit/ratelimit.h"
#include "ratelimit/store.h"
#include "ratelimit/usage.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most limits one reservation covers. */
#define RLT_BUDGET_LIMITS 16

/* One limit of a multi-limit reservation. */
typedef struct rlt_limit {
    int policy;      /* policy id (one that can settle: rlt_settle_supported) */
    const void *key; /* key bytes (copied by the reservation) */
    size_t klen;
    rlt_weights weights; /* what a usage costs on this limit */
} rlt_limit;

/* Reserves on n (1..RLT_BUDGET_LIMITS) limits at once the cost of usage `estimate` under each
 * limit's weighting (typically the prompt's tokens and max_tokens as `out`), all or nothing,
 * as rlt_store_decide_multi decides: allowed only when every limit allows, and then charged
 * on every one; denied, nothing is charged or recorded, *reservation is 0 and *refused (may
 * be NULL) the index of the first limit that refused (-1 when allowed).  Allowed, one
 * reservation records every limit and *reservation gets its id (64 unguessable bits, never 0).
 * It waits `timeout` ns (0: RLT_RESERVE_DEFAULT_TIMEOUT) for its final settle; unsettled by
 * then it expires and every limit stays charged as it stands (the estimate, less partial
 * settles within it, plus their excess: an abandoned stream is charged as estimated).
 * *combined as rlt_store_decide_multi's; each (may be NULL: n entries) gets every limit's own
 * decision (allowed: its remaining budget after the charge and its reset instant).  At most
 * max_reservations multi-limit reservations are outstanding (a bound of their own, beside the
 * single ones'); `holder` (0: anonymous) is counted as rlt_store_reserve_for's (at most
 * max_reservations_per_holder in its bucket, RLT_EFULL beyond), and a full table
 * drops the expired ones, then ends every reservation of the holder bucket holding the most
 * (not the caller's nor the anonymous one; charged as estimated), then refuses (RLT_EFULL).  Every
 * name of `estimate` must be weighed by some limit.  Thread-safe.  Returns RLT_OK (allowed or
 * denied); RLT_EINVAL (NULL arguments, n out of range, a limit that cannot settle, a usage name no
 * limit weighs, timeout < 0); RLT_ERANGE (a cost that leaves int64); RLT_EFULL; RLT_ENOENT (no such
 * policy), RLT_EKEYLEN, RLT_ENOMEM. */
int rlt_store_reserve_limits(rlt_store *s, uint64_t holder, const rlt_limit *limits, size_t n,
                             const rlt_usage *estimate, rlt_ns now, rlt_ns timeout,
                             rlt_decision *combined, rlt_decision *each, int *refused,
                             uint64_t *reservation);

/* Settles reservation `reservation`, made on the limits whose (policy, key) are keys[0..n)
 * in the same order (their cost fields are ignored), with usage `usage` at `now`.  Each
 * limit's cost of the usage (its weighting without the constant term, which the reservation
 * charged once) is taken from what the reservation still holds on it; what exceeds it is
 * charged at once, as a debt if the limit is used up.  final: the reservation ends, and what it
 * still holds on each limit is refunded as rlt_settle refunds (never minting); not final (a
 * partial settle, one chunk of a stream): it stays outstanding for the next.  Every name of
 * `usage` must be weighed by some limit of the reservation; an empty usage is valid (a final
 * settle that charges nothing more).  *combined (and each, may be NULL) get every limit's
 * state after it (a cost-0 peek); charged (may be NULL: n entries) gets what this call charged
 * on each limit beyond what the reservation had held (0 when within it).  Thread-safe; two
 * settles of one reservation at once: one runs, the other finds nothing.  Returns RLT_OK;
 * RLT_ENOENT when no such reservation is outstanding for these keys (never made, already
 * settled, expired, another key set: nothing changes); RLT_EINVAL (NULL arguments, a usage
 * name no limit weighs, a negative count: nothing changes); RLT_ERANGE (a cost that leaves
 * int64: nothing changes); another error of the store while charging a limit ends the
 * reservation, every limit not yet charged staying charged as estimated (never twice). */
int rlt_store_settle_limits(rlt_store *s, uint64_t reservation, const rlt_check *keys, size_t n,
                            const rlt_usage *usage, bool final, rlt_ns now, rlt_decision *combined,
                            rlt_decision *each, int64_t *charged);

/* Multi-limit reservations outstanding at `now` (expired ones not counted).  0 for NULL. */
size_t rlt_store_limit_reservations(rlt_store *s, rlt_ns now);

#ifdef __cplusplus
}
#endif
#endif /* RATELIMIT_BUDGET_H */
