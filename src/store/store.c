/* The keyed store: sharded open-addressing tables of 32-byte slots, named policies and tiers,
 * single, batched and multi-limit decisions, CLOCK eviction and the idle sweep.
 *
 * Layout.  A key's keyed hash under the store's secret (h) is computed once per call: AES rounds
 * keyed from the secret where the CPU has AES-NI (aeshash.c, chosen at open; its opening
 * comment gives the security argument), SipHash-1-3 elsewhere.  Its low bits pick the shard, so
 * every policy of one key (and its tier assignment) lives in one shard. Inside the shard the entry
 * hash is h ^ mix(policy); its top 32 bits are the slot tag and pick the home slot by
 * multiply-shift (any table size works, so tables grow by 1.5x and stay between 53% and 80% full).
 * Linear probing with backward-shift deletion: no tombstones, and a hit usually costs the one cache
 * miss of its home slot.  After its slots each table keeps one fingerprint byte per slot (the
 * tag's low byte, 0 when empty), which big stores' hot path probes before it reads a slot
 * (fp_of).
 *
 * Decisions.  A GCRA request on a key already in the table (key and state inline) takes a hot
 * path of a few dozen instructions after the hash (decide_locked_tag, rlt__gcra_hot); every
 * other request the general one through rlt_decide.  Both give rlt_decide's answers.
 *
 * Locking.  One spinlock per shard guards its table, its counters and its assignments.
 * Policies and tiers are written under the policy mutex *and* every shard lock, so a decision
 * reads them under its shard lock alone: the hot path takes exactly one lock (a batch takes
 * it per item, never two at once).  Lock order: sweep mutex, policy mutex, shard locks by
 * increasing index.
 *
 * Memory.  A shard holds at most max_keys / shards keys and max_bytes / shards bytes.  At the
 * cap the store first drops a fresh entry found within the next 256 slots of the CLOCK hand
 * (which changes no decision); then, unless it fails closed, it evicts the first entry the
 * hand finds not touched since the hand last passed it (second chance).  New entries start
 * untouched, so keys churned once by an attacker go before keys that come back. */
#define _GNU_SOURCE
#include <assert.h>
#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "store/reserve.h"
#include "store/store_internal.h"

#define MAX_POLICIES 65535u
#define MAX_TIERS 65535u
#define MAX_SLOTS (UINT32_C(1) << 30)
#define SCAN_IDLE 256u /* slots the eviction looks through for a fresh entry */
#define SMALL_STATE 64u

/* ---- locks ---------------------------------------------------------------------------- */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#ifndef RLT_STORE_USE_MUTEX
/* The contended part of the spinlock, out of line: with a call (sched_yield) inside the
 * inlined loop, the compiler saves the caller's live values around the whole loop on every
 * call; out here, only a call that finds the lock taken pays for it. */
static __attribute__((noinline)) void shard_lock_wait(rlt__shard *sh)
{
    /* Test-and-test-and-set; yield after a while so a preempted holder can run. */
    for (;;) {
        unsigned spins = 0;
        while (__atomic_load_n(&sh->lock, __ATOMIC_RELAXED)) {
            if (++spins < 64) {
                cpu_relax();
            } else {
                sched_yield();
                spins = 0;
            }
        }
        if (!__atomic_exchange_n(&sh->lock, 1, __ATOMIC_ACQUIRE)) return;
    }
}
#endif

/* Inline for the decision paths (a call there costs a spill of the caller's live values);
 * rlt__shard_lock / rlt__shard_unlock are the same for the other files. */
static inline __attribute__((always_inline)) void shard_lock(rlt__shard *sh)
{
#ifdef RLT_STORE_USE_MUTEX
    pthread_mutex_lock(&sh->lock);
#else
    if (__builtin_expect(__atomic_exchange_n(&sh->lock, 1, __ATOMIC_ACQUIRE), 0))
        shard_lock_wait(sh);
#endif
}

static inline __attribute__((always_inline)) void shard_unlock(rlt__shard *sh)
{
#ifdef RLT_STORE_USE_MUTEX
    pthread_mutex_unlock(&sh->lock);
#else
    __atomic_store_n(&sh->lock, 0, __ATOMIC_RELEASE);
#endif
}

void rlt__shard_lock(rlt__shard *sh)
{
    shard_lock(sh);
}

void rlt__shard_unlock(rlt__shard *sh)
{
    shard_unlock(sh);
}

void rlt__lock_all(rlt_store *s)
{
    for (uint32_t i = 0; i < s->nshards; i++)
        rlt__shard_lock(&s->shards[i]);
}

void rlt__unlock_all(rlt_store *s)
{
    for (uint32_t i = s->nshards; i-- > 0;)
        rlt__shard_unlock(&s->shards[i]);
}

/* ---- slots ---------------------------------------------------------------------------- */

static inline size_t pad8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

static inline bool is_inline(uint32_t ssz, size_t klen)
{
    return ssz + klen <= RLT__INLINE;
}

static inline uint32_t home(uint32_t tag, uint32_t cap)
{
    return (uint32_t)(((uint64_t)tag * cap) >> 32);
}

/* A slot's fingerprint: one byte per slot in an array after the table's slots (0: empty),
 * from the tag's low bits (the home slot comes from its high ones).  The hot path's probe
 * reads these bytes, not the slots: 1M keys' fingerprints are 1.4 MB, so the probe's branches
 * wait for a cached line instead of the slot's DRAM miss, and the core runs on to the next
 * call while that miss is outstanding (docs/performance.md, round 6).  Only big stores' hot
 * path reads them, and only to find a slot faster: a probe that ends on a 0 or never matches
 * goes to decide_general, whose probe reads the slots themselves, so a wrong byte would cost
 * time, never an answer (tests check the bytes directly: rlt__store_fps_consistent).  Every
 * write that fills, moves or empties a slot writes its byte. */
static inline uint8_t fp_of(uint32_t tag)
{
    const uint8_t f = (uint8_t)tag;
    return f ? f : 1;
}

static inline uint8_t *fps_of(rlt__slot *tab, uint32_t cap)
{
    return (uint8_t *)(tab + cap);
}

static inline uint32_t tag_of(const rlt_store *s, uint64_t h, int pid)
{
    return (uint32_t)((h ^ s->pols[pid].mix) >> 32);
}

static inline rlt__shard *shard_of(const rlt_store *s, uint64_t h)
{
    return &s->shards[h & s->shard_mask];
}

uint8_t *rlt__slot_state(const rlt_store *s, const rlt__slot *e)
{
    uint32_t ssz = s->pols[e->policy].ssz;
    return is_inline(ssz, e->meta & RLT__KLEN_MASK) ? (uint8_t *)e->u.inl : e->u.ool;
}

const uint8_t *rlt__slot_key(const rlt_store *s, const rlt__slot *e)
{
    uint32_t ssz = s->pols[e->policy].ssz;
    return is_inline(ssz, e->meta & RLT__KLEN_MASK) ? e->u.inl + ssz : e->u.ool + pad8(ssz);
}

static inline uint64_t key_hash(const rlt_store *s, const void *key, size_t klen)
{
    if (__builtin_expect(s->use_aes, 1)) return rlt__aeshash(&s->aes, key, klen);
    return rlt__siphash(&s->sip, key, klen, 1, 3);
}

static void assign_drop(const rlt_store *s, rlt__shard *sh, const void *key, size_t klen);

uint64_t rlt__key_hash(const rlt_store *s, const void *key, size_t klen)
{
    return key_hash(s, key, klen);
}

/* A slot's first 8 bytes (tag, meta, policy) as one word, and the word a live slot of
 * (tag, klen, pid) has under HEAD_MASK (REF and PIN masked off): one compare instead of three
 * before the key bytes are looked at. */
static inline uint64_t slot_head(const rlt__slot *e)
{
    uint64_t w;
    memcpy(&w, e, sizeof w);
    return w;
}

_Static_assert(offsetof(rlt__slot, tag) == 0 && offsetof(rlt__slot, meta) == 4 &&
                   offsetof(rlt__slot, policy) == 6,
               "slot_head reads tag, meta and policy as one word");

static inline uint64_t head_of(uint32_t tag, uint32_t meta, uint32_t pid)
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
    return slot_head(&t);
#endif
}

#define HEAD_MASK head_of(UINT32_MAX, RLT__KLEN_MASK, UINT16_MAX)

/* Key equality without a libc call for the common short keys: two overlapping loads. */
static inline bool key_eq(const uint8_t *a, const uint8_t *b, size_t n)
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

static inline rlt__slot *find_slot(const rlt_store *s, rlt__shard *sh, uint64_t h, int pid,
                                   const void *key, size_t klen)
{
    if (!sh->cap) return NULL;
    const uint32_t ssz = s->pols[pid].ssz, tag = tag_of(s, h, pid), cap = sh->cap;
    const bool inl = is_inline(ssz, klen);
    const uint64_t want = head_of(tag, (uint32_t)klen, (uint32_t)pid), mask = HEAD_MASK;
    uint32_t i = home(tag, cap);
    for (;;) {
        rlt__slot *e = &sh->tab[i];
        if (!e->meta) return NULL;
        if ((slot_head(e) & mask) == want) {
            const uint8_t *k = inl ? e->u.inl + ssz : e->u.ool + pad8(ssz);
            if (key_eq(k, key, klen)) return e;
        }
        if (++i == cap) i = 0;
    }
}

