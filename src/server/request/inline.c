/* The inline-policy cache: bounded slots named "i#k" in the store, reused when idle past their
 * horizon (inline.h says why that mints nothing) or else evicted least recently used first
 * with their keys, never while in use, with a quota per tenant. */
#include "server/request/inline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How long after its last use a key of policy p is fresh again, whatever its state: the
 * reset time of a state used to its full capacity at once, or the period, whichever is
 * longer, doubled for margin (a sliding window counter remembers two windows). */
static rlt_ns horizon_of(const rlt_policy *p)
{
    rlt_ns h = p->period;
    size_t n = rlt_state_size(p);
    void *st = n > 0 ? calloc(1, n) : NULL;
    if (st != NULL) {
        int64_t cost = p->algo == RLT_CONCURRENCY ? 1 : rlt_policy_limit(p);
        rlt_decision d;
        if (rlt_decide(p, st, 0, cost, &d) == RLT_OK && d.reset_after > h) h = d.reset_after;
        free(st);
    }
    return h > INT64_MAX / 4 ? INT64_MAX / 2 : 2 * h + RLT_NS_PER_S;
}

static void slot_name(char *out, size_t cap, size_t k)
{
    snprintf(out, cap, "i#%zu", k);
}

int rlt__inline_open(rlt__inline_table *t, size_t max, rlt__registry *reg, rlt_ns now)
{
    memset(t, 0, sizeof *t);
    t->slot = calloc(max ? max : 1, sizeof *t->slot);
    if (t->slot == NULL) return RLT_ENOMEM;
    t->max = max;
    t->epoch = 1;
    for (size_t k = 0; k < max; k++) {
        rlt__inline_slot *sl = &t->slot[k];
        char name[32], canon[256];
        slot_name(name, sizeof name, k);
        int id = rlt__registry_policy_id(reg, name);
        rlt_policy p;
        sl->id = id >= 0 ? id : -1;
        if (id < 0 || rlt__registry_policy(reg, id, &p) != RLT_OK ||
            rlt_policy_format(&p, canon, sizeof canon) < 0)
            continue;
        sl->text = strdup(canon);
        if (sl->text == NULL) return RLT_ENOMEM;
        sl->horizon = horizon_of(&p);
        sl->last = now;
    }
    return RLT_OK;
}

void rlt__inline_close(rlt__inline_table *t)
{
    for (size_t k = 0; k < t->max; k++)
        free(t->slot[k].text);
    free(t->slot);
    memset(t, 0, sizeof *t);
}

void rlt__inline_touch(rlt__inline_table *t, size_t slot, rlt_ns now)
{
    if (slot >= t->max) return;
    rlt_ns *last = &t->slot[slot].last;
    if (__atomic_load_n(last, __ATOMIC_RELAXED) < now)
        __atomic_store_n(last, now, __ATOMIC_SEQ_CST);
}

static bool idle(const rlt__inline_slot *sl, rlt_ns now)
{
    rlt_ns last = __atomic_load_n(&sl->last, __ATOMIC_SEQ_CST);
    return sl->text != NULL && now - last > sl->horizon;
}

/* Whether slot `sl` may be evicted with its live keys at `now`: not used within the grace. */
static bool past_grace(const rlt__inline_slot *sl, rlt_ns now)
{
    return sl->text != NULL &&
           now - __atomic_load_n(&sl->last, __ATOMIC_SEQ_CST) > RLT__INLINE_GRACE;
}

/* The slot to use for a new text: a free one, else the least recently used idle one, else
 * (evict_live) the least recently used one past its grace; only the owner's own when it is at
 * its quota.  SIZE_MAX when there is none. */
