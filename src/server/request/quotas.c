/* The daemon's RLQS quota state: a table of the BucketIds reported (each matched to its quota
 * bucket rule, with its src/quota bucket when the rule is a policy), one src/quota division
 * per assignment TTL, and each stream's memberships (what it was last sent, for blanket rules,
 * shadow mode and penalty boxes, which the division does not see). */
#include "server/request/quotas.h"
#include "server/request/quotas_int.h"
#include "server/request/quotas_redis.h"

#include "server/base/log.h"
#include "server/base/mem.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* What src/quota holds per bucket and per member, roughly, counted in the memory budget
 * beside this file's own records. */
#define DIVISION_BUCKET_BYTES 256
#define DIVISION_MEMBER_BYTES 192
#define MAX_DIVISIONS RLT__QUOTAS_MAX_DIVISIONS
#define MAX_UNKNOWN_LOGGED RLT__QUOTAS_MAX_UNKNOWN

typedef rlt__quotas_division division;
typedef rlt__quotas_bucket bucket;

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

struct rlt__quotas_stream {
    member **tab; /* by bucket hash */
    size_t cap, n;
    joined js[MAX_DIVISIONS];
    size_t njs;
};

static bool take(size_t n)
{
    return rlt__mem_conn_take(n);
}

static void give(size_t n)
{
    rlt__mem_conn_give(n);
}

