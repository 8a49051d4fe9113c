/* The daemon's RLQS quota state: a table of the BucketIds reported that match a quota bucket
 * rule (each with its src/quota bucket when the rule is a policy, and the client it is charged
 * to), one src/quota division per assignment TTL, and each stream's memberships (what it was
 * last sent, for blanket rules, shadow mode and penalty boxes, which the division does not
 * see).  A bucket's key starts with its stream's tenant prefix, so tenants never share one. */
#include "server/envoy/rlqs.h"
#include "server/envoy/rlqs_int.h"
#include "server/envoy/rlqs_redis.h"

#include "server/base/log.h"
#include "server/base/mem.h"
#include "server/envoy/rlqs_envoy.h"
#include "server/envoy/rlqs_hold.h"
#include "server/envoy/rlqs_rule.h"
#include "server/envoy/rlqs_unmatched.h"

#include <assert.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* What src/quota holds per bucket and per member, roughly, counted in the memory budget
 * beside this file's own records. */
#define DIVISION_BUCKET_BYTES 256
#define DIVISION_MEMBER_BYTES 192
#define MAX_DIVISIONS RLT__RLQS_MAX_DIVISIONS
#define MAX_UNKNOWN_LOGGED RLT__RLQS_MAX_UNKNOWN

typedef rlt__rlqs_division division;
typedef rlt__rlqs_bucket bucket;

/* One stream's membership of a bucket. */
typedef struct member {
    struct member *next;
    bucket *b;
    rlt_ns sent_at; /* 0: nothing sent yet */
    int sent_kind;
    bool overridden; /* last sent something else than the division's assignment */
} member;

typedef struct joined {
    division *dv;
    uint32_t sid;
} joined;

struct rlt__rlqs_stream {
    member **tab; /* by bucket hash */
    size_t cap, n;
    joined js[MAX_DIVISIONS];
    size_t njs;
    rlt__rlqs_holder *holder;      /* NULL: none (no per-client cap) */
    rlt__rlqs_unmatched unmatched; /* its BucketIds that match no rule */
    size_t plen;
    char prefix[RLT__STR_MAX]; /* the tenant's key prefix, plen bytes */
};

static bool take(size_t n)
{
    return rlt__mem_conn_take(n);
}

static void give(size_t n)
{
    rlt__mem_conn_give(n);
}

int rlt__rlqs_open(rlt__rlqs **out)
{
    rlt__rlqs *q = calloc(1, sizeof *q);
    if (q == NULL) return RLT_ENOMEM;
    q->cap = 1024;
    q->tab = calloc(q->cap, sizeof *q->tab);
    q->holders = calloc(1, sizeof *q->holders);
    if (q->tab == NULL || q->holders == NULL || pthread_mutex_init(&q->lock, NULL) != 0) {
        free(q->tab);
        free(q->holders);
        free(q);
        return RLT_ENOMEM;
    }
    *out = q;
    return RLT_OK;
}

static size_t bucket_bytes(const bucket *b)
{
    return sizeof *b + b->klen + (b->kind == RLT__QUOTA_POLICY ? DIVISION_BUCKET_BYTES : 0);
}

static void bucket_free(rlt__rlqs *q, bucket *b)
{
    if (b->holder != NULL) {
        assert(b->holder->buckets > 0);
        b->holder->buckets--;
        rlt__rlqs_holder_release(q->holders, b->holder);
    }
    give(bucket_bytes(b));
    free(b);
}

void rlt__rlqs_close(rlt__rlqs *q)
{
    if (q == NULL) return;
    for (size_t i = 0; i < q->cap; i++)
        for (bucket *b = q->tab[i], *nx; b != NULL; b = nx) {
            nx = b->next;
            bucket_free(q, b);
        }
    for (size_t i = 0; i < q->ndvs; i++)
        rlt__quota_close(q->dvs[i].div);
    for (size_t i = 0; i < q->nunknown; i++)
        free(q->unknown[i]);
    rlt__rlqs_redis_sweep(q, INT64_MAX);
    rlt__rlqs_holders_free(q->holders);
    free(q->holders);
    free(q->tab);
    pthread_mutex_destroy(&q->lock);
    free(q);
}