static size_t pick(const rlt__inline_table *t, uint64_t owner, bool own_only, bool evict_live,
                   rlt_ns now)
{
    size_t best = SIZE_MAX, live = SIZE_MAX;
    for (size_t k = 0; k < t->max; k++) {
        const rlt__inline_slot *sl = &t->slot[k];
        if (sl->text == NULL) {
            if (!own_only) return k;
            continue;
        }
        if (own_only && sl->owner != owner) continue;
        rlt_ns last = __atomic_load_n(&sl->last, __ATOMIC_RELAXED);
        size_t *into = idle(sl, now) ? &best : evict_live && past_grace(sl, now) ? &live : NULL;
        if (into != NULL &&
            (*into == SIZE_MAX || last < __atomic_load_n(&t->slot[*into].last, __ATOMIC_RELAXED)))
            *into = k;
    }
    return best != SIZE_MAX ? best : live;
}

static void refuse_full(const rlt__inline_table *t, bool at_quota, size_t quota, char *err,
                        size_t errlen)
{
    if (at_quota)
        snprintf(err, errlen,
                 "this tenant has %zu inline policies in use, its quota: name them in the "
                 "config instead",
                 quota);
    else
        snprintf(err, errlen,
                 "too many distinct inline policies in use (max %zu): name them in the "
                 "config instead",
                 t->max);
}

int rlt__inline_intern(rlt__inline_table *t, rlt__registry *reg, const rlt_policy *run,
                       const char *canon, uint64_t owner, size_t quota, bool evict_live, rlt_ns now,
                       size_t *slot, int *id, char *err, size_t errlen)
{
    size_t mine = 0;
    for (size_t k = 0; k < t->max; k++) {
        rlt__inline_slot *sl = &t->slot[k];
        if (sl->text == NULL) continue;
        if (strcmp(sl->text, canon) == 0) {
            rlt__inline_touch(t, k, now);
            *slot = k;
            *id = sl->id;
            return RLT_OK;
        }
        mine += sl->owner == owner;
    }
    bool at_quota = owner != 0 && mine >= quota;
    size_t k = pick(t, owner, at_quota, evict_live, now);
    if (k == SIZE_MAX) {
        refuse_full(t, at_quota, quota, err, errlen);
        return RLT_ENOMEM;
    }
    rlt__inline_slot *sl = &t->slot[k];
    if (sl->text != NULL) {
        /* Bump the epoch before the last look at the use time: a thread that uses the slot
         * from its cache touches, then reads the epoch (srv.c tl_get); one of the two sees the
         * other, so no request is decided under the slot's next policy. */
        __atomic_add_fetch(&t->epoch, 1, __ATOMIC_SEQ_CST);
        if (!idle(sl, now) && !(evict_live && past_grace(sl, now))) {
            refuse_full(t, at_quota, quota, err, errlen);
            return RLT_ENOMEM;
        }
        /* An eviction rewrites the store's table under all its locks: bounded per second. */
        int64_t sec = now / RLT_NS_PER_S;
        if (sec != t->evict_second) {
            t->evict_second = sec;
            t->evictions = 0;
        }
        if (t->evictions >= RLT__INLINE_EVICT_PER_S) {
            snprintf(err, errlen,
                     "inline policies change too fast (more than %d replaced per second): name "
                     "them in the config instead",
                     RLT__INLINE_EVICT_PER_S);
            return RLT_ENOMEM;
        }
        t->evictions++;
    }
    char *text = strdup(canon);
    if (text == NULL) {
        snprintf(err, errlen, "out of memory");
        return RLT_ENOMEM;
    }
    char name[32];
    slot_name(name, sizeof name, k);
    int nid = -1;
    /* Idle, every key of the old policy is fresh: resetting them drops no allowance.  Evicted
     * past its grace, its keys start fresh as a full store's least recently used key does. */
    int st = rlt__registry_set_policy(reg, name, run, RLT_CHANGE_RESET, &nid);
    if (st != RLT_OK) {
        free(text);
        snprintf(err, errlen, "cannot add policy: %s", rlt_strerror(st));
        return st;
    }
    free(sl->text);
    sl->text = text;
    sl->id = nid;
    sl->owner = owner;
    sl->horizon = horizon_of(run);
    __atomic_store_n(&sl->last, now, __ATOMIC_RELAXED);
    *slot = k;
    *id = nid;
    return RLT_OK;
}
