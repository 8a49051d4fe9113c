/* Room for new entries: an insert within the shard's caps (growing the table by 1.5x while it
 * may), the eviction when a shard is at its cap (fresh entries first, then CLOCK's second
 * chance, never a pinned entry), and the idle sweep that drops fresh entries ahead of need.
 * The policy is in store.c's opening comment ("Memory"). */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "core/sliding_log.h"

#include "store/assign.h"
#include "store/evict.h"
#include "store/lock.h"
#include "store/logs.h"
#include "store/table.h"

#define MAX_SLOTS (UINT32_C(1) << 30)
#define SCAN_IDLE 256u /* slots the eviction looks through for a fresh entry */

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
                rlt__assign_drop(s, sh, rlt__slot_key(s, e), e->meta & RLT__KLEN_MASK);
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
    const bool inl = rlt__is_inline(P->ssz, klen);
    /* A block given holds its state (a compact log: any size); a new one, a zero state (a
     * compact log: one slot). */
    size_t sbytes = P->ssz;
    if (rlt__pol_log(P))
        sbytes =
            block ? rlt__ool_state_bytes(P, block + rlt__pad8(klen)) : rlt__sliding_log_bytes(1);
    const uint64_t extra = inl ? 0 : rlt__pad8(klen) + sbytes;
    const uint64_t slot = sizeof(rlt__slot);
    for (;;) {
        bool full = sh->count >= s->key_cap || sh->bytes + extra > s->byte_cap;
        if (!full && (uint64_t)(sh->count + 1) * 5 > (uint64_t)sh->cap * 4) {
            uint64_t want = sh->cap ? sh->cap + sh->cap / 2 : 16;
            if (s->key_cap != UINT64_MAX && want > s->key_cap + s->key_cap / 4 + 2)
                want = s->key_cap + s->key_cap / 4 + 2;
            if (s->byte_cap != UINT64_MAX) {
                uint64_t other = sh->bytes - rlt__table_bytes(sh->cap) + extra;
                uint64_t avail = s->byte_cap > other ? s->byte_cap - other : 0;
                if (avail >= RLT__HUGE) avail &= ~(uint64_t)4095; /* big tables: whole pages */
                uint64_t fit = avail / slot;
                if (want > fit) want = fit;
            }
            if (want > MAX_SLOTS) want = MAX_SLOTS;
            if (want <= sh->cap || want * 4 < (uint64_t)(sh->count + 1) * 5) {
                full = true;
            } else {
                int rc = rlt__grow(s, sh, (uint32_t)want);
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
        block = rlt__ool_new(P, klen, 1);
        if (!block) return RLT_ENOMEM;
    }
    const uint32_t tag = rlt__tag_of(s, h, pid);
    uint32_t i = rlt__home(tag, sh->cap);
    while (sh->tab[i].meta)
        if (++i == sh->cap) i = 0;
    rlt__slot *e = &sh->tab[i];
    memset(e, 0, sizeof *e);
    rlt__fps_of(sh->tab, sh->cap)[i] = rlt__fp_of(tag);
    e->tag = tag;
    e->policy = (uint16_t)pid;
    e->meta = (uint16_t)klen;
    if (inl) {
        memcpy(e->u.inl + P->ssz, key, klen);
    } else {
        memcpy(block, key, klen);
        e->u.ool = block;
        RLT__STAT_ADD(sh->bytes, extra);
    }
    RLT__STAT_ADD(sh->count, 1u);
    *out = e;
    return RLT_OK;
}

size_t rlt_store_sweep(rlt_store *s, rlt_ns now, size_t budget)
{
    if (!s) return 0;
    size_t dropped = 0;
    pthread_mutex_lock(&s->sweep_mu);
    for (uint32_t visited = 0; budget > 0 && visited <= s->nshards;) {
        rlt__shard *sh = &s->shards[s->sweep_shard];
        rlt__shard_lock(sh);
        rlt__note_now(sh, now);
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
