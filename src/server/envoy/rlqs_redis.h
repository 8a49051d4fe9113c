/* The Redis mode of the daemon's RLQS quota state (rlqs_redis.c): what rlqs_sync.c calls
 * to exchange the policy buckets' claims with the fleet, and the hooks rlqs.c calls under
 * its lock.  Thread-safety: the rlt__rlqs_* calls below lock the state themselves, the hooks
 * run under the lock; a chunk is used by one thread. */
#ifndef RLT_SERVER_ENVOY_RLQS_REDIS_H
#define RLT_SERVER_ENVOY_RLQS_REDIS_H

#include "server/backend/backend.h"
#include "server/envoy/rlqs_int.h"

#include <stddef.h>
#include <stdint.h>

/* ---- Redis mode (rlqs_sync.c runs it) -------------------------------------------------------
 * Each policy bucket's budget is this server's claimed part of the global one, given by its
 * latest exchange with the fleet, minus what retired buckets of the same key (a reload, an
 * abandon) still hold in live assignments.  A claim is divided until its deadline: the time
 * taken before its exchange + the claim's TTL - the hold - the assignment TTL - 100 ms, so that
 * every assignment made from it expires before the claim does in Redis.  The hold is fail:
 * local's, two assignment TTLs (0 for the other modes): the claim's TTL asked of Redis is the
 * assignment TTL + `extra` + the hold.  A bucket whose exchange failed, whose answer the
 * division refused, or whose deadline passed without a new answer takes its rule's fail mode
 * (`fail:`, default the redis section's): open answers allow-all, closed deny-all (both divide
 * a zero budget meanwhile, so the ledger drains), local divides its last claim (less what
 * retired buckets carried in it) until the claim's expiry less one assignment TTL and 100 ms,
 * then nothing: never more than Redis still reserves for this server.  An exchange is flagged
 * RLT__QUOTA_X_EXPECT while the bucket's last claim should still be live in Redis.  A budget with
 * one part zero admits nothing and is divided as zero. */

/* One exchange of a snapshot chunk. */
typedef struct rlt__rlqs_claim {
    uint64_t id, hash; /* the bucket, found again by both (it may be gone by then); id 0: a
                          key only retired buckets hold, exchanged to keep its claim */
    int64_t carried_q, carried_b; /* held by retired buckets of the key (in x.held_*) */
    rlt_ns began;                 /* the caller's clock read just before the exchange */
    rlt__quota_exchange x;
} rlt__rlqs_claim;

/* The buckets exchanged per chunk: a round's snapshot, exchange and apply go a chunk at a
 * time, so that no claim waits for a whole round (65,536 buckets) before its answer is applied. */
#define RLT__RLQS_CHUNK 64

/* A round's cursor and its reused buffers (charged to the connections' memory share).
 * Zero-initialised; one thread uses it. */
typedef struct rlt__rlqs_chunk {
    rlt__rlqs_claim *c; /* c[0..n): the chunk's exchanges */
    size_t n, cap;
    char *keys; /* the exchanges' keys (x.key points here) */
    size_t kused, kcap;
    size_t slot; /* the walk: the next table slot, then the carried amounts' */
    int phase;   /* 0 the table, 1 the carried amounts, 2 done */
} rlt__rlqs_chunk;

/* Redis mode from now on (call before the first report): a new policy bucket divides a zero
 * budget (its members are answered deny-all) until its first exchange, and wake(arg) is
 * called, under the lock, when one appears.  wake NULL: back to one server's mode (and the
 * carried amounts are freed). */
void rlt__rlqs_redis_mode(rlt__rlqs *q, void (*wake)(void *), void *arg);

/* Starts a new round's walk. */
void rlt__rlqs_chunk_begin(rlt__rlqs_chunk *ch);

/* The next chunk of exchanges at `now` (locks, for one chunk's walk): ch->n of them, 0 when
 * the round is done.  Each has demand (an unknown one counts as Q; an active member with no
 * rate yet, 1), held (max(the ledger's live sums, the part divided now) + the carried
 * amounts), Q, B, the claim's TTL (the bucket's assignment TTL + `extra` + the hold) and the
 * EXPECT flag.  Returns RLT_OK, or RLT_ENOMEM (nothing could be taken: the walk stays where
 * it is). */
int rlt__rlqs_claims(rlt__rlqs *q, rlt_ns now, rlt_ns extra, rlt__rlqs_chunk *ch);

/* Applies exchanges c[0..n) of a chunk (locks): a bucket whose x.status is RLT_OK divides
 * x.budget - carried until c->began + x.ttl - the hold - its TTL - 100 ms, the others take their
 * fail mode at `now`; buckets retired meanwhile are skipped.  Returns the number of those buckets
 * in a fail mode after it. */
size_t rlt__rlqs_claims_apply(rlt__rlqs *q, const rlt__rlqs_claim *c, size_t n, rlt_ns now);

/* Frees the chunk's buffers (it stays usable, zeroed). */
void rlt__rlqs_chunk_free(rlt__rlqs_chunk *ch);

/* Redis mode, under the lock (rlqs_redis.c). */

/* A new policy bucket: divides nothing until its first claim; wakes the exchanges. */
void rlt__rlqs_redis_new(rlt__rlqs *q, rlt__rlqs_bucket *b);
/* Policy bucket b is retired at `now`: its ledger's live sums are carried in its key's claim
 * until they expire (dropped silently when memory is short: the claim may then be low for one
 * TTL, as before carrying existed). */
void rlt__rlqs_redis_retire(rlt__rlqs *q, rlt__rlqs_bucket *b, rlt_ns now);
/* Before a report of policy bucket b at `now`: a claim whose deadline passed without a
 * successful exchange puts the bucket in its fail mode. */
void rlt__rlqs_redis_check(rlt__rlqs_bucket *b, rlt_ns now);
/* Frees the carried amounts expired at `now` (every of them with `now` INT64_MAX). */
void rlt__rlqs_redis_sweep(rlt__rlqs *q, rlt_ns now);

#endif
