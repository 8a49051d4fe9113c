/* Reservations of the keyed store: charge after the response (rlt_store_reserve / _settle).
 *
 * Layout.  Each shard keeps the outstanding reservations of its keys in its own table, so a
 * reservation lives under the same lock as the state it was charged to and settling takes
 * exactly the one lock a decision takes: reserve and settle are linearizable with every
 * decision on the key, with no second lock and no lock order to keep.  The table is open
 * addressing on the id (ids are SipHash outputs: their low bits are already uniform), linear
 * probing with backward-shift deletion, at most half full: it starts at 16 slots with the
 * shard's first reservation and doubles as needed.  Each entry owns a heap copy of its key.
 *
 * Bounds.  At most resv_cap (max_reservations) are outstanding in the whole store, counted by
 * one atomic that a reservation takes a ticket from before it decides (so two shards cannot
 * both take the last one), whatever shards the keys fall in.  Expiry is lazy: an expired
 * reservation is dropped when a settle finds it, or when the store is full and one may have
 * expired: then every shard in turn (one lock at a time, none held) is purged of its expired
 * ones before the request is refused; either way it stays charged as estimated, which never
 * mints.  When the purge frees nothing, the holder bucket holding the most (not the caller's,
 * nor the anonymous one) loses its outstanding reservations, ended early and charged as
 * estimated, as an expiry would (never minting), and the ticket is tried again; only then is
 * the reservation refused (RLT_EFULL) before anything is charged.  So one client filling the
 * table (66,000 reservations with estimate 0 and a day's timeout) locks no one else out: the
 * next client's reservation ends the biggest holder's.  Each holder bucket also holds at most
 * resv_holder_cap (max_reservations_per_holder); holders are bucketed by a keyed hash of their
 * id, so a client cannot pick the bucket of another.  "May have expired" is kept by one more
 * atomic, resv_expiry, at most the earliest expiry outstanding: a reservation lowers it to its own,
 * a purge sets it to the earliest it left.  So a full store refuses in a few instructions
 * until that instant, and purges only when a reservation may have expired (a few threads
 * refused at the same instant may each purge once; a reservation settled early leaves the
 * bound low, which costs one purge that frees nothing).  A purge of every shard on every
 * refused call (a 64Ki bound in 1,024 shards: 0.67 ms each, bench/store/settle.c with the
 * code before this) would let one client holding the bound stall every other.
 *
 * Ids.  64 bits of SipHash-1-3 of a store-wide counter under a secret drawn from the store's
 * own (so ids say nothing about keys nor about each other), never 0, unique in their table.
 * A settle must also name the key and the policy the reservation was made for.
 *
 * Resets and evictions.  A state reset (rlt_store_reset) or evicted for room takes the
 * reservation's charge with it, and new requests may make the key again: a refund from that
 * new state would give back what the reservation never took there.  Each shard counts such
 * drops (resv_epoch); a reservation made before the latest one refunds nothing (its real cost
 * is charged when higher).  Drops of fresh states need no such care: a state is fresh only
 * once the charge no longer counts, and then rlt_settle's bounds refund nothing.
 *
 * Policy changes.  Replacing a policy with other numbers, or resetting its keys
 * (rlt_store_set_policy), ends its outstanding reservations, charged as estimated: a refund
 * computed under the new numbers from an estimate charged under the old ones, or from a state
 * that no longer holds the estimate, could mint. */
#include <stdlib.h>
#include <string.h>

#include "store/decide.h"
#include "store/evict.h"
#include "store/lock.h"
#include "store/logs.h"
#include "store/reserve.h"
#include "store/siphash.h"
#include "store/table.h"

#define DEFAULT_MAX 65536u

typedef struct resv {
    uint64_t id; /* 0: an empty slot */
    rlt_ns at;   /* the effective instant of the reservation */
    rlt_ns expires;
    int64_t estimate;
    uint32_t policy;
    uint32_t klen;
    uint8_t *key;
    uint64_t epoch;  /* the shard's resv_epoch when it was made */
    uint32_t bucket; /* its holder's bucket (RLT__RESV_BUCKETS: the anonymous holder) */
} resv;

struct rlt__resv_table {
    uint32_t mask; /* slots - 1 (a power of two) */
    uint32_t count;
    resv slot[];
};

