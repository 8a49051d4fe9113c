/* One shard's table of slots (table.h): where an entry keeps its state and key, deletion,
 * the table's memory and growth, and the (tab, cap) copy the prefetch reads. */
#define _GNU_SOURCE /* MADV_HUGEPAGE */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/sliding_log.h"
#include "store/lock.h"
#include "store/table.h"

size_t rlt__ool_state_bytes(const rlt__pol *P, const void *st)
{
    if (!rlt__pol_log(P)) return P->ssz;
    return rlt__sliding_log_bytes(rlt__sliding_log_slots(&P->p, st));
}

uint8_t *rlt__slot_state(const rlt_store *s, const rlt__slot *e)
{
    const uint32_t ssz = s->pols[e->policy].ssz, klen = e->meta & RLT__KLEN_MASK;
    return rlt__is_inline(ssz, klen) ? (uint8_t *)e->u.inl : e->u.ool + rlt__pad8(klen);
}

const uint8_t *rlt__slot_key(const rlt_store *s, const rlt__slot *e)
{
    uint32_t ssz = s->pols[e->policy].ssz;
    return rlt__is_inline(ssz, e->meta & RLT__KLEN_MASK) ? e->u.inl + ssz : e->u.ool;
}

void rlt__delete(const rlt_store *s, rlt__shard *sh, rlt__slot *e)
{
    const uint32_t cap = sh->cap;
    uint32_t i = (uint32_t)(e - sh->tab);
    assert(i < cap && e->meta);
    size_t klen = e->meta & RLT__KLEN_MASK;
    uint32_t ssz = s->pols[e->policy].ssz;
    if (!rlt__is_inline(ssz, klen)) {
        const uint8_t *b = e->u.ool;
        const size_t bytes =
            rlt__pad8(klen) + rlt__ool_state_bytes(&s->pols[e->policy], b + rlt__pad8(klen));
        free(e->u.ool);
        RLT__STAT_ADD(sh->bytes, -(uint64_t)bytes);
    }
    RLT__STAT_ADD(sh->count, -1u);
    /* Backward shift: pull later members of the run into the hole unless their home lies
     * cyclically in (hole, their position]. */
    uint8_t *const fp = rlt__fps_of(sh->tab, cap);
    uint32_t j = i;
    for (;;) {
        if (++j == cap) j = 0;
        rlt__slot *f = &sh->tab[j];
        if (!f->meta) break;
        uint32_t k = rlt__home(f->tag, cap);
        bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (stays) continue;
        sh->tab[i] = *f;
        fp[i] = fp[j];
        i = j;
    }
    memset(&sh->tab[i], 0, sizeof sh->tab[i]);
    fp[i] = 0;
}

size_t rlt__table_bytes(uint32_t cap)
{
    size_t n = (size_t)cap * (sizeof(rlt__slot) + 1); /* the slots, then their fingerprints */
    if (n < RLT__HUGE) return (n + 63) & ~(size_t)63; /* whole cache lines */
    return (n + 4095) & ~(size_t)4095; /* whole pages; the tail of the last 2 MiB stays in small
                                          pages */
}

/* Big tables come straight from mmap: malloc would often hand back heap memory that small
 * pages already back, and a fresh mapping is zero. */
