/* `ratelimit quota`'s local enforcement of one bucket's assignment, as Envoy's
 * rate_limit_quota filter does it: a token bucket (max_tokens, tokens_per_fill per
 * fill_interval, refilled continuously and starting full), or a blanket allow-all / deny-all,
 * for assignment_time_to_live after it arrives; before the first assignment the
 * no_assignment_behavior, after it expires the expired_assignment_behavior.  A pure function
 * of `now` (integer ns from any origin): the caller reads the clock; the tests set it.
 * Integers only: tokens are kept in units of 1 / fill_interval_ns of a token. */
#ifndef RLT_CLI_QUOTA_ENFORCE_H
#define RLT_CLI_QUOTA_ENFORCE_H

#include <stdbool.h>
#include <stdint.h>

/* What a bucket holds. */
typedef enum rlt__qe_kind {
    RLT__QE_NONE = 0,     /* no assignment yet (or abandoned): no_assignment behaviour */
    RLT__QE_TOKEN_BUCKET, /* a token bucket */
    RLT__QE_ALLOW_ALL,    /* a blanket allow-all */
    RLT__QE_DENY_ALL      /* a blanket deny-all */
} rlt__qe_kind;

/* One assignment as received (the kinds are those of proto/rlqs_client.h's actions). */
typedef struct rlt__qe_assignment {
    rlt__qe_kind kind;
    uint32_t max_tokens;      /* TOKEN_BUCKET: >= 1 */
    uint32_t tokens_per_fill; /* TOKEN_BUCKET: >= 1 */
    int64_t fill_interval_ns; /* TOKEN_BUCKET: > 0 */
    int64_t ttl_ns;           /* >= 0 */
} rlt__qe_assignment;

/* One bucket of one stream.  All-zero is fresh: no assignment, and behaviours allow-all
 * before the first assignment and deny-all after one expires unless set otherwise. */
typedef struct rlt__qe_bucket {
    bool no_assignment_deny; /* the no_assignment_behavior is deny-all (default allow-all) */
    bool expired_allow;      /* the expired_assignment_behavior is allow-all (default deny) */
    rlt__qe_assignment a;    /* what is held (kind NONE: nothing) */
    int64_t expires_ns;      /* when `a` stops (its arrival + ttl, saturated) */
    unsigned __int128 units; /* TOKEN_BUCKET: tokens x fill_interval_ns */
    int64_t last_ns;         /* TOKEN_BUCKET: when units were last refilled */
} rlt__qe_bucket;

/* Applies an assignment that arrived at `now`.  The same token bucket while the held one is
 * live extends it (its tokens kept: rlqs.proto); any other replaces it, a token bucket
 * starting full (Envoy's TokenBucket).  RLT__QE_NONE abandons the bucket (back to the
 * no-assignment behaviour).  Returns false, changing nothing, for a token bucket with 0
 * max_tokens, tokens_per_fill or fill_interval, or a negative ttl. */
bool rlt__qe_assign(rlt__qe_bucket *b, const rlt__qe_assignment *a, int64_t now);

/* The state of the bucket at `now`, for display: RLT__QE_NONE before any assignment,
 * the held kind while it lives, and after it expires the kind of the expired behaviour
 * (ALLOW_ALL or DENY_ALL) with *expired set. */
rlt__qe_kind rlt__qe_state(const rlt__qe_bucket *b, int64_t now, bool *expired);

/* Decides one request at `now`: true admits it (taking one token from a token bucket).  A
 * clock that steps back refills nothing.  Never fails. */
bool rlt__qe_admit(rlt__qe_bucket *b, int64_t now);

/* Whole tokens the bucket holds at `now` (after a refill; 0 unless a live token bucket). */
int64_t rlt__qe_tokens(const rlt__qe_bucket *b, int64_t now);

#endif
