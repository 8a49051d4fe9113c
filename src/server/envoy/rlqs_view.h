/* The RLQS quota state seen from the outside (rlqs_view.c): one bounded snapshot of its
 * buckets, copied out under the state's lock, that /v1/stats, /metrics and the Live page all
 * render (rlqs_report.c), so that the three agree.  A snapshot holds the
 * RLT__RLQS_VIEW_TOP buckets of the largest demand one by one and the rest summed in one
 * row, whatever the number of buckets (up to RLT__RLQS_MAX_BUCKETS, 65,536).
 * Cost: O(buckets + memberships) under the lock, the division's ledgers counted exactly at
 * `now` (rlt__quota_bucket_totals); nothing is allocated. */
#ifndef RLT_SERVER_ENVOY_RLQS_VIEW_H
#define RLT_SERVER_ENVOY_RLQS_VIEW_H

#include "ratelimit/ratelimit.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Buckets shown one by one; the others are summed in `other`. */
#define RLT__RLQS_VIEW_TOP 20
/* Bytes of a bucket's domain and BucketId text kept (longer ones are cut, `cut` set). */
#define RLT__RLQS_VIEW_TEXT 192

/* What a policy bucket's budget comes from in Redis mode (rlqs_redis.h); NONE otherwise. */
typedef enum rlt__rlqs_view_claim {
    RLT__QV_CLAIM_NONE = 0,  /* one server's mode, or a blanket rule */
    RLT__QV_CLAIM_UNCLAIMED, /* awaiting its first exchange: divides nothing */
    RLT__QV_CLAIM_CLAIMED,   /* divides its claimed part */
    RLT__QV_CLAIM_FAILING,   /* in its fail mode */
} rlt__rlqs_view_claim;

/* One bucket (or, as `other`, the sum of the buckets past the top).  Tokens are per fill
 * interval for rates (tokens_per_fill) and whole tokens for bursts (max_tokens); a blanket
 * rule's bucket has no budget (every token field 0). */
typedef struct rlt__rlqs_view_row {
    char domain[RLT__RLQS_VIEW_TEXT]; /* the tenant's key prefix then the domain, NUL-ended */
    char bucket[RLT__RLQS_VIEW_TEXT]; /* the BucketId as "k=v,k=v" (its order), NUL-ended; the
                                           bytes as Envoy sent them */
    bool cut;                           /* domain or bucket was longer than kept */
    uint64_t id; /* its order of creation (ties in the ranking go to the oldest) */
    int rule;    /* the rule's index in its domain's quota_buckets (0-based) */
    char policy[RLT__RLQS_VIEW_TEXT]; /* the rule's policy text ("" for a blanket rule) */
    int kind;                           /* RLT__QUOTA_* (config.h) */
    bool shadow;                        /* the rule's shadow_mode */
    rlt_ns ttl;                         /* its assignments' TTL */
    rlt_ns fill_interval;               /* F of its token buckets; 0 for a blanket rule */
    uint64_t members;                   /* streams (Envoys) holding it now */
    uint64_t departed;  /* members whose stream ended, their assignments not yet expired */
    int64_t demand;     /* the members' summed demand, tokens per F (0 while unknown) */
    uint64_t unknown;   /* members whose demand is not known yet (no rate reported) */
    int64_t assigned_q; /* live assignments handed out: summed tokens_per_fill ... */
    int64_t assigned_b; /* ... and summed max_tokens */
    int64_t budget_q;   /* the budget divided now: Q (tokens per F) ... */
    int64_t budget_b;   /* ... and B */
    int64_t left_q;     /* budget_q - assigned_q, at least 0 */
    int64_t left_b;     /* budget_b - assigned_b, at least 0 */
    rlt__rlqs_view_claim claim; /* Redis mode */
    int64_t claim_q, claim_b;     /* the claim of its last successful exchange (0: none) */
} rlt__rlqs_view_row;

typedef struct rlt__rlqs_view {
    rlt_ns at;      /* the `now` it was taken at */
    bool redis;     /* Redis mode */
    size_t buckets; /* every bucket held (== nrows + nother) */
    size_t nrows;   /* rows[0..nrows): demand descending, then oldest first */
    rlt__rlqs_view_row rows[RLT__RLQS_VIEW_TOP];
    size_t nother; /* buckets summed in `other` (its numeric fields; text empty) */
    rlt__rlqs_view_row other;
} rlt__rlqs_view;

struct rlt__rlqs;

/* Fills *v with the state of q's buckets at `now` (locks q; q NULL: an empty view).  The
 * buckets of the largest demand (then the most members, then the oldest) are rows[], the rest
 * summed in v->other (claims, members and tokens added; kind, rule, ttl and F of no one).
 * Thread-safe against every other quotas call. */
void rlt__rlqs_view_get(struct rlt__rlqs *q, rlt_ns now, rlt__rlqs_view *v);

/* The words the outputs use: "policy", "allow_all", "deny_all"; "", "unclaimed",
 * "claimed", "failing". */
const char *rlt__rlqs_view_kind(int kind);
const char *rlt__rlqs_view_claim_name(rlt__rlqs_view_claim c);

#endif
