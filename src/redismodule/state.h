/* The Redis module's state layer: the values the Lua scripts of src/redis/lua keep in Redis,
 * read into the core's state blocks, decided by the core (src/core, rlt_decide), and written
 * back in the scripts' exact format.  Pure code: no module API, no clock, no allocation, so it
 * is unit-tested under the sanitizers without a Redis server.  Not installed.
 *
 * Units: the scripts keep microseconds; the core runs in nanoseconds (now = now_us x 1000) for
 * the algorithms whose replies need ns rounding (sliding window, token bucket, GCRA, leaky
 * bucket), and in microseconds (a policy whose "ns" are us) for the others, whose replies are
 * whole microseconds (fixed window, sliding log, concurrency: their lease ids are the scripts'
 * microsecond instants).  Every decision returned is in nanoseconds. */
#ifndef RLT_REDISMODULE_STATE_H
#define RLT_REDISMODULE_STATE_H

#include "ratelimit/ratelimit.h"
#include "redis/layout.h"

#include <stdbool.h>

/* A policy as the module runs it. */
typedef struct rlt__mpol {
    rlt_policy p;  /* as given (W in ns): names the key, runs the ns algorithms */
    rlt_policy pu; /* the same numbers with W in us: runs fixed window, sliding log, concurrency */
    rlt__rpol rp;  /* the scripts' microsecond policy */
    int64_t fac;   /* core scaled units per script scaled unit: 1000 x p.scale_ / rp.scale */
    char tail[RLT__KEYTAIL_MAX]; /* the key name's policy part (layout.h) */
    size_t tl;
    char btail[RLT__BLKTAIL_MAX]; /* block=: the companion key's suffix (rlt__block_tail) */
    size_t btl;                   /* 0: no penalty box */
} rlt__mpol;

/* Prepares `m` from a policy.  Returns RLT_OK; RLT_EINVAL or RLT_ERANGE as
 * rlt_redis_policy_check (period not whole microseconds, numbers past the scripts' bounds). */
int rlt__mpol_init(rlt__mpol *m, const rlt_policy *p);

/* Whether the policy's state is a Redis string (else a list: sliding log; a hash:
 * concurrency). */
bool rlt__mpol_is_string(const rlt__mpol *m);

/* Largest magnitude of an instant or count read from a value (the scripts' 2^53). */
#define RLT__NUM_VAL_MAX (INT64_C(1) << 53)

/* Longest string value written. */
#define RLT__MVAL_MAX 72

/* Decides a request of `cost` at `now_us` on the string value val[0..vlen) (`val` NULL: no key)
 * of a string-state policy.  On RLT_OK, *d is the decision and, when it charged, out[0..*outlen)
 * the new value (*outlen 0: nothing to write).  Returns RLT_OK; RLT_ECORRUPT when the value is
 * no state of this policy; RLT_EINVAL, RLT_ERANGE as rlt_decide. */
int rlt__mstr_decide(const rlt__mpol *m, const char *val, size_t vlen, int64_t now_us, int64_t cost,
                     rlt_decision *d, char out[RLT__MVAL_MAX], size_t *outlen);

/* The expiry of a key written with decision `d`: reset_after rounded up to the ms, at least 1 and
 * at least floor_ms (the scripts' rule). */
int64_t rlt__mttl_ms(const rlt_decision *d, int64_t floor_ms);

/* A sliding log's list edit, as the script makes it: with `del`, delete the list and push
 * `item`; else LTRIM from `trim` (when > 0), then LSET -1 `item` (`lset`) or RPUSH `item`. */
typedef struct rlt__mlog_edit {
    bool del, lset;
    int64_t trim;
    char item[48];
    size_t ilen;
} rlt__mlog_edit;

/* Bytes of scratch the sliding log and concurrency functions need (the core's state size). */
size_t rlt__mpol_scratch(const rlt__mpol *m);

