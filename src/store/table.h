/* One shard's table of slots: the open-addressing layout (home slot by multiply-shift, linear
 * probing, backward-shift deletion, a fingerprint byte per slot), its memory, its growth, and
 * the copy of (tab, cap) the prefetch reads.  Lookups are inline here for the decision paths;
 * making room for a new entry is evict.c's.  Every function here wants the shard's lock held
 * (or the shard private to the caller). */
#ifndef RLT_STORE_TABLE_H
#define RLT_STORE_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "store/aeshash.h"
#include "store/siphash.h"
#include "store/store_internal.h"

/* n rounded up to 8: an out-of-line block holds the key padded to 8 bytes, then the state
 * (whose size may change: a compact sliding log, logs.h). */
static inline size_t rlt__pad8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

/* Whether an entry of state size ssz and key length klen keeps both in its slot. */
static inline bool rlt__is_inline(uint32_t ssz, size_t klen)
{
    return ssz + klen <= RLT__INLINE;
}

/* The home slot of entry tag `tag` in a table of cap slots: multiply-shift, any cap works. */
static inline uint32_t rlt__home(uint32_t tag, uint32_t cap)
{
    return (uint32_t)(((uint64_t)tag * cap) >> 32);
}

/* A slot's fingerprint: one byte per slot in an array after the table's slots (0: empty),
 * from the tag's low bits (the home slot comes from its high ones).  The hot path's probe
 * reads these bytes, not the slots: 1M keys' fingerprints are 1.4 MB, so the probe's branches
 * wait for a cached line instead of the slot's DRAM miss, and the core runs on to the next
 * call while that miss is outstanding (docs/experiments/store-round6-fingerprints.md).  Only big stores' hot
 * path reads them, and only to find a slot faster: a probe that ends on a 0 or never matches
 * goes to the general path (general.c), whose probe reads the slots themselves, so a wrong byte
 * would cost time, never an answer (tests check the bytes directly: rlt__store_fps_consistent).
 * Every write that fills, moves or empties a slot writes its byte. */
static inline uint8_t rlt__fp_of(uint32_t tag)
{
    const uint8_t f = (uint8_t)tag;
    return f ? f : 1;
}

/* The table's fingerprint bytes, right after its cap slots. */
static inline uint8_t *rlt__fps_of(rlt__slot *tab, uint32_t cap)
{
    return (uint8_t *)(tab + cap);
}

/* The entry tag of key hash h under policy pid: bits 32..63 of h ^ mix(pid). */
static inline uint32_t rlt__tag_of(const rlt_store *s, uint64_t h, int pid)
{
    return (uint32_t)((h ^ s->pols[pid].mix) >> 32);
}

/* The shard of key hash h. */
static inline rlt__shard *rlt__shard_of(const rlt_store *s, uint64_t h)
{
    return &s->shards[h & s->shard_mask];
}

/* The key's keyed hash under the store's secret (h): its low bits pick the shard. */
static inline uint64_t rlt__key_hash(const rlt_store *s, const void *key, size_t klen)
{
    if (__builtin_expect(s->use_aes, 1)) return rlt__aeshash(&s->aes, key, klen);
    return rlt__siphash(&s->sip, key, klen, 1, 3);
}

/* A slot's first 8 bytes (tag, meta, policy) as one word, and the word a live slot of
 * (tag, klen, pid) has under RLT__HEAD_MASK (REF and PIN masked off): one compare instead of
 * three before the key bytes are looked at. */
static inline uint64_t rlt__slot_head(const rlt__slot *e)
{
    uint64_t w;
    memcpy(&w, e, sizeof w);
    return w;
}

_Static_assert(offsetof(rlt__slot, tag) == 0 && offsetof(rlt__slot, meta) == 4 &&
                   offsetof(rlt__slot, policy) == 6,
               "rlt__slot_head reads tag, meta and policy as one word");

static inline uint64_t rlt__head_of(uint32_t tag, uint32_t meta, uint32_t pid)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    /* In registers: building the word in a struct on the stack and reading it back as one
     * 8-byte load defeats store forwarding (three narrow stores, one wide load). */
    return (uint64_t)tag | (uint64_t)(uint16_t)meta << 32 | (uint64_t)(uint16_t)pid << 48;
#else
    rlt__slot t;
    t.tag = tag;
    t.meta = (uint16_t)meta;
    t.policy = (uint16_t)pid;
    return rlt__slot_head(&t);
#endif
}

#define RLT__HEAD_MASK rlt__head_of(UINT32_MAX, RLT__KLEN_MASK, UINT16_MAX)

