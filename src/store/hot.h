/* The single call's hot path under the shard lock, inline for its three callers (the single
 * call in decide.c, batches in batch.c, tier decisions in tier.c): the prefetch of the shard's
 * line and the probe's slots, and the GCRA decision on a key already in the table.  Each
 * caller gets it unrolled into its own entry points, the way it was tuned instruction by
 * instruction (docs/experiments/, store rounds 4 to 9); what it does not take goes out of
 * line to rlt__decide_locked_general (general.c). */
#ifndef RLT_STORE_HOT_H
#define RLT_STORE_HOT_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "store/decision.h"
#include "store/general.h"
#include "store/store_internal.h"
#include "store/table.h"

/* A prefetch with intent to write: the line comes in exclusive, so the store (or the locked
 * exchange) that follows needs no second round trip to take it from another core's cache.
 * PREFETCHW is a no-op on x86-64 cores that predate it. */
static inline void rlt__prefetch_w(const void *p)
{
#if defined(__x86_64__)
    __asm__ __volatile__("prefetchw %0" : : "m"(*(const char *)p));
#else
    __builtin_prefetch(p, 1, 3);
#endif
}

/* Prefetches the lines a lookup from slot i of `tab` reads: slot i's, and those of slots
 * i + 1 and i + 3, which are the next line (and, for a home that is a line's second slot, the
 * one after): a third of the keys are displaced from their home at the table's 71% load, and
 * without these their lookup takes a second miss after the first (round 4 in
 * docs/performance.md: +5-7% for single calls at 1M keys with i + 1, +3-8% more with i + 3;
 * +17% for batches of 16).  The addresses are formed as integers: slot i + 3 may lie past
 * the table, and `tab` and `i` may come from different tables (read unlocked while a grow
 * swaps them), where pointer arithmetic would be undefined; a prefetch of any address is
 * not, and never faults. */
static inline void rlt__prefetch_probe(const rlt__slot *tab, uint32_t cap, uint32_t i)
{
    const uintptr_t a = (uintptr_t)tab + (uintptr_t)i * sizeof *tab;
    __builtin_prefetch((const void *)((uintptr_t)tab + (uintptr_t)cap * sizeof *tab + i), 0, 3);
    rlt__prefetch_w((const void *)a);
    rlt__prefetch_w((const void *)(a + sizeof *tab));
    rlt__prefetch_w((const void *)(a + 3 * sizeof *tab));
}

/* Prefetches, before the lock is taken, the shard's first line (the lock: with other threads
 * it may be in another core's cache) and the lines of the probe from the home slot of
 * the entry tag `tag` (with millions of keys, DRAM misses), all for writing.  Everything it needs
 * is known once the key is hashed,
 * so the out-of-order core starts both misses early: a single call overlaps the slot's miss
 * with the lock line's hand-off from another core, and with the tail of the previous call
 * (locked instructions do not wait for prefetches); a batch overlaps the misses of the items
 * ahead.  The table is read without the lock from the shard's hint (rlt__hint: a line no
 * decision writes); a stale cap or tab only prefetches a useless line, as prefetches never
 * fault and nothing reads through the address. */
static inline void rlt__prefetch_tag(const rlt_store *s, uint64_t h, uint32_t tag)
{
    rlt__prefetch_w(rlt__shard_of(s, h));
    const rlt__hint *hint = &s->hints[h & s->shard_mask];
    const uint32_t cap = __atomic_load_n(&hint->cap, __ATOMIC_RELAXED);
    rlt__slot *tab = __atomic_load_n(&hint->tab, __ATOMIC_RELAXED);
    if (tab) rlt__prefetch_probe(tab, cap, rlt__home(tag, cap));
}

/* The same for a batch item: (h, policy mix), whatever the store's size. */
static inline void rlt__prefetch_home(const rlt_store *s, uint64_t h, uint64_t mix)
{
    rlt__prefetch_tag(s, h, (uint32_t)((h ^ mix) >> 32));
}

/* A key of 8..16 bytes as its first and last 8 bytes (overlapping for keys under 16): in one
 * vector register where SSE2 is there (the hot path's probe then keeps no general register for
 * it), else in two words. */
#if defined(__SSE2__)
typedef __m128i rlt__key16;
static inline __attribute__((always_inline)) rlt__key16 rlt__key16_of(const uint8_t *k, size_t klen)
{
    uint64_t a, b;
    memcpy(&a, k, 8);
    memcpy(&b, k + klen - 8, 8);
    return _mm_set_epi64x((long long)b, (long long)a);
}
static inline __attribute__((always_inline)) bool rlt__key16_eq(rlt__key16 x, rlt__key16 y)
{
    return _mm_movemask_epi8(_mm_cmpeq_epi8(x, y)) == 0xFFFF;
}
static inline __attribute__((always_inline)) rlt__key16 rlt__key16_zero(void)
{
    return _mm_setzero_si128();
}
#else
typedef struct {
    uint64_t a, b;
} rlt__key16;
static inline __attribute__((always_inline)) rlt__key16 rlt__key16_of(const uint8_t *k, size_t klen)
{
    rlt__key16 v;
    memcpy(&v.a, k, 8);
    memcpy(&v.b, k + klen - 8, 8);
    return v;
}
static inline __attribute__((always_inline)) bool rlt__key16_eq(rlt__key16 x, rlt__key16 y)
{
    return ((x.a ^ y.a) | (x.b ^ y.b)) == 0;
}
static inline __attribute__((always_inline)) rlt__key16 rlt__key16_zero(void)
{
    return (rlt__key16){0, 0};
}
#endif

/* Whether inline slot e, whose head matched, holds the key: as rlt__key16 values (the key's first
 * and last 8 bytes, `kv`) for keys of 8..16 bytes, bytewise below. */
