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
 * (rlt__fp_of in table.h).
 *
 * Decisions.  A GCRA request on a key already in the table (key and state inline) takes a hot
 * path of a few dozen instructions after the hash (rlt__decide_locked_tag in hot.h,
 * rlt__gcra_hot in decision.h); every
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
 * untouched, so keys churned once by an attacker go before keys that come back.
 *
 * Files.  This one: opening and closing a store, its stats, the per-key calls (when, reset,
 * release) and the swap a snapshot load makes.  store_internal.h: the types.  lock.c: the
 * shard lock.  table.c: a shard's table (slots, probing, deletion, growth).  evict.c: room for
 * new entries and the idle sweep.  assign.c: tier assignments.  policy.c, tier.c: named
 * policies and tiers.  hot.h and decide.c: the single call; general.c: its general path;
 * decision.h: what a decision writes; batch.c: batches; multi.c: multi-limit checks.
 * reserve.c: reservations; snapshot.c: snapshots; aeshash.c, siphash.c, secret.c: the key
 * hashes and their secret. */
#include <stdlib.h>
#include <string.h>

#include "ratelimit/adaptive.h"

#include "store/assign.h"
#include "store/lock.h"
#include "store/budget.h"
#include "store/reserve.h"
#include "store/secret.h"
#include "store/store.h"
#include "store/table.h"

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
    if (rlt__secret_init(secret, o.has_secret, o.secret)) return RLT_EIO;
    int rc = store_alloc(out, n, o.max_keys ? o.max_keys / n : UINT64_MAX,
                         o.max_bytes ? o.max_bytes / n : UINT64_MAX, o.fail_closed, secret,
                         hash != RLT__HASH_SIP && aes_ok);
    if (rc == RLT_OK) rlt__resv_init(*out, o.max_reservations, o.max_reservations_per_holder);
    return rc;
}

int rlt__store_new_like(const rlt_store *s, rlt_store **out)
{
    return store_alloc(out, s->nshards, s->key_cap, s->byte_cap, s->fail_closed, s->secret,
                       s->use_aes);
}

/* Frees everything a shard owns (its lock held, or the shard private). */
static void shard_free(rlt__shard *sh, const rlt_store *s)
{
    for (uint32_t i = 0; i < sh->cap; i++) {
        const rlt__slot *e = &sh->tab[i];
        if (e->meta && !rlt__is_inline(s->pols[e->policy].ssz, e->meta & RLT__KLEN_MASK))
            free(e->u.ool);
    }
    rlt__table_free(sh->tab, sh->cap);
    rlt__assign_free(sh);
    rlt__resv_free((rlt_store *)s, sh); /* its counter is not part of the logical state */
}

