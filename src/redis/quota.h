/* RLQS claims in Redis (quota.c, lua/quota.lua): several ratelimitd serving one fleet of
 * Envoys share each quota bucket's global budget through one Redis hash per bucket, where each
 * server publishes its demand and claims its part.  Internal to this tree (the daemon's Redis
 * backend calls it); it includes only the public header, so a caller needs no hiredis. */
#ifndef RLT_REDIS_QUOTA_H
#define RLT_REDIS_QUOTA_H

#include "ratelimit/redis.h"

#include <stddef.h>
#include <stdint.h>

/* The longest bucket key rlt__redis_quota_exchange takes (a domain, NUL, a canonical
 * BucketId: the daemon's are at most 255 + 1 + 1,056 bytes). */
#define RLT__REDIS_QUOTA_KEY_MAX 4096

/* Demands above this are clamped to it.  The script's doubles are not exact for Q x d (up to
 * 2^72): harmless, as a target is only ever capped by the exact free amount (integers far
 * below 2^53), so the sums stay within Q and B whatever the rounding. */
#define RLT__REDIS_QUOTA_DEMAND_MAX (INT64_C(1) << 40)

/* rlt__redis_quota.flags.  EXPECT: the server's previous exchange of the bucket stored a
 * field that should still be live (its claim's TTL has not passed since): not finding it
 * means the fleet's claims were lost (Redis restarted empty, the key evicted or flushed), and
 * the bucket is marked so for one claim's TTL, every server's budget capped at what it holds.
 * GAP: the server's view of Redis had a gap (a failed exchange, any bucket) less than a claim's
 * TTL ago: without its own field it is given no more than it holds (the others' claims may
 * have been lost while it was not looking). */
#define RLT__REDIS_QUOTA_EXPECT 1u
#define RLT__REDIS_QUOTA_GAP 2u

/* One exchange of one bucket: what the server tells (in) and what it is given (out). */
typedef struct rlt__redis_quota {
    /* in */
    const void *key; /* the bucket's identity, 1..RLT__REDIS_QUOTA_KEY_MAX bytes, any bytes */
    size_t klen;
    int64_t demand;       /* the server's streams' demand, tokens per F, >= 0 (clamped) */
    int64_t held_q;       /* what the server's ledger may hold until it applies the answer: */
    int64_t held_b;       /* max(its live sums, the budget it divides now), >= 0 */
    int64_t cap_q, cap_b; /* the global Q (tokens per F) and B, 0..2^32 - 1 */
    rlt_ns ttl;           /* the claim's life without another exchange, >= 1 ms */
    unsigned flags;       /* RLT__REDIS_QUOTA_EXPECT | RLT__REDIS_QUOTA_GAP, or 0 */
    /* out (RLT_OK only) */
    int64_t budget_q, budget_b; /* what the server may divide now (0: deny-all; both 0 or
                                   neither) */
    int64_t claim_q, claim_b;   /* what is stored: max(budget, held) */
    int64_t servers;            /* live servers on the bucket, this one included */
    int64_t total_demand;       /* D: the live servers' demands summed */
} rlt__redis_quota;

/* One exchange, atomically in Redis by lua/quota.lua (always the script, EVALSHA with a load
 * after NOSCRIPT, on the node of the bucket's slot, Cluster and Sentinel alike; the handle's
 * breaker and timeout).  `server` names the calling server's field (16 hex digits).  The
 * Redis key is the handle's prefix + "rlqs:{" + the key with bytes outside 0x21..0x7e and
 * '%', '{', '}' as %XX + "}".  Time is Redis's (TIME).  The stored claims of a bucket sum to
 * <= cap_q and <= cap_b as long as every server passes a held no larger than its last claim
 * (the script's header has the argument); a field that does not parse counts as a claim of
 * cap_q and cap_b for one claim's TTL, and a lost state (flags) caps every budget at held.  Returns
 * RLT_OK with the out fields; RLT_EINVAL (NULL, an empty or too long key, a number out of range);
 * RLT_ENOMEM; RLT_EBACKEND (Redis unreachable, its breaker open, an error, a reply that does not
 * decode or breaks the script's promises: a budget over Q, B or the claim, one part zero without
 * the other, a claim over Q or B or under held, no server), RLT_ETIMEDOUT. */
int rlt__redis_quota_exchange(rlt_redis *r, uint64_t server, rlt__redis_quota *q);

/* The Redis key of bucket key[0..klen) into buf[0..cap): its length, or RLT_ENOSPC,
 * RLT_EINVAL.  For tests and operators. */
int rlt__redis_quota_key(const rlt_redis *r, const void *key, size_t klen, char *buf, size_t cap);

#endif
