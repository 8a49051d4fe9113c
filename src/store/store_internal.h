/* Internals of the keyed store: the slot layout, the shard, the store, and store.c's rlt__
 * helpers for the part's other files (snapshot.c, reserve.c).  Each of those files declares
 * its own internal functions in its own header (reserve.h, crc32c.h, siphash.h, aeshash.h). */
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
 * one heap block with the state (padded to 8 bytes) followed by the key. */
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
        uint8_t *ool;             /* heap block: state (padded to 8), then key */
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
    uint64_t resv_cap; /* max_reservations */
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

void rlt__shard_lock(rlt__shard *sh);
void rlt__shard_unlock(rlt__shard *sh);
void rlt__lock_all(rlt_store *s);
void rlt__unlock_all(rlt_store *s);

/* Table operations on one shard (caller holds its lock, or owns the shard privately). */
uint64_t rlt__key_hash(const rlt_store *s, const void *key, size_t klen);
rlt__slot *rlt__find(const rlt_store *s, rlt__shard *sh, uint64_t h, int pid, const void *key,
                     size_t klen);
/* Inserts a new entry with a zero state (or with `block` as its out-of-line block when not
 * NULL), making room first by the store's rules.  Returns RLT_OK and *out, RLT_EFULL,
 * RLT_ENOMEM.  Any slot pointer held before the call is invalid after it. */
int rlt__insert(rlt_store *s, rlt__shard *sh, uint64_t h, int pid, const void *key, size_t klen,
                rlt_ns now, uint8_t *block, rlt__slot **out);
void rlt__delete(const rlt_store *s, rlt__shard *sh, rlt__slot *e);
uint8_t *rlt__slot_state(const rlt_store *s, const rlt__slot *e);
const uint8_t *rlt__slot_key(const rlt_store *s, const rlt__slot *e);
void rlt__shard_free(rlt__shard *sh, const rlt_store *s);
int rlt__assign_set(const rlt_store *s, rlt__shard *sh, uint64_t h, const void *key, size_t klen,
                    uint32_t tier);
const rlt__assign *rlt__assign_find(const rlt__shard *sh, uint64_t h, const void *key, size_t klen);

/* The decision under a held shard lock, as rlt_store_decide makes it (for reserve.c). */
int rlt__decide_in_shard(rlt_store *s, rlt__shard *sh, uint64_t h, int id, const void *key,
                         size_t klen, rlt_ns now, int64_t cost, rlt_decision *d);

/* Which keyed hash a store opened by rlt__store_open_hash uses for its keys. */
enum { RLT__HASH_AUTO = 0, RLT__HASH_SIP = 1, RLT__HASH_AES = 2 };
/* rlt_store_open with the key hash chosen: RLT__HASH_AUTO (what rlt_store_open does: AES
 * where the CPU has AES-NI, else SipHash-1-3), RLT__HASH_SIP (the fallback, forced: for tests)
 * or RLT__HASH_AES (RLT_EINVAL where the CPU lacks it).  Returns as rlt_store_open. */
int rlt__store_open_hash(rlt_store **out, const rlt_store_options *opt, int hash);
/* A new, empty store with the same shards, caps, mode, secret and key hash as `s`, for building a
 * table off to the side (snapshot load).  RLT_OK or RLT_ENOMEM. */
int rlt__store_new_like(const rlt_store *s, rlt_store **out);
/* Appends a policy / tier to a store nobody else can see yet (no locks).  RLT_OK, RLT_EINVAL
 * (invalid or duplicate name, invalid policy, unknown policy id), RLT_ENOMEM. */
int rlt__add_policy(rlt_store *s, const char *name, size_t nlen, const rlt_policy *p);
int rlt__add_tier(rlt_store *s, const char *name, size_t nlen, int policy);
/* Exchanges the contents (policies, tiers, tables) of `s` with the private store `t`.  Takes
 * every lock of `s`. */
void rlt__store_swap(rlt_store *s, rlt_store *t, rlt_ns now);
/* For tests: makes `s` take the big-store paths (the single call's prefetch, the probe over
 * the fingerprints) whatever its size, as a store of millions of keys does. */
void rlt__store_force_big(rlt_store *s);
/* For tests: true when every slot's fingerprint byte is its tag's (0 for an empty slot) in
 * every shard.  Takes each shard's lock in turn. */
bool rlt__store_fps_consistent(rlt_store *s);
bool rlt__valid_name(const char *name, size_t len);

/* Relaxed counter update for fields read lock-free by the stats. */
#define RLT__STAT_ADD(field, n) __atomic_store_n(&(field), (field) + (n), __ATOMIC_RELAXED)

#endif