void rlt__rlqs_lock(rlt__rlqs *q)
{
    pthread_mutex_lock(&q->lock);
}

void rlt__rlqs_unlock(rlt__rlqs *q)
{
    pthread_mutex_unlock(&q->lock);
}

/* ---- the table -------------------------------------------------------------------------- */

static uint64_t hash_of(const char *domain, size_t dlen, const char *key, size_t klen)
{
    uint64_t h = rlt_hash_fnv1a(domain, dlen);
    return (h ^ rlt_hash_fnv1a(key, klen)) * UINT64_C(0x9e3779b97f4a7c15);
}

static bool same_key(const bucket *b, uint64_t h, const char *domain, size_t dlen, const char *key,
                     size_t klen)
{
    return b->hash == h && b->klen == dlen + 1 + klen && memcmp(b->key, domain, dlen) == 0 &&
           b->key[dlen] == '\0' && memcmp(b->key + dlen + 1, key, klen) == 0;
}

static void unlink_bucket(rlt__rlqs *q, bucket *b)
{
    bucket **pp = &q->tab[b->hash & (q->cap - 1)];
    while (*pp != b)
        pp = &(*pp)->next;
    *pp = b->next;
    q->n--;
}

static void grow_table(rlt__rlqs *q)
{
    size_t cap = q->cap * 2;
    bucket **t = calloc(cap, sizeof *t);
    if (t == NULL) return; /* longer chains, still correct */
    for (size_t i = 0; i < q->cap; i++)
        for (bucket *b = q->tab[i], *nx; b != NULL; b = nx) {
            nx = b->next;
            b->next = t[b->hash & (cap - 1)];
            t[b->hash & (cap - 1)] = b;
        }
    free(q->tab);
    q->tab = t;
    q->cap = cap;
}

/* Retires a bucket: out of the table, its division bucket closed (the members leave it; its
 * ledger keeps their live assignments until they expire, then a sweep frees it). */
static void retire(rlt__rlqs *q, bucket *b, rlt_ns now)
{
    if (b->dead) return;
    unlink_bucket(q, b);
    b->dead = true;
    if (b->kind == RLT__QUOTA_POLICY) {
        /* Redis mode: the key's claim keeps covering its live assignments */
        if (q->redis) rlt__rlqs_redis_retire(q, b, now);
        rlt__quota_bucket_close(b->dv->div, b->qb);
    }
    if (b->refs == 0) bucket_free(q, b);
}

static division *division_for(rlt__rlqs *q, rlt_ns ttl)
{
    for (size_t i = 0; i < q->ndvs; i++)
        if (q->dvs[i].ttl == ttl) return &q->dvs[i];
    if (q->ndvs == MAX_DIVISIONS) return NULL;
    /* The TTL is three reporting intervals: renewed with two left, a share moving at most once
     * per interval (src/quota's defaults for I = ttl / 3). */
    rlt__quota_options o = {.report_interval = ttl / 3,
                            .ttl = ttl,
                            .max_buckets = RLT__RLQS_MAX_BUCKETS,
                            .max_buckets_per_stream = RLT__RLQS_MAX_PER_STREAM};
    division *d = &q->dvs[q->ndvs];
    if (rlt__quota_open(&d->div, &o) != RLT_OK) return NULL;
    d->ttl = ttl;
    q->ndvs++;
    return d;
}

