/* The BucketIds of an RLQS stream that match no quota bucket rule (rlqs_unmatched.c): they
 * are answered with their domain's quota_default and take no place in the quota state's table
 * (no bucket, no membership, nothing shared between streams), so that a client reporting
 * thousands of them costs the table nothing.  The stream keeps only what it last sent for each
 * (a small open-addressing set of hashes, 40 bytes an entry, at most
 * RLT__RLQS_MAX_UNMATCHED per stream), so as to resend only when the answer changes or a
 * third of its TTL has passed; past that many, the others are answered at every report.
 * Under the quotas lock; `now` is the caller's. */
#ifndef RLT_SERVER_ENVOY_RLQS_UNMATCHED_H
#define RLT_SERVER_ENVOY_RLQS_UNMATCHED_H

#include "ratelimit/ratelimit.h"
#include "server/config/config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The unmatched BucketIds a stream remembers what it sent for. */
#define RLT__RLQS_MAX_UNMATCHED 1024

typedef struct rlt__rlqs_sent rlt__rlqs_sent;

/* Zero-initialised: empty.  Owned by one stream. */
typedef struct rlt__rlqs_unmatched {
    rlt__rlqs_sent *e; /* cap slots, hash 0 free */
    size_t cap, n;
} rlt__rlqs_unmatched;

/* A usage of the unmatched BucketId whose hash is `hash`, in domain d, with time_elapsed
 * `elapsed` (<= 0: none), at `now`: whether to send the domain's quota_default, *kind
 * (RLT__QUOTA_ALLOW_ALL or _DENY_ALL) for *ttl (rlqs_rule.h's default TTL, at least `least`:
 * the first elapsed seen makes it 3 x that interval, as for a rule's bucket).  True when it was
 * not sent to this stream yet, changed, or a third of its TTL has passed; false: nothing to
 * send.  Memory short or the set full: true at every report. */
bool rlt__rlqs_unmatched_answer(rlt__rlqs_unmatched *s, const rlt__domain *d, uint64_t hash,
                                  rlt_ns elapsed, rlt_ns least, rlt_ns now, int *kind, rlt_ns *ttl);

/* Forgets `hash` (the BucketId now matches a rule: the stream is a member of its bucket). */
void rlt__rlqs_unmatched_forget(rlt__rlqs_unmatched *s, uint64_t hash);

/* Frees the set (the stream's end); it is empty after. */
void rlt__rlqs_unmatched_free(rlt__rlqs_unmatched *s);

#endif
