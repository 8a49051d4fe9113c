/* Top offenders: a Space-Saving heavy-hitter sketch over (policy, key) items.
 *
 * An rlt_topk keeps at most K counters, whatever the number of distinct items it is shown, in
 * memory allocated once when it opens (about K x (RLT_KEY_MAX + 64) bytes).  Each monitored
 * item carries an estimated count and an error bound, with Space-Saving's guarantees
 * (Metwally, Agrawal, El Abbadi 2005):
 *
 *   count - error <= true count <= count         for every monitored item;
 *   true count <= floor                          for every item that is not monitored,
 *
 * where floor (rlt_topk_floor) is at most N/K for a sketch fed N units by rlt_topk_add alone,
 * so every item whose true count passes N/K is monitored.  Sketches merge (rlt_topk_merge):
 * the merge keeps both bounds, so a program keeps one sketch per thread and merges them when
 * it reads.  Keys are binary-safe, 1..RLT_KEY_MAX bytes, copied whole: identity is exact.
 *
 * Time plays no part; counts are uint64 and every sum is checked.  The sketch never reads a
 * clock, never locks and never allocates after rlt_topk_open: one sketch is not thread-safe
 * (the caller serializes calls on it; const calls may run together).  Depends on libc.
 */
#ifndef RATELIMIT_TOPK_H
#define RATELIMIT_TOPK_H

#include "ratelimit/store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Most counters a sketch may hold. */
#define RLT_TOPK_MAX 100000

typedef struct rlt_topk rlt_topk;

/* Options.  `k` is required; the rest all-zero means a random secret. */
typedef struct rlt_topk_options {
    size_t k;           /* counters: 1..RLT_TOPK_MAX */
    bool has_secret;    /* hash keys with `secret` instead of a random one (getrandom) */
    uint8_t secret[16]; /* SipHash key of the index; sketches merge only under one secret */
} rlt_topk_options;

/* Opens an empty sketch of opt->k counters.  Returns RLT_OK and *out, RLT_EINVAL (NULL
 * arguments, k out of range), RLT_ENOMEM, RLT_EIO (no random secret). */
int rlt_topk_open(rlt_topk **out, const rlt_topk_options *opt);

/* Frees the sketch.  NULL is a no-op. */
void rlt_topk_close(rlt_topk *t);

/* Forgets every item: the sketch is as rlt_topk_open left it (same K and secret). */
void rlt_topk_clear(rlt_topk *t);

/* Counts `count` more units (denials) of item (policy, key[0..klen)).  A new item takes the
 * place of the item with the smallest count when all K counters are in use, and inherits
 * that count as its error.  O(log K).  Returns RLT_OK; RLT_EINVAL (NULL t or key, count 0);
 * RLT_EKEYLEN (klen 0 or > RLT_KEY_MAX); RLT_ERANGE (a count or the total would pass
 * UINT64_MAX).  On error nothing changes. */
int rlt_topk_add(rlt_topk *t, int policy, const void *key, size_t klen, uint64_t count);

/* One monitored item, as rlt_topk_list reports it.  `key` points into the sketch: valid until
 * the next call that changes it. */
typedef struct rlt_topk_entry {
    int policy;
    const uint8_t *key;
    size_t klen;
    uint64_t count; /* an upper bound of the item's true count */
    uint64_t error; /* count - error is a lower bound of it */
} rlt_topk_entry;

/* Writes the min(n, size) monitored items with the largest counts to out[0..), largest first
 * (ties: smaller error first, then policy, then key bytes; the order is deterministic).
 * Returns the number written.  O(size x log n). */
size_t rlt_topk_list(const rlt_topk *t, rlt_topk_entry *out, size_t n);

/* Items monitored (0..K), K, the units counted (N: every add's count, summed over merged
 * sketches) and the floor: an upper bound of the true count of every item not monitored. */
size_t rlt_topk_size(const rlt_topk *t);
size_t rlt_topk_capacity(const rlt_topk *t);
uint64_t rlt_topk_total(const rlt_topk *t);
uint64_t rlt_topk_floor(const rlt_topk *t);

/* Makes dst an exact copy of src (same K and secret required; for a reader that copies a
 * sketch under its owner's lock and merges outside it).  O(K), no allocation.  Returns
 * RLT_OK or RLT_EINVAL (NULL, the same sketch, another K or secret; dst unchanged). */
int rlt_topk_copy(rlt_topk *dst, const rlt_topk *src);

/* Replaces dst's content by the merge of src[0..n) (dst must not be one of them; every sketch
 * must have dst's secret; K may differ).  An item's merged count (error) is the sum over the
 * sources of its count (error) where it is monitored and of the source's floor where it is
 * not; dst keeps the K largest merged counts, and its floor is the larger of the sources'
 * floors summed and the largest merged count it dropped.  Both guarantees above hold for the
 * result, with N the sum of the sources' totals: floor <= 2N/K when the sources were fed by
 * rlt_topk_add alone with this K.  O(n^2 x K) lookups.  Returns RLT_OK; RLT_EINVAL (NULL
 * arguments, dst among src, another secret; dst unchanged); RLT_ERANGE (a sum passes
 * UINT64_MAX; dst is left empty). */
int rlt_topk_merge(rlt_topk *dst, const rlt_topk *const *src, size_t n);

#ifdef __cplusplus
}
#endif

#endif