static inline __attribute__((always_inline)) bool
rlt__slot_key_is(const rlt__slot *e, size_t klen, bool words, rlt__key16 kv, const void *key)
{
    if (!words) return rlt__key_eq(e->u.inl + 8, key, klen);
    return rlt__key16_eq(rlt__key16_of(e->u.inl + 8, klen), kv);
}

/* The decision under the shard lock.  The common case, a GCRA request on a key already in the
 * table with its key and state inline, runs here in a few dozen instructions (see
 * rlt__gcra_hot for why that count matters); everything else goes to the general path (general.c).
 * `tag` is the entry hash's tag for (h, id), known before the policy array may be read.
 *
 * With millions of keys the first read of the slot waits ~100-200 ns for DRAM, and the core
 * can only run ahead to the next call's hash and prefetch (and overlap the two misses) if
 * everything between this wait and that prefetch fits its window of in-flight instructions:
 * the fewer instructions per call, the more calls overlap (docs/performance.md measures it).
 * `big` is the store's big flag as the caller read it for its prefetch (it only ever turns
 * on, and either value decides right); `k816` tells that the key has 8..16 bytes, which the
 * AES entry checks before it hashes, so that the inlined copy drops the length's tests.
 * Caller holds sh's lock.  Returns RLT_OK (allowed or denied), RLT_ENOENT (unknown policy id),
 * RLT_EINVAL (negative cost), or what the general path returns (RLT_EFULL, RLT_ENOMEM). */
static inline __attribute__((always_inline)) int
rlt__decide_locked_tag(rlt_store *s, rlt__shard *sh, uint64_t h, uint32_t tag, int id,
                       const void *key, size_t klen, rlt_ns now, int64_t cost, rlt_decision *d,
                       bool big, bool k816)
{
    /* A negative id too.  A negative cost is reported first, as every entry's checks do. */
    if ((uint32_t)id >= s->npol) return cost < 0 ? RLT_EINVAL : RLT_ENOENT;
    const rlt__pol *P = &s->pols[id];
    const rlt_ns floor = __atomic_load_n(&s->drop_floor, __ATOMIC_ACQUIRE);
    /* hot_end > 0 only for GCRA, whose 8-byte state keeps keys up to 16 bytes inline.  The hot
     * path takes calls at or after every drop (rlt__effective_now is then `now` itself, and
     * the decision needs no re-expression): a call with a lagging clock takes the general
     * path, and the hot one has two live values fewer. */
    if (now >= floor && (uint64_t)now < P->hot_end && (uint64_t)cost - 1 < (uint64_t)P->p.burst &&
        (k816 || klen <= RLT__INLINE - 8) && sh->cap) {
        assert(P->ssz == 8);
        rlt__note_now(sh, now);
        rlt__decision_put_fixed(d, P->p.burst);
        uint64_t want = rlt__head_of(tag, (uint32_t)klen, (uint32_t)id);
        rlt__slot *const tab = sh->tab, *e;
        const uint32_t cap = sh->cap;
        uint32_t i = rlt__home(tag, cap);
        /* Keys of 8..16 bytes (the common ones) are compared as one rlt__key16 value. */
        const bool words = k816 || klen >= 8;
        const rlt__key16 kv = words ? rlt__key16_of(key, klen) : rlt__key16_zero();
        uint64_t head;
        if (big) {
            /* Millions of keys: the probe walks the fingerprints, and only a match reads the
             * slot, so the branch on each step waits for the fingerprint's (cached) line, not
             * for the slot's DRAM miss; the slot's check after a match is all but always true,
             * and predicted. */
            const uint8_t *const fp = rlt__fps_of(tab, cap), f = rlt__fp_of(tag);
            for (;; i = i + 1 == cap ? 0 : i + 1) {
                const uint8_t g = fp[i];
                if (!g) goto general; /* empty: a new key */
                e = &tab[i];
                if (g == f && ((head = rlt__slot_head(e)) & RLT__HEAD_MASK) == want &&
                    rlt__slot_key_is(e, klen, words, kv, key))
                    goto found;
            }
        }
        /* A small store's table is in the core's caches: one load a step, from the slot. */
        for (;; i = i + 1 == cap ? 0 : i + 1) {
            e = &tab[i];
            head = rlt__slot_head(e);
            if (!(head & rlt__head_of(0, UINT16_MAX, 0))) goto general; /* empty: a new key */
            if ((head & RLT__HEAD_MASK) == want && rlt__slot_key_is(e, klen, words, kv, key))
                goto found;
        }
    found:;
        const rlt__gcra_req q = rlt__gcra_prepare(&P->p, now, cost);
        const bool allowed = rlt__gcra_apply_state(&q, e->u.inl, d);
        if (!(head & rlt__head_of(0, RLT__REF, 0))) e->meta |= RLT__REF;
        rlt__count_decision(sh, allowed);
        if (!allowed) rlt__jitter_decision(&P->p, key, klen, now, d);
        return RLT_OK;
    }
general:
    return rlt__decide_locked_general(s, sh, h, id, key, klen, now, cost, d);
}

/* rlt__decide_locked_tag for a caller that knows only (h, id): the tag from them, the big flag
 * read here, any key length.  Same returns. */
static inline __attribute__((always_inline)) int
rlt__decide_locked(rlt_store *s, rlt__shard *sh, uint64_t h, int id, const void *key, size_t klen,
                   rlt_ns now, int64_t cost, rlt_decision *d)
{
    const uint32_t tag = (uint32_t)((h ^ rlt__pol_mix((uint32_t)id)) >> 32);
    return rlt__decide_locked_tag(s, sh, h, tag, id, key, klen, now, cost, d,
                                  __atomic_load_n(&s->big, __ATOMIC_RELAXED), false);
}

#endif
