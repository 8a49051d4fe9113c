/* The division alone: max-min fair water-filling in whole tokens, a member's demand from its
 * recent reports and its want.  Pure functions of their arguments (no state, no clock) that
 * the quota state (quota.c) and the tests share; quota.h has the model they serve. */
#ifndef RLT_QUOTA_DIVIDE_H
#define RLT_QUOTA_DIVIDE_H

#include "ratelimit/ratelimit.h"

#include <stddef.h>
#include <stdint.h>

/* One member's entry for rlt__quota_fill. */
typedef struct rlt__quota_share {
    int64_t want; /* in: >= 1 */
    int64_t got;  /* out */
    uint32_t idx; /* carried: the caller's index (the array is reordered) */
} rlt__quota_share;

/* Max-min fair water-filling of `cap` whole tokens over s[0..n): when cap >= n every member
 * gets at least 1, members wanting no more than the level get their want, the others share
 * the rest equally (those sorted first by want, then idx, get the remainder's extra token).
 * When cap < n, the first `cap` members in idx order get 1 and the others 0.
 * sum(got) <= cap and got <= want always.  Sorts s (by want, then idx).  O(n log n). */
void rlt__quota_fill(rlt__quota_share *s, size_t n, int64_t cap);

/* The demand of counts[0..k) requests over elapsed[0..k) ns, in tokens per `fill` ns,
 * rounded up and capped at `cap`: ceil(sum(counts) x fill / sum(elapsed)); -1 when the
 * elapsed sum is 0 (no rate known).  Counts saturate; no overflow for any input. */
int64_t rlt__quota_demand(const uint64_t *counts, const rlt_ns *elapsed, size_t k, rlt_ns fill,
                          int64_t cap);

/* want = demand + max(1, demand x headroom_permille / 1000), at least 1, capped at `cap`;
 * `cap` when the demand is unknown (-1): a new member is treated as heavy. */
int64_t rlt__quota_want(int64_t demand, uint32_t headroom_permille, int64_t cap);

#endif