void rlt__resv_init(rlt_store *s, size_t max, size_t per_holder)
{
    s->resv_cap = max ? max : DEFAULT_MAX;
    s->resv_holder_cap = per_holder ? per_holder : UINT64_MAX;
    s->resv_expiry = INT64_MAX;
    /* A secret of its own, so that no id is a key hash under the key secret. */
    static const char a[] = "rlt reservation id a", b[] = "rlt reservation id b";
    uint64_t k0 = rlt__siphash13(s->secret, a, sizeof a),
             k1 = rlt__siphash13(s->secret, b, sizeof b);
    memcpy(s->resv_secret, &k0, 8);
    memcpy(s->resv_secret + 8, &k1, 8);
}

void rlt__resv_free(rlt_store *s, rlt__shard *sh)
{
    struct rlt__resv_table *t = sh->resv;
    if (!t) return;
    for (uint32_t i = 0; i <= t->mask; i++) {
        free(t->slot[i].key);
        if (t->slot[i].id != 0)
            __atomic_fetch_sub(&s->resv_held[t->slot[i].bucket], 1, __ATOMIC_RELAXED);
    }
    __atomic_fetch_sub(&s->resv_count, t->count, __ATOMIC_RELAXED);
    free(t);
    sh->resv = NULL;
}

static resv *find(struct rlt__resv_table *t, uint64_t id)
{
    if (!t || id == 0) return NULL;
    for (uint32_t i = (uint32_t)id & t->mask;; i = (i + 1) & t->mask) {
        if (t->slot[i].id == id) return &t->slot[i];
        if (t->slot[i].id == 0) return NULL;
    }
}

/* Backward-shift deletion: no tombstones, probes stay short. */
static void resv_delete(rlt_store *s, struct rlt__resv_table *t, resv *e)
{
    free(e->key);
    __atomic_fetch_sub(&s->resv_held[e->bucket], 1, __ATOMIC_RELAXED);
    uint32_t hole = (uint32_t)(e - t->slot);
    for (uint32_t j = (hole + 1) & t->mask; t->slot[j].id != 0; j = (j + 1) & t->mask) {
        uint32_t home = (uint32_t)t->slot[j].id & t->mask;
        /* Move j into the hole unless its home lies cyclically in (hole, j]. */
        if (((j - home) & t->mask) >= ((j - hole) & t->mask)) {
            t->slot[hole] = t->slot[j];
            hole = j;
        }
    }
    memset(&t->slot[hole], 0, sizeof t->slot[hole]);
    t->count--;
    __atomic_fetch_sub(&s->resv_count, 1, __ATOMIC_RELAXED);
}

/* Which reservations a purge drops: the expired ones, a policy's, or a holder bucket's. */
enum { BY_EXPIRY, BY_POLICY, BY_BUCKET };

/* Drops the reservations that expired at `now` (BY_EXPIRY), or whose policy (BY_POLICY) or
 * holder bucket (BY_BUCKET) is `which`.  Returns the earliest expiry among those it keeps
 * (INT64_MAX: none). */
static rlt_ns purge(rlt_store *s, struct rlt__resv_table *t, rlt_ns now, int by, uint32_t which)
{
    rlt_ns earliest = INT64_MAX;
    for (uint32_t i = 0; t && i <= t->mask;) {
        resv *e = &t->slot[i];
        bool drop = by == BY_EXPIRY   ? now >= e->expires
                    : by == BY_POLICY ? e->policy == which
                                      : e->bucket == which;
        if (e->id != 0 && drop) {
            resv_delete(s, t, e); /* slot i now holds a shifted entry (or none): look again */
        } else {
            if (e->id != 0 && e->expires < earliest) earliest = e->expires;
            i++;
        }
    }
    return earliest;
}