/* Whether b still answers under cfg: its rule is the same (a reload kept it).  Else false. */
static bool still_valid(bucket *b, const rlt__config *cfg, const char *domain, size_t dlen,
                        const rlt__rlqs_use *u)
{
    if (b->cfg == cfg) return true;
    const rlt__domain *d = rlt__config_domain(cfg, domain, dlen);
    if (d == NULL) return false;
    const rlt__qrule *r = rlt__rlqs_rule_of(d, u->pairs, u->npairs);
    int kind = rlt__rlqs_rule_kind(d, r);
    if (!rlt__rlqs_same_rule(r, b->rule) || kind != b->kind ||
        rlt__rlqs_default_ttl(d, r, b->observed, RLT__RLQS_MIN_TTL) !=
            b->ttl) /* the domain's assignment_ttl changed */
        return false;
    b->cfg = cfg;
    b->rule = r;
    return true;
}

/* A new bucket of rule r (matched), its key scope (tenant prefix + domain), NUL, the BucketId. */
static int new_bucket(rlt__rlqs *q, const rlt__config *cfg, const rlt__domain *d,
                      const rlt__qrule *r, const char *scope, size_t slen,
                      const rlt__rlqs_use *u, uint64_t h, rlt_ns now, bucket **out)
{
    if (q->n >= RLT__RLQS_MAX_BUCKETS) return RLT_EFULL;
    int kind = rlt__rlqs_rule_kind(d, r);
    size_t klen = slen + 1 + u->klen;
    bucket probe = {.klen = klen, .kind = kind};
    if (!take(bucket_bytes(&probe))) return RLT_ENOMEM;
    bucket *b = calloc(1, sizeof *b + klen);
    if (b == NULL) {
        give(bucket_bytes(&probe));
        return RLT_ENOMEM;
    }
    *b = probe;
    b->hash = h;
    b->cfg = cfg;
    b->rule = r;
    b->observed = u->elapsed;
    b->ttl = rlt__rlqs_default_ttl(d, r, u->elapsed, RLT__RLQS_MIN_TTL);
    b->idle_since = now;
    memcpy(b->key, scope, slen);
    memcpy(b->key + slen + 1, u->key, u->klen);
    b->provisional = u->elapsed <= 0 && !rlt__rlqs_ttl_set(d, r);
    if (kind == RLT__QUOTA_POLICY) {
        rlt__quota_budget bg;
        int e = rlt__rlqs_budget_of(&r->policy, &bg);
        if (e == RLT_OK)
            e = (b->dv = division_for(q, b->ttl)) == NULL
                    ? RLT_EFULL
                    : rlt__quota_bucket_open(b->dv->div, &bg, &b->qb);
        if (e != RLT_OK) {
            bucket_free(q, b);
            return e == RLT_ENOMEM ? RLT_ENOMEM : RLT_EFULL;
        }
        b->cap_q = bg.limit;
        b->cap_b = bg.burst;
        if (q->redis) rlt__rlqs_redis_new(q, b);
    }
    b->id = ++q->next_id;
    b->next = q->tab[h & (q->cap - 1)];
    q->tab[h & (q->cap - 1)] = b;
    if (++q->n > q->cap) grow_table(q);
    *out = b;
    return RLT_OK;
}

/* ---- streams ---------------------------------------------------------------------------- */

int rlt__rlqs_stream_new_for(rlt__rlqs *q, const rlt__rlqs_client *who,
                               rlt__rlqs_stream **out)
{
    if (who != NULL && who->plen >= RLT__STR_MAX) return RLT_EINVAL;
    if (!take(sizeof(rlt__rlqs_stream))) return RLT_ENOMEM;
    rlt__rlqs_stream *st = calloc(1, sizeof *st);
    if (st == NULL) {
        give(sizeof *st);
        return RLT_ENOMEM;
    }
    if (who != NULL && who->plen > 0) {
        memcpy(st->prefix, who->prefix, who->plen);
        st->plen = who->plen;
    }
    int e = RLT_OK;
    rlt__rlqs_lock(q);
    if (who != NULL && who->holder != 0) {
        rlt__rlqs_holder *h = rlt__rlqs_holder_get(q->holders, who->holder);
        if (h == NULL) {
            e = RLT_ENOMEM;
        } else if (who->max_streams > 0 && h->streams >= who->max_streams) {
            rlt__rlqs_holder_release(q->holders, h);
            e = RLT_EFULL;
        } else {
            h->streams++;
            st->holder = h;
        }
    }
    if (e == RLT_OK) q->streams++;
    rlt__rlqs_unlock(q);
    if (e != RLT_OK) {
        free(st);
        give(sizeof *st);
        return e;
    }
    *out = st;
    return RLT_OK;
}

