/* The daemon's quota state for Envoy's Rate Limit Quota Service (quotas.c): the BucketIds
 * Envoys report, matched to the config's quota buckets, each policy bucket's global budget
 * divided among the streams reporting it by src/quota (one division per assignment TTL), and
 * each stream's memberships.  The gRPC service (grpc/rlqs.c) feeds it one usage at a time and
 * sends what it answers.
 *
 * Thread-safety: one mutex guards everything (reports are not the hot path: an Envoy reports
 * each bucket once per reporting interval).  rlt__quotas_report runs between
 * rlt__quotas_lock and rlt__quotas_unlock, so that a whole report message takes the lock once;
 * the other calls lock it themselves.
 * Memory: every bucket and membership counts in the connections' share of max_memory (mem.h);
 * caps: RLT__QUOTAS_MAX_BUCKETS BucketIds in all, RLT__QUOTAS_MAX_PER_STREAM per stream.
 * Time: `now` is the caller's clock (the turn's), never read here. */
#ifndef RLT_SERVER_REQUEST_QUOTAS_H
#define RLT_SERVER_REQUEST_QUOTAS_H

#include "ratelimit/ratelimit.h"
#include "server/backend/backend.h"
#include "server/config/config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RLT__QUOTAS_MAX_BUCKETS 65536
#define RLT__QUOTAS_MAX_PER_STREAM 1024
/* The TTL of a blanket rule's or an unknown domain's assignment, and the least default TTL. */
#define RLT__QUOTAS_MIN_TTL (2 * RLT_NS_PER_S)

typedef struct rlt__quotas rlt__quotas;
typedef struct rlt__quotas_stream rlt__quotas_stream;

/* Opens an empty state.  RLT_OK or RLT_ENOMEM. */
int rlt__quotas_open(rlt__quotas **out);
/* Frees everything (every stream must have ended).  NULL is a no-op. */
void rlt__quotas_close(rlt__quotas *q);

/* A new stream (one Envoy's StreamRateLimitQuotas call).  RLT_OK, RLT_ENOMEM (the memory
 * budget is spent). */
int rlt__quotas_stream_new(rlt__quotas *q, rlt__quotas_stream **out);
/* The stream ended or broke at `now`: its memberships depart (their live assignments stay in
 * the ledgers until their TTL, as the Envoy may enforce them until then) and it is freed. */
void rlt__quotas_stream_end(rlt__quotas *q, rlt__quotas_stream *st, rlt_ns now);

/* One BucketQuotaUsage. */
typedef struct rlt__quotas_usage {
    const rlt__entry *pairs; /* the BucketId, sorted by key, unique keys */
    size_t npairs;
    const char *key; /* its canonical bytes (rlqs_pb.h's rlt__rlqs_id_key) */
    size_t klen;
    rlt_ns elapsed; /* time_elapsed; <= 0: no rate */
    uint64_t allowed, denied;
} rlt__quotas_usage;

/* What to send for the bucket; the kinds are rlqs_pb.h's rlt__rlqs_kind. */
enum {
    RLT__QA_NONE = -1, /* nothing: the Envoy keeps its assignment */
    RLT__QA_TOKEN_BUCKET = 0,
    RLT__QA_ALLOW_ALL = 1,
    RLT__QA_DENY_ALL = 2,
    RLT__QA_ABANDON = 3,
};

typedef struct rlt__quotas_answer {
    int kind;                 /* RLT__QA_* */
    uint32_t max_tokens;      /* TOKEN_BUCKET: >= 1 */
    uint32_t tokens_per_fill; /* TOKEN_BUCKET: >= 1 */
    rlt_ns fill_interval;     /* TOKEN_BUCKET: > 0 */
    rlt_ns ttl;               /* not ABANDON: > 0 */
} rlt__quotas_answer;

void rlt__quotas_lock(rlt__quotas *q);
void rlt__quotas_unlock(rlt__quotas *q);

/* One usage of `domain` on stream st at `now`, under cfg (the config in force): the BucketId
 * is matched to its quota bucket (first match wins; none: the domain's quota_default; an
 * unknown domain: allow-all, logged once per domain), its usage recorded, and *a says what to
 * send.  A bucket whose rule a reload removed or changed is answered ABANDON once (the Envoy
 * forgets it and subscribes again under the new rule).  Returns RLT_OK; RLT_EFULL (a bucket
 * cap: the usage is not recorded); RLT_ENOMEM. */
