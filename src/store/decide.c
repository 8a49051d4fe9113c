/* The single call, rlt_store_decide: one entry point per key hash (AES where the CPU has
 * AES-NI, SipHash-1-3 elsewhere), each with its hash, the shard lock and the hot path (hot.h)
 * unrolled into it, so that no call comes before the slot's address is known.  The hot path's
 * instruction count is the store's speed at millions of keys (docs/performance.md); keep what
 * it inlines inlined. */
#include "store/aeshash.h"
#include "store/decide.h"
#include "store/hot.h"
#include "store/lock.h"
#include "store/siphash.h"
#include "store/table.h"

/* One call once its key is hashed (h): inlined into the two entry points below, so that each
 * has its key hash unrolled into it and no call before the slot's address is known. */
static inline __attribute__((always_inline)) int
decide_hashed(rlt_store *s, int id, const void *key, size_t klen, rlt_ns now, int64_t cost,
              rlt_decision *d, uint64_t h, bool k816)
{
    rlt__shard *sh = rlt__shard_of(s, h);
    const uint32_t tag = (uint32_t)((h ^ rlt__pol_mix((uint32_t)id)) >> 32);
    const bool big = __atomic_load_n(&s->big, __ATOMIC_RELAXED);
    if (big) rlt__prefetch_tag(s, h, tag);
    rlt__shard_lock(sh);
    int rc = rlt__decide_locked_tag(s, sh, h, tag, id, key, klen, now, cost, d, big, k816);
    rlt__shard_unlock(sh);
    return rc;
}

#if RLT__AESHASH_X86
/* The AES path for any arguments: the checks, then the hash of any length. */
static __attribute__((noinline)) RLT__AESHASH_TARGET int
decide_aes_any(rlt_store *s, int id, const void *key, size_t klen, rlt_ns now, int64_t cost,
               rlt_decision *d)
{
    if (!d || cost < 0) return RLT_EINVAL;
    int rc = rlt__check_key(key, klen);
    if (rc) return rc;
    return decide_hashed(s, id, key, klen, now, cost, d, rlt__aeshash_inline(&s->aes, key, klen),
                         false);
}

/* The AES path's entry: a key of 8..16 bytes (the common one) with a decision to write goes
 * straight to the hash of that length; anything else goes to decide_aes_any, which checks it
 * all.  A negative cost is refused on the general path under the lock, before anything is
 * read or written (the hot path takes costs of 1..burst only).  Every instruction here runs on
 * every call and ahead of the slot's prefetch: round 9 in docs/performance.md. */
static __attribute__((noinline)) RLT__AESHASH_TARGET int decide_aes(rlt_store *s, int id,
                                                                    const void *key, size_t klen,
                                                                    rlt_ns now, int64_t cost,
                                                                    rlt_decision *d)
{
    if (__builtin_expect(!d || !key || klen - 8 > 8, 0))
        return decide_aes_any(s, id, key, klen, now, cost, d);
    return decide_hashed(s, id, key, klen, now, cost, d, rlt__aeshash_8to16(&s->aes, key, klen),
                         true);
}
#endif

static __attribute__((noinline)) int decide_sip(rlt_store *s, int id, const void *key, size_t klen,
                                                rlt_ns now, int64_t cost, rlt_decision *d)
{
    if (!s || !d || cost < 0) return RLT_EINVAL;
    int rc = rlt__check_key(key, klen);
    if (rc) return rc;
    return decide_hashed(s, id, key, klen, now, cost, d, rlt__siphash(&s->sip, key, klen, 1, 3),
                         false);
}

/* A dispatcher of a few instructions: each path is a function of its own, so that this one
 * saves no registers before it jumps. */
int rlt_store_decide(rlt_store *s, int id, const void *key, size_t klen, rlt_ns now, int64_t cost,
                     rlt_decision *d)
{
#if RLT__AESHASH_X86
    /* use_aes is set at open only where the CPU runs AES-NI. */
    if (__builtin_expect(s && s->use_aes, 1)) return decide_aes(s, id, key, klen, now, cost, d);
#endif
    return decide_sip(s, id, key, klen, now, cost, d);
}

int rlt__decide_in_shard(rlt_store *s, rlt__shard *sh, uint64_t h, int id, const void *key,
                         size_t klen, rlt_ns now, int64_t cost, rlt_decision *d)
{
    return rlt__decide_locked(s, sh, h, id, key, klen, now, cost, d);
}