rlt__slot *rlt__find(const rlt_store *s, rlt__shard *sh, uint64_t h, int pid, const void *key,
                     size_t klen)
{
    return find_slot(s, sh, h, pid, key, klen);
}

void rlt__delete(const rlt_store *s, rlt__shard *sh, rlt__slot *e)
{
    const uint32_t cap = sh->cap;
    uint32_t i = (uint32_t)(e - sh->tab);
    assert(i < cap && e->meta);
    size_t klen = e->meta & RLT__KLEN_MASK;
    uint32_t ssz = s->pols[e->policy].ssz;
    if (!is_inline(ssz, klen)) {
        free(e->u.ool);
        RLT__STAT_ADD(sh->bytes, -(uint64_t)(pad8(ssz) + klen));
    }
    RLT__STAT_ADD(sh->count, -1u);
    /* Backward shift: pull later members of the run into the hole unless their home lies
     * cyclically in (hole, their position]. */
    uint8_t *const fp = fps_of(sh->tab, cap);
    uint32_t j = i;
    for (;;) {
        if (++j == cap) j = 0;
        rlt__slot *f = &sh->tab[j];
        if (!f->meta) break;
        uint32_t k = home(f->tag, cap);
        bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (stays) continue;
        sh->tab[i] = *f;
        fp[i] = fp[j];
        i = j;
    }
    memset(&sh->tab[i], 0, sizeof sh->tab[i]);
    fp[i] = 0;
}

/* Tables of 2 MiB and more are 2 MiB aligned and asked to be backed by huge pages: a random
 * probe then costs one cache miss without a TLB miss on top. */
#define HUGE (UINT64_C(2) << 20)

static size_t table_bytes(uint32_t cap)
{
    size_t n = (size_t)cap * (sizeof(rlt__slot) + 1); /* the slots, then their fingerprints */
    if (n < HUGE) return (n + 63) & ~(size_t)63;      /* whole cache lines */
    return (n + 4095) & ~(size_t)4095; /* whole pages; the tail of the last 2 MiB stays in small
                                          pages */
}

/* Big tables come straight from mmap: malloc would often hand back heap memory that small
 * pages already back, and a fresh mapping is zero. */