int rlt__rlqs_stream_new(rlt__rlqs *q, rlt__rlqs_stream **out)
{
    return rlt__rlqs_stream_new_for(q, NULL, out);
}

static void unref(rlt__rlqs *q, bucket *b, rlt_ns now)
{
    if (--b->refs > 0) return;
    if (b->dead)
        bucket_free(q, b);
    else
        b->idle_since = now;
}

static void member_drop(rlt__rlqs *q, rlt__rlqs_stream *st, member *m, rlt_ns now)
{
    member **pp = &st->tab[m->b->hash & (st->cap - 1)];
    while (*pp != m)
        pp = &(*pp)->next;
    *pp = m->next;
    st->n--;
    q->members--;
    unref(q, m->b, now);
    free(m);
    give(sizeof *m + DIVISION_MEMBER_BYTES);
}

void rlt__rlqs_stream_end(rlt__rlqs *q, rlt__rlqs_stream *st, rlt_ns now)
{
    if (st == NULL) return;
    rlt__rlqs_lock(q);
    for (size_t i = 0; i < st->cap; i++)
        for (member *m = st->tab[i], *nx; m != NULL; m = nx) {
            nx = m->next;
            q->members--;
            unref(q, m->b, now);
            free(m);
            give(sizeof *m + DIVISION_MEMBER_BYTES);
        }
    for (size_t i = 0; i < st->njs; i++)
        rlt__quota_stream_close(st->js[i].dv->div, st->js[i].sid);
    if (st->holder != NULL) {
        st->holder->streams--;
        rlt__rlqs_holder_release(q->holders, st->holder);
    }
    q->streams--;
    rlt__rlqs_unlock(q);
    rlt__rlqs_unmatched_free(&st->unmatched);
    give(st->cap * sizeof *st->tab);
    free(st->tab);
    free(st);
    give(sizeof *st);
}

static member *member_find(rlt__rlqs_stream *st, uint64_t h, const char *domain, size_t dlen,
                           const char *key, size_t klen)
{
    if (st->cap == 0) return NULL;
    for (member *m = st->tab[h & (st->cap - 1)]; m != NULL; m = m->next)
        if (same_key(m->b, h, domain, dlen, key, klen)) return m;
    return NULL;
}

static int member_add(rlt__rlqs *q, rlt__rlqs_stream *st, bucket *b, member **out)
{
    if (st->n >= RLT__RLQS_MAX_PER_STREAM) return RLT_EFULL;
    if (st->n >= st->cap / 2) {
        size_t cap = st->cap ? st->cap * 2 : 8;
        if (!take((cap - st->cap) * sizeof *st->tab)) return RLT_ENOMEM;
        member **t = calloc(cap, sizeof *t);
        if (t == NULL) {
            give((cap - st->cap) * sizeof *st->tab);
            return RLT_ENOMEM;
        }
        for (size_t i = 0; i < st->cap; i++)
            for (member *m = st->tab[i], *nx; m != NULL; m = nx) {
                nx = m->next;
                m->next = t[m->b->hash & (cap - 1)];
                t[m->b->hash & (cap - 1)] = m;
            }
        free(st->tab);
        st->tab = t;
        st->cap = cap;
    }
    if (!take(sizeof(member) + DIVISION_MEMBER_BYTES)) return RLT_ENOMEM;
    member *m = calloc(1, sizeof *m);
    if (m == NULL) {
        give(sizeof(member) + DIVISION_MEMBER_BYTES);
        return RLT_ENOMEM;
    }
    m->b = b;
    m->sent_kind = RLT__QA_NONE;
    b->refs++;
    m->next = st->tab[b->hash & (st->cap - 1)];
    st->tab[b->hash & (st->cap - 1)] = m;
    st->n++;
    q->members++;
    *out = m;
    return RLT_OK;
}

