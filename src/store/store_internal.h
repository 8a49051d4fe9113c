/* The keyed store's shared types: the slot layout, the shard, the policy, the store itself, and
 * the few inline helpers every file of the part uses on them (the drop floor, the shard's
 * clock and counters, the key's and the policy id's checks).  Functions live in their files'
 * own headers (lock.h, table.h, evict.h, assign.h, policy.h, tier.h, decide.h, hot.h,
 * general.h, store.h, reserve.h); store.c's opening comment gives the design. */
#ifndef RLT_STORE_INTERNAL_H
#define RLT_STORE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ratelimit/store.h"
#include "store/aeshash.h"
#include "store/siphash.h"

/* One table slot: 32 bytes, two per cache line.  An empty slot has meta == 0 (the empty key is
 * invalid, so a live slot's key length is never 0).  The payload holds the state followed by
 * the key inline when state size + key length <= RLT__INLINE; otherwise it holds a pointer to
 * one heap block with the key (padded to 8 bytes) followed by the state (a compact sliding
 * log's changes size: logs.h). */
#define RLT__INLINE 24
#define RLT__KLEN_MASK 0x03ffu /* key length, 1..RLT_KEY_MAX */
#define RLT__REF 0x8000u       /* CLOCK reference bit: touched since the hand last passed */
#define RLT__PIN 0x4000u       /* held by an in-progress multi-limit check: never evicted */

typedef struct rlt__slot {
    uint32_t tag;    /* bits 32..63 of the entry hash; also picks the home slot */
    uint16_t meta;   /* key length | REF | PIN; 0 = empty */
    uint16_t policy; /* policy id */
    union {
        uint8_t inl[RLT__INLINE]; /* state, then key */
        uint8_t *ool;             /* heap block: key (padded to 8), then state */
        uint64_t align_;
    } u;
} rlt__slot;

/* A tier assignment: key -> tier index.  Chained, per shard, never evicted. */
typedef struct rlt__assign {
    struct rlt__assign *next;
    uint64_t hash;
    uint32_t tier;
    uint16_t klen;
    uint8_t key[];
} rlt__assign;

/* One lock shard.  Everything here is protected by `lock`; the counters are written with
 * relaxed atomic stores under the lock so rlt_store_stats_get may read them without it.
 * Layout: everything a decision reads or writes (the lock, the table, the clock, the decision
 * counters) shares the first cache line, so a decision dirties one line of the shard and two
 * threads trading a shard trade one line, not two.  Rarely written fields come after.  The
 * prefetch reads the table from the store's hints (rlt__hint), not from here. */
/* Reservations' holders are counted in this many buckets by a keyed hash of the holder. */
#define RLT__RESV_BUCKETS 1024u

typedef struct rlt__shard {
#ifdef RLT_STORE_USE_MUTEX
    _Alignas(64) pthread_mutex_t lock;
#else
    _Alignas(64) int lock; /* spinlock: 0 free, 1 held */
#endif
    uint32_t cap;   /* slots in tab (any integer >= 16, or 0 before the first key) */
    uint32_t count; /* live slots */
    uint32_t hand;  /* CLOCK hand */
    rlt__slot *tab;
    rlt_ns last_now; /* latest `now` seen (policy conversion has no `now` of its own) */
    uint64_t allowed, denied;
    uint64_t bytes; /* tab + out-of-line blocks */
    _Alignas(64) rlt__assign **abuckets;
    uint32_t anb, acount; /* assignment buckets (power of two) and entries */
    uint64_t evicted_idle, evicted_forced, refused_full;
    struct rlt__resv_table *resv; /* outstanding reservations of the shard's keys (reserve.c) */
    uint64_t resv_epoch;          /* bumped when a state that may hold a reservation's charge is
                                     dropped (reset, forced eviction): older reservations refund nothing */
} rlt__shard;

/* A shard's table as the slot prefetch sees it: a copy of (tab, cap), written under the shard
 * lock wherever those change (grow, swap) and read without it.  The copies of all shards sit
 * in one dense array apart from the shards, so a call forms its slot's address from a line
 * that no decision writes: it is clean in every core's cache, while the shard's own line
 * (lock, clock, counters) is modified by whichever core decided last.  Reading (tab, cap)
 * from that line made the prefetch wait for its hand-off from the other core, and then the
 * lock's exchange wait a second time to own it.  Only prefetches read the copy: a stale one
 * fetches a useless line, and decisions read the shard's own fields under its lock. */
