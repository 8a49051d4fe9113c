/* Multi-limit reservations (include/ratelimit/budget.h): one id over up to 16 (policy, key,
 * weighting) limits, charged all or nothing by rlt_store_decide_multi, settled once or in
 * partial settles.
 *
 * Layout.  The records live apart from the single reservations' per-shard tables, because one
 * record spans several shards: 64 stripes, each a mutex and a chained hash table on the id
 * (ids are SipHash outputs: their low bits are uniform), made on the first multi-limit
 * reservation.  A stripe's lock is never held while a shard lock is taken: a settle unlinks
 * its record under the stripe lock, charges each limit under that limit's shard lock alone
 * (reserve.c's rlt__resv_apply, the very settle of a single reservation), then links the
 * record back (partial) or frees it (final).  So a settle runs once: a second one, even
 * concurrent, finds nothing.
 *
 * Accounting per limit.  At reserve, limit i is charged E_i = its weighting's cost of the
 * estimate, constant term c_i included; the record holds h_i = E_i - c_i (the constant term,
 * a per-request count, is spent at once).  A settle's cost on it is u_i = weighting minus c_i
 * of the usage: within h_i, nothing changes in the state and h_i -= u_i; beyond it, the excess
 * u_i - h_i is charged (as a debt past the limit) and h_i = 0.  A final settle then refunds
 * h_i by rlt_settle's rule from the reservation's instant (never minting).  So over the
 * reservation's life a limit is charged c_i + sum u_i when the usage came within the estimate
 * (less what the refund rule cannot give back), and exactly the excess more when not.
 *
 * Bounds.  At most resv_cap records (one atomic count); holders in RLT__RESV_BUCKETS buckets by
 * a keyed hash, as reserve.c's, for the rule of a full table.  Expiry is lazy: a settle finding
 * an expired record drops it (every limit stays charged as it stands), and a full table purges
 * every stripe before it ends a holder's records or refuses.  A store load ends them all, as
 * it ends single reservations: it bumps budget_gen, and a settle of a record made under an
 * older count finds nothing (dropped then, charged as estimated). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ratelimit/budget.h"
#include "store/budget.h"
#include "store/multi.h"
#include "store/reserve.h"
#include "store/siphash.h"
#include "store/store_internal.h"

#define STRIPES 64u
#define SLOTS 256u /* chains per stripe */

typedef struct blimit {
    int policy;
    uint32_t klen;
    uint8_t *key; /* in the record's block, after the limits */
    uint64_t epoch;
    rlt_weights w;
    int64_t held; /* h_i */
} blimit;

typedef struct brec {
    struct brec *next;
    uint64_t id;
    rlt_ns at, expires;
    uint64_t gen;  /* the store's load count when it was made */
    uint64_t pgen; /* its policy-change count then (a change since: no refund) */
    uint32_t bucket;
    uint32_t n;
    size_t size; /* bytes asked for it */
    blimit l[];
} brec;

typedef struct stripe {
    pthread_mutex_t mu;
    brec *slot[SLOTS];
} stripe;

/* Records of at most SMALL bytes (three limits with keys of a few dozen bytes) are recycled
 * through a free list of at most SPARE: freeing thousands of them at once would otherwise
 * return the heap's top to the system and fault it back in page by page on the next burst
 * (it cost a 3-limit reservation 1.5 us in bench/server/mreserve.c). */
#define SMALL 1024u
#define SPARE 4096u

struct rlt__budget {
    stripe st[STRIPES];
    pthread_mutex_t spare_mu;
    brec *spare; /* linked by next */
    uint32_t nspare;
    uint64_t count; /* atomic */
    uint64_t next;  /* atomic: the id counter */
    uint32_t held[RLT__RESV_BUCKETS + 1];
};

static brec *rec_alloc(struct rlt__budget *b, size_t size)
{
    if (size > SMALL) return malloc(size);
    pthread_mutex_lock(&b->spare_mu);
    brec *r = b->spare;
    if (r) {
        b->spare = r->next;
        b->nspare--;
    }
    pthread_mutex_unlock(&b->spare_mu);
    return r ? r : malloc(SMALL);
}

/* Frees a record (its keys are in the same block), or keeps it for the next. */
static void rec_free(struct rlt__budget *b, brec *r)
{
    if (!r) return;
    if (r->size <= SMALL) {
        pthread_mutex_lock(&b->spare_mu);
        if (b->nspare < SPARE) {
            r->next = b->spare;
            b->spare = r;
            b->nspare++;
            r = NULL;
        }
        pthread_mutex_unlock(&b->spare_mu);
    }
    free(r);
}