static rlt__slot *table_alloc(uint32_t cap)
{
    size_t n = table_bytes(cap);
    if (n < HUGE) {
        /* Line-aligned so that no slot straddles two cache lines: a decision touches one. */
        rlt__slot *t = aligned_alloc(64, n);
        if (t) memset(t, 0, n);
        return t;
    }
    uint8_t *p = mmap(NULL, n + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    /* Trim to a 2 MiB aligned range of n bytes. */
    size_t lead = (size_t)(-(uintptr_t)p & (HUGE - 1));
    if (lead) munmap(p, lead);
    if (HUGE - lead) munmap(p + lead + n, HUGE - lead);
#ifdef MADV_HUGEPAGE
    madvise(p + lead, n, MADV_HUGEPAGE);
#endif
    return (rlt__slot *)(void *)(p + lead);
}

static void table_free(rlt__slot *tab, uint32_t cap)
{
    if (!tab) return;
    size_t n = table_bytes(cap);
    if (n < HUGE)
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

/* Publishes the shard's (tab, cap) to the prefetch (caller holds the shard lock). */
static void publish_table(rlt_store *s, const rlt__shard *sh)
{
    rlt__hint *hint = &s->hints[sh - s->shards];
    __atomic_store_n(&hint->tab, sh->tab, __ATOMIC_RELAXED);
    __atomic_store_n(&hint->cap, sh->cap, __ATOMIC_RELAXED);
    if ((uint64_t)sh->cap * s->nshards >= PREFETCH_SLOTS &&
        !__atomic_load_n(&s->big, __ATOMIC_RELAXED))
        __atomic_store_n(&s->big, true, __ATOMIC_RELAXED);
}

static int grow(rlt_store *s, rlt__shard *sh, uint32_t ncap)
{
    assert(ncap > sh->cap);
    rlt__slot *nt = table_alloc(ncap);
    if (!nt) return RLT_ENOMEM;
    uint8_t *const nfp = fps_of(nt, ncap);
    for (uint32_t i = 0; i < sh->cap; i++) {
        const rlt__slot *e = &sh->tab[i];
        if (!e->meta) continue;
        uint32_t j = home(e->tag, ncap);
        while (nt[j].meta)
            if (++j == ncap) j = 0;
        nt[j] = *e;
        nfp[j] = fp_of(e->tag);
    }
    table_free(sh->tab, sh->cap);
    RLT__STAT_ADD(sh->bytes, (uint64_t)table_bytes(ncap) - table_bytes(sh->cap));
    sh->tab = nt;
    sh->cap = ncap;
    publish_table(s, sh);
    sh->hand = 0;
    return RLT_OK;
}

/* Frees one entry to make room for a new key.  Fresh entries first (dropping them changes no
 * decision), looked for in the next SCAN_IDLE slots; then, unless the store fails closed,
 * CLOCK: the first entry not touched since the hand last passed.  Pinned entries (held by a
 * multi-limit check) are never taken.  Returns false when nothing could be freed. */
static bool make_room(rlt_store *s, rlt__shard *sh, rlt_ns now)
{
    const uint32_t cap = sh->cap;
    if (!sh->count) return false;
    uint32_t i = sh->hand < cap ? sh->hand : 0;
    const uint32_t window = cap < SCAN_IDLE ? cap : SCAN_IDLE;
    for (uint32_t n = 0; n < window; n++) {
        rlt__slot *e = &sh->tab[i];
        if (e->meta && !(e->meta & RLT__PIN)) {
            const rlt__pol *P = &s->pols[e->policy];
            if (rlt_is_fresh(&P->p, rlt__slot_state(s, e), now)) {
                rlt__note_drop(s, now);
                rlt__delete(s, sh, e);
                RLT__STAT_ADD(sh->evicted_idle, 1);
                sh->hand = i;
                return true;
            }
        }
        if (++i == cap) i = 0;
    }
    if (s->fail_closed) {
        sh->hand = i; /* the next attempt examines the next window */
        return false;
    }
    i = sh->hand < cap ? sh->hand : 0;
    for (uint64_t n = 0; n < 2 * (uint64_t)cap + 1; n++) {
        rlt__slot *e = &sh->tab[i];
        if (e->meta && !(e->meta & RLT__PIN)) {
            if (e->meta & RLT__REF) {
                e->meta = (uint16_t)(e->meta & ~RLT__REF);
            } else {
                /* The least recently used key leaves, and its tier assignment with it. */
                assign_drop(s, sh, rlt__slot_key(s, e), e->meta & RLT__KLEN_MASK);
                rlt__delete(s, sh, e);
                sh->resv_epoch++; /* its reservations' charges went with it (reserve.c) */
                RLT__STAT_ADD(sh->evicted_forced, 1);
                sh->hand = i;
                return true;
            }
        }
        if (++i == cap) i = 0;
    }
    return false;
}

int rlt__insert(rlt_store *s, rlt__shard *sh, uint64_t h, int pid, const void *key, size_t klen,
                rlt_ns now, uint8_t *block, rlt__slot **out)
{
    const rlt__pol *P = &s->pols[pid];
    const bool inl = is_inline(P->ssz, klen);
    const uint64_t extra = inl ? 0 : pad8(P->ssz) + klen;
    const uint64_t slot = sizeof(rlt__slot);
    for (;;) {
        bool full = sh->count >= s->key_cap || sh->bytes + extra > s->byte_cap;
        if (!full && (uint64_t)(sh->count + 1) * 5 > (uint64_t)sh->cap * 4) {
            uint64_t want = sh->cap ? sh->cap + sh->cap / 2 : 16;
            if (s->key_cap != UINT64_MAX && want > s->key_cap + s->key_cap / 4 + 2)
                want = s->key_cap + s->key_cap / 4 + 2;
            if (s->byte_cap != UINT64_MAX) {
                uint64_t other = sh->bytes - table_bytes(sh->cap) + extra;
                uint64_t avail = s->byte_cap > other ? s->byte_cap - other : 0;
                if (avail >= HUGE) avail &= ~(uint64_t)4095; /* big tables: whole pages */
                uint64_t fit = avail / slot;
                if (want > fit) want = fit;
            }
            if (want > MAX_SLOTS) want = MAX_SLOTS;
            if (want <= sh->cap || want * 4 < (uint64_t)(sh->count + 1) * 5) {
                full = true;
            } else {
                int rc = grow(s, sh, (uint32_t)want);
                if (rc) return rc;
            }
        }
        if (!full) break;
        if (!make_room(s, sh, now)) {
            RLT__STAT_ADD(sh->refused_full, 1);
            return RLT_EFULL;
        }
    }
    if (!inl && !block) {
        block = calloc(1, extra);
        if (!block) return RLT_ENOMEM;
    }
    const uint32_t tag = tag_of(s, h, pid);
    uint32_t i = home(tag, sh->cap);
    while (sh->tab[i].meta)
        if (++i == sh->cap) i = 0;
    rlt__slot *e = &sh->tab[i];
    memset(e, 0, sizeof *e);
    fps_of(sh->tab, sh->cap)[i] = fp_of(tag);
    e->tag = tag;
    e->policy = (uint16_t)pid;
    e->meta = (uint16_t)klen;
    if (inl) {
        memcpy(e->u.inl + P->ssz, key, klen);
    } else {
        memcpy(block + pad8(P->ssz), key, klen);
        e->u.ool = block;
        RLT__STAT_ADD(sh->bytes, extra);
    }
    RLT__STAT_ADD(sh->count, 1u);
    *out = e;
    return RLT_OK;
}

/* ---- tier assignments ----------------------------------------------------------------- */

const rlt__assign *rlt__assign_find(const rlt__shard *sh, uint64_t h, const void *key, size_t klen)
{
    if (!sh->anb) return NULL;
    for (const rlt__assign *a = sh->abuckets[(h >> 32) & (sh->anb - 1)]; a; a = a->next)
        if (a->hash == h && a->klen == klen && memcmp(a->key, key, klen) == 0) return a;
    return NULL;
}

/* Drops key's assignment, if any (its key left the store for room: forced eviction). */
static void assign_drop(const rlt_store *s, rlt__shard *sh, const void *key, size_t klen)
{
    if (sh->acount == 0) return;
    uint64_t h = key_hash(s, key, klen);
    for (rlt__assign **pp = &sh->abuckets[(h >> 32) & (sh->anb - 1)]; *pp; pp = &(*pp)->next) {
        rlt__assign *a = *pp;
        if (a->hash == h && a->klen == klen && memcmp(a->key, key, klen) == 0) {
            *pp = a->next;
            RLT__STAT_ADD(sh->bytes, -(uint64_t)(sizeof *a + klen));
            free(a);
            sh->acount--;
            return;
        }
    }
}

int rlt__assign_set(const rlt_store *s, rlt__shard *sh, uint64_t h, const void *key, size_t klen,
                    uint32_t tier)
{
    rlt__assign *a = (rlt__assign *)rlt__assign_find(sh, h, key, klen);
    if (a) {
        a->tier = tier;
        return RLT_OK;
    }
    /* Bounded like keys: at most a shard's share of max_keys, and counted in its bytes. */
    if (sh->acount >= s->key_cap || sh->bytes + sizeof *a + klen > s->byte_cap) return RLT_EFULL;
    if (sh->acount + 1 > sh->anb) {
        uint32_t nb = sh->anb ? sh->anb * 2 : 8;
        rlt__assign **b = calloc(nb, sizeof *b);
        if (!b) return RLT_ENOMEM;
        for (uint32_t i = 0; i < sh->anb; i++) {
            for (rlt__assign *x = sh->abuckets[i], *nx; x; x = nx) {
                nx = x->next;
                rlt__assign **slot = &b[(x->hash >> 32) & (nb - 1)];
                x->next = *slot;
                *slot = x;
            }
        }
        free(sh->abuckets);
        sh->abuckets = b;
        sh->anb = nb;
    }
    a = malloc(sizeof *a + klen);
    if (!a) return RLT_ENOMEM;
    a->hash = h;
    a->tier = tier;
    a->klen = (uint16_t)klen;
    memcpy(a->key, key, klen);
    rlt__assign **slot = &sh->abuckets[(h >> 32) & (sh->anb - 1)];
    a->next = *slot;
    *slot = a;
    sh->acount++;
    RLT__STAT_ADD(sh->bytes, sizeof *a + klen);
    return RLT_OK;
}

/* ---- lifecycle ------------------------------------------------------------------------ */

/* The hint array's allocation: whole cache lines. */
static size_t hints_bytes(uint32_t nshards)
{
    return ((size_t)nshards * sizeof(rlt__hint) + 63) & ~(size_t)63;
}

static int store_alloc(rlt_store **out, uint32_t nshards, uint64_t key_cap, uint64_t byte_cap,
                       bool fail_closed, const uint8_t secret[16], bool use_aes)
{
    _Static_assert(sizeof(rlt_store) % 64 == 0, "the store is whole cache lines");
    rlt_store *s = aligned_alloc(64, sizeof *s); /* its often-written lines are its own */
    if (!s) return RLT_ENOMEM;
    memset(s, 0, sizeof *s);
    s->shards = aligned_alloc(64, nshards * sizeof(rlt__shard));
    if (!s->shards) {
        free(s);
        return RLT_ENOMEM;
    }
    memset(s->shards, 0, nshards * sizeof(rlt__shard));
    s->hints = aligned_alloc(64, hints_bytes(nshards));
    if (!s->hints) {
        free(s->shards);
        free(s);
        return RLT_ENOMEM;
    }
    memset(s->hints, 0, nshards * sizeof(rlt__hint));
    for (uint32_t i = 0; i < nshards; i++)
        s->shards[i].last_now = INT64_MIN;
    s->drop_floor = INT64_MIN;
#ifdef RLT_STORE_USE_MUTEX
    for (uint32_t i = 0; i < nshards; i++)
        pthread_mutex_init(&s->shards[i].lock, NULL);
#endif
    s->nshards = nshards;
    s->shard_mask = nshards - 1;
    s->key_cap = key_cap;
    s->byte_cap = byte_cap;
    s->fail_closed = fail_closed;
    memcpy(s->secret, secret, 16);
    rlt__sipkey_init(&s->sip, secret);
    rlt__aeskey_init(&s->aes, secret);
    s->use_aes = use_aes;
    pthread_mutex_init(&s->pol_mu, NULL);
    pthread_mutex_init(&s->sweep_mu, NULL);
    *out = s;
    return RLT_OK;
}

int rlt_store_open(rlt_store **out, const rlt_store_options *opt)
{
    return rlt__store_open_hash(out, opt, RLT__HASH_AUTO);
}

int rlt__store_open_hash(rlt_store **out, const rlt_store_options *opt, int hash)
{
    if (!out) return RLT_EINVAL;
    *out = NULL;
    rlt_store_options o;
    if (opt)
        o = *opt;
    else
        memset(&o, 0, sizeof o);
    if (o.shards > 65536) return RLT_EINVAL;
    if (o.max_bytes && o.max_bytes < 4096) return RLT_EINVAL;
    uint32_t n = 1;
    while (n < (o.shards ? o.shards : 1024))
        n <<= 1;
    /* A capped store keeps 16,384 keys (and 1 MiB) per shard or more, down to 64 shards: keys
     * fill the shards unevenly, and with fewer per shard the first is full well before the
     * store is (at max_keys 1M, random keys: at 86-90% of it with 1,024 shards, 98% with 64). */
    while (!o.shards && n > 64 && o.max_keys && o.max_keys / n < 16384)
        n >>= 1;
    while (!o.shards && n > 64 && o.max_bytes && o.max_bytes / n < (UINT64_C(1) << 20))
        n >>= 1;
    /* Small caps get fewer shards, so that a per-shard cap stays meaningful. */
    while (n > 1 && o.max_keys && o.max_keys / n < 64)
        n >>= 1;
    while (n > 1 && o.max_bytes && o.max_bytes / n < 65536)
        n >>= 1;
    const bool aes_ok = rlt__aeshash_supported();
    if (hash == RLT__HASH_AES ? !aes_ok : hash != RLT__HASH_AUTO && hash != RLT__HASH_SIP)
        return RLT_EINVAL;
    uint8_t secret[16];
    if (o.has_secret) {
        memcpy(secret, o.secret, 16);
    } else {
        size_t got = 0;
        while (got < sizeof secret) {
            ssize_t r = getrandom(secret + got, sizeof secret - got, 0);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) return RLT_EIO;
            got += (size_t)r;
        }
    }
    int rc = store_alloc(out, n, o.max_keys ? o.max_keys / n : UINT64_MAX,
                         o.max_bytes ? o.max_bytes / n : UINT64_MAX, o.fail_closed, secret,
                         hash != RLT__HASH_SIP && aes_ok);
    if (rc == RLT_OK) rlt__resv_init(*out, o.max_reservations);
    return rc;
}

int rlt__store_new_like(const rlt_store *s, rlt_store **out)
{
    return store_alloc(out, s->nshards, s->key_cap, s->byte_cap, s->fail_closed, s->secret,
                       s->use_aes);
}

void rlt__shard_free(rlt__shard *sh, const rlt_store *s)
{
    for (uint32_t i = 0; i < sh->cap; i++) {
        const rlt__slot *e = &sh->tab[i];
        if (e->meta && !is_inline(s->pols[e->policy].ssz, e->meta & RLT__KLEN_MASK)) free(e->u.ool);
    }
    table_free(sh->tab, sh->cap);
    for (uint32_t i = 0; i < sh->anb; i++) {
        for (rlt__assign *a = sh->abuckets[i], *n; a; a = n) {
            n = a->next;
            free(a);
        }
    }
    free(sh->abuckets);
    rlt__resv_free((rlt_store *)s, sh); /* its counter is not part of the logical state */
}

void rlt_store_close(rlt_store *s)
{
    if (!s) return;
    for (uint32_t i = 0; i < s->nshards; i++) {
        rlt__shard_free(&s->shards[i], s);
#ifdef RLT_STORE_USE_MUTEX
        pthread_mutex_destroy(&s->shards[i].lock);
#endif
    }
    free(s->shards);
    free(s->hints);
    free(s->pols);
    free(s->tiers);
    pthread_mutex_destroy(&s->pol_mu);
    pthread_mutex_destroy(&s->sweep_mu);
    free(s);
}

/* ---- policies and tiers --------------------------------------------------------------- */

bool rlt__valid_name(const char *name, size_t len)
{
    if (!name || len < 1 || len > RLT_NAME_MAX) return false;
    for (size_t i = 0; i < len; i++)
        if (name[i] <= 0x20 || name[i] >= 0x7f) return false;
    return true;
}

bool rlt_store_name_valid(const char *name, size_t len)
{
    return rlt__valid_name(name, len);
}

static int name_len(const char *name, size_t *len)
{
    if (!name) return RLT_EINVAL;
    *len = strnlen(name, RLT_NAME_MAX + 1);
    return rlt__valid_name(name, *len) ? RLT_OK : RLT_EINVAL;
}

static int pol_find(const rlt_store *s, const char *name, size_t len)
{
    for (uint32_t i = 0; i < s->npol; i++)
        if (s->pols[i].nlen == len && memcmp(s->pols[i].name, name, len) == 0) return (int)i;
    return -1;
}

static int tier_find(const rlt_store *s, const char *name, size_t len)
{
    for (uint32_t i = 0; i < s->ntier; i++)
        if (s->tiers[i].nlen == len && memcmp(s->tiers[i].name, name, len) == 0) return (int)i;
    return -1;
}

/* Re-derives the policy through rlt_policy_init so a caller's stale derived fields cannot
 * reach the decision code. */
static int clean_policy(const rlt_policy *p, rlt_policy *q, uint32_t *ssz)
{
    if (!p) return RLT_EINVAL;
    int64_t burst = p->algo == RLT_TOKEN_BUCKET || p->algo == RLT_GCRA ? p->burst : 0;
    if (rlt_policy_init(q, p->algo, p->limit, p->period, burst, p->queue, p->delay) ||
        rlt_policy_set_block(q, p->block, p->block_factor, p->block_max) ||
        rlt_policy_set_jitter(q, p->jitter))
        return RLT_EINVAL;
    if (rlt_policy_copy_calendar(q, p)) return RLT_EINVAL; /* calendar windows keep theirs */
    size_t n = rlt_state_size(q);
    if (!n || n > UINT32_MAX) return RLT_EINVAL;
    *ssz = (uint32_t)n;
    return RLT_OK;
}

/* Appends a policy; caller holds every lock (or owns the store). */
static int pol_append(rlt_store *s, const char *name, size_t len, const rlt_policy *q, uint32_t ssz)
{
    if (s->npol >= MAX_POLICIES) return RLT_ENOMEM;
    if (s->npol == s->polcap) {
        uint32_t nc = s->polcap ? s->polcap * 2 : 8;
        rlt__pol *np = realloc(s->pols, nc * sizeof *np);
        if (!np) return RLT_ENOMEM;
        s->pols = np;
        s->polcap = nc;
    }
    rlt__pol *P = &s->pols[s->npol];
    memset(P, 0, sizeof *P);
    P->p = *q;
    P->ssz = ssz;
    P->hot_end = rlt__gcra_hot_end(q);
    P->mix = rlt__pol_mix(s->npol);
    P->nlen = (uint8_t)len;
    memcpy(P->name, name, len);
    __atomic_store_n(&s->npol, s->npol + 1, __ATOMIC_RELAXED);
    return (int)s->npol - 1;
}

int rlt__add_policy(rlt_store *s, const char *name, size_t nlen, const rlt_policy *p)
{
    rlt_policy q;
    uint32_t ssz;
    if (!rlt__valid_name(name, nlen) || pol_find(s, name, nlen) >= 0) return RLT_EINVAL;
    if (clean_policy(p, &q, &ssz)) return RLT_EINVAL;
    int id = pol_append(s, name, nlen, &q, ssz);
    return id < 0 ? id : RLT_OK;
}

/* Carries every entry of policy `pid` from `old` to the policy now in s->pols[pid]; caller
 * holds every lock.  `reset` drops them all (the caller then changes the policy). */
/* Carries every entry of policy `pid` from `old` to the policy now in s->pols[pid]; caller
 * holds every lock.  `reset` drops them all (the caller then changes the policy).  Entries
 * fresh under the old policy carry nothing and are dropped first, so the result does not
 * depend on whether the store had dropped them lazily yet.  `now` is the latest time the
 * store has seen (set_policy takes no clock of its own). */
/* Where a walk over a shard's table that deletes as it goes must start: at an empty slot.  A
 * delete shifts later entries of its cluster back by one and never moves one across an empty
 * slot, so a walk that starts at an empty slot and goes once around meets every entry exactly
 * once.  A walk from slot 0 meets twice an entry that a delete near the end pulls back across
 * the wrap, which converted one state twice (a change of policy could then mint allowance).
 * The table is at most 80% full, so an empty slot exists whenever cap > 0. */
static uint32_t walk_start(const rlt__shard *sh)
{
    for (uint32_t i = 0; i < sh->cap; i++)
        if (!sh->tab[i].meta) return i;
    return 0;
}

static void convert_entries(rlt_store *s, int pid, const rlt_policy *old, rlt_change how,
                            bool reset, rlt_ns now)
{
    for (uint32_t k = 0; k < s->nshards; k++) {
        rlt__shard *sh = &s->shards[k];
        const uint32_t start = walk_start(sh);
        for (uint32_t n = 0; n < sh->cap;) {
            rlt__slot *e = &sh->tab[(start + n) % sh->cap];
            if (!e->meta || e->policy != pid) {
                n++;
                continue;
            }
            if (!reset) {
                const rlt_policy *np = &s->pols[pid].p;
                uint8_t *st = rlt__slot_state(s, e);
                rlt_convert c = how == RLT_CHANGE_SCALE ? RLT_CONVERT_SCALE : RLT_CONVERT_KEEP;
                if (!rlt_is_fresh(old, st, now) &&
                    rlt_state_convert(old, np, st, now, c) == RLT_OK) {
                    n++;
                    continue;
                }
            }
            rlt__delete(s, sh, e); /* a later entry may have moved into this slot: look again */
        }
    }
}

int rlt_store_set_policy(rlt_store *s, const char *name, const rlt_policy *p, rlt_change how,
                         int *id)
{
    size_t len;
    rlt_policy q;
    uint32_t ssz;
    if (!s || name_len(name, &len) || clean_policy(p, &q, &ssz)) return RLT_EINVAL;
    if (how != RLT_CHANGE_KEEP && how != RLT_CHANGE_RESET && how != RLT_CHANGE_SCALE)
        return RLT_EINVAL;
    pthread_mutex_lock(&s->pol_mu);
    rlt__lock_all(s);
    int pid = pol_find(s, name, len), rc = RLT_OK;
    if (pid < 0) {
        pid = pol_append(s, name, len, &q, ssz);
        if (pid < 0) rc = pid;
    } else {
        rlt__pol *P = &s->pols[pid];
        rlt_policy old = P->p;
        bool reset = how == RLT_CHANGE_RESET || old.algo != q.algo || P->ssz != ssz;
        if (!reset && rlt_policy_equal(&old, &q)) {
            /* The same policy again (a reload, a restart's config over its snapshot): every
             * state and reservation stands as it is; a conversion would cap debts. */
            rlt__unlock_all(s);
            pthread_mutex_unlock(&s->pol_mu);
            if (id) *id = pid;
            return RLT_OK;
        }
        rlt_ns now = INT64_MIN;
        for (uint32_t k = 0; k < s->nshards; k++)
            if (s->shards[k].last_now > now) now = s->shards[k].last_now;
        rlt__note_drop(s, now); /* entries may be reset or dropped as of `now` */
        if (reset) convert_entries(s, pid, &old, how, true, now); /* under the old size */
        if (reset || !rlt__policy_same(&old, &q)) rlt__resv_drop_policy(s, pid);
        P->p = q;
        P->ssz = ssz;
        P->hot_end = rlt__gcra_hot_end(&q);
        if (!reset) convert_entries(s, pid, &old, how, false, now);
    }
    rlt__unlock_all(s);
    pthread_mutex_unlock(&s->pol_mu);
    if (rc) return rc;
    if (id) *id = pid;
    return RLT_OK;
}

int rlt_store_policy_id(const rlt_store *s, const char *name)
{
    size_t len;
    if (!s || name_len(name, &len)) return RLT_ENOENT;
    rlt_store *m = (rlt_store *)s; /* the mutex is not part of the logical state */
    pthread_mutex_lock(&m->pol_mu);
    int id = pol_find(s, name, len);
    pthread_mutex_unlock(&m->pol_mu);
    return id < 0 ? RLT_ENOENT : id;
}

int rlt_store_get_policy(const rlt_store *s, int id, rlt_policy *out)
{
    if (!s || !out) return RLT_ENOENT;
    rlt_store *m = (rlt_store *)s;
    int rc = RLT_ENOENT;
    pthread_mutex_lock(&m->pol_mu);
    if (id >= 0 && (uint32_t)id < s->npol) {
        *out = s->pols[id].p;
        rc = RLT_OK;
    }
    pthread_mutex_unlock(&m->pol_mu);
    return rc;
}

static int tier_append(rlt_store *s, const char *name, size_t len, int policy)
{
    if (s->ntier >= MAX_TIERS) return RLT_ENOMEM;
    if (s->ntier == s->tiercap) {
        uint32_t nc = s->tiercap ? s->tiercap * 2 : 8;
        rlt__named_tier *nt = realloc(s->tiers, nc * sizeof *nt);
        if (!nt) return RLT_ENOMEM;
        s->tiers = nt;
        s->tiercap = nc;
    }
    rlt__named_tier *t = &s->tiers[s->ntier++];
    memset(t, 0, sizeof *t);
    t->nlen = (uint8_t)len;
    memcpy(t->name, name, len);
    t->policy = policy;
    return RLT_OK;
}

int rlt__add_tier(rlt_store *s, const char *name, size_t nlen, int policy)
{
    if (!rlt__valid_name(name, nlen) || tier_find(s, name, nlen) >= 0) return RLT_EINVAL;
    if (policy < 0 || (uint32_t)policy >= s->npol) return RLT_EINVAL;
    return tier_append(s, name, nlen, policy);
}

int rlt_store_set_tier(rlt_store *s, const char *tier, int policy_id)
{
    size_t len;
    if (!s || name_len(tier, &len)) return RLT_EINVAL;
    pthread_mutex_lock(&s->pol_mu);
    int rc = RLT_OK;
    if (policy_id < 0 || (uint32_t)policy_id >= s->npol) {
        rc = RLT_ENOENT;
    } else {
        rlt__lock_all(s);
        int t = tier_find(s, tier, len);
        if (t >= 0)
            s->tiers[t].policy = policy_id;
        else
            rc = tier_append(s, tier, len, policy_id);
        rlt__unlock_all(s);
    }
    pthread_mutex_unlock(&s->pol_mu);
    return rc;
}

static int check_key(const void *key, size_t klen)
{
    if (klen == 0 || klen > RLT_KEY_MAX) return RLT_EKEYLEN;
    return key ? RLT_OK : RLT_EINVAL;
}

int rlt_store_assign_tier(rlt_store *s, const void *key, size_t klen, const char *tier)
{
    size_t len;
    if (!s || name_len(tier, &len)) return RLT_EINVAL;
    int rc = check_key(key, klen);
    if (rc) return rc;
    uint64_t h = rlt__key_hash(s, key, klen);
    rlt__shard *sh = shard_of(s, h);
    rlt__shard_lock(sh); /* tiers are written under every shard lock: reading under one is safe */
    int t = tier_find(s, tier, len);
    rc = t < 0 ? RLT_ENOENT : rlt__assign_set(s, sh, h, key, klen, (uint32_t)t);
    rlt__shard_unlock(sh);
    return rc;
}

/* A prefetch with intent to write: the line comes in exclusive, so the store (or the locked
 * exchange) that follows needs no second round trip to take it from another core's cache.
 * PREFETCHW is a no-op on x86-64 cores that predate it. */
static inline void prefetch_w(const void *p)
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
static inline void prefetch_probe(const rlt__slot *tab, uint32_t cap, uint32_t i)
{
    const uintptr_t a = (uintptr_t)tab + (uintptr_t)i * sizeof *tab;
    __builtin_prefetch((const void *)((uintptr_t)tab + (uintptr_t)cap * sizeof *tab + i), 0, 3);
    prefetch_w((const void *)a);
    prefetch_w((const void *)(a + sizeof *tab));
    prefetch_w((const void *)(a + 3 * sizeof *tab));
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
static inline void prefetch_tag(const rlt_store *s, uint64_t h, uint32_t tag)
{
    prefetch_w(shard_of(s, h));
    const rlt__hint *hint = &s->hints[h & s->shard_mask];
    const uint32_t cap = __atomic_load_n(&hint->cap, __ATOMIC_RELAXED);
    rlt__slot *tab = __atomic_load_n(&hint->tab, __ATOMIC_RELAXED);
    if (tab) prefetch_probe(tab, cap, home(tag, cap));
}

/* The same for a batch item: (h, policy mix), whatever the store's size. */
static inline void prefetch_home(const rlt_store *s, uint64_t h, uint64_t mix)
{
    prefetch_tag(s, h, (uint32_t)((h ^ mix) >> 32));
}

/* ---- decisions ------------------------------------------------------------------------ */

/* Records `now` as the shard's latest instant, with a store and no branch: a call's `now` is
 * newer than its shard's on the first call to that shard after each clock tick, which no
 * predictor can learn, and the branch this replaced mispredicted often enough to cost ~20% of
 * a hot call at 1,000 keys (docs/performance.md, round 4). */
static inline void note_now(rlt__shard *sh, rlt_ns now)
{
    const rlt_ns last = sh->last_now;
    sh->last_now = now > last ? now : last;
}

/* Adds 1 to a counter that rlt_store_stats_get reads without the lock.  On x86-64 one `add`
 * to memory (not locked: the shard lock orders the writers) does what RLT__STAT_ADD's load,
 * add and atomic store do in three instructions; an aligned 8-byte write is single-copy
 * atomic there, so a reader sees the old value or the new one, as with the atomic store. */
static inline void stat_inc(uint64_t *f)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __asm__ __volatile__("addq $1, %0" : "+m"(*f));
#else
    RLT__STAT_ADD(*f, 1);
#endif
}

static inline void count_decision(rlt__shard *sh, bool allowed)
{
    stat_inc(allowed ? &sh->allowed : &sh->denied);
}

static bool fresh_after(const rlt_policy *p, const void *st, rlt_ns now, int64_t cost,
                        const rlt_decision *d)
{
    /* An allowed request of cost >= 1 has just consumed something; a denied one that can fit
     * later was denied by used allowance (a fresh state allows any cost that can ever fit).
     * Neither leaves a fresh state, and the hot path skips the check. */
    if (cost > 0 && (d->allowed || d->retry_after >= 0)) {
        assert(!rlt_is_fresh(p, st, now));
        return false;
    }
    return rlt_is_fresh(p, st, now);
}

/* The decision under the shard lock, the general way: any algorithm, a new key, a large
 * state, a peek.  `now` is the effective instant, `asked` the caller's. */
static __attribute__((noinline)) int decide_general(rlt_store *s, rlt__shard *sh, uint64_t h,
                                                    int id, const void *key, size_t klen,
                                                    rlt_ns asked, rlt_ns now, int64_t cost,
                                                    rlt_decision *d)
{
    const rlt__pol *P = &s->pols[id];
    rlt__slot *e = find_slot(s, sh, h, id, key, klen);
    int rc;
    if (e) {
        /* An existing entry is never dropped here: a peek or a denial consumed nothing and
         * must change nothing, not even which instants later calls are decided at.  The
         * sweep and make_room drop it once it is fresh. */
        uint8_t *st = rlt__slot_state(s, e);
        if ((rc = rlt_decide(&P->p, st, now, cost, d))) return rc;
        e->meta |= RLT__REF;
    } else if (P->ssz <= SMALL_STATE) {
        uint64_t tmp[SMALL_STATE / 8] = {0};
        if ((rc = rlt_decide(&P->p, tmp, now, cost, d))) return rc;
        if (!fresh_after(&P->p, tmp, now, cost, d)) {
            if ((rc = rlt__insert(s, sh, h, id, key, klen, now, NULL, &e))) return rc;
            memcpy(rlt__slot_state(s, e), tmp, P->ssz);
        }
    } else {
        /* Large state (sliding log, concurrency): decide in the block the entry will own. */
        uint8_t *block = calloc(1, pad8(P->ssz) + klen);
        if (!block) return RLT_ENOMEM;
        rc = rlt_decide(&P->p, block, now, cost, d);
        if (rc || fresh_after(&P->p, block, now, cost, d)) {
            free(block);
        } else if ((rc = rlt__insert(s, sh, h, id, key, klen, now, block, &e))) {
            free(block);
        }
        if (rc) return rc;
    }
    rlt__from_effective(d, asked, now);
    count_decision(sh, d->allowed);
    return RLT_OK;
}

/* The policy's jitter on a denied decision's wait (rlt_jitter: the key's FNV-1a, the caller's
 * instant), so every front end of the store reports the same spread value. */
static inline void jitter_decision(const rlt_policy *p, const void *key, size_t klen, rlt_ns now,
                                   rlt_decision *d)
{
    if (p->jitter > 0 && d->retry_after > 0)
        d->retry_after = rlt_jitter(p, rlt_hash_fnv1a(key, klen), now, d->retry_after);
}

/* A key of 8..16 bytes as its first and last 8 bytes (overlapping for keys under 16): in one
 * vector register where SSE2 is there (the hot path's probe then keeps no general register for
 * it), else in two words. */
#if defined(__SSE2__)
typedef __m128i key16;
static inline __attribute__((always_inline)) key16 key16_of(const uint8_t *k, size_t klen)
{
    uint64_t a, b;
    memcpy(&a, k, 8);
    memcpy(&b, k + klen - 8, 8);
    return _mm_set_epi64x((long long)b, (long long)a);
}
static inline __attribute__((always_inline)) bool key16_eq(key16 x, key16 y)
{
    return _mm_movemask_epi8(_mm_cmpeq_epi8(x, y)) == 0xFFFF;
}
static inline __attribute__((always_inline)) key16 key16_zero(void)
{
    return _mm_setzero_si128();
}
#else
typedef struct {
    uint64_t a, b;
} key16;
static inline __attribute__((always_inline)) key16 key16_of(const uint8_t *k, size_t klen)
{
    key16 v;
    memcpy(&v.a, k, 8);
    memcpy(&v.b, k + klen - 8, 8);
    return v;
}
static inline __attribute__((always_inline)) bool key16_eq(key16 x, key16 y)
{
    return ((x.a ^ y.a) | (x.b ^ y.b)) == 0;
}
static inline __attribute__((always_inline)) key16 key16_zero(void)
{
    return (key16){0, 0};
}
#endif

/* Whether inline slot e, whose head matched, holds the key: as key16 values (the key's first
 * and last 8 bytes, `kv`) for keys of 8..16 bytes, bytewise below. */
static inline __attribute__((always_inline)) bool slot_key_is(const rlt__slot *e, size_t klen,
                                                              bool words, key16 kv, const void *key)
{
    if (!words) return key_eq(e->u.inl + 8, key, klen);
    return key16_eq(key16_of(e->u.inl + 8, klen), kv);
}

/* The decision under the shard lock when the hot path below does not take it: any algorithm,
 * a new key, a lagging clock, a cost outside 1..burst.  Out of line, and reading the drop floor
 * and the policy itself, so that the hot path keeps none of what only this path needs. */
static __attribute__((noinline)) int decide_locked_general(rlt_store *s, rlt__shard *sh, uint64_t h,
                                                           int id, const void *key, size_t klen,
                                                           rlt_ns now, int64_t cost,
                                                           rlt_decision *d)
{
    if (cost < 0) return RLT_EINVAL; /* decide_aes's fast entry leaves this check to here */
    const rlt__pol *P = &s->pols[id];
    const rlt_ns floor = __atomic_load_n(&s->drop_floor, __ATOMIC_ACQUIRE);
    const rlt_ns eff = now < floor ? floor : now;
    note_now(sh, eff);
    int rc = decide_general(s, sh, h, id, key, klen, now, eff, cost, d);
    if (!rc) jitter_decision(&P->p, key, klen, now, d);
    return rc;
}

/* The decision under the shard lock.  The common case, a GCRA request on a key already in the
 * table with its key and state inline, runs here in a few dozen instructions (see
 * rlt__gcra_hot for why that count matters); everything else goes to decide_general.  `tag`
 * is the entry hash's tag for (h, id), known before the policy array may be read.
 *
 * With millions of keys the first read of the slot waits ~100-200 ns for DRAM, and the core
 * can only run ahead to the next call's hash and prefetch (and overlap the two misses) if
 * everything between this wait and that prefetch fits its window of in-flight instructions:
 * the fewer instructions per call, the more calls overlap (docs/performance.md measures it).
 * `big` is the store's big flag as the caller read it for its prefetch (it only ever turns
 * on, and either value decides right); `k816` tells that the key has 8..16 bytes, which the
 * AES entry checks before it hashes, so that the inlined copy drops the length's tests. */
static inline __attribute__((always_inline)) int
decide_locked_tag(rlt_store *s, rlt__shard *sh, uint64_t h, uint32_t tag, int id, const void *key,
                  size_t klen, rlt_ns now, int64_t cost, rlt_decision *d, bool big, bool k816)
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
        note_now(sh, now);
        rlt__decision_put_fixed(d, P->p.burst);
        uint64_t want = head_of(tag, (uint32_t)klen, (uint32_t)id);
        rlt__slot *const tab = sh->tab, *e;
        const uint32_t cap = sh->cap;
        uint32_t i = home(tag, cap);
        /* Keys of 8..16 bytes (the common ones) are compared as one key16 value. */
        const bool words = k816 || klen >= 8;
        const key16 kv = words ? key16_of(key, klen) : key16_zero();
        uint64_t head;
        if (big) {
            /* Millions of keys: the probe walks the fingerprints, and only a match reads the
             * slot, so the branch on each step waits for the fingerprint's (cached) line, not
             * for the slot's DRAM miss; the slot's check after a match is all but always true,
             * and predicted. */
            const uint8_t *const fp = fps_of(tab, cap), f = fp_of(tag);
            for (;; i = i + 1 == cap ? 0 : i + 1) {
                const uint8_t g = fp[i];
                if (!g) goto general; /* empty: a new key */
                e = &tab[i];
                if (g == f && ((head = slot_head(e)) & HEAD_MASK) == want &&
                    slot_key_is(e, klen, words, kv, key))
                    goto found;
            }
        }
        /* A small store's table is in the core's caches: one load a step, from the slot. */
        for (;; i = i + 1 == cap ? 0 : i + 1) {
            e = &tab[i];
            head = slot_head(e);
            if (!(head & head_of(0, UINT16_MAX, 0))) goto general; /* empty: a new key */
            if ((head & HEAD_MASK) == want && slot_key_is(e, klen, words, kv, key)) goto found;
        }
    found:;
        const rlt__gcra_req q = rlt__gcra_prepare(&P->p, now, cost);
        const bool allowed = rlt__gcra_apply_state(&q, e->u.inl, d);
        if (!(head & head_of(0, RLT__REF, 0))) e->meta |= RLT__REF;
        count_decision(sh, allowed);
        if (!allowed) jitter_decision(&P->p, key, klen, now, d);
        return RLT_OK;
    }
