/* Multi-limit checks, rlt_store_decide_multi: every limit of a request decided on working
 * copies of the states under all their shards' locks (taken in increasing order), then either
 * committed together or, when one denies, nothing charged (only a penalty box's start kept).
 * Copy, decide, then commit or pin: there is nothing to roll back. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "store/decision.h"
#include "store/evict.h"
#include "store/lock.h"
#include "store/logs.h"
#include "store/multi.h"
#include "store/table.h"

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
        rlt__state_get(s, e, m->st); /* the full layout (a compact log expanded) */
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
        if ((rc = rlt__state_put(s, sh, e, r->st))) break;
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
                        bool *all, rlt__multi_extra *x)
{
    now = rlt__effective_now(s, now); /* the caller re-expresses the waits (from_effective) */
    for (size_t i = 0; i < n; i++) {
        if (c[i].policy < 0 || (uint32_t)c[i].policy >= s->npol) return RLT_ENOENT;
        if (s->pols[c[i].policy].p.algo == RLT_CONCURRENCY) return RLT_EINVAL;
        if (x && !rlt_settle_supported(&s->pols[c[i].policy].p)) return RLT_EINVAL;
    }
    if (x) {
        /* What a reservation needs to settle later, read under the locks before the charge. */
        x->at = now;
        x->pgen = __atomic_load_n(&s->budget_pgen, __ATOMIC_RELAXED);
        for (size_t i = 0; i < n; i++) {
            x->epoch[i] = s->shards[m[i].shard].resv_epoch;
        }
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
        if (m[i].root == (int)i) total += rlt__pad8(s->pols[c[i].policy].ssz);
    }
    uint64_t stackbuf[MULTI_STACK * RLT__SMALL_STATE / 8];
    uint8_t *arena = total <= sizeof stackbuf ? (uint8_t *)stackbuf : malloc(total);
    if (!arena) return RLT_ENOMEM;
    int rc = RLT_OK;
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        if (m[i].root != (int)i) continue;
        m[i].st = arena + off;
        off += rlt__pad8(s->pols[c[i].policy].ssz);
        rlt__shard *sh = &s->shards[m[i].shard];
        rlt__note_now(sh, now);
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
    /* Room in every compact log for what it will hold, before anything is written. */
    for (size_t i = 0; i < n && !rc; i++) {
        if (m[i].root != (int)i || !m[i].existed) continue;
        rlt__shard *sh = &s->shards[m[i].shard];
        rc = rlt__state_reserve(s, sh, rlt__find(s, sh, m[i].h, c[i].policy, c[i].key, c[i].klen),
                                m[i].st);
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
        (void)rlt__state_put(s, sh, e, m[i].st); /* cannot fail: the room was made above */
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
    return rlt__store_decide_multi_ex(s, checks, n, now, combined, refused, NULL);
}

int rlt__store_decide_multi_ex(rlt_store *s, const rlt_check *checks, size_t n, rlt_ns now,
                               rlt_decision *combined, int *refused, rlt__multi_extra *x)
{
    if (!s || !checks || !combined || n == 0 || n > INT32_MAX) return RLT_EINVAL;
    for (size_t i = 0; i < n; i++) {
        int rc = rlt__check_key(checks[i].key, checks[i].klen);
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
    int rc = multi_locked(s, checks, m, n, now, &all, x);
    if (!rc) {
        rlt_decision *cd = combined;
        int first_refused = -1;
        for (size_t i = 0; i < n; i++) {
            if (!m[i].d.allowed && first_refused < 0) first_refused = (int)i;
            rlt__jitter_decision(&s->pols[checks[i].policy].p, checks[i].key, checks[i].klen, now,
                                 &m[i].d);
            rlt_decision_combine(cd, &m[i].d, i == 0);
            if (x) {
                x->each[i] = m[i].d;
                rlt__from_effective(&x->each[i], now, rlt__effective_now(s, now));
            }
        }
        assert(cd->allowed == all);
        rlt__from_effective(cd, now, rlt__effective_now(s, now)); /* still under the locks */
        if (refused) *refused = first_refused;
        rlt__count_decision(&s->shards[lk[0]], all);
    }
    for (size_t i = nl; i-- > 0;)
        rlt__shard_unlock(&s->shards[lk[i]]);
    if (m != mstack) free(m);
    if (lk != lstack) free(lk);
    return rc;
}