int rlt__quotas_open(rlt__quotas **out)
{
    rlt__quotas *q = calloc(1, sizeof *q);
    if (q == NULL) return RLT_ENOMEM;
    q->cap = 1024;
    q->tab = calloc(q->cap, sizeof *q->tab);
    if (q->tab == NULL || pthread_mutex_init(&q->lock, NULL) != 0) {
        free(q->tab);
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

static void bucket_free(bucket *b)
{
    give(bucket_bytes(b));
    free(b);
}

void rlt__quotas_close(rlt__quotas *q)
{
    if (q == NULL) return;
    for (size_t i = 0; i < q->cap; i++)
        for (bucket *b = q->tab[i], *nx; b != NULL; b = nx) {
            nx = b->next;
            bucket_free(b);
        }
    for (size_t i = 0; i < q->ndvs; i++)
        rlt__quota_close(q->dvs[i].div);
    for (size_t i = 0; i < q->nunknown; i++)
        free(q->unknown[i]);
    rlt__quotas_redis_sweep(q, INT64_MAX);
    free(q->tab);
    pthread_mutex_destroy(&q->lock);
    free(q);
}

void rlt__quotas_lock(rlt__quotas *q)
{
    pthread_mutex_lock(&q->lock);
}

void rlt__quotas_unlock(rlt__quotas *q)
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

static void unlink_bucket(rlt__quotas *q, bucket *b)
{
    bucket **pp = &q->tab[b->hash & (q->cap - 1)];
    while (*pp != b)
        pp = &(*pp)->next;
    *pp = b->next;
    q->n--;
}

static void grow_table(rlt__quotas *q)
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
static void retire(rlt__quotas *q, bucket *b, rlt_ns now)
{
    if (b->dead) return;
    unlink_bucket(q, b);
    b->dead = true;
    if (b->kind == RLT__QUOTA_POLICY) {
        /* Redis mode: the key's claim keeps covering its live assignments */
        if (q->redis) rlt__quotas_redis_retire(q, b, now);
        rlt__quota_bucket_close(b->dv->div, b->qb);
    }
    if (b->refs == 0) bucket_free(b);
}

static division *division_for(rlt__quotas *q, rlt_ns ttl)
{
    for (size_t i = 0; i < q->ndvs; i++)
        if (q->dvs[i].ttl == ttl) return &q->dvs[i];
    if (q->ndvs == MAX_DIVISIONS) return NULL;
    /* The TTL is three reporting intervals: renewed with two left, a share moving at most once
     * per interval (src/quota's defaults for I = ttl / 3). */
    rlt__quota_options o = {.report_interval = ttl / 3,
                            .ttl = ttl,
                            .max_buckets = RLT__QUOTAS_MAX_BUCKETS,
                            .max_buckets_per_stream = RLT__QUOTAS_MAX_PER_STREAM};
    division *d = &q->dvs[q->ndvs];
    if (rlt__quota_open(&d->div, &o) != RLT_OK) return NULL;
    d->ttl = ttl;
    q->ndvs++;
    return d;
}

/* Whether two quota bucket rules give the same answers (a reload that keeps a rule as it was
 * keeps its buckets and their ledgers). */
static bool same_rule(const rlt__qrule *a, const rlt__qrule *b)
{
    if (a == NULL || b == NULL) return a == b;
    if (a->kind != b->kind || a->shadow != b->shadow || a->fail != b->fail || a->ttl != b->ttl ||
        strcmp(a->text, b->text) != 0 || a->nmatch != b->nmatch)
        return false;
    for (size_t i = 0; i < a->nmatch; i++)
        if (strcmp(a->keys[i], b->keys[i]) != 0 || strcmp(a->values[i], b->values[i]) != 0)
            return false;
    return true;
}

/* The rule of BucketId u in domain d (NULL: quota_default) and its TTL. */
static const rlt__qrule *rule_of(const rlt__domain *d, const rlt__quotas_usage *u)
{
    int i = rlt__config_quota_match(d, u->pairs, u->npairs);
    return i < 0 ? NULL : &d->qrules[i];
}

static rlt_ns default_ttl(const rlt__domain *d, const rlt__qrule *r, rlt_ns elapsed)
{
    if (r != NULL && r->ttl > 0) return r->ttl;
    if (d->quota_ttl > 0) return d->quota_ttl;
    /* 3 x the observed reporting interval, at least 2 s, in whole seconds (few divisions). */
    rlt_ns i = elapsed > 0 && elapsed < 60 * RLT_NS_PER_S ? elapsed : 0;
    rlt_ns t = 3 * i < RLT__QUOTAS_MIN_TTL ? RLT__QUOTAS_MIN_TTL : 3 * i;
    return (t + RLT_NS_PER_S - 1) / RLT_NS_PER_S * RLT_NS_PER_S;
}

/* Whether b still answers under cfg: its rule is the same (a reload kept it).  Else false. */
static bool still_valid(bucket *b, const rlt__config *cfg, const char *domain, size_t dlen,
                        const rlt__quotas_usage *u)
{
    if (b->cfg == cfg) return true;
    const rlt__domain *d = rlt__config_domain(cfg, domain, dlen);
    if (d == NULL) return false;
    const rlt__qrule *r = rule_of(d, u);
    int kind = r                                         ? r->kind
               : d->quota_default == RLT__QUOTA_DENY_ALL ? RLT__QUOTA_DENY_ALL
                                                         : RLT__QUOTA_ALLOW_ALL;
    if (!same_rule(r, b->rule) || kind != b->kind ||
        default_ttl(d, r, b->observed) != b->ttl) /* the domain's assignment_ttl changed */
        return false;
    b->cfg = cfg;
    b->rule = r;
    return true;
}

static int new_bucket(rlt__quotas *q, const rlt__config *cfg, const rlt__domain *d,
                      const char *domain, size_t dlen, const rlt__quotas_usage *u, uint64_t h,
                      rlt_ns now, bucket **out)
{
    if (q->n >= RLT__QUOTAS_MAX_BUCKETS) return RLT_EFULL;
    const rlt__qrule *r = rule_of(d, u);
    int kind = r                                         ? r->kind
               : d->quota_default == RLT__QUOTA_DENY_ALL ? RLT__QUOTA_DENY_ALL
                                                         : RLT__QUOTA_ALLOW_ALL;
    size_t klen = dlen + 1 + u->klen;
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
    b->ttl = default_ttl(d, r, u->elapsed);
    b->idle_since = now;
    memcpy(b->key, domain, dlen);
    memcpy(b->key + dlen + 1, u->key, u->klen);
    if (kind == RLT__QUOTA_POLICY) {
        const rlt_policy *p = &r->policy;
        rlt__quota_budget bg = {
            .limit = p->limit, .period = p->period, .burst = p->burst > 0 ? p->burst : p->limit};
        int e = (b->dv = division_for(q, b->ttl)) == NULL
                    ? RLT_EFULL
                    : rlt__quota_bucket_open(b->dv->div, &bg, &b->qb);
        if (e != RLT_OK) {
            bucket_free(b);
            return e == RLT_ENOMEM ? RLT_ENOMEM : RLT_EFULL;
        }
        b->cap_q = bg.limit;
        b->cap_b = bg.burst;
        if (q->redis) rlt__quotas_redis_new(q, b);
    }
    b->id = ++q->next_id;
    b->next = q->tab[h & (q->cap - 1)];
    q->tab[h & (q->cap - 1)] = b;
    if (++q->n > q->cap) grow_table(q);
    *out = b;
    return RLT_OK;
}

/* ---- streams ---------------------------------------------------------------------------- */

int rlt__quotas_stream_new(rlt__quotas *q, rlt__quotas_stream **out)
{
    if (!take(sizeof(rlt__quotas_stream))) return RLT_ENOMEM;
    rlt__quotas_stream *st = calloc(1, sizeof *st);
    if (st == NULL) {
        give(sizeof *st);
        return RLT_ENOMEM;
    }
    rlt__quotas_lock(q);
    q->streams++;
    rlt__quotas_unlock(q);
    *out = st;
    return RLT_OK;
}

static void unref(rlt__quotas *q, bucket *b, rlt_ns now)
{
    (void)q;
    if (--b->refs > 0) return;
    if (b->dead)
        bucket_free(b);
    else
        b->idle_since = now;
}

static void member_drop(rlt__quotas *q, rlt__quotas_stream *st, member *m, rlt_ns now)
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

void rlt__quotas_stream_end(rlt__quotas *q, rlt__quotas_stream *st, rlt_ns now)
{
    if (st == NULL) return;
    rlt__quotas_lock(q);
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
    q->streams--;
    rlt__quotas_unlock(q);
    give(st->cap * sizeof *st->tab);
    free(st->tab);
    free(st);
    give(sizeof *st);
}

static member *member_find(rlt__quotas_stream *st, uint64_t h, const char *domain, size_t dlen,
                           const char *key, size_t klen)
{
    if (st->cap == 0) return NULL;
    for (member *m = st->tab[h & (st->cap - 1)]; m != NULL; m = m->next)
        if (same_key(m->b, h, domain, dlen, key, klen)) return m;
    return NULL;
}

static int member_add(rlt__quotas *q, rlt__quotas_stream *st, bucket *b, member **out)
{
    if (st->n >= RLT__QUOTAS_MAX_PER_STREAM) return RLT_EFULL;
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
static int stream_in(rlt__quotas_stream *st, division *dv, uint32_t *sid)
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
static void sweep(rlt__quotas *q, rlt_ns now)
{
    if (now - q->last_sweep < RLT_NS_PER_S) return;
    q->last_sweep = now;
    for (size_t i = 0; i < q->ndvs; i++)
        rlt__quota_sweep(q->dvs[i].div, now);
    rlt__quotas_redis_sweep(q, now);
    for (size_t i = 0; i < q->cap; i++)
        for (bucket *b = q->tab[i], *nx; b != NULL; b = nx) {
            nx = b->next;
            if (b->refs == 0 && now - b->idle_since >= b->ttl) retire(q, b, now);
        }
}

static void log_unknown(rlt__quotas *q, const char *domain, size_t dlen)
{
    for (size_t i = 0; i < q->nunknown; i++)
        if (strlen(q->unknown[i]) == dlen && memcmp(q->unknown[i], domain, dlen) == 0) return;
    if (q->nunknown == MAX_UNKNOWN_LOGGED) return;
    char *s = strndup(domain, dlen);
    if (s == NULL) return;
    q->unknown[q->nunknown++] = s;
    rlt__log(RLT__LOG_NOTICE, "rlqs: unknown domain '%.*s': its buckets are allowed all",
             (int)(dlen > 200 ? 200 : dlen), domain);
}

/* A blanket answer: sent first, when it changes, and when a third of its TTL has passed. */
static void blanket(member *m, int kind, rlt_ns ttl, rlt_ns now, rlt__quotas_answer *a)
{
    if (m->sent_kind == kind && now - m->sent_at < ttl / 3) return;
    a->kind = kind;
    a->ttl = ttl;
    m->sent_kind = kind;
    m->sent_at = now;
}

/* A policy bucket: the division's answer, unless a penalty box or shadow mode overrides it. */
static int divided(rlt__quotas_stream *st, bucket *b, member *m, const rlt__quotas_usage *u,
                   rlt_ns now, rlt__quotas_answer *a)
{
    uint32_t sid;
    int e = stream_in(st, b->dv, &sid);
    if (e != RLT_OK) return e == RLT_ENOMEM ? RLT_ENOMEM : RLT_EFULL;
    rlt__quota_usage qu = {u->allowed, u->denied, u->elapsed > 0 ? u->elapsed : 0};
    if (b->claim != RLT__QUOTAS_UNCLAIMED) rlt__quotas_redis_check(b, now);
    rlt__quota_answer qa;
    e = rlt__quota_report(b->dv->div, sid, b->qb, &qu, now, &qa);
    if (e != RLT_OK) return e == RLT_ENOMEM ? RLT_ENOMEM : RLT_EFULL;
    const rlt_policy *p = &b->rule->policy;
    /* The penalty box: an Envoy denying with its share of the budget is a breach. */
    if (p->block > 0 && u->denied > 0 && m->sent_kind == RLT__QA_TOKEN_BUCKET)
        b->blocked_until = now + p->block;
    if (now < b->blocked_until) {
        blanket(m, RLT__QA_DENY_ALL, b->blocked_until - now, now, a);
        m->overridden = true;
        return RLT_OK;
    }
    bool failing = b->claim == RLT__QUOTAS_FAILING;
    if (b->rule->shadow ||
        (failing && (b->fail == RLT__FAIL_OPEN || b->fail == RLT__FAIL_CLOSED))) {
        /* Redis down: fail open or closed (the division's budget is zero meanwhile) */
        blanket(m, failing && b->fail == RLT__FAIL_CLOSED ? RLT__QA_DENY_ALL : RLT__QA_ALLOW_ALL,
                b->ttl, now, a);
        m->overridden = true;
        return RLT_OK;
    }
    if (qa.reason == RLT__QUOTA_KEEP && !m->overridden) return RLT_OK;
    const rlt__quota_assignment *as = &qa.assignment;
    m->overridden = false;
    m->sent_at = now;
    /* a live assignment sent again (after an override) lives only until the ledger's expiry */
    a->ttl = qa.reason == RLT__QUOTA_KEEP ? as->expires_at - now : as->ttl;
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

int rlt__quotas_report(rlt__quotas *q, const rlt__config *cfg, rlt__quotas_stream *st,
                       const char *domain, size_t dlen, const rlt__quotas_usage *u, rlt_ns now,
                       rlt__quotas_answer *a)
{
    a->kind = RLT__QA_NONE;
    sweep(q, now);
    const rlt__domain *d = rlt__config_domain(cfg, domain, dlen);
    uint64_t h = hash_of(domain, dlen, u->key, u->klen);
    member *m = member_find(st, h, domain, dlen, u->key, u->klen);
    if (m != NULL && (m->b->dead || !still_valid(m->b, cfg, domain, dlen, u))) {
        /* A reload removed or changed its rule: the Envoy forgets the bucket; its next report
         * subscribes again, under the rule in force. */
        retire(q, m->b, now);
        member_drop(q, st, m, now);
        a->kind = RLT__QA_ABANDON;
        return RLT_OK;
    }
    if (d == NULL) {
        log_unknown(q, domain, dlen);
        a->kind = RLT__QA_ALLOW_ALL;
        a->ttl = RLT__QUOTAS_MIN_TTL;
        return RLT_OK;
    }
    if (m == NULL) {
        bucket *b = q->tab[h & (q->cap - 1)];
        while (b != NULL && !same_key(b, h, domain, dlen, u->key, u->klen))
            b = b->next;
        if (b != NULL && !still_valid(b, cfg, domain, dlen, u)) {
            retire(q, b, now);
            b = NULL;
        }
        int e = b != NULL ? RLT_OK : new_bucket(q, cfg, d, domain, dlen, u, h, now, &b);
        if (e != RLT_OK) return e;
        if ((e = member_add(q, st, b, &m)) != RLT_OK) {
            if (b->refs == 0) b->idle_since = now;
            return e;
        }
    }
    bucket *b = m->b;
    if (b->kind != RLT__QUOTA_POLICY) {
        blanket(m, b->kind == RLT__QUOTA_DENY_ALL ? RLT__QA_DENY_ALL : RLT__QA_ALLOW_ALL, b->ttl,
                now, a);
        return RLT_OK;
    }
    return divided(st, b, m, u, now, a);
}

void rlt__quotas_stats_get(rlt__quotas *q, rlt__quotas_stats *out)
{
    rlt__quotas_lock(q);
    out->buckets = q->n;
    out->members = q->members;
    out->streams = q->streams;
    rlt__quotas_unlock(q);
}