void rlt_store_close(rlt_store *s)
{
    if (!s) return;
    for (uint32_t i = 0; i < s->nshards; i++) {
        shard_free(&s->shards[i], s);
#ifdef RLT_STORE_USE_MUTEX
        pthread_mutex_destroy(&s->shards[i].lock);
#endif
    }
    rlt__budget_free(s);
    free(s->shards);
    free(s->hints);
    free(s->pols);
    free(s->tiers);
    pthread_mutex_destroy(&s->pol_mu);
    pthread_mutex_destroy(&s->sweep_mu);
    free(s);
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

/* Whether some policy is a concurrency limiter: without one no state can hold a lease, and
 * rlt_store_leases answers without walking a table. */
static bool any_concurrency(rlt_store *s)
{
    bool any = false;
    pthread_mutex_lock(&s->pol_mu);
    for (uint32_t i = 0; i < s->npol && !any; i++)
        any = s->pols[i].p.algo == RLT_CONCURRENCY;
    pthread_mutex_unlock(&s->pol_mu);
    return any;
}

/* Counted when asked, never kept: a lease ends by itself at its expiry, with no call to
 * count it down, so a running counter would need every lease's expiry beside it.  Walking the
 * tables costs the reader (one slot read per key, each shard under its own lock in turn) and
 * nothing on any decision's path. */
size_t rlt_store_leases(rlt_store *s, rlt_ns now)
{
    if (!s || !any_concurrency(s)) return 0;
    size_t n = 0;
    for (uint32_t i = 0; i < s->nshards; i++) {
        rlt__shard *sh = &s->shards[i];
        rlt__shard_lock(sh);
        rlt_ns at = rlt__effective_now(s, now);
        for (uint32_t j = 0; j < sh->cap; j++) {
            const rlt__slot *e = &sh->tab[j];
            if (!e->meta || s->pols[e->policy].p.algo != RLT_CONCURRENCY) continue;
            /* A peek (cost 0) reads the state and writes nothing; a penalty box in force would
             * answer 0 remaining whatever is held, so the slots are read without it. */
            rlt_policy p = s->pols[e->policy].p;
            p.block = 0;
            rlt_decision d;
            if (rlt_decide(&p, rlt__slot_state(s, e), at, 0, &d) == RLT_OK && d.remaining >= 0)
                n += (size_t)(d.limit - d.remaining);
        }
        rlt__shard_unlock(sh);
    }
    return n;
}

/* The policy `id` of a key whose shard the caller has locked: RLT_OK, or RLT_ENOENT with the
 * lock released. */
static int pol_locked(rlt_store *s, rlt__shard *sh, int id)
{
    if (rlt__pol_known(s, id)) return RLT_OK;
    rlt__shard_unlock(sh);
    return RLT_ENOENT;
}

int rlt_store_when(rlt_store *s, int id, const void *key, size_t klen, rlt_ns now, int64_t cost,
                   rlt_ns *at)
{
    if (!s || !at) return RLT_EINVAL;
    uint64_t h;
    rlt__shard *sh;
    int rc = rlt__lock_key(s, key, klen, &h, &sh);
    if (rc || (rc = pol_locked(s, sh, id))) return rc;
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
    rlt__shard_unlock(sh);
    return rc;
}

int rlt_store_reset(rlt_store *s, int id, const void *key, size_t klen)
{
    if (!s) return RLT_EINVAL;
    uint64_t h;
    rlt__shard *sh;
    int rc = rlt__lock_key(s, key, klen, &h, &sh);
    if (rc || (rc = pol_locked(s, sh, id))) return rc;
    rlt__slot *e = rlt__find(s, sh, h, id, key, klen);
    if (e) {
        rlt__delete(s, sh, e);
        sh->resv_epoch++; /* a reservation's charge went with it (reserve.c) */
    }
    rlt__shard_unlock(sh);
    return RLT_OK;
}

int rlt_store_release(rlt_store *s, int id, const void *key, size_t klen, rlt_ns now, int64_t lease)
{
    return rlt_store_release_report(s, id, key, klen, now, lease, -1, 0);
}

int rlt_store_release_report(rlt_store *s, int id, const void *key, size_t klen, rlt_ns now,
                             int64_t lease, rlt_ns latency_ns, int outcome)
{
    if (!s) return RLT_EINVAL;
    uint64_t h;
    rlt__shard *sh;
    int rc = rlt__lock_key(s, key, klen, &h, &sh);
    if (rc || (rc = pol_locked(s, sh, id))) return rc;
    const rlt__pol *P = &s->pols[id];
    if (P->p.algo != RLT_CONCURRENCY) {
        rc = RLT_EINVAL;
    } else {
        now = rlt__effective_now(s, now);
        rlt__note_now(sh, now);
        rlt__slot *e = rlt__find(s, sh, h, id, key, klen);
        if (!e) {
            rc = RLT_ENOENT;
        } else {
            uint8_t *st = rlt__slot_state(s, e);
            rc = latency_ns < 0 ? rlt_release(&P->p, st, now, lease)
                                : rlt_release_report(&P->p, st, now, lease, latency_ns, outcome);
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
        rlt__publish_table(s, a);
        rlt__publish_table(t, b);
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
    __atomic_fetch_add(&s->budget_gen, 1, __ATOMIC_RELEASE); /* and the multi-limit ones */
#undef SWAP
    s->sweep_shard = 0;
    s->sweep_slot = 0;
    rlt__unlock_all(s);
    pthread_mutex_unlock(&s->pol_mu);
    pthread_mutex_unlock(&s->sweep_mu);
}