static rlt__slot *table_alloc(uint32_t cap)
{
    size_t n = rlt__table_bytes(cap);
    if (n < RLT__HUGE) {
        /* Line-aligned so that no slot straddles two cache lines: a decision touches one. */
        rlt__slot *t = aligned_alloc(64, n);
        if (t) memset(t, 0, n);
        return t;
    }
    uint8_t *p =
        mmap(NULL, n + RLT__HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    /* Trim to a 2 MiB aligned range of n bytes. */
    size_t lead = (size_t)(-(uintptr_t)p & (RLT__HUGE - 1));
    if (lead) munmap(p, lead);
    if (RLT__HUGE - lead) munmap(p + lead + n, RLT__HUGE - lead);
#ifdef MADV_HUGEPAGE
    madvise(p + lead, n, MADV_HUGEPAGE);
#endif
    return (rlt__slot *)(void *)(p + lead);
}

void rlt__table_free(rlt__slot *tab, uint32_t cap)
{
    if (!tab) return;
    size_t n = rlt__table_bytes(cap);
    if (n < RLT__HUGE)
        free(tab);
    else
        munmap(tab, n);
}

/* Single calls prefetch only in stores whose tables hold this many slots in all (16 MiB) or
 * more: there the slot is a cache miss worth starting early, and the shard line probably sits
 * in another core's cache if other threads use the store; in small hot tables both are in L1
 * or L2 and the prefetch is a dozen instructions for nothing.  A store is big from the first
 * time a shard's table times the shard count reaches the size (shards fill evenly: the keyed
 * hash spreads keys over them), and stays big; the flag sits in the store's read-only lines,
 * so a small store's call touches no line for it that it does not touch anyway. */
#define PREFETCH_SLOTS (UINT64_C(1) << 19)

void rlt__publish_table(rlt_store *s, const rlt__shard *sh)
{
    rlt__hint *hint = &s->hints[sh - s->shards];
    __atomic_store_n(&hint->tab, sh->tab, __ATOMIC_RELAXED);
    __atomic_store_n(&hint->cap, sh->cap, __ATOMIC_RELAXED);
    if ((uint64_t)sh->cap * s->nshards >= PREFETCH_SLOTS &&
        !__atomic_load_n(&s->big, __ATOMIC_RELAXED))
        __atomic_store_n(&s->big, true, __ATOMIC_RELAXED);
}

int rlt__grow(rlt_store *s, rlt__shard *sh, uint32_t ncap)
{
    assert(ncap > sh->cap);
    rlt__slot *nt = table_alloc(ncap);
    if (!nt) return RLT_ENOMEM;
    uint8_t *const nfp = rlt__fps_of(nt, ncap);
    for (uint32_t i = 0; i < sh->cap; i++) {
        const rlt__slot *e = &sh->tab[i];
        if (!e->meta) continue;
        uint32_t j = rlt__home(e->tag, ncap);
        while (nt[j].meta)
            if (++j == ncap) j = 0;
        nt[j] = *e;
        nfp[j] = rlt__fp_of(e->tag);
    }
    rlt__table_free(sh->tab, sh->cap);
    RLT__STAT_ADD(sh->bytes, (uint64_t)rlt__table_bytes(ncap) - rlt__table_bytes(sh->cap));
    sh->tab = nt;
    sh->cap = ncap;
    rlt__publish_table(s, sh);
    sh->hand = 0;
    return RLT_OK;
}

int rlt__lock_key(rlt_store *s, const void *key, size_t klen, uint64_t *h, rlt__shard **sh)
{
    const int rc = rlt__check_key(key, klen);
    if (rc) return rc;
    *h = rlt__key_hash(s, key, klen);
    *sh = rlt__shard_of(s, *h);
    rlt__shard_lock(*sh);
    return RLT_OK;
}

void rlt__store_force_big(rlt_store *s)
{
    __atomic_store_n(&s->big, true, __ATOMIC_RELAXED);
}

bool rlt__store_fps_consistent(rlt_store *s)
{
    bool ok = true;
    for (uint32_t k = 0; k < s->nshards && ok; k++) {
        rlt__shard *sh = &s->shards[k];
        rlt__shard_lock(sh);
        const uint8_t *fp = sh->cap ? rlt__fps_of(sh->tab, sh->cap) : NULL;
        for (uint32_t i = 0; i < sh->cap && ok; i++)
            ok = fp[i] == (sh->tab[i].meta ? rlt__fp_of(sh->tab[i].tag) : 0);
        rlt__shard_unlock(sh);
    }
    return ok;
}