general:
    return decide_locked_general(s, sh, h, id, key, klen, now, cost, d);
}

static inline __attribute__((always_inline)) int decide_locked(rlt_store *s, rlt__shard *sh,
                                                               uint64_t h, int id, const void *key,
                                                               size_t klen, rlt_ns now,
                                                               int64_t cost, rlt_decision *d)
{
    const uint32_t tag = (uint32_t)((h ^ rlt__pol_mix((uint32_t)id)) >> 32);
    return decide_locked_tag(s, sh, h, tag, id, key, klen, now, cost, d,
                             __atomic_load_n(&s->big, __ATOMIC_RELAXED), false);
}

/* One call once its key is hashed (h): inlined into the two entry points below, so that each
 * has its key hash unrolled into it and no call before the slot's address is known. */
static inline __attribute__((always_inline)) int
decide_hashed(rlt_store *s, int id, const void *key, size_t klen, rlt_ns now, int64_t cost,
              rlt_decision *d, uint64_t h, bool k816)
{
    rlt__shard *sh = shard_of(s, h);
    const uint32_t tag = (uint32_t)((h ^ rlt__pol_mix((uint32_t)id)) >> 32);
    const bool big = __atomic_load_n(&s->big, __ATOMIC_RELAXED);
    if (big) prefetch_tag(s, h, tag);
    shard_lock(sh);
    int rc = decide_locked_tag(s, sh, h, tag, id, key, klen, now, cost, d, big, k816);
    shard_unlock(sh);
    return rc;
}