int rlt__quotas_report(rlt__quotas *q, const rlt__config *cfg, rlt__quotas_stream *st,
                       const char *domain, size_t dlen, const rlt__quotas_usage *u, rlt_ns now,
                       rlt__quotas_answer *a);

/* Counts for tests and metrics (locks). */
typedef struct rlt__quotas_stats {
    size_t buckets; /* BucketIds held (idle ones awaiting their TTL included) */
    size_t members; /* stream memberships */
    size_t streams;
} rlt__quotas_stats;
void rlt__quotas_stats_get(rlt__quotas *q, rlt__quotas_stats *out);

/* ---- Redis mode (quotas_redis.c; quotas_sync.c runs it) ------------------------------------
 * Each policy bucket's budget is this server's claimed part of the global one, given by its
 * latest exchange with the fleet, minus what retired buckets of the same key (a reload, an
 * abandon) still hold in live assignments.  A claim is divided until its deadline: the time
 * taken before its exchange + the claim's TTL - the assignment TTL - 100 ms, so that every
 * assignment made from it expires before the claim does in Redis.  A bucket whose exchange
 * failed, whose answer the division refused, or whose deadline passed without a new answer
 * takes its rule's fail mode (`fail:`, default the redis section's): open answers allow-all,
 * closed deny-all (both divide a zero budget meanwhile, so the ledger drains), local divides
 * min(Q / N, the last claim) (B alike) for one assignment TTL, then Q / N (at least one token
 * each; N the bucket's last live-server count, never seen: redis.fleet_size).  A budget with
 * one part zero admits nothing and is divided as zero. */

/* One exchange of a snapshot chunk. */
typedef struct rlt__quotas_claim {
    uint64_t id, hash; /* the bucket, found again by both (it may be gone by then); id 0: a
                          key only retired buckets hold, exchanged to keep its claim */
    int64_t carried_q, carried_b; /* held by retired buckets of the key (in x.held_*) */
    rlt__quota_exchange x;
} rlt__quotas_claim;

/* The buckets exchanged per chunk: a round's snapshot, exchange and apply go a chunk at a
 * time, so that no claim waits for a whole round (65,536 buckets) before its answer is applied. */
#define RLT__QUOTAS_CHUNK 64

/* A round's cursor and its reused buffers (charged to the connections' memory share).
 * Zero-initialised; one thread uses it. */
typedef struct rlt__quotas_chunk {
    rlt__quotas_claim *c; /* c[0..n): the chunk's exchanges */
    size_t n, cap;
    char *keys; /* the exchanges' keys (x.key points here) */
    size_t kused, kcap;
    size_t slot; /* the walk: the next table slot, then the carried amounts' */
    int phase;   /* 0 the table, 1 the carried amounts, 2 done */
} rlt__quotas_chunk;

/* Redis mode from now on (call before the first report): a new policy bucket divides a zero
 * budget (its members are answered deny-all) until its first exchange, and wake(arg) is
 * called, under the lock, when one appears.  wake NULL: back to one server's mode (and the
 * carried amounts are freed). */
void rlt__quotas_redis_mode(rlt__quotas *q, void (*wake)(void *), void *arg);

/* Starts a new round's walk. */
void rlt__quotas_chunk_begin(rlt__quotas_chunk *ch);

/* The next chunk of exchanges at `now` (locks, for one chunk's walk): ch->n of them, 0 when
 * the round is done.  Each has demand (an unknown one counts as Q; an active member with no
 * rate yet, 1), held (max(the ledger's live sums, the part divided now) + the carried
 * amounts), Q, B and the claim's TTL, the bucket's assignment TTL + `extra`.  Returns RLT_OK,
 * or RLT_ENOMEM (nothing could be taken: the walk stays where it is). */
int rlt__quotas_claims(rlt__quotas *q, rlt_ns now, rlt_ns extra, rlt__quotas_chunk *ch);

/* Applies the chunk's exchanges (locks): a bucket whose x.status is RLT_OK divides
 * x.budget - carried until began + x.ttl - its TTL - 100 ms (`began`: read before the
 * exchange), the others take their fail mode at `now`; buckets retired meanwhile are
 * skipped.  Returns the number of the chunk's buckets in a fail mode after it. */
size_t rlt__quotas_claims_apply(rlt__quotas *q, const rlt__quotas_chunk *ch, rlt_ns began,
                                rlt_ns now);

/* Frees the chunk's buffers (it stays usable, zeroed). */
void rlt__quotas_chunk_free(rlt__quotas_chunk *ch);

#endif