/* The stream's id in division dv, opened on its first bucket there. */
static int stream_in(rlt__rlqs_stream *st, division *dv, uint32_t *sid)
{
    for (size_t i = 0; i < st->njs; i++)
        if (st->js[i].dv == dv) {
            *sid = st->js[i].sid;
            return RLT_OK;
        }
    int e = rlt__quota_stream_open(dv->div, sid);
    if (e != RLT_OK) return e;
    st->js[st->njs++] = (joined){dv, *sid};
    return RLT_OK;
}

/* ---- reports ---------------------------------------------------------------------------- */

/* Frees, about once a second, what has outlived its TTL: the divisions' expired ledger
 * entries and departed members, and buckets no stream has reported for a TTL. */
static void sweep(rlt__rlqs *q, rlt_ns now)
{
    if (now - q->last_sweep < RLT_NS_PER_S) return;
    q->last_sweep = now;
    for (size_t i = 0; i < q->ndvs; i++)
        rlt__quota_sweep(q->dvs[i].div, now);
    rlt__rlqs_redis_sweep(q, now);
    for (size_t i = 0; i < q->cap; i++)
        for (bucket *b = q->tab[i], *nx; b != NULL; b = nx) {
            nx = b->next;
            if (b->refs == 0 && now - b->idle_since >= b->ttl) retire(q, b, now);
        }
}

/* A blanket answer: sent first, when it changes, and when a third of its TTL has passed. */
static void blanket(member *m, int kind, rlt_ns ttl, rlt_ns now, rlt__rlqs_answer *a)
{
    if (m->sent_kind == kind && now - m->sent_at < ttl / 3) return;
    a->kind = kind;
    a->ttl = ttl;
    m->sent_kind = kind;
    m->sent_at = now;
}

/* Envoy's first report of a bucket has no elapsed: a default TTL from one is replaced at the
 * first report with one, a policy bucket moving to that TTL's division (rlt__rlqs_move keeps
 * the budget safe; the full one is back after).  A failed move is tried at the next report. */
static void settle(rlt__rlqs *q, rlt__rlqs_stream *st, const rlt__domain *d, bucket *b,
                   rlt_ns elapsed, rlt_ns now)
{
    uint32_t sid;
    rlt__quota_budget bg;
    bool policy =
        b->kind == RLT__QUOTA_POLICY && rlt__rlqs_budget_of(&b->rule->policy, &bg) == RLT_OK;
    if (policy && b->lowered_until != 0 && now >= b->lowered_until) {
        b->lowered_until = 0;
        if (!q->redis) rlt__quota_bucket_budget(b->dv->div, b->qb, &bg);
    }
    if (!b->provisional || elapsed <= 0) return;
    rlt_ns ttl = rlt__rlqs_default_ttl(d, b->rule, elapsed, RLT__RLQS_MIN_TTL);
    if (ttl != b->ttl && b->kind == RLT__QUOTA_POLICY) {
        division *dv = division_for(q, ttl);
        if (!policy || dv == NULL || stream_in(st, b->dv, &sid) != RLT_OK ||
            rlt__rlqs_move(b->dv->div, b->qb, sid, b->ttl, dv->div, &bg, now, &b->qb,
                             &b->lowered_until) != RLT_OK)
            return;
        b->dv = dv;
        if (q->redis) rlt__rlqs_redis_new(q, b); /* divides nothing before its next claim */
    }
    b->provisional = false;
    b->observed = elapsed;
    b->ttl = ttl;
}