#if RLT__AESHASH_X86
/* The AES path for any arguments: the checks, then the hash of any length. */
static __attribute__((noinline)) RLT__AESHASH_TARGET int
decide_aes_any(rlt_store *s, int id, const void *key, size_t klen, rlt_ns now, int64_t cost,
               rlt_decision *d)
{
    if (!d || cost < 0) return RLT_EINVAL;
    int rc = check_key(key, klen);
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
    int rc = check_key(key, klen);
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

void rlt__store_force_big(rlt_store *s)
{
    __atomic_store_n(&s->big, true, __ATOMIC_RELAXED);
}

bool rlt__store_fps_consistent(rlt_store *s)
{
    bool ok = true;
    for (uint32_t k = 0; k < s->nshards && ok; k++) {
        rlt__shard *sh = &s->shards[k];
        shard_lock(sh);
        const uint8_t *fp = sh->cap ? fps_of(sh->tab, sh->cap) : NULL;
        for (uint32_t i = 0; i < sh->cap && ok; i++)
            ok = fp[i] == (sh->tab[i].meta ? fp_of(sh->tab[i].tag) : 0);
        shard_unlock(sh);
    }
    return ok;
}

int rlt__decide_in_shard(rlt_store *s, rlt__shard *sh, uint64_t h, int id, const void *key,
                         size_t klen, rlt_ns now, int64_t cost, rlt_decision *d)
{
    return decide_locked(s, sh, h, id, key, klen, now, cost, d);
}

/* ---- batches -------------------------------------------------------------------------- */

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
    b->rc = cost < 0 ? RLT_EINVAL : check_key(k->key, k->klen);
    if (b->rc) return;
    b->h = hash(s, k->key, k->klen);
    prefetch_home(s, b->h, mix);
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
            rlt__shard *sh = shard_of(s, b->h);
            shard_lock(sh);
            rc = decide_locked(s, sh, b->h, id, keys[i].key, keys[i].klen, now,
                               costs ? costs[i] : 1, &out[i]);
            shard_unlock(sh);
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

/* The tier policy of `key` (its assignment, else default_tier), and optionally a decision
 * under it in the same critical section (d != NULL). */
static int tier_call(rlt_store *s, const char *default_tier, const void *key, size_t klen,
                     rlt_ns now, int64_t cost, rlt_decision *d, int *policy_id)
{
    int rc = check_key(key, klen);
    if (rc) return rc;
    size_t dlen = 0;
    if (default_tier && name_len(default_tier, &dlen)) return RLT_EINVAL;
    uint64_t h = rlt__key_hash(s, key, klen);
    rlt__shard *sh = shard_of(s, h);
    rlt__shard_lock(sh);
    const rlt__assign *a = rlt__assign_find(sh, h, key, klen);
    int t = a ? (int)a->tier : default_tier ? tier_find(s, default_tier, dlen) : -1;
    if (t < 0)
        rc = RLT_ENOENT;
    else if (d != NULL)
        rc = decide_locked(s, sh, h, s->tiers[t].policy, key, klen, now, cost, d);
    else
        *policy_id = s->tiers[t].policy;
    rlt__shard_unlock(sh);
    return rc;
}

int rlt_store_decide_tier(rlt_store *s, const char *default_tier, const void *key, size_t klen,
                          rlt_ns now, int64_t cost, rlt_decision *d)
{
    if (!s || !d || cost < 0) return RLT_EINVAL;
    return tier_call(s, default_tier, key, klen, now, cost, d, NULL);
}

int rlt_store_tier_policy(rlt_store *s, const char *default_tier, const void *key, size_t klen,
                          int *policy_id)
{
    if (!s || !policy_id) return RLT_EINVAL;
    return tier_call(s, default_tier, key, klen, 0, 0, NULL, policy_id);
}

int rlt_store_when(rlt_store *s, int id, const void *key, size_t klen, rlt_ns now, int64_t cost,
                   rlt_ns *at)
{
    if (!s || !at) return RLT_EINVAL;
    int rc = check_key(key, klen);
    if (rc) return rc;
    uint64_t h = rlt__key_hash(s, key, klen);
    rlt__shard *sh = shard_of(s, h);
    rlt__shard_lock(sh);
    if (id < 0 || (uint32_t)id >= s->npol) {
        rc = RLT_ENOENT;
    } else {
        const rlt__pol *P = &s->pols[id];
        const rlt__slot *e = rlt__find(s, sh, h, id, key, klen);
        now = rlt__effective_now(s, now);
        if (e) {
            rc = rlt_when(&P->p, rlt__slot_state(s, e), now, cost, at);
        } else {
            void *zero = calloc(1, P->ssz);
            rc = zero ? rlt_when(&P->p, zero, now, cost, at) : RLT_ENOMEM;
            free(zero);
        }
    }
    rlt__shard_unlock(sh);
    return rc;
}

int rlt_store_reset(rlt_store *s, int id, const void *key, size_t klen)
{
    if (!s) return RLT_EINVAL;
    int rc = check_key(key, klen);
    if (rc) return rc;
    uint64_t h = rlt__key_hash(s, key, klen);
    rlt__shard *sh = shard_of(s, h);
    rlt__shard_lock(sh);
    if (id < 0 || (uint32_t)id >= s->npol) {
        rc = RLT_ENOENT;
    } else {
        rlt__slot *e = rlt__find(s, sh, h, id, key, klen);
        if (e) {
            rlt__delete(s, sh, e);
            sh->resv_epoch++; /* a reservation's charge went with it (reserve.c) */
        }
    }
    rlt__shard_unlock(sh);
    return rc;
}

int rlt_store_release(rlt_store *s, int id, const void *key, size_t klen, rlt_ns now, int64_t lease)
{
    if (!s) return RLT_EINVAL;
    int rc = check_key(key, klen);
    if (rc) return rc;
    uint64_t h = rlt__key_hash(s, key, klen);
    rlt__shard *sh = shard_of(s, h);
    rlt__shard_lock(sh);
    if (id < 0 || (uint32_t)id >= s->npol) {
        rc = RLT_ENOENT;
    } else if (s->pols[id].p.algo != RLT_CONCURRENCY) {
        rc = RLT_EINVAL;
    } else {
        const rlt__pol *P = &s->pols[id];
        now = rlt__effective_now(s, now);
        note_now(sh, now);
        rlt__slot *e = rlt__find(s, sh, h, id, key, klen);
        if (!e) {
            rc = RLT_ENOENT;
        } else {
            uint8_t *st = rlt__slot_state(s, e);
            rc = rlt_release(&P->p, st, now, lease);
            if (rlt_is_fresh(&P->p, st, now)) {
                rlt__note_drop(s, now);
                rlt__delete(s, sh, e);
                RLT__STAT_ADD(sh->evicted_idle, 1);
            }
        }
    }
    rlt__shard_unlock(sh);
    return rc;
}

/* ---- multi-limit checks --------------------------------------------------------------- */

typedef struct mstate {
    uint64_t h;
    uint32_t shard;
    int root;     /* first check with the same (policy, key): they share one state copy */
    bool existed; /* root: the entry is in the table */
    bool added;   /* root: inserted by this call */
    uint8_t *st;  /* root: the working copy of the state */
    rlt_decision d;
} mstate;

#define MULTI_STACK 8

static bool same_entry(const rlt_check *a, const mstate *ma, const rlt_check *b, const mstate *mb)
{
    return a->policy == b->policy && ma->h == mb->h && a->klen == b->klen &&
           memcmp(a->key, b->key, a->klen) == 0;
}

/* Loads the table's state of root check i into its working copy (zero when absent). */
static void load_copy(rlt_store *s, const rlt_check *c, mstate *m)
{
    rlt__shard *sh = &s->shards[m->shard];
    const rlt__slot *e = rlt__find(s, sh, m->h, c->policy, c->key, c->klen);
    uint32_t ssz = s->pols[c->policy].ssz;
    if (e)
        memcpy(m->st, rlt__slot_state(s, e), ssz);
    else
        memset(m->st, 0, ssz);
    m->existed = e != NULL;
}

/* A multi-limit check that is denied charges nothing, but a limit with a penalty box
 * (block=) that denied starts its block: decide it again on the table's state and keep what
 * the box wrote (a limit denied only because an earlier check of the same entry took the
 * allowance is allowed on the table's state: nothing to keep).  The entries written are
 * pinned until the end so that making room for one cannot evict another. */
static int multi_blocks(rlt_store *s, const rlt_check *c, mstate *m, size_t n, rlt_ns now)
{
    int rc = RLT_OK;
    for (size_t i = 0; i < n && !rc; i++) {
        const rlt_policy *p = &s->pols[c[i].policy].p;
        if (m[i].d.allowed || p->block <= 0 || c[i].cost <= 0) continue;
        mstate *r = &m[m[i].root];
        load_copy(s, &c[m[i].root], r);
        rlt_decision d;
        if ((rc = rlt_decide(p, r->st, now, c[i].cost, &d))) break;
        if (d.allowed || rlt_is_fresh(p, r->st, now)) continue;
        m[i].d = d;
        rlt__shard *sh = &s->shards[r->shard];
        rlt__slot *e = rlt__find(s, sh, r->h, c[i].policy, c[i].key, c[i].klen);
        if (!e && (rc = rlt__insert(s, sh, r->h, c[i].policy, c[i].key, c[i].klen, now, NULL, &e)))
            break;
        memcpy(rlt__slot_state(s, e), r->st, s->pols[c[i].policy].ssz);
        e->meta |= RLT__PIN | RLT__REF;
    }
    for (size_t i = 0; i < n; i++) {
        if (s->pols[c[i].policy].p.block <= 0) continue;
        rlt__slot *e =
            rlt__find(s, &s->shards[m[i].shard], m[i].h, c[i].policy, c[i].key, c[i].klen);
        if (e) e->meta = (uint16_t)(e->meta & ~RLT__PIN);
    }
    return rc;
}

static int multi_locked(rlt_store *s, const rlt_check *c, mstate *m, size_t n, rlt_ns now,
                        bool *all)
{
    now = rlt__effective_now(s, now); /* the caller re-expresses the waits (from_effective) */
    for (size_t i = 0; i < n; i++) {
        if (c[i].policy < 0 || (uint32_t)c[i].policy >= s->npol) return RLT_ENOENT;
        if (s->pols[c[i].policy].p.algo == RLT_CONCURRENCY) return RLT_EINVAL;
    }
    /* Working copies. */
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        m[i].root = (int)i;
        for (size_t j = 0; j < i; j++) {
            if (m[j].root == (int)j && same_entry(&c[i], &m[i], &c[j], &m[j])) {
                m[i].root = (int)j;
                break;
            }
        }
        if (m[i].root == (int)i) total += pad8(s->pols[c[i].policy].ssz);
    }
    uint64_t stackbuf[MULTI_STACK * SMALL_STATE / 8];
    uint8_t *arena = total <= sizeof stackbuf ? (uint8_t *)stackbuf : malloc(total);
    if (!arena) return RLT_ENOMEM;
    int rc = RLT_OK;
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        if (m[i].root != (int)i) continue;
        m[i].st = arena + off;
        off += pad8(s->pols[c[i].policy].ssz);
        rlt__shard *sh = &s->shards[m[i].shard];
        note_now(sh, now);
        load_copy(s, &c[i], &m[i]);
    }
    /* Decide every limit on the copies; nothing in the table changes yet. */
    *all = true;
    for (size_t i = 0; i < n && !rc; i++) {
        const rlt_policy *p = &s->pols[c[i].policy].p;
        rc = rlt_decide(p, m[m[i].root].st, now, c[i].cost, &m[i].d);
        if (!rc && !m[i].d.allowed) *all = false;
    }
    if (rc) goto out;
    if (!*all) {
        /* Nothing is consumed: the limits that would have allowed report as they stand. */
        for (size_t i = 0; i < n; i++) {
            if (!m[i].d.allowed) continue;
            mstate *r = &m[m[i].root];
            load_copy(s, &c[m[i].root], r);
            rlt_decision peek;
            rc = rlt_decide(&s->pols[c[i].policy].p, r->st, now, 0, &peek);
            if (rc) goto out;
            m[i].d.remaining = peek.remaining;
            m[i].d.reset_after = peek.reset_after;
            m[i].d.retry_after = 0;
        }
        rc = multi_blocks(s, c, m, n, now);
        goto out;
    }
    /* Commit.  Pin the entries involved so that making room for a new one cannot evict
     * another, insert the missing ones (undoing those inserts if one fails), then write. */
    for (size_t i = 0; i < n; i++) {
        if (m[i].root != (int)i || !m[i].existed) continue;
        rlt__slot *e =
            rlt__find(s, &s->shards[m[i].shard], m[i].h, c[i].policy, c[i].key, c[i].klen);
        assert(e);
        e->meta |= RLT__PIN | RLT__REF;
    }
    for (size_t i = 0; i < n && !rc; i++) {
        if (m[i].root != (int)i || m[i].existed) continue;
        const rlt_policy *p = &s->pols[c[i].policy].p;
        if (rlt_is_fresh(p, m[i].st, now)) continue;
        rlt__slot *e;
        rc = rlt__insert(s, &s->shards[m[i].shard], m[i].h, c[i].policy, c[i].key, c[i].klen, now,
                         NULL, &e);
        if (!rc) {
            e->meta |= RLT__PIN;
            m[i].existed = true;
            m[i].added = true;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (m[i].root != (int)i || !m[i].existed) continue;
        rlt__shard *sh = &s->shards[m[i].shard];
        rlt__slot *e = rlt__find(s, sh, m[i].h, c[i].policy, c[i].key, c[i].klen);
        assert(e);
        const rlt_policy *p = &s->pols[c[i].policy].p;
        e->meta = (uint16_t)(e->meta & ~RLT__PIN);
        if (rc) {
            /* Undo: the entries this call inserted still hold a zero (fresh) state. */
            if (m[i].added) rlt__delete(s, sh, e);
            continue;
        }
        memcpy(rlt__slot_state(s, e), m[i].st, s->pols[c[i].policy].ssz);
        if (rlt_is_fresh(p, m[i].st, now)) {
            rlt__note_drop(s, now);
            rlt__delete(s, sh, e);
            RLT__STAT_ADD(sh->evicted_idle, 1);
        }
    }
out:
    if (arena != (uint8_t *)stackbuf) free(arena);
    return rc;
}