void rlt__budget_free(rlt_store *s)
{
    struct rlt__budget *b = s->budget;
    s->budget = NULL;
    if (!b) return;
    for (uint32_t k = 0; k < STRIPES; k++) {
        for (uint32_t j = 0; j < SLOTS; j++) {
            for (brec *r = b->st[k].slot[j], *nx; r; r = nx) {
                nx = r->next;
                free(r);
            }
        }
        pthread_mutex_destroy(&b->st[k].mu);
    }
    for (brec *r = b->spare, *nx; r; r = nx) {
        nx = r->next;
        free(r);
    }
    pthread_mutex_destroy(&b->spare_mu);
    free(b);
}

/* The store's table, made on first use (two threads racing: one wins, the other frees its). */
static struct rlt__budget *table(rlt_store *s)
{
    struct rlt__budget *b = __atomic_load_n(&s->budget, __ATOMIC_ACQUIRE);
    if (b) return b;
    struct rlt__budget *n = calloc(1, sizeof *n);
    if (!n) return NULL;
    for (uint32_t k = 0; k < STRIPES; k++)
        pthread_mutex_init(&n->st[k].mu, NULL);
    pthread_mutex_init(&n->spare_mu, NULL);
    if (__atomic_compare_exchange_n(&s->budget, &b, n, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return n;
    for (uint32_t k = 0; k < STRIPES; k++)
        pthread_mutex_destroy(&n->st[k].mu);
    pthread_mutex_destroy(&n->spare_mu);
    free(n);
    return b;
}

static stripe *stripe_of(struct rlt__budget *b, uint64_t id)
{
    return &b->st[id % STRIPES];
}
static brec **chain_of(stripe *st, uint64_t id)
{
    return &st->slot[(id / STRIPES) % SLOTS];
}

/* Unlinks and returns the record `id` of its stripe (locked), or NULL. */
static brec *unlink_rec(stripe *st, uint64_t id)
{
    for (brec **p = chain_of(st, id); *p; p = &(*p)->next) {
        if ((*p)->id != id) continue;
        brec *r = *p;
        *p = r->next;
        return r;
    }
    return NULL;
}

static void drop(struct rlt__budget *b, brec *r)
{
    __atomic_fetch_sub(&b->held[r->bucket], 1, __ATOMIC_RELAXED);
    __atomic_fetch_sub(&b->count, 1, __ATOMIC_RELAXED);
    rec_free(b, r);
}

/* Drops the expired records at `now` (bucket == UINT32_MAX) or every record of `bucket`, one
 * stripe lock at a time.  Returns how many it dropped. */
static uint64_t purge(struct rlt__budget *b, rlt_ns now, uint32_t bucket)
{
    uint64_t n = 0;
    for (uint32_t k = 0; k < STRIPES; k++) {
        stripe *st = &b->st[k];
        pthread_mutex_lock(&st->mu);
        for (uint32_t j = 0; j < SLOTS; j++) {
            for (brec **p = &st->slot[j]; *p;) {
                brec *r = *p;
                if (bucket == UINT32_MAX ? now >= r->expires : r->bucket == bucket) {
                    *p = r->next;
                    drop(b, r);
                    n++;
                } else {
                    p = &r->next;
                }
            }
        }
        pthread_mutex_unlock(&st->mu);
    }
    return n;
}

/* One place in the table for holder bucket `mine`, as budget.h says: within the holder's bound
 * (max_reservations_per_holder), then the table's.  RLT_OK (both taken) or RLT_EFULL. */
static int take_place(rlt_store *s, struct rlt__budget *b, rlt_ns now, uint32_t mine)
{
    const uint64_t hcap = mine == RLT__RESV_BUCKETS ? UINT64_MAX : s->resv_holder_cap;
    if (!rlt__take32(&b->held[mine], hcap) &&
        (!purge(b, now, UINT32_MAX) || !rlt__take32(&b->held[mine], hcap)))
        return RLT_EFULL;
    if (rlt__take64(&b->count, s->resv_cap)) return RLT_OK;
    if (purge(b, now, UINT32_MAX) && rlt__take64(&b->count, s->resv_cap)) return RLT_OK;
    uint32_t big = RLT__RESV_BUCKETS, most = 0;
    for (uint32_t k = 0; k < RLT__RESV_BUCKETS; k++) {
        uint32_t h = __atomic_load_n(&b->held[k], __ATOMIC_RELAXED);
        if (h > most) most = h, big = k;
    }
    if (mine != RLT__RESV_BUCKETS && big != RLT__RESV_BUCKETS && big != mine) {
        (void)purge(b, now, big);
        if (rlt__take64(&b->count, s->resv_cap)) return RLT_OK;
    }
    __atomic_fetch_sub(&b->held[mine], 1, __ATOMIC_RELAXED);
    return RLT_EFULL;
}

/* The weightings' costs of usage `u` (constant terms left out when `spent`), every name of u
 * weighed by some limit.  RLT_OK, RLT_EINVAL or RLT_ERANGE. */
static int costs(const rlt_weights *const *w, size_t n, const rlt_usage *u, bool spent,
                 int64_t *out)
{
    if (u->n > RLT_USAGE_NAMES) return RLT_EINVAL;
    for (uint32_t j = 0; j < u->n; j++) {
        bool named = false;
        for (size_t i = 0; i < n && !named; i++)
            named = rlt_weights_names(w[i], u->item[j].name);
        if (!named || u->item[j].count < 0) return RLT_EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        int rc = rlt_weights_cost(w[i], u, &out[i]);
        if (rc) return rc;
        if (spent) out[i] -= w[i]->base;
    }
    return RLT_OK;
}

int rlt_store_reserve_limits(rlt_store *s, uint64_t holder, const rlt_limit *limits, size_t n,
                             const rlt_usage *estimate, rlt_ns now, rlt_ns timeout,
                             rlt_decision *combined, rlt_decision *each, int *refused,
                             uint64_t *reservation)
{
    if (!s || !limits || !estimate || !combined || !reservation || n == 0 ||
        n > RLT_BUDGET_LIMITS || timeout < 0)
        return RLT_EINVAL;
    *reservation = 0;
    if (refused) *refused = -1;
    const rlt_weights *w[RLT_BUDGET_LIMITS];
    rlt_check c[RLT_BUDGET_LIMITS];
    int64_t est[RLT_BUDGET_LIMITS];
    for (size_t i = 0; i < n; i++) {
        int rc = rlt__check_key(limits[i].key, limits[i].klen);
        if (rc) return rc;
        w[i] = &limits[i].weights;
    }
    int rc = costs(w, n, estimate, false, est);
    if (rc) return rc;
    struct rlt__budget *b = table(s);
    if (!b) return RLT_ENOMEM;
    size_t keys = 0;
    for (size_t i = 0; i < n; i++)
        keys += limits[i].klen;
    const size_t size = sizeof(brec) + n * sizeof(blimit) + keys; /* the keys after the limits */
    brec *r = rec_alloc(b, size);
    if (!r) return RLT_ENOMEM;
    r->size = size;
    r->n = (uint32_t)n;
    uint8_t *kp = (uint8_t *)&r->l[n];
    for (size_t i = 0; i < n; i++) {
        blimit *l = &r->l[i];
        c[i] = (rlt_check){limits[i].policy, limits[i].key, limits[i].klen, est[i]};
        l->policy = limits[i].policy;
        l->klen = (uint32_t)limits[i].klen;
        l->w = limits[i].weights;
        l->held = est[i] - l->w.base; /* est includes base, and base >= 0 */
        l->key = kp;
        memcpy(kp, limits[i].key, l->klen);
        kp += l->klen;
    }
    r->bucket = rlt__resv_bucket(s, holder);
    if ((rc = take_place(s, b, now, r->bucket)) != RLT_OK) {
        rec_free(b, r);
        return rc;
    }
    r->gen = __atomic_load_n(&s->budget_gen, __ATOMIC_ACQUIRE);
    rlt_decision mine[RLT_BUDGET_LIMITS];
    uint64_t epoch[RLT_BUDGET_LIMITS];
    rlt__multi_extra x = {each ? each : mine, epoch, 0, 0};
    rc = rlt__store_decide_multi_ex(s, c, n, now, combined, refused, &x);
    if (rc || !combined->allowed) {
        __atomic_fetch_sub(&b->count, 1, __ATOMIC_RELAXED);
        __atomic_fetch_sub(&b->held[r->bucket], 1, __ATOMIC_RELAXED);
        rec_free(b, r);
        return rc;
    }
    r->at = x.at;
    r->pgen = x.pgen;
    for (size_t i = 0; i < n; i++)
        r->l[i].epoch = epoch[i];
    if (__builtin_add_overflow(r->at, timeout ? timeout : RLT_RESERVE_DEFAULT_TIMEOUT, &r->expires))
        r->expires = INT64_MAX;
    for (;;) {
        uint64_t k = __atomic_fetch_add(&b->next, 1, __ATOMIC_RELAXED);
        r->id = rlt__siphash13(s->resv_secret, &k, sizeof k) ^ 0x6275646765740000ull; /* "budget" */
        if (r->id == 0) continue;
        stripe *st = stripe_of(b, r->id);
        pthread_mutex_lock(&st->mu);
        brec **ch = chain_of(st, r->id), *e = *ch;
        while (e && e->id != r->id)
            e = e->next;
        if (!e) {
            r->next = *ch;
            *ch = r;
        }
        pthread_mutex_unlock(&st->mu);
        if (!e) break;
    }
    *reservation = r->id;
    return RLT_OK;
}

static bool same_keys(const brec *r, const rlt_check *k, size_t n)
{
    if (r->n != n) return false;
    for (size_t i = 0; i < n; i++)
        if (r->l[i].policy != k[i].policy || r->l[i].klen != k[i].klen || !k[i].key ||
            memcmp(r->l[i].key, k[i].key, k[i].klen) != 0)
            return false;
    return true;
}

int rlt_store_settle_limits(rlt_store *s, uint64_t reservation, const rlt_check *keys, size_t n,
                            const rlt_usage *usage, bool final, rlt_ns now, rlt_decision *combined,
                            rlt_decision *each, int64_t *charged)
{
    if (!s || !keys || !usage || !combined || n == 0 || n > RLT_BUDGET_LIMITS) return RLT_EINVAL;
    struct rlt__budget *b = __atomic_load_n(&s->budget, __ATOMIC_ACQUIRE);
    if (!b || reservation == 0) return RLT_ENOENT;
    stripe *st = stripe_of(b, reservation);
    int64_t cost[RLT_BUDGET_LIMITS];
    pthread_mutex_lock(&st->mu);
    brec *r = unlink_rec(st, reservation);
    int rc = RLT_OK;
    if (!r) {
        rc = RLT_ENOENT;
    } else if (!same_keys(r, keys, n)) {
        rc = RLT_ENOENT; /* another key set: the record stays */
    } else if (rlt__effective_now(s, now) >= r->expires ||
               r->gen != __atomic_load_n(&s->budget_gen, __ATOMIC_ACQUIRE)) {
        drop(b, r); /* expired, or a load since: charged as it stands */
        r = NULL;
        rc = RLT_ENOENT;
    } else {
        const rlt_weights *w[RLT_BUDGET_LIMITS];
        for (size_t i = 0; i < n; i++)
            w[i] = &r->l[i].w;
        rc = costs(w, n, usage, true, cost);
    }
    if (rc && r) { /* nothing changes: link it back */
        brec **ch = chain_of(st, reservation);
        r->next = *ch;
        *ch = r;
    }
    pthread_mutex_unlock(&st->mu);
    if (rc) return rc;
    rlt_decision d[RLT_BUDGET_LIMITS];
    bool seen[RLT_BUDGET_LIMITS] = {false};
    for (size_t i = 0; i < n && !rc; i++) {
        blimit *l = &r->l[i];
        const int64_t over = cost[i] > l->held ? cost[i] - l->held : 0;
        if (charged) charged[i] = over;
        if (final || over > 0) {
            /* One rlt_settle: the excess charged, or (final) what is still held refunded. */
            rc = rlt__resv_apply(s, l->policy, l->key, l->klen, now, r->at, l->epoch, r->pgen,
                                 l->held, cost[i], &d[i]);
            seen[i] = rc == RLT_OK;
            l->held = 0;
        } else {
            l->held -= cost[i];
        }
    }
    if (rc || final) {
        drop(b, r); /* an error part-way ends it: the rest stays charged as it stands */
        if (rc) return rc;
    } else {
        pthread_mutex_lock(&st->mu);
        brec **ch = chain_of(st, reservation);
        r->next = *ch;
        *ch = r;
        pthread_mutex_unlock(&st->mu);
    }
    /* Where each limit stands: the settle's own peek, else one now. */
    for (size_t i = 0; i < n; i++) {
        if (!seen[i] &&
            (rc = rlt_store_decide(s, keys[i].policy, keys[i].key, keys[i].klen, now, 0, &d[i])))
            return rc;
        if (each) each[i] = d[i];
        rlt_decision_combine(combined, &d[i], i == 0);
    }
    return RLT_OK;
}

size_t rlt_store_limit_reservations(rlt_store *s, rlt_ns now)
{
    struct rlt__budget *b = s ? __atomic_load_n(&s->budget, __ATOMIC_ACQUIRE) : NULL;
    if (!b) return 0;
    size_t n = 0;
    for (uint32_t k = 0; k < STRIPES; k++) {
        pthread_mutex_lock(&b->st[k].mu);
        for (uint32_t j = 0; j < SLOTS; j++)
            for (const brec *r = b->st[k].slot[j]; r; r = r->next)
                n += now < r->expires;
        pthread_mutex_unlock(&b->st[k].mu);
    }
    return n;
}
