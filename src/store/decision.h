/* What a decision writes: the decision's fields in two parts (the hot path writes the fixed
 * ones before it reads the slot), the GCRA hot path's arithmetic, and the policy's jitter.
 * Shared by the single call (decide.c through hot.h), the general path (general.c), batches
 * and multi-limit checks; the tests check the hot arithmetic against rlt_decide. */
#ifndef RLT_STORE_DECISION_H
#define RLT_STORE_DECISION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ratelimit/ratelimit.h"

/* A decision without a delay or lease, padding included (as rlt_decide's memset does), is
 * written in two parts with one store per word (a decision built on the stack and copied costs
 * three times as many memory operations): rlt__decision_put_fixed writes what does not depend
 * on the key's state (limit, delay, lease), which the hot path writes before it reads the
 * slot, and rlt__decision_put_state the rest.  Together they write every field. */
static inline void rlt__decision_put_fixed(rlt_decision *d, int64_t limit)
{
    d->limit = limit;
    d->delay = 0;
    d->lease = 0;
}

static inline void rlt__decision_put_state(rlt_decision *d, bool allowed, int64_t remaining,
                                           rlt_ns retry_after, rlt_ns reset_after)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    _Static_assert(offsetof(rlt_decision, allowed) == 0 && offsetof(rlt_decision, limit) == 8 &&
                       sizeof(bool) == 1,
                   "the first word of a decision is `allowed` and its padding");
    const uint64_t first = allowed;
    memcpy(d, &first, sizeof first);
#else
    memset(d, 0, offsetof(rlt_decision, limit));
    d->allowed = allowed;
#endif
    d->remaining = remaining;
    d->retry_after = retry_after;
    d->reset_after = reset_after;
    _Static_assert(
        offsetof(rlt_decision, remaining) == 16 && offsetof(rlt_decision, retry_after) == 24 &&
            offsetof(rlt_decision, reset_after) == 32 && offsetof(rlt_decision, delay) == 40 &&
            offsetof(rlt_decision, lease) == 48 && sizeof(rlt_decision) == 56,
        "the two rlt__decision_put parts write every field and no padding is left");
}

/* The store's hot path for GCRA: a request of cost 1..burst on an existing entry at a `now`
 * in [0, rlt__gcra_hot_end(p)).  The same arithmetic as rlt_decide (src/core/bucket.c, whose
 * representation it reads: the state is tat x scale_ stored with the sign bit flipped so that
 * all-zero is fresh), specialised to those preconditions, under which no step can overflow:
 * now x scale_ + cap_ <= INT64_MAX, and a stored tat above now x scale_ is within int64 of it.
 * It runs in ~25 instructions instead of ~130 (the dispatch, argument checks, overflow checks,
 * token-bucket branches), and that count matters beyond the hot path: the fewer instructions
 * a call executes after its slot's cache miss, the sooner the out-of-order core reaches the
 * next call's hash and prefetch while this miss is still outstanding.  Any other request
 * (a peek, a cost that can never fit, a time near the int64 limits, another algorithm) goes to
 * rlt_decide.  tests/store/test_store_model.c checks it against rlt_decide. */
static inline uint64_t rlt__gcra_hot_end(const rlt_policy *p)
{
    if (p->algo != RLT_GCRA || p->scale_ < 1 || p->cap_ < 0) return 0; /* never */
    if (p->block > 0) return 0; /* the penalty box's state: rlt_decide's general path */
    return (uint64_t)((INT64_MAX - p->cap_) / p->scale_) + 1;
}

/* What the hot path knows before the state is read: computed ahead of the slot's load so
 * that, in program order, as little as possible waits behind the slot's cache miss. */
typedef struct rlt__gcra_req {
    int64_t now_s;  /* now x scale_ */
    int64_t need_s; /* cost x unit_ */
    int64_t room;   /* cap_ - need_s: the most `used` that still allows */
    const rlt_policy *p;
} rlt__gcra_req;

static inline rlt__gcra_req rlt__gcra_prepare(const rlt_policy *p, rlt_ns now, int64_t cost)
{
    rlt__gcra_req q;
    q.now_s = now * p->scale_;
    q.need_s = cost * p->unit_; /* cost <= burst: need_s <= cap_ */
    q.room = p->cap_ - q.need_s;
    q.p = p;
    return q;
}

/* Decides on the state at `st`, writes the fields of *d that depend on it (allowed and its
 * padding, remaining, retry_after, reset_after) and returns d->allowed.  The hot path writes
 * the others (rlt__decision_put_fixed) before it reads the slot: the fewer instructions a call
 * runs after the slot's miss, the further the core runs ahead into the next call. */
static inline bool rlt__gcra_apply_state(const rlt__gcra_req *q, void *st, rlt_decision *d)
{
    const int64_t scale = q->p->scale_, cap = q->p->cap_;
    uint64_t w;
    memcpy(&w, st, sizeof w);
    const int64_t tat = (int64_t)(w ^ (UINT64_C(1) << 63));
    const int64_t used = tat > q->now_s ? tat - q->now_s : 0;
    const bool allowed = used <= q->room;
    const int64_t after = allowed ? used + q->need_s : used;
    int64_t retry = 0, reset;
    if (scale == 1) {
        reset = after;
        if (!allowed) retry = used - q->room;
    } else {
        reset = after / scale + (after % scale != 0);
        if (!allowed) {
            const int64_t over = used - q->room;
            retry = over / scale + (over % scale != 0);
        }
    }
    rlt__decision_put_state(d, allowed, after >= cap ? 0 : (cap - after) / q->p->unit_, retry,
                            reset);
    if (allowed) {
        w = (uint64_t)(q->now_s + after) ^ (UINT64_C(1) << 63);
        memcpy(st, &w, sizeof w);
    }
    return allowed;
}

/* Decides on the state at `st` into *d (every field) and returns d->allowed. */
static inline bool rlt__gcra_apply(const rlt__gcra_req *q, void *st, rlt_decision *d)
{
    rlt__decision_put_fixed(d, q->p->burst);
    return rlt__gcra_apply_state(q, st, d);
}

static inline void rlt__gcra_hot(const rlt_policy *p, void *st, rlt_ns now, int64_t cost,
                                 rlt_decision *d)
{
    const rlt__gcra_req q = rlt__gcra_prepare(p, now, cost);
    (void)rlt__gcra_apply(&q, st, d);
}

/* The policy's jitter on a denied decision's wait (rlt_jitter: the key's FNV-1a, the caller's
 * instant), so every front end of the store reports the same spread value. */
static inline void rlt__jitter_decision(const rlt_policy *p, const void *key, size_t klen,
                                        rlt_ns now, rlt_decision *d)
{
    if (p->jitter > 0 && d->retry_after > 0)
        d->retry_after = rlt_jitter(p, rlt_hash_fnv1a(key, klen), now, d->retry_after);
}

#endif