/* A policy bucket: the division's answer, unless a penalty box or shadow mode overrides it. */
static int divided(rlt__rlqs_stream *st, bucket *b, member *m, const rlt__rlqs_use *u,
                   rlt_ns now, rlt__rlqs_answer *a)
{
    uint32_t sid;
    int e = stream_in(st, b->dv, &sid);
    if (e != RLT_OK) return e == RLT_ENOMEM ? RLT_ENOMEM : RLT_EFULL;
    rlt__quota_usage qu = {u->allowed, u->denied, u->elapsed > 0 ? u->elapsed : 0};
    if (b->claim != RLT__RLQS_UNCLAIMED) rlt__rlqs_redis_check(b, now);
    rlt__quota_answer qa;
    e = rlt__quota_report(b->dv->div, sid, b->qb, &qu, now, &qa);
    if (e != RLT_OK) return e == RLT_ENOMEM ? RLT_ENOMEM : RLT_EFULL;
    const rlt__quota_assignment *as = &qa.assignment;
    const rlt_policy *p = &b->rule->policy;
    /* The penalty box: denials while the fleet's demand reached the budget are a breach (an
     * Envoy over its share of a fleet under the budget is not). */
    if (p->block > 0 && u->denied > 0 && m->sent_kind == RLT__QA_TOKEN_BUCKET &&
        rlt__rlqs_box_due(b->dv->div, b->qb, now))
        b->blocked_until = now + p->block;
    if (now < b->blocked_until) {
        /* Envoy reads whole seconds: under one left, its last deny-all runs out on its own */
        rlt_ns left = rlt__rlqs_whole_ttl(b->blocked_until - now);
        if (left > 0) blanket(m, RLT__QA_DENY_ALL, left, now, a);
        m->overridden = true;
        return RLT_OK;
    }
    if (b->rule->shadow)
        a->shadow_denied = rlt__rlqs_shadow_denied(as, now, u->allowed + u->denied, u->elapsed);
    bool failing = b->claim == RLT__RLQS_FAILING;
    if (b->rule->shadow ||
        (failing && (b->fail == RLT__FAIL_OPEN || b->fail == RLT__FAIL_CLOSED))) {
        /* Redis down: fail open or closed (the division's budget is zero meanwhile) */
        blanket(m, failing && b->fail == RLT__FAIL_CLOSED ? RLT__QA_DENY_ALL : RLT__QA_ALLOW_ALL,
                b->ttl, now, a);
        m->overridden = true;
        return RLT_OK;
    }
    if (qa.reason == RLT__QUOTA_KEEP && !m->overridden) return RLT_OK;
    /* a live assignment sent again (after an override) lives only until the ledger's expiry,
     * in whole seconds down (Envoy reads those only); under one second: not sent */
    rlt_ns ttl =
        rlt__rlqs_whole_ttl(qa.reason == RLT__QUOTA_KEEP ? as->expires_at - now : as->ttl);
    if (ttl == 0) return RLT_OK;
    m->overridden = false;
    m->sent_at = now;
    a->ttl = ttl;
    if (as->deny_all) {
        a->kind = m->sent_kind = RLT__QA_DENY_ALL;
        return RLT_OK;
    }
    a->kind = m->sent_kind = RLT__QA_TOKEN_BUCKET;
    a->max_tokens = as->max_tokens;
    a->tokens_per_fill = as->tokens_per_fill;
    a->fill_interval = as->fill_interval;
    return RLT_OK;
}

