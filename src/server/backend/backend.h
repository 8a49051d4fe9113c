/* The backends of the decision seam: where a decision is made.  A table of operations with
 * two implementations, chosen once when the server context opens (rlt__srv_open): the local
 * keyed store (local.c) and Redis (redis.c, through libratelimit_redis).  Both take their
 * policies from the registry (registry.h: policy ids, tiers) and their fail modes from its
 * config; neither counts metrics nor applies shadow mode (the seam, request/decide.c, does,
 * the same for both).  Nothing outside this room and the seam knows which backend runs. */
#ifndef RLT_SERVER_BACKEND_BACKEND_H
#define RLT_SERVER_BACKEND_BACKEND_H

#include "ratelimit/budget.h"
#include "ratelimit/ratelimit.h"
#include "ratelimit/store.h"
#include "server/backend/registry.h"
#include "server/config/config.h"
#include "server/base/obuf.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct rlt__backend rlt__backend;

/* One RLQS quota bucket's exchange with the other servers of the fleet (Redis mode of Envoy's
 * Rate Limit Quota Service, envoy/rlqs_sync.c; src/redis/quota.h has the claims' rule). */
/* rlt__quota_exchange.flags, src/redis/quota.h's RLT__REDIS_QUOTA_EXPECT and _GAP (the same
 * values): the server's previous exchange stored a field that should still be live; the
 * server's view of Redis had a gap less than a claim's life ago. */
#define RLT__QUOTA_X_EXPECT 1u
#define RLT__QUOTA_X_GAP 2u

typedef struct rlt__quota_exchange {
    /* in */
    const char *key; /* the bucket: domain, NUL, canonical BucketId */
    size_t klen;
    int64_t demand;         /* this server's streams' demand, tokens per F */
    int64_t held_q, held_b; /* the most its ledger may hold until the answer is applied */
    int64_t cap_q, cap_b;   /* the bucket's global Q (tokens per F) and B */
    rlt_ns ttl;             /* the claim's life without another exchange */
    unsigned flags;         /* RLT__QUOTA_X_EXPECT | RLT__QUOTA_X_GAP, or 0 */
    /* out */
    int status;                 /* RLT_OK, or why not (RLT_EBACKEND, RLT_ETIMEDOUT...) */
    int64_t budget_q, budget_b; /* RLT_OK: what this server may divide now */
    int64_t claim_q, claim_b;   /* RLT_OK: what is stored as its claim */
    int64_t servers;            /* RLT_OK: live servers on the bucket, this one included */
} rlt__quota_exchange;

typedef struct rlt__backend_ops {
    const char *name; /* "local" or "redis", for INFO and /metrics */
    /* Decisions are made at the daemon's `now` (true: the local store) or at the backend's own
     * clock (false: Redis's, so that skewed daemons cannot mint allowance). */
    bool daemon_clock;
    /* One decision under policy `policy_id`.  A backend failure is a decision (the policy's
     * fail mode) and returns RLT_OK; argument errors return their RLT_* code. */
    int (*decide)(rlt__backend *b, int policy_id, const void *key, size_t klen, rlt_ns now,
                  int64_t cost, rlt_decision *d);
    /* n independent decisions, in order for every key; status[i] per item. */
    void (*decide_batch)(rlt__backend *b, const int *policy, const rlt_key *keys, size_t n,
                         rlt_ns now, const int64_t *costs, rlt_decision *out, int *status);
    /* All or nothing over n limits (rlt_store_decide_multi's contract). */
    int (*decide_multi)(rlt__backend *b, const rlt_check *checks, size_t n, rlt_ns now,
                        rlt_decision *combined, int *refused);
    /* One decision of priority class c under a reserve (rlt_store_decide_class's contract);
     * NULL when a backend has no classes (Redis). */
    int (*decide_class)(rlt__backend *b, int policy_id, const void *key, size_t klen, rlt_ns now,
                        int64_t cost, rlt_class c, int reserve_pct, rlt_decision *d);
    int (*reset)(rlt__backend *b, int policy_id, const void *key, size_t klen);
    /* latency_ns < 0: no report; else rlt_store_release_report's (Redis: ignored, its
     * policies are never adaptive) */
    int (*release)(rlt__backend *b, int policy_id, const void *key, size_t klen, rlt_ns now,
                   int64_t lease, rlt_ns latency_ns, int outcome);
    /* Charge after the response (rlt_store_reserve_for / rlt_store_settle's contracts, on
     * behalf of `holder`; Redis: rlt_redis_reserve / rlt_redis_settle, where the holder is not
     * counted); NULL when a backend cannot hold reservations. */
    int (*reserve)(rlt__backend *b, uint64_t holder, int policy_id, const void *key, size_t klen,
                   rlt_ns now, int64_t estimate, rlt_ns timeout, rlt_decision *d,
                   uint64_t *reservation);
    int (*settle)(rlt__backend *b, int policy_id, const void *key, size_t klen, rlt_ns now,
                  uint64_t reservation, int64_t real_cost, rlt_decision *d);
    /* One reservation over several limits and its settles (include/ratelimit/budget.h's
     * rlt_store_reserve_limits / rlt_store_settle_limits; Redis: rlt_redis_reserve_limits /
     * rlt_redis_settle_limits, where the holder is not counted). */
    int (*reserve_limits)(rlt__backend *b, uint64_t holder, const rlt_limit *limits, size_t n,
                          const rlt_usage *estimate, rlt_ns now, rlt_ns timeout,
                          rlt_decision *combined, rlt_decision *each, int *refused,
                          uint64_t *reservation);
    int (*settle_limits)(rlt__backend *b, uint64_t reservation, const rlt_check *keys, size_t n,
                         const rlt_usage *usage, bool final, rlt_ns now, rlt_decision *combined,
                         rlt_decision *each, int64_t *charged);
    /* Local lease units held now, over every thread's handle (rlt_redis_lease_units); NULL
     * when the backend holds none.  Any thread. */
    uint64_t (*lease_units)(rlt__backend *b);
    /* Exchanges x[0..n) with the fleet as server `server` (64 random bits), on the calling
     * thread's own connection, setting each x[i].status; NULL when a backend has no fleet
     * (local). */
    void (*quota_exchange)(rlt__backend *b, uint64_t server, rlt__quota_exchange *x, size_t n);
    /* The backend's lines of INFO / families of /metrics (may write nothing). */
    void (*info)(rlt__backend *b, rlt__obuf *out);
    void (*prometheus)(rlt__backend *b, rlt__obuf *out);
    /* Frees the backend, after every thread stopped using it. */
    void (*close)(rlt__backend *b);
} rlt__backend_ops;

/* What every implementation's handle starts with. */
struct rlt__backend {
    const rlt__backend_ops *ops;
};

/* The registry's own store (local.c).  reg must outlive the backend.  Returns RLT_OK and *out,
 * or RLT_ENOMEM. */
int rlt__backend_local_open(rlt__registry *reg, rlt__backend **out);

/* Redis (redis.c), from the settings of reg's config (`redis:`), its policies read from reg
 * (which must outlive the backend).  Does not need Redis up.  Returns RLT_OK and *out, or an
 * RLT_* code with a message in err (also when the daemon was built without
 * libratelimit_redis). */
int rlt__backend_redis_open(rlt__registry *reg, rlt__backend **out, char *err, size_t errlen);
#endif
