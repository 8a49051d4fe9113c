/* Named policies: their checks, rlt_store_set_policy with the conversion of a changed
 * policy's states (or their reset), and the lookups.  Policies are written under the policy
 * mutex and every shard lock (store.c's opening comment, "Locking"). */
#include <stdlib.h>
#include <string.h>

#include "ratelimit/adaptive.h"

#include "store/decision.h"
#include "store/lock.h"
#include "store/policy.h"
#include "store/reserve.h"
#include "store/table.h"

#define MAX_POLICIES 65535u

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

int rlt__name_len(const char *name, size_t *len)
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

/* Re-derives the policy through rlt_policy_init so a caller's stale derived fields cannot
 * reach the decision code. */
static int clean_policy(const rlt_policy *p, rlt_policy *q, uint32_t *ssz)
{
    if (!p) return RLT_EINVAL;
    int64_t burst = p->algo == RLT_TOKEN_BUCKET || p->algo == RLT_GCRA ? p->burst : 0;
    if (rlt_policy_init(q, p->algo, p->limit, p->period, burst, p->queue, p->delay) ||
        rlt_policy_set_block(q, p->block, p->block_factor, p->block_max) ||
        rlt_policy_set_jitter(q, p->jitter) ||
        (p->adapt && rlt_policy_set_adaptive(q, p->adapt, p->adapt_min, p->adapt_init,
                                             p->adapt_slow)))
        return RLT_EINVAL;
    if (rlt_policy_copy_calendar(q, p)) return RLT_EINVAL; /* calendar windows keep theirs */
    if (p->reserve < 0 || p->reserve > 100) return RLT_EINVAL;
    q->reserve = p->reserve;
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

/* Carries every entry of policy `pid` from `old` to the policy now in s->pols[pid]; caller
 * holds every lock.  `reset` drops them all (the caller then changes the policy).  Entries
 * fresh under the old policy carry nothing and are dropped first, so the result does not
 * depend on whether the store had dropped them lazily yet.  `now` is the latest time the
 * store has seen (set_policy takes no clock of its own). */
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
    if (!s || rlt__name_len(name, &len) || clean_policy(p, &q, &ssz)) return RLT_EINVAL;
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
    if (!s || rlt__name_len(name, &len)) return RLT_ENOENT;
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