typedef struct rlt__hint {
    rlt__slot *tab;
    uint32_t cap;
} rlt__hint;

/* The value xored into a key's hash for policy `id`: a fixed function of the id, so a call
 * can form slot addresses to prefetch before it takes the lock that guards the policy array. */
static inline uint64_t rlt__pol_mix(uint32_t id)
{
    return (uint64_t)(id + 1) * UINT64_C(0x9E3779B97F4A7C15);
}

/* A named policy.  Read under any shard lock or the policy mutex; written under both. */
typedef struct rlt__pol {
    rlt_policy p;
    uint64_t hot_end; /* rlt__gcra_hot_end(&p): the GCRA hot path takes 0 <= now < hot_end */
    uint64_t mix;     /* xored into the key hash so one key's policies use different slots */
    uint32_t ssz;     /* rlt_state_size */
    uint8_t nlen;
    char name[RLT_NAME_MAX + 1];
} rlt__pol;

/* A named tier: the policy its assigned keys are decided under (rlt_store_set_tier).  Named
 * apart from the server's rlt__tier (server/config.h), a tier of its configuration. */
typedef struct rlt__named_tier {
    uint8_t nlen;
    char name[RLT_NAME_MAX + 1];
    int policy;
} rlt__named_tier;

struct rlt_store {
    rlt__sipkey sip; /* the secret, expanded for the key hash */
    rlt__aeskey aes; /* the secret, expanded for the AES key hash */
    bool use_aes;    /* keys hash with rlt__aeshash (AES-NI, chosen at open), else SipHash-1-3 */
    uint8_t secret[16];
    uint32_t nshards, shard_mask;
    uint64_t key_cap;  /* per shard; UINT64_MAX = none */
    uint64_t byte_cap; /* per shard; UINT64_MAX = none */
    bool fail_closed;
    rlt__shard *shards;
    rlt__hint *hints; /* per shard: its (tab, cap) for the prefetch (relaxed atomics) */
    bool big; /* some shard's table has grown to a size where single calls prefetch (atomic) */
    rlt__pol *pols;
    uint32_t npol, polcap;
    rlt__named_tier *tiers;
    uint32_t ntier, tiercap;
    /* The latest `now` at which a non-fresh-looking drop could matter: every drop of a fresh
     * entry happens at some `now`, and the entry is equivalent to fresh only from then on.
     * Calls with an earlier `now` are decided at this instant instead (atomic; written before
     * the drop under the shard lock, read under the shard lock). */
    rlt_ns drop_floor;
    /* Reservations (reserve.c): the bound, and the key their ids are drawn under. */
    uint64_t resv_cap;          /* max_reservations */
    struct rlt__budget *budget; /* multi-limit reservations (budget.c), made on first use */
    uint64_t budget_gen;        /* loads so far (atomic): they end multi-limit reservations */
    uint64_t budget_pgen; /* policy changes so far (atomic, under every shard lock): after one,
                             a multi-limit reservation's settle refunds nothing */
    uint8_t resv_secret[16];
    /* Everything above is read by decisions and written rarely.  What other threads write
     * often (a sweep's mutex and cursor, a reservation's counters) starts on a line of its
     * own: on the lines above, each of those writes would cost every deciding core a miss. */
    _Alignas(64) pthread_mutex_t pol_mu; /* policies and tiers (writers also take every shard
                                            lock) */
    pthread_mutex_t sweep_mu;            /* the sweep cursor */
    uint32_t sweep_shard, sweep_slot;
    /* Reservations: how many are outstanding, a lower bound on their expiries, and the
     * counter their ids hash (atomics). */
    _Alignas(64) uint64_t resv_count; /* expired ones included until dropped */
    rlt_ns resv_expiry;               /* at most the earliest expiry among them (INT64_MAX: none) */
    uint64_t resv_next;
    uint64_t resv_holder_cap; /* max_reservations_per_holder; UINT64_MAX = none */
    /* Outstanding reservations per holder bucket (reserve.c; atomics): the last one is the
     * anonymous holder's (rlt_store_reserve). */
    _Alignas(64) uint32_t resv_held[RLT__RESV_BUCKETS + 1];
};