int rlt_store_decide_multi(rlt_store *s, const rlt_check *checks, size_t n, rlt_ns now,
                           rlt_decision *combined, int *refused)
{
    if (!s || !checks || !combined || n == 0 || n > INT32_MAX) return RLT_EINVAL;
    for (size_t i = 0; i < n; i++) {
        int rc = check_key(checks[i].key, checks[i].klen);
        if (rc) return rc;
        if (checks[i].cost < 0) return RLT_EINVAL;
    }
    mstate mstack[MULTI_STACK];
    uint32_t lstack[MULTI_STACK];
    mstate *m = n <= MULTI_STACK ? mstack : calloc(n, sizeof *m);
    uint32_t *lk = n <= MULTI_STACK ? lstack : calloc(n, sizeof *lk);
    if (!m || !lk) {
        if (m != mstack) free(m);
        if (lk != lstack) free(lk);
        return RLT_ENOMEM;
    }
    /* Hash once; lock the shards involved in increasing order, each once. */
    size_t nl = 0;
    for (size_t i = 0; i < n; i++) {
        memset(&m[i], 0, sizeof m[i]);
        m[i].h = rlt__key_hash(s, checks[i].key, checks[i].klen);
        m[i].shard = (uint32_t)(m[i].h & s->shard_mask);
        size_t j = nl;
        while (j > 0 && lk[j - 1] > m[i].shard)
            j--;
        if (j > 0 && lk[j - 1] == m[i].shard) continue;
        memmove(&lk[j + 1], &lk[j], (nl - j) * sizeof *lk);
        lk[j] = m[i].shard;
        nl++;
    }
    for (size_t i = 0; i < nl; i++)
        rlt__shard_lock(&s->shards[lk[i]]);
    bool all = false;
    int rc = multi_locked(s, checks, m, n, now, &all);
    if (!rc) {
        rlt_decision *cd = combined;
        int first_refused = -1;
        for (size_t i = 0; i < n; i++) {
            if (!m[i].d.allowed && first_refused < 0) first_refused = (int)i;
            jitter_decision(&s->pols[checks[i].policy].p, checks[i].key, checks[i].klen, now,
                            &m[i].d);
            rlt_decision_combine(cd, &m[i].d, i == 0);
        }
        assert(cd->allowed == all);
        rlt__from_effective(cd, now, rlt__effective_now(s, now)); /* still under the locks */
        if (refused) *refused = first_refused;
        count_decision(&s->shards[lk[0]], all);
    }
    for (size_t i = nl; i-- > 0;)
        rlt__shard_unlock(&s->shards[lk[i]]);
    if (m != mstack) free(m);
    if (lk != lstack) free(lk);
    return rc;
}

