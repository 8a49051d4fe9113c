/* Batches, rlt_store_decide_batch: many keys under one policy, each item hashed and its slot
 * prefetched BATCH_AHEAD items before it is decided, so that the items' DRAM misses overlap;
 * each decision is the single call's hot path (hot.h) under its own shard lock. */
#include <string.h>

#include "store/aeshash.h"
#include "store/hot.h"
#include "store/lock.h"
#include "store/siphash.h"
#include "store/table.h"

/* How many items a batch hashes and prefetches ahead of the one it decides: enough to cover a
 * DRAM round trip (~150 ns) with the ~10 ns each decision of a cached slot takes, and within
 * what a core can have in flight (10-20 outstanding misses). */
#define BATCH_AHEAD 16

typedef struct bstage {
    uint64_t h;
    int rc; /* status found before the lock: bad cost or key */
} bstage;

/* A key hash as the batch takes it: each entry point below passes its own, inlined into it. */
typedef uint64_t (*batch_hash_fn)(const rlt_store *s, const void *key, size_t klen);

/* Validates an item, hashes its key and prefetches its shard and home slot. */
static inline __attribute__((always_inline)) void batch_stage(const rlt_store *s, uint64_t mix,
                                                              const rlt_key *k, int64_t cost,
                                                              bstage *b, batch_hash_fn hash)
{
    b->rc = cost < 0 ? RLT_EINVAL : rlt__check_key(k->key, k->klen);
    if (b->rc) return;
    b->h = hash(s, k->key, k->klen);
    rlt__prefetch_home(s, b->h, mix);
}

static inline __attribute__((always_inline)) int
decide_batch_with(rlt_store *s, int id, const rlt_key *keys, size_t n, rlt_ns now,
                  const int64_t *costs, rlt_decision *out, int *status, batch_hash_fn hash)
{
    /* A bad id decides nothing (every item is RLT_ENOENT under the lock); its mix only shapes
     * the prefetched addresses. */
    const uint64_t mix = rlt__pol_mix((uint32_t)id);
    bstage ring[BATCH_AHEAD];
    const size_t ahead = n < BATCH_AHEAD ? n : BATCH_AHEAD;
    for (size_t j = 0; j < ahead; j++)
        batch_stage(s, mix, &keys[j], costs ? costs[j] : 1, &ring[j], hash);
    int first = RLT_OK;
    for (size_t i = 0; i < n; i++) {
        bstage *b = &ring[i % BATCH_AHEAD];
        int rc = b->rc;
        if (!rc) {
            rlt__shard *sh = rlt__shard_of(s, b->h);
            rlt__shard_lock(sh);
            rc = rlt__decide_locked(s, sh, b->h, id, keys[i].key, keys[i].klen, now,
                                    costs ? costs[i] : 1, &out[i]);
            rlt__shard_unlock(sh);
        }
        if (rc) {
            memset(&out[i], 0, sizeof out[i]);
            if (first == RLT_OK) first = rc;
        }
        if (status) status[i] = rc;
        /* The slot of this item is free again: stage the item BATCH_AHEAD further on. */
        if (i + BATCH_AHEAD < n)
            batch_stage(s, mix, &keys[i + BATCH_AHEAD], costs ? costs[i + BATCH_AHEAD] : 1, b,
                        hash);
    }
    return first;
}

#if RLT__AESHASH_X86
static inline __attribute__((always_inline)) RLT__AESHASH_TARGET uint64_t
batch_hash_aes(const rlt_store *s, const void *key, size_t klen)
{
    return rlt__aeshash_inline(&s->aes, key, klen);
}

static __attribute__((noinline)) RLT__AESHASH_TARGET int
decide_batch_aes(rlt_store *s, int id, const rlt_key *keys, size_t n, rlt_ns now,
                 const int64_t *costs, rlt_decision *out, int *status)
{
    return decide_batch_with(s, id, keys, n, now, costs, out, status, batch_hash_aes);
}
#endif

static inline __attribute__((always_inline)) uint64_t batch_hash_sip(const rlt_store *s,
                                                                     const void *key, size_t klen)
{
    return rlt__siphash(&s->sip, key, klen, 1, 3);
}

static __attribute__((noinline)) int decide_batch_sip(rlt_store *s, int id, const rlt_key *keys,
                                                      size_t n, rlt_ns now, const int64_t *costs,
                                                      rlt_decision *out, int *status)
{
    return decide_batch_with(s, id, keys, n, now, costs, out, status, batch_hash_sip);
}

/* Like rlt_store_decide, each key hash has a copy of the batch with that hash inlined in it
 * (the AES one with the shard lock inlined too): no call per item before its prefetch. */
int rlt_store_decide_batch(rlt_store *s, int id, const rlt_key *keys, size_t n, rlt_ns now,
                           const int64_t *costs, rlt_decision *out, int *status)
{
    if (!s || (n && (!keys || !out))) return RLT_EINVAL;
#if RLT__AESHASH_X86
    if (__builtin_expect(s->use_aes, 1))
        return decide_batch_aes(s, id, keys, n, now, costs, out, status);
#endif
    return decide_batch_sip(s, id, keys, n, now, costs, out, status);
}