int rlt__rlqs_report(rlt__rlqs *q, const rlt__config *cfg, rlt__rlqs_stream *st,
                       const char *domain, size_t dlen, const rlt__rlqs_use *u, rlt_ns now,
                       rlt__rlqs_answer *a)
{
    a->kind = RLT__QA_NONE;
    a->shadow_denied = 0;
    if (dlen >= RLT__STR_MAX) return RLT_EINVAL;
    sweep(q, now);
    /* the bucket's identity: the tenant's prefix and the domain, then the BucketId */
    char scope[2 * RLT__STR_MAX];
    size_t slen = st->plen + dlen;
    memcpy(scope, st->prefix, st->plen);
    memcpy(scope + st->plen, domain, dlen);
    const rlt__domain *d = rlt__config_domain(cfg, domain, dlen);
    uint64_t h = hash_of(scope, slen, u->key, u->klen);
    member *m = member_find(st, h, scope, slen, u->key, u->klen);
    if (m != NULL && (m->b->dead || !still_valid(m->b, cfg, domain, dlen, u))) {
        /* A reload removed or changed its rule: the Envoy forgets the bucket; its next report
         * subscribes again, under the rule in force. */
        retire(q, m->b, now);
        member_drop(q, st, m, now);
        a->kind = RLT__QA_ABANDON;
        return RLT_OK;
    }
    if (d == NULL) {
        rlt__rlqs_log_unknown(q->unknown, &q->nunknown, MAX_UNKNOWN_LOGGED, domain, dlen);
        a->kind = RLT__QA_ALLOW_ALL;
        a->ttl = RLT__RLQS_MIN_TTL;
        return RLT_OK;
    }
    if (m == NULL) {
        bucket *b = q->tab[h & (q->cap - 1)];
        while (b != NULL && !same_key(b, h, scope, slen, u->key, u->klen))
            b = b->next;
        if (b != NULL && !still_valid(b, cfg, domain, dlen, u)) {
            retire(q, b, now);
            b = NULL;
        }
        if (b == NULL) {
            const rlt__qrule *r = rlt__rlqs_rule_of(d, u->pairs, u->npairs);
            int kind;
            rlt_ns ttl;
            if (r == NULL) { /* no rule: quota_default, and no bucket */
                if (rlt__rlqs_unmatched_answer(&st->unmatched, d, h, u->elapsed,
                                                 RLT__RLQS_MIN_TTL, now, &kind, &ttl)) {
                    a->kind = kind == RLT__QUOTA_DENY_ALL ? RLT__QA_DENY_ALL : RLT__QA_ALLOW_ALL;
                    a->ttl = ttl;
                }
                return RLT_OK;
            }
            rlt__rlqs_holder *ho = st->holder;
            size_t cap = cfg->set.rlqs_max_buckets_per_client;
            if (q->n >= RLT__RLQS_MAX_BUCKETS) return RLT_EFULL; /* the table's cap first */
            if (ho != NULL && cap > 0 && ho->buckets >= cap) { /* this client's share is full */
                q->counted.over_cap++;
                return RLT_OK;
            }
            int e = new_bucket(q, cfg, d, r, scope, slen, u, h, now, &b);
            if (e != RLT_OK) return e;
            b->holder = ho;
            if (ho != NULL) ho->buckets++;
        }
        int e = member_add(q, st, b, &m);
        if (e != RLT_OK) {
            if (b->refs == 0) b->idle_since = now;
            return e;
        }
        rlt__rlqs_unmatched_forget(&st->unmatched, h);
    }
    bucket *b = m->b;
    settle(q, st, d, b, u->elapsed, now);
    if (b->kind != RLT__QUOTA_POLICY) {
        blanket(m, b->kind == RLT__QUOTA_DENY_ALL ? RLT__QA_DENY_ALL : RLT__QA_ALLOW_ALL, b->ttl,
                now, a);
        return RLT_OK;
    }
    return divided(st, b, m, u, now, a);
}

void rlt__rlqs_stats_get(rlt__rlqs *q, rlt__rlqs_stats *out)
{
    rlt__rlqs_lock(q);
    out->buckets = q->n;
    out->members = q->members;
    out->streams = q->streams;
    out->c = q->counted;
    rlt__rlqs_unlock(q);
}

rlt__rlqs_counters *rlt__rlqs_counted(rlt__rlqs *q)
{
    return &q->counted;
}