/* Decides on a sliding log's list items[0..n) ("t:c" runs, oldest first) with scratch of
 * rlt__mpol_scratch bytes.  *write tells whether *e must be applied.  Returns RLT_OK;
 * RLT_ECORRUPT for items that are no such log; RLT_EINVAL, RLT_ERANGE as rlt_decide. */
int rlt__mlog_decide(const rlt__mpol *m, const char *const *items, const size_t *lens, size_t n,
                     int64_t now_us, int64_t cost, void *scratch, rlt_decision *d,
                     rlt__mlog_edit *e, bool *write);

/* Decides on a concurrency hash given as field/value pairs kv[0..2*npairs) (HGETALL order).
 * When a lease is taken, *slot is the slot to write: HSET n <lease> s<slot> "<lease>:<expiry>"
 * (the value in val[0..*vlen)); else *slot = -1.  Returns as rlt__mlog_decide. */
int rlt__mcc_decide(const rlt__mpol *m, const char *const *kv, const size_t *kvlen, size_t npairs,
                    int64_t now_us, int64_t cost, void *scratch, rlt_decision *d, int64_t *slot,
                    char val[48], size_t *vlen);

/* Releases `lease` on a concurrency hash: *slot the slot holding it (to HDEL) or -1; returns
 * RLT_OK when it was live, RLT_ENOENT when unknown or expired, RLT_ECORRUPT. */
int rlt__mcc_release(const rlt__mpol *m, const char *const *kv, const size_t *kvlen, size_t npairs,
                     int64_t now_us, int64_t lease, void *scratch, int64_t *slot);

/* ---- the penalty box (block=) --------------------------------------------------------------
 * Its state is the companion key (layout.h, rlt__block_tail): "until:level", until in us.  The
 * functions below are the ones above with that state in and out: they put it into the core's
 * state block (the 16 bytes of src/core/block.c after the algorithm's) in the algorithm's own
 * time base, decide with rlt_decide, and take it back; *b is updated and *bchanged says
 * whether the companion key must be written (a breach started a block).  With a policy
 * without block=, b is ignored and they are the functions above. */
typedef struct rlt__mblk {
    bool set;      /* the companion key exists: blocked at least once */
    int64_t until; /* the latest block's end, us (exclusive) */
    int64_t level; /* 0..64 */
} rlt__mblk;

/* Parses a companion value into *b (NULL val: no key): until in [0, 2^52 + 2^50], level in
 * [0, 64].  RLT_OK or RLT_ECORRUPT. */
int rlt__mblk_parse(const char *val, size_t vlen, rlt__mblk *b);

/* Writes b's value ("until:level") into out; returns its length. */
size_t rlt__mblk_format(const rlt__mblk *b, char out[48]);

/* The companion key's expiry after a write at now_us: the block's end, plus the policy's period
 * when the factor escalates (the memory of src/core/block.c), rounded up to the ms, at least 1
 * and at least floor_ms (the script's rule, lib/60_block.lua). */
int64_t rlt__mblk_ttl_ms(const rlt__mpol *m, const rlt__mblk *b, int64_t now_us, int64_t floor_ms);

int rlt__mstr_decide_blk(const rlt__mpol *m, const char *val, size_t vlen, int64_t now_us,
                         int64_t cost, rlt_decision *d, char out[RLT__MVAL_MAX], size_t *outlen,
                         rlt__mblk *b, bool *bchanged);
int rlt__mlog_decide_blk(const rlt__mpol *m, const char *const *items, const size_t *lens, size_t n,
                         int64_t now_us, int64_t cost, void *scratch, rlt_decision *d,
                         rlt__mlog_edit *e, bool *write, rlt__mblk *b, bool *bchanged);
int rlt__mcc_decide_blk(const rlt__mpol *m, const char *const *kv, const size_t *kvlen,
                        size_t npairs, int64_t now_us, int64_t cost, void *scratch, rlt_decision *d,
                        int64_t *slot, char val[48], size_t *vlen, rlt__mblk *b, bool *bchanged);

#endif