/* Records that an entry fresh at `now` is about to be dropped. */
static inline void rlt__note_drop(rlt_store *s, rlt_ns now)
{
    rlt_ns f = __atomic_load_n(&s->drop_floor, __ATOMIC_RELAXED);
    while (now > f && !__atomic_compare_exchange_n(&s->drop_floor, &f, now, true, __ATOMIC_RELEASE,
                                                   __ATOMIC_RELAXED)) {
    }
}

/* The instant a call at `now` is decided at: never before a drop already made. */
static inline rlt_ns rlt__effective_now(const rlt_store *s, rlt_ns now)
{
    rlt_ns f = __atomic_load_n(&s->drop_floor, __ATOMIC_ACQUIRE);
    return now < f ? f : now;
}

/* Re-expresses the waits of a decision taken at `eff` relative to the caller's `now`. */
static inline void rlt__from_effective(rlt_decision *d, rlt_ns now, rlt_ns eff)
{
    if (eff == now) return;
    rlt_ns lag = eff - now;
    if (d->retry_after > 0)
        d->retry_after = __builtin_add_overflow(d->retry_after, lag, &d->retry_after)
                             ? INT64_MAX
                             : d->retry_after;
    if (d->reset_after > 0)
        d->reset_after = __builtin_add_overflow(d->reset_after, lag, &d->reset_after)
                             ? INT64_MAX
                             : d->reset_after;
    if (d->delay > 0)
        d->delay = __builtin_add_overflow(d->delay, lag, &d->delay) ? INT64_MAX : d->delay;
}

/* States of up to this many bytes are decided in a copy on the stack before their entry
 * exists (general.c) or while a multi-limit check holds them (multi.c). */
#define RLT__SMALL_STATE 64u

/* Whether `id` names one of the store's policies (a negative id too).  Under a shard lock or
 * the policy mutex. */
static inline bool rlt__pol_known(const rlt_store *s, int id)
{
    return id >= 0 && (uint32_t)id < s->npol;
}

/* A key as every entry point takes it: RLT_OK, RLT_EKEYLEN (empty or over RLT_KEY_MAX bytes)
 * or RLT_EINVAL (NULL). */
static inline int rlt__check_key(const void *key, size_t klen)
{
    if (klen == 0 || klen > RLT_KEY_MAX) return RLT_EKEYLEN;
    return key ? RLT_OK : RLT_EINVAL;
}

/* Relaxed counter update for fields read lock-free by the stats. */
#define RLT__STAT_ADD(field, n) __atomic_store_n(&(field), (field) + (n), __ATOMIC_RELAXED)

/* Records `now` as the shard's latest instant, with a store and no branch: a call's `now` is
 * newer than its shard's on the first call to that shard after each clock tick, which no
 * predictor can learn, and the branch this replaced mispredicted often enough to cost ~20% of
 * a hot call at 1,000 keys (docs/experiments/store-round4-shards.md). */
static inline void rlt__note_now(rlt__shard *sh, rlt_ns now)
{
    const rlt_ns last = sh->last_now;
    sh->last_now = now > last ? now : last;
}

/* Adds 1 to a counter that rlt_store_stats_get reads without the lock.  On x86-64 one `add`
 * to memory (not locked: the shard lock orders the writers) does what RLT__STAT_ADD's load,
 * add and atomic store do in three instructions; an aligned 8-byte write is single-copy
 * atomic there, so a reader sees the old value or the new one, as with the atomic store. */
static inline void rlt__stat_inc(uint64_t *f)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __asm__ __volatile__("addq $1, %0" : "+m"(*f));
#else
    RLT__STAT_ADD(*f, 1);
#endif
}

/* Counts a decision in the shard's stats (caller holds the shard lock). */
static inline void rlt__count_decision(rlt__shard *sh, bool allowed)
{
    rlt__stat_inc(allowed ? &sh->allowed : &sh->denied);
}

#endif
