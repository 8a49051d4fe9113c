/* The daemon's quota state for Envoy's Rate Limit Quota Service (rlqs.c): the BucketIds
 * Envoys report, matched to the config's quota buckets, each policy bucket's global budget
 * divided among the streams reporting it by src/quota (one division per assignment TTL), and
 * each stream's memberships.  The gRPC service (grpc/rlqs.c) feeds it one usage at a time and
 * sends what it answers.
 *
 * Thread-safety: one mutex guards everything (reports are not the hot path: an Envoy reports
 * each bucket once per reporting interval).  rlt__rlqs_report runs between
 * rlt__rlqs_lock and rlt__rlqs_unlock, so that a whole report message takes the lock once;
 * the other calls lock it themselves.
 * Memory: every bucket and membership counts in the connections' share of max_memory (mem.h);
 * caps: RLT__RLQS_MAX_BUCKETS BucketIds in all, RLT__RLQS_MAX_PER_STREAM per stream, and
 * per client (a tenant, or else a connection: rlqs_hold.h) server.rlqs_max_streams_per_client
 * streams and server.rlqs_max_buckets_per_client buckets created.  BucketIds that match no
 * rule are answered from quota_default without a bucket (rlqs_unmatched.h).
 * Tenants: a stream opened by a tenant has its own buckets (the bucket's identity, and its
 * Redis key, start with the tenant's key prefix, as the per-request doors' keys do).
 * Time: `now` is the caller's clock (the turn's), never read here. */
#ifndef RLT_SERVER_ENVOY_RLQS_H
#define RLT_SERVER_ENVOY_RLQS_H

#include "ratelimit/ratelimit.h"
#include "server/backend/backend.h"
#include "server/config/config.h"
#include "server/envoy/rlqs_counters.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RLT__RLQS_MAX_BUCKETS 65536
#define RLT__RLQS_MAX_PER_STREAM 1024
/* The TTL of a blanket rule's or an unknown domain's assignment, and the least default TTL. */
#define RLT__RLQS_MIN_TTL (2 * RLT_NS_PER_S)

typedef struct rlt__rlqs rlt__rlqs;
typedef struct rlt__rlqs_stream rlt__rlqs_stream;

/* Opens an empty state.  RLT_OK or RLT_ENOMEM. */
int rlt__rlqs_open(rlt__rlqs **out);
/* Frees everything (every stream must have ended).  NULL is a no-op. */
void rlt__rlqs_close(rlt__rlqs *q);

/* Who opens a stream. */
typedef struct rlt__rlqs_client {
    uint64_t holder;    /* rlt__session_holder's id (a tenant, or a connection); 0: none, no
                           per-client cap applies (tests of the table alone) */
    const char *prefix; /* the tenant's key prefix (plen bytes, copied); NULL with plen 0 */
    size_t plen;        /* < RLT__STR_MAX */
    size_t max_streams; /* the holder's open streams, this one included; 0: no cap */
} rlt__rlqs_client;

/* A new stream (one Envoy's StreamRateLimitQuotas call) of client `who` (NULL: no tenant, no
 * holder).  RLT_OK; RLT_EFULL (the holder has max_streams open: nothing is opened);
 * RLT_ENOMEM (the memory budget is spent). */
int rlt__rlqs_stream_new_for(rlt__rlqs *q, const rlt__rlqs_client *who,
                               rlt__rlqs_stream **out);
/* rlt__rlqs_stream_new_for(q, NULL, out). */
int rlt__rlqs_stream_new(rlt__rlqs *q, rlt__rlqs_stream **out);
/* The stream ended or broke at `now`: its memberships depart (their live assignments stay in
 * the ledgers until their TTL, as the Envoy may enforce them until then) and it is freed. */
void rlt__rlqs_stream_end(rlt__rlqs *q, rlt__rlqs_stream *st, rlt_ns now);

/* One BucketQuotaUsage. */
typedef struct rlt__rlqs_use {
    const rlt__entry *pairs; /* the BucketId, sorted by key, unique keys */
    size_t npairs;
    const char *key; /* its canonical bytes (rlqs_pb.h's rlt__rlqs_id_key) */
    size_t klen;
    rlt_ns elapsed; /* time_elapsed; <= 0: no rate */
    uint64_t allowed, denied;
} rlt__rlqs_use;

/* What to send for the bucket; the kinds are rlqs_pb.h's rlt__rlqs_kind. */
enum {
    RLT__QA_NONE = -1, /* nothing: the Envoy keeps its assignment */
    RLT__QA_TOKEN_BUCKET = 0,
    RLT__QA_ALLOW_ALL = 1,
    RLT__QA_DENY_ALL = 2,
    RLT__QA_ABANDON = 3,
};

typedef struct rlt__rlqs_answer {
    int kind;                 /* RLT__QA_* */
    uint32_t max_tokens;      /* TOKEN_BUCKET: >= 1 */
    uint32_t tokens_per_fill; /* TOKEN_BUCKET: >= 1 */
    rlt_ns fill_interval;     /* TOKEN_BUCKET: > 0 */
    rlt_ns ttl;               /* not ABANDON: > 0, whole seconds */
    uint64_t shadow_denied;   /* shadow mode: requests of the usage beyond the would-be share */
} rlt__rlqs_answer;

void rlt__rlqs_lock(rlt__rlqs *q);
void rlt__rlqs_unlock(rlt__rlqs *q);

/* One usage of `domain` (dlen < RLT__STR_MAX) on stream st at `now`, under cfg (the config in
 * force): the BucketId is matched to its quota bucket (first match wins; an unknown domain:
 * allow-all, logged once per domain), its usage recorded, and *a says what to send.  None
 * matches: the domain's quota_default, with no bucket kept (rlqs_unmatched.h).  A bucket
 * whose rule a reload removed or changed is answered ABANDON once (the Envoy forgets it and
 * subscribes again under the new rule).  A new bucket past its client's
 * cfg->set.rlqs_max_buckets_per_client is not kept and gets no answer (a->kind NONE: the
 * Envoy applies its no_assignment_behavior), counted in over_cap; the other clients' buckets
 * are not affected.  Returns RLT_OK; RLT_EFULL (the table's or the stream's bucket cap: the
 * usage is not recorded); RLT_ENOMEM. */
int rlt__rlqs_report(rlt__rlqs *q, const rlt__config *cfg, rlt__rlqs_stream *st,
                       const char *domain, size_t dlen, const rlt__rlqs_use *u, rlt_ns now,
                       rlt__rlqs_answer *a);


/* Counts for tests and metrics (locks). */
typedef struct rlt__rlqs_stats {
    size_t buckets; /* BucketIds held (idle ones awaiting their TTL included) */
    size_t members; /* stream memberships */
    size_t streams;
    rlt__rlqs_counters c;
} rlt__rlqs_stats;
void rlt__rlqs_stats_get(rlt__rlqs *q, rlt__rlqs_stats *out);

/* The counters, to add to between rlt__rlqs_lock and rlt__rlqs_unlock. */
rlt__rlqs_counters *rlt__rlqs_counted(rlt__rlqs *q);

/* Redis mode: rlqs_redis.h. */

#endif