/* ---- sweep and stats ------------------------------------------------------------------ */

size_t rlt_store_sweep(rlt_store *s, rlt_ns now, size_t budget)
{
    if (!s) return 0;
    size_t dropped = 0;
    pthread_mutex_lock(&s->sweep_mu);
    for (uint32_t visited = 0; budget > 0 && visited <= s->nshards;) {
        rlt__shard *sh = &s->shards[s->sweep_shard];
        rlt__shard_lock(sh);
        note_now(sh, now);
        /* Hold the lock for a bounded chunk so decisions are not stalled for long. */
        for (unsigned chunk = 0; budget > 0 && s->sweep_slot < sh->cap && chunk < 1024; chunk++) {
            rlt__slot *e = &sh->tab[s->sweep_slot];
            budget--;
            if (e->meta && !(e->meta & RLT__PIN) &&
                rlt_is_fresh(&s->pols[e->policy].p, rlt__slot_state(s, e), now)) {
                rlt__note_drop(s, now);
                rlt__delete(s, sh, e); /* a later entry may shift into this slot: look again */
                RLT__STAT_ADD(sh->evicted_idle, 1);
                dropped++;
                continue;
            }
            s->sweep_slot++;
        }
        bool done = s->sweep_slot >= sh->cap;
        rlt__shard_unlock(sh);
        if (done) {
            s->sweep_slot = 0;
            s->sweep_shard = (s->sweep_shard + 1) & s->shard_mask;
            visited++;
        }
    }
    pthread_mutex_unlock(&s->sweep_mu);
    return dropped;
}