/* Lowers resv_expiry to `at` if it is later. */
static void note_expiry(rlt_store *s, rlt_ns at)
{
    rlt_ns cur = __atomic_load_n(&s->resv_expiry, __ATOMIC_RELAXED);
    while (at < cur && !__atomic_compare_exchange_n(&s->resv_expiry, &cur, at, true,
                                                    __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

void rlt__resv_drop_policy(rlt_store *s, int pid)
{
    __atomic_fetch_add(&s->budget_pgen, 1, __ATOMIC_RELAXED); /* budget.c: no refund after */
    for (uint32_t k = 0; k < s->nshards; k++)
        (void)purge(s, s->shards[k].resv, 0, BY_POLICY, (uint32_t)pid); /* resv_expiry stays a
                                                                            lower bound */
}

bool rlt__policy_same(const rlt_policy *a, const rlt_policy *b)
{
    return rlt_policy_equal(a, b); /* numbers, block=, jitter= and calendar fields */
}

/* Drops every shard's expired reservations at `now` (one shard lock at a time; the caller
 * holds none), when one may have expired.  resv_expiry stays at most every outstanding
 * expiry: the purge sets it to "none" before it starts, so a reservation made in a shard it
 * has already passed lowers it afterwards, and one made in a shard still ahead is also seen
 * there; then it lowers it to the earliest it kept.  (Calls refused while a purge runs are
 * refused as if just before it.) */
static void purge_expired(rlt_store *s, rlt_ns now)
{
    const rlt_ns eff = rlt__effective_now(s, now);
    if (eff < __atomic_load_n(&s->resv_expiry, __ATOMIC_RELAXED)) return;
    __atomic_store_n(&s->resv_expiry, INT64_MAX, __ATOMIC_RELAXED);
    rlt_ns earliest = INT64_MAX;
    for (uint32_t k = 0; k < s->nshards; k++) {
        rlt__shard *sh = &s->shards[k];
        rlt__shard_lock(sh);
        const rlt_ns e = purge(s, sh->resv, eff, BY_EXPIRY, 0);
        rlt__shard_unlock(sh);
        if (e < earliest) earliest = e;
    }
    note_expiry(s, earliest);
}

/* Ends early every reservation of the holder bucket holding the most, unless it is `mine`
 * (or none holds any): each stays charged as estimated, as at its expiry.  true: some ended. */
static bool end_biggest(rlt_store *s, uint32_t mine)
{
    uint32_t big = RLT__RESV_BUCKETS, most = 0;
    for (uint32_t b = 0; b < RLT__RESV_BUCKETS; b++) {
        uint32_t n = __atomic_load_n(&s->resv_held[b], __ATOMIC_RELAXED);
        if (n > most) {
            most = n;
            big = b;
        }
    }
    if (big == RLT__RESV_BUCKETS || big == mine) return false;
    for (uint32_t k = 0; k < s->nshards; k++) {
        rlt__shard *sh = &s->shards[k];
        rlt__shard_lock(sh);
        (void)purge(s, sh->resv, 0, BY_BUCKET, big); /* resv_expiry stays a lower bound */
        rlt__shard_unlock(sh);
    }
    return true;
}

/* One ticket of the store-wide bound and of the holder's bucket, as the head of the file
 * says: expired ones dropped first, then (the table full) the biggest holder's ended.
 * Returns RLT_OK (taken) or RLT_EFULL. */
static int take_ticket(rlt_store *s, rlt_ns now, uint32_t bucket)
{
    const uint64_t hcap = bucket == RLT__RESV_BUCKETS ? UINT64_MAX : s->resv_holder_cap;
    for (int round = 0;; round++) {
        if (rlt__take32(&s->resv_held[bucket], hcap)) {
            if (rlt__take64(&s->resv_count, s->resv_cap)) return RLT_OK;
            __atomic_fetch_sub(&s->resv_held[bucket], 1, __ATOMIC_RELAXED);
            if (round == 1 && bucket != RLT__RESV_BUCKETS && end_biggest(s, bucket)) continue;
        }
        if (round >= 1) return RLT_EFULL;
        purge_expired(s, now);
    }
}

/* A free slot for one more reservation in sh's table (grown to stay at most half full). */
static int make_room(rlt__shard *sh)
{
    struct rlt__resv_table *t = sh->resv;
    uint32_t slots = t ? t->mask + 1 : 0;
    if (t && (uint64_t)(t->count + 1) * 2 <= slots) return RLT_OK;
    uint32_t ns = slots ? slots * 2 : 16;
    if (ns == 0 || ns > (UINT32_C(1) << 30)) return RLT_EFULL;
    struct rlt__resv_table *n = calloc(1, sizeof *n + ns * sizeof(resv));
    if (!n) return RLT_ENOMEM;
    n->mask = ns - 1;
    for (uint32_t i = 0; i < slots; i++) {
        if (t->slot[i].id == 0) continue;
        uint32_t j = (uint32_t)t->slot[i].id & n->mask;
        while (n->slot[j].id != 0)
            j = (j + 1) & n->mask;
        n->slot[j] = t->slot[i];
        n->count++;
    }
    free(t);
    sh->resv = n;
    return RLT_OK;
}

static uint64_t new_id(rlt_store *s, struct rlt__resv_table *t)
{
    for (;;) {
        uint64_t n = __atomic_fetch_add(&s->resv_next, 1, __ATOMIC_RELAXED);
        uint64_t id = rlt__siphash13(s->resv_secret, &n, sizeof n);
        if (id != 0 && !find(t, id)) return id;
    }
}

static int check_args(const rlt_store *s, const void *key, size_t klen, const rlt_decision *d)
{
    if (!s || !d) return RLT_EINVAL;
    return rlt__check_key(key, klen);
}

int rlt_store_reserve(rlt_store *s, int id, const void *key, size_t klen, rlt_ns now,
                      int64_t estimate, rlt_ns timeout, rlt_decision *d, uint64_t *reservation)
{
    return rlt_store_reserve_for(s, 0, id, key, klen, now, estimate, timeout, d, reservation);
}

/* Gives back a ticket taken for a reservation that was not recorded. */
static void give_back(rlt_store *s, uint32_t bucket)
{
    __atomic_fetch_sub(&s->resv_held[bucket], 1, __ATOMIC_RELAXED);
    __atomic_fetch_sub(&s->resv_count, 1, __ATOMIC_RELAXED);
}

int rlt_store_reserve_for(rlt_store *s, uint64_t holder, int id, const void *key, size_t klen,
                          rlt_ns now, int64_t estimate, rlt_ns timeout, rlt_decision *d,
                          uint64_t *reservation)
{
    int rc = check_args(s, key, klen, d);
    if (rc) return rc;
    if (!reservation || estimate < 0 || timeout < 0) return RLT_EINVAL;
    *reservation = 0;
    const uint32_t bucket = rlt__resv_bucket(s, holder);
    if (take_ticket(s, now, bucket) != RLT_OK) return RLT_EFULL;
    uint8_t *kcopy = malloc(klen); /* before the charge: nothing to undo after it */
    if (!kcopy) {
        give_back(s, bucket);
        return RLT_ENOMEM;
    }
    memcpy(kcopy, key, klen);
    uint64_t h;
    rlt__shard *sh;
    (void)rlt__lock_key(s, key, klen, &h, &sh); /* the key is checked */
    const rlt_ns eff = rlt__effective_now(s, now);
    if (!rlt__pol_known(s, id)) {
        rc = RLT_ENOENT;
    } else if (!rlt_settle_supported(&s->pols[id].p)) {
        rc = RLT_EINVAL;
    } else if ((rc = make_room(sh)) == RLT_OK &&
               (rc = rlt__decide_in_shard(s, sh, h, id, key, klen, now, estimate, d)) == RLT_OK &&
               (d->allowed || estimate == 0)) {
        /* An estimate of 0 charges nothing, so it is recorded whatever *d says (whether a
         * cost-1 request would pass now): on a limit already used up its settle still charges
         * the whole real cost, as a debt (Envoy's drain_over_limit does exactly this). */
        struct rlt__resv_table *t = sh->resv;
        uint64_t rid = new_id(s, t);
        uint32_t i = (uint32_t)rid & t->mask;
        while (t->slot[i].id != 0)
            i = (i + 1) & t->mask;
        rlt_ns expires =
            __builtin_add_overflow(eff, timeout ? timeout : RLT_RESERVE_DEFAULT_TIMEOUT, &expires)
                ? INT64_MAX
                : expires;
        t->slot[i] = (resv){.id = rid,
                            .at = eff,
                            .expires = expires,
                            .estimate = estimate,
                            .policy = (uint32_t)id,
                            .klen = (uint32_t)klen,
                            .key = kcopy,
                            .epoch = sh->resv_epoch,
                            .bucket = bucket};
        t->count++;
        note_expiry(s, expires); /* under the shard lock: a purge of this shard sees it or not */
        kcopy = NULL;
        *reservation = rid;
    }
    rlt__shard_unlock(sh);
    if (kcopy) { /* nothing recorded: give the ticket back */
        free(kcopy);
        give_back(s, bucket);
    }
    return rc;
}

/* rlt_settle on the key's state, or on a fresh one when the entry is gone (dropped as fresh or
 * evicted): a refund then finds nothing to give back, a debt makes the entry again. */
static int settle_state(rlt_store *s, rlt__shard *sh, uint64_t h, int id, const void *key,
                        size_t klen, rlt_ns now, const resv *r, int64_t real, rlt_decision *d)
{
    const rlt__pol *P = &s->pols[id];
    rlt__slot *e = rlt__find(s, sh, h, id, key, klen);
    int rc;
    if (e) {
        e->meta |= RLT__REF;
        /* A compact log grows first for an extra charge (logs.h), shrinks after a refund. */
        if ((rc = rlt__log_fit(s, sh, e, now, 0, real - r->estimate))) return rc;
        rc = rlt_settle(&P->p, rlt__slot_state(s, e), now, r->at, r->estimate, real, d);
        if (rc == RLT_OK) rlt__log_trim(s, sh, e);
        return rc;
    }
    uint8_t *state = calloc(1, P->ssz); /* the full layout, then into the entry */
    if (!state) return RLT_ENOMEM;
    rc = rlt_settle(&P->p, state, now, r->at, r->estimate, real, d);
    if (rc == RLT_OK && !rlt_is_fresh(&P->p, state, now)) {
        rc = rlt__insert(s, sh, h, id, key, klen, now, NULL, &e);
        if (rc == RLT_OK && (rc = rlt__state_put(s, sh, e, state))) rlt__delete(s, sh, e);
    }
    free(state);
    return rc;
}

int rlt__resv_apply(rlt_store *s, int id, const void *key, size_t klen, rlt_ns now, rlt_ns at,
                    uint64_t epoch, uint64_t pgen, int64_t estimate, int64_t real_cost,
                    rlt_decision *d)
{
    uint64_t h;
    rlt__shard *sh;
    (void)rlt__lock_key(s, key, klen, &h, &sh); /* the caller checked the key */
    const rlt_ns eff = rlt__effective_now(s, now);
    if (eff > sh->last_now) sh->last_now = eff;
    int rc = RLT_ENOENT;
    if (rlt__pol_known(s, id)) {
        const rlt_ns t = s->pols[id].p.algo == RLT_GCRA ? sh->last_now : eff; /* as below */
        /* A reset, an eviction or other numbers since: no refund (a higher cost still charged). */
        if ((epoch != sh->resv_epoch ||
             pgen != __atomic_load_n(&s->budget_pgen, __ATOMIC_RELAXED)) &&
            real_cost < estimate)
            real_cost = estimate;
        const resv r = {.at = at, .estimate = estimate};
        if ((rc = settle_state(s, sh, h, id, key, klen, t, &r, real_cost, d)) == RLT_OK)
            rlt__from_effective(d, now, t);
    }
    rlt__shard_unlock(sh);
    return rc;
}

int rlt_store_settle(rlt_store *s, int id, const void *key, size_t klen, rlt_ns now,
                     uint64_t reservation, int64_t real_cost, rlt_decision *d)
{
    int rc = check_args(s, key, klen, d);
    if (rc) return rc;
    if (real_cost < 0) return RLT_EINVAL;
    uint64_t h;
    rlt__shard *sh;
    (void)rlt__lock_key(s, key, klen, &h, &sh); /* the key is checked */
    const rlt_ns eff = rlt__effective_now(s, now);
    if (eff > sh->last_now) sh->last_now = eff;
    resv *r = find(sh->resv, reservation);
    if (!rlt__pol_known(s, id) || !r || r->policy != (uint32_t)id || r->klen != klen ||
        memcmp(r->key, key, klen) != 0) {
        rc = RLT_ENOENT;
    } else if (eff >= r->expires) {
        resv_delete(s, sh->resv, r); /* expired: charged as estimated */
        rc = RLT_ENOENT;
    } else {
        /* A GCRA word does not remember the latest instant it was decided at, which bounds
         * the refill its refund must leave out (rlt_settle's contract): the shard's latest
         * time does (a clock that stepped back since the reservation gets the refill of the
         * step left out, never given back). */
        const rlt_ns at = s->pols[id].p.algo == RLT_GCRA ? sh->last_now : eff;
        /* A state of this shard was reset or evicted since the reservation: the key's state
         * may be a new one that never held the estimate, so nothing is refunded (a higher real
         * cost is still charged). */
        if (r->epoch != sh->resv_epoch && real_cost < r->estimate) real_cost = r->estimate;
        if ((rc = settle_state(s, sh, h, id, key, klen, at, r, real_cost, d)) == RLT_OK) {
            resv_delete(s, sh->resv, r);
            rlt__from_effective(d, now, at);
        }
    }
    rlt__shard_unlock(sh);
    return rc;
}

size_t rlt_store_reservations(rlt_store *s, rlt_ns now)
{
    if (!s) return 0;
    size_t n = 0;
    for (uint32_t i = 0; i < s->nshards; i++) {
        rlt__shard *sh = &s->shards[i];
        rlt__shard_lock(sh);
        const struct rlt__resv_table *t = sh->resv;
        for (uint32_t j = 0; t && j <= t->mask; j++)
            n += t->slot[j].id != 0 && now < t->slot[j].expires;
        rlt__shard_unlock(sh);
    }
    return n;
}
