/* The inline-policy cache: bounded slots named "i#k" in the store, reused when idle past their
 * horizon (inline.h says why that mints nothing) or else evicted least recently used first
 * with their keys, never while in use, with a quota per tenant and replacements budgeted per
 * connection, per address, per tenant and in all. */
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
    int st = rlt__budgets_open(&t->all, RLT__INLINE_ALL_PER_S, RLT__INLINE_ALL_BURST, 1);
    if (st == RLT_OK)
        st = rlt__budgets_open(&t->clients, RLT__INLINE_CLIENT_PER_S, RLT__INLINE_CLIENT_BURST,
                               RLT__INLINE_BUDGETS);
    if (st == RLT_OK)
        st = rlt__budgets_open(&t->addrs, RLT__INLINE_ADDR_PER_S, RLT__INLINE_ADDR_BURST,
                               RLT__INLINE_BUDGETS);
    if (st == RLT_OK)
        st = rlt__budgets_open(&t->tenants, RLT__INLINE_TENANT_PER_S, RLT__INLINE_TENANT_BURST,
                               RLT__INLINE_BUDGETS);
    if (st != RLT_OK) return st;
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
    rlt__budgets_close(&t->all);
    rlt__budgets_close(&t->clients);
    rlt__budgets_close(&t->addrs);
    rlt__budgets_close(&t->tenants);
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

/* The budgets a replacement for `who` is charged to: the global one, its connection's, its
 * address's, its tenant's (NULL when it has none). */
typedef struct charges {
    rlt__budget *all, *client, *addr, *tenant;
} charges;

/* Whether one replacement fits every budget `who` answers to at `now`, nothing charged yet
 * (copy, decide, then commit: a refused or failed text charges none).  False with a message. */
static bool fits_budgets(rlt__inline_table *t, rlt__inline_who who, rlt_ns now, charges *c,
                         char *err, size_t errlen)
{
    c->all = rlt__budgets_get(&t->all, 0, now);
    c->client = who.client ? rlt__budgets_get(&t->clients, who.client, now) : NULL;
    c->addr = who.addr ? rlt__budgets_get(&t->addrs, who.addr, now) : NULL;
    c->tenant = who.owner ? rlt__budgets_get(&t->tenants, who.owner, now) : NULL;
    const char *whose = NULL;
    int per_s = 0;
    if (who.client && !rlt__budget_fits(&t->clients, c->client, now))
        whose = "this connection's", per_s = RLT__INLINE_CLIENT_PER_S;
    else if (who.addr && !rlt__budget_fits(&t->addrs, c->addr, now))
        whose = "this address's", per_s = RLT__INLINE_ADDR_PER_S;
    else if (who.owner && !rlt__budget_fits(&t->tenants, c->tenant, now))
        whose = "this tenant's", per_s = RLT__INLINE_TENANT_PER_S;
    else if (!rlt__budget_fits(&t->all, c->all, now))
        whose = "all clients'", per_s = RLT__INLINE_ALL_PER_S;
    if (whose == NULL) return true;
    snprintf(err, errlen,
             "inline policies change too fast (%s new texts replace more than %d per second): "
             "name them in the config instead",
             whose, per_s);
    return false;
}

static void charge(rlt__inline_table *t, const charges *c, rlt_ns now)
{
    rlt__budget_charge(&t->all, c->all, now);
    if (c->client) rlt__budget_charge(&t->clients, c->client, now);
    if (c->addr) rlt__budget_charge(&t->addrs, c->addr, now);
    if (c->tenant) rlt__budget_charge(&t->tenants, c->tenant, now);
}

int rlt__inline_intern(rlt__inline_table *t, rlt__registry *reg, const rlt_policy *run,
                       const char *canon, rlt__inline_who who, size_t quota, bool evict_live,
                       rlt_ns now, size_t *slot, int *id, char *err, size_t errlen)
{
    uint64_t owner = who.owner;
    charges ch = {0};
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
        if (!fits_budgets(t, who, now, &ch, err, errlen)) return RLT_ENOMEM;
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
    if (ch.all != NULL) charge(t, &ch, now);
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