void rlt_store_stats_get(const rlt_store *s, rlt_store_stats *out)
{
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!s) return;
    out->bytes = sizeof *s + s->nshards * sizeof(rlt__shard) + hints_bytes(s->nshards);
    for (uint32_t i = 0; i < s->nshards; i++) {
        const rlt__shard *sh = &s->shards[i];
        out->keys += __atomic_load_n(&sh->count, __ATOMIC_RELAXED);
        out->bytes += __atomic_load_n(&sh->bytes, __ATOMIC_RELAXED);
        out->evicted_idle += __atomic_load_n(&sh->evicted_idle, __ATOMIC_RELAXED);
        out->evicted_forced += __atomic_load_n(&sh->evicted_forced, __ATOMIC_RELAXED);
        out->refused_full += __atomic_load_n(&sh->refused_full, __ATOMIC_RELAXED);
        out->allowed += __atomic_load_n(&sh->allowed, __ATOMIC_RELAXED);
        out->denied += __atomic_load_n(&sh->denied, __ATOMIC_RELAXED);
    }
}

/* ---- snapshot support ----------------------------------------------------------------- */

void rlt__store_swap(rlt_store *s, rlt_store *t, rlt_ns now)
{
    pthread_mutex_lock(&s->sweep_mu);
    pthread_mutex_lock(&s->pol_mu);
    rlt__lock_all(s);
#define SWAP(a, b)                                                                                 \
    do {                                                                                           \
        __typeof__(a) tmp_ = (a);                                                                  \
        (a) = (b);                                                                                 \
        (b) = tmp_;                                                                                \
    } while (0)
    SWAP(s->pols, t->pols);
    uint32_t np = s->npol;
    __atomic_store_n(&s->npol, t->npol, __ATOMIC_RELAXED);
    t->npol = np;
    SWAP(s->polcap, t->polcap);
    SWAP(s->tiers, t->tiers);
    SWAP(s->ntier, t->ntier);
    SWAP(s->tiercap, t->tiercap);
    for (uint32_t i = 0; i < s->nshards; i++) {
        rlt__shard *a = &s->shards[i], *b = &t->shards[i];
        rlt__slot *tab = a->tab;
        uint32_t cap = a->cap;
        a->tab = b->tab;
        a->cap = b->cap;
        b->tab = tab;
        b->cap = cap;
        publish_table(s, a);
        publish_table(t, b);
        SWAP(a->hand, b->hand);
        SWAP(a->abuckets, b->abuckets);
        SWAP(a->anb, b->anb);
        SWAP(a->acount, b->acount);
        uint32_t c = a->count;
        uint64_t by = a->bytes;
        RLT__STAT_ADD(a->count, b->count - c);
        RLT__STAT_ADD(a->bytes, b->bytes - by);
        b->count = c;
        b->bytes = by;
        RLT__STAT_ADD(a->evicted_idle, b->evicted_idle);
        RLT__STAT_ADD(a->evicted_forced, b->evicted_forced);
        RLT__STAT_ADD(a->refused_full, b->refused_full);
        a->last_now = now; /* the loaded states live on the caller's clock now */
        /* Outstanding reservations were charged to states the load replaced: refunding them
         * from the loaded ones could mint, so they end here, charged as estimated. */
        rlt__resv_free(s, a);
    }
#undef SWAP
    s->sweep_shard = 0;
    s->sweep_slot = 0;
    rlt__unlock_all(s);
    pthread_mutex_unlock(&s->pol_mu);
    pthread_mutex_unlock(&s->sweep_mu);
}