/* Key equality without a libc call for the common short keys: two overlapping loads. */
static inline bool rlt__key_eq(const uint8_t *a, const uint8_t *b, size_t n)
{
    if (n >= 8 && n <= 16) {
        uint64_t a0, a1, b0, b1;
        memcpy(&a0, a, 8);
        memcpy(&b0, b, 8);
        memcpy(&a1, a + n - 8, 8);
        memcpy(&b1, b + n - 8, 8);
        return ((a0 ^ b0) | (a1 ^ b1)) == 0;
    }
    if (n >= 4 && n < 8) {
        uint32_t a0, a1, b0, b1;
        memcpy(&a0, a, 4);
        memcpy(&b0, b, 4);
        memcpy(&a1, a + n - 4, 4);
        memcpy(&b1, b + n - 4, 4);
        return ((a0 ^ b0) | (a1 ^ b1)) == 0;
    }
    return memcmp(a, b, n) == 0;
}

/* The entry of (h, pid, key) in sh's table, or NULL (caller holds the shard lock). */
static inline rlt__slot *rlt__find(const rlt_store *s, rlt__shard *sh, uint64_t h, int pid,
                                   const void *key, size_t klen)
{
    if (!sh->cap) return NULL;
    const uint32_t ssz = s->pols[pid].ssz, tag = rlt__tag_of(s, h, pid), cap = sh->cap;
    const bool inl = rlt__is_inline(ssz, klen);
    const uint64_t want = rlt__head_of(tag, (uint32_t)klen, (uint32_t)pid), mask = RLT__HEAD_MASK;
    uint32_t i = rlt__home(tag, cap);
    for (;;) {
        rlt__slot *e = &sh->tab[i];
        if (!e->meta) return NULL;
        if ((rlt__slot_head(e) & mask) == want) {
            const uint8_t *k = inl ? e->u.inl + ssz : e->u.ool;
            if (rlt__key_eq(k, key, klen)) return e;
        }
        if (++i == cap) i = 0;
    }
}

/* Whether the entries of policy P keep compact sliding logs (logs.h). */
static inline bool rlt__pol_log(const rlt__pol *P)
{
    return P->p.algo == RLT_SLIDING_LOG && P->p.block <= 0;
}

/* The state bytes of out-of-line state `st` of policy P: P->ssz, or a compact log's. */
size_t rlt__ool_state_bytes(const rlt__pol *P, const void *st);

/* Where entry e keeps its state / its key: in the slot or in its out-of-line block. */
uint8_t *rlt__slot_state(const rlt_store *s, const rlt__slot *e);
const uint8_t *rlt__slot_key(const rlt_store *s, const rlt__slot *e);

/* Empties entry e's slot (freeing its out-of-line block) and shifts the rest of its cluster
 * back; any slot pointer held before the call is invalid after it. */
void rlt__delete(const rlt_store *s, rlt__shard *sh, rlt__slot *e);

/* Tables of 2 MiB and more are 2 MiB aligned and asked to be backed by huge pages: a random
 * probe then costs one cache miss without a TLB miss on top. */
#define RLT__HUGE (UINT64_C(2) << 20)

/* The bytes a table of cap slots (and their fingerprints) takes, as counted in the shard's
 * bytes. */
size_t rlt__table_bytes(uint32_t cap);

/* Frees a table of cap slots (NULL: nothing).  Out-of-line blocks are the caller's. */
void rlt__table_free(rlt__slot *tab, uint32_t cap);

/* Moves sh's entries into a new table of ncap > cap slots.  RLT_OK or RLT_ENOMEM (the old
 * table stays). */
int rlt__grow(rlt_store *s, rlt__shard *sh, uint32_t ncap);

/* Publishes sh's (tab, cap) to the prefetch's hint, and turns the store's big flag on once its
 * tables reach the size where single calls prefetch. */
void rlt__publish_table(rlt_store *s, const rlt__shard *sh);

/* Checks a key, hashes it and takes its shard's lock: RLT_OK with *h and *sh set and the lock
 * held, or rlt__check_key's error with nothing locked. */
int rlt__lock_key(rlt_store *s, const void *key, size_t klen, uint64_t *h, rlt__shard **sh);

/* For tests: makes `s` take the big-store paths (the single call's prefetch, the probe over
 * the fingerprints) whatever its size, as a store of millions of keys does. */
void rlt__store_force_big(rlt_store *s);

/* For tests: true when every slot's fingerprint byte is its tag's (0 for an empty slot) in
 * every shard.  Takes each shard's lock in turn. */
bool rlt__store_fps_consistent(rlt_store *s);

#endif
