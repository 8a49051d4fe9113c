/* The Redis mode of the RLQS quota state (rlqs_redis.h has the contract): the exchanges'
 * snapshots taken a chunk at a time, their answers applied, each claim's deadline, the fail
 * modes, and the amounts retired buckets still hold under their key.  The records are
 * rlqs_int.h's; this file takes the state's lock itself (never calling into rlqs.c). */
#include "server/envoy/rlqs_redis.h"

#include "server/base/mem.h"
#include "server/envoy/rlqs_envoy.h"

#include <stdlib.h>
#include <string.h>

/* A claim's deadline is the time taken before its exchange + the claim's TTL - the assignment
 * TTL - this margin: an assignment made from the claim until then expires before the claim
 * does in Redis, with 100 ms for the call's latency and the two clocks' rates. */
#define CLAIM_MARGIN (100 * RLT_NS_PER_MS)

typedef rlt__rlqs_bucket bucket;
typedef rlt__rlqs_carry carry;

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

void rlt__rlqs_redis_mode(rlt__rlqs *q, void (*wake)(void *), void *arg)
{
    pthread_mutex_lock(&q->lock);
    q->redis = wake != NULL;
    q->wake = wake;
    q->wake_arg = arg;
    if (wake == NULL) rlt__rlqs_redis_sweep(q, INT64_MAX);
    pthread_mutex_unlock(&q->lock);
}

/* The bucket's division gets budget (bq, bb) of its global one (same fill interval).  A
 * budget with one part zero admits nothing: both are zero then. */
static int divide_part(bucket *b, int64_t bq, int64_t bb)
{
    if (bq <= 0 || bb <= 0) bq = bb = 0;
    rlt_ns f = rlt__rlqs_fill(b->rule->policy.period); /* Q and B are per F (rlqs_envoy.h) */
    rlt__quota_budget bg = {bq, f, bb, f};
    return rlt__quota_bucket_budget(b->dv->div, b->qb, &bg);
}

void rlt__rlqs_redis_new(rlt__rlqs *q, bucket *b)
{
    b->claim = RLT__RLQS_UNCLAIMED;
    divide_part(b, 0, 0); /* nothing is divided before the first claim */
    q->wake(q->wake_arg);
}

/* The bucket's fail mode: its rule's, else the redis section's. */
static int fail_mode(const bucket *b)
{
    const rlt__redis_settings *rs = &b->cfg->set.redis;
    return b->rule->fail != RLT__FAIL_DEFAULT ? b->rule->fail
           : rs->fail_local                   ? RLT__FAIL_LOCAL
           : rs->fail_open                    ? RLT__FAIL_OPEN
                                              : RLT__FAIL_CLOSED;
}

/* How much longer than its deadline needs a claim stays reserved in Redis: fail: local's
 * hold, two assignment TTLs, during which a daemon cut from Redis keeps dividing its last
 * claim (the others cannot take it meanwhile); none for the other modes. */
static rlt_ns hold_of(const bucket *b)
{
    return fail_mode(b) == RLT__FAIL_LOCAL ? 2 * b->ttl : 0;
}

/* fail: local's part: the last claim, while Redis still reserves it for this daemon; from its
 * expiry less one assignment TTL (and the margin), nothing, so that every assignment made
 * from it has expired when the others may take it.  Never Q / N: the others' claims are not
 * known, and one that still reaches Redis takes whatever this one's expired claim freed. */
static void fail_local(bucket *b, rlt_ns now)
{
    bool held = b->claim_expires > 0 && now < b->claim_expires - b->ttl - CLAIM_MARGIN;
    /* cannot fail: F is the rule's, the parts are within 0..Q */
    (void)divide_part(b, held ? b->claim_q : 0, held ? b->claim_b : 0);
}

static void enter_fail(bucket *b, rlt_ns now)
{
    if (b->claim != RLT__RLQS_FAILING) {
        b->fail = fail_mode(b);
        b->claim = RLT__RLQS_FAILING;
        b->fail_since = now;
    }
    if (b->fail == RLT__FAIL_LOCAL)
        fail_local(b, now);
    else
        (void)divide_part(b, 0, 0); /* open and closed answer blankets: the ledger drains */
}

void rlt__rlqs_redis_check(bucket *b, rlt_ns now)
{
    /* the exchanges run late (a slow Redis, a long round): the claim may expire in Redis
     * before what is divided from it now would; the next applied answer ends the mode */
    if (b->claim == RLT__RLQS_CLAIMED && now >= b->claim_until) enter_fail(b, now);
    /* fail: local's part ends with the claim's reservation, reports or not */
    if (b->claim == RLT__RLQS_FAILING && b->fail == RLT__FAIL_LOCAL) fail_local(b, now);
}

/* ---- what retired buckets carry ---------------------------------------------------------- */

static bool carry_key(const carry *c, uint64_t hash, const char *key, size_t klen)
{
    return c->hash == hash && c->klen == klen && memcmp(c->key, key, klen) == 0;
}

static void carry_free(rlt__rlqs *q, carry *c)
{
    rlt__mem_conn_give(sizeof *c + c->klen);
    free(c);
    q->ncarry--;
}

void rlt__rlqs_redis_retire(rlt__rlqs *q, bucket *b, rlt_ns now)
{
    rlt__quota_totals t;
    if (rlt__quota_bucket_totals(b->dv->div, b->qb, now, &t) != RLT_OK ||
        (t.tokens_per_fill == 0 && t.max_tokens == 0))
        return;
    if (q->carry == NULL) {
        if (!rlt__mem_conn_take(RLT__RLQS_CARRY_SLOTS * sizeof *q->carry)) return;
        q->carry = calloc(RLT__RLQS_CARRY_SLOTS, sizeof *q->carry);
        if (q->carry == NULL) {
            rlt__mem_conn_give(RLT__RLQS_CARRY_SLOTS * sizeof *q->carry);
            return;
        }
    }
    if (!rlt__mem_conn_take(sizeof(carry) + b->klen)) return;
    carry *c = malloc(sizeof *c + b->klen);
    if (c == NULL) {
        rlt__mem_conn_give(sizeof(carry) + b->klen);
        return;
    }
    *c = (carry){.hash = b->hash,
                 .q = t.tokens_per_fill,
                 .b = t.max_tokens,
                 .cap_q = b->cap_q,
                 .cap_b = b->cap_b,
                 .ttl = b->ttl,
                 .until = now + b->ttl, /* every live assignment was sent at or before now */
                 .klen = b->klen};
    memcpy(c->key, b->key, b->klen);
    carry **slot = &q->carry[b->hash % RLT__RLQS_CARRY_SLOTS];
    c->next = *slot;
    *slot = c;
    q->ncarry++;
}

void rlt__rlqs_redis_sweep(rlt__rlqs *q, rlt_ns now)
{
    if (q->carry == NULL) return;
    for (size_t i = 0; i < RLT__RLQS_CARRY_SLOTS; i++)
        for (carry **pp = &q->carry[i]; *pp != NULL;) {
            carry *c = *pp;
            if (c->until > now) {
                pp = &c->next;
                continue;
            }
            *pp = c->next;
            carry_free(q, c);
        }
    if (q->ncarry == 0) {
        free(q->carry);
        q->carry = NULL;
        rlt__mem_conn_give(RLT__RLQS_CARRY_SLOTS * sizeof *q->carry);
    }
}

/* The live amounts retired buckets carry for a key at `now`; *first: whether `self` is the
 * first carry of that key in its chain (the one that exchanges the key alone). */
static void carried(const rlt__rlqs *q, uint64_t hash, const char *key, size_t klen, rlt_ns now,
                    const carry *self, int64_t *cq, int64_t *cb, bool *first)
{
    *cq = *cb = 0;
    bool seen = false;
    if (first) *first = true;
    if (q->carry == NULL) return;
    for (const carry *c = q->carry[hash % RLT__RLQS_CARRY_SLOTS]; c != NULL; c = c->next) {
        if (c->until <= now || !carry_key(c, hash, key, klen)) continue;
        if (first && !seen && c != self) *first = false;
        seen = true;
        *cq += c->q;
        *cb += c->b;
    }
}

/* ---- the chunks ------------------------------------------------------------------------ */

static const bucket *find_key(const rlt__rlqs *q, uint64_t hash, const char *key, size_t klen)
{
    for (const bucket *b = q->tab[hash & (q->cap - 1)]; b != NULL; b = b->next)
        if (b->hash == hash && b->klen == klen && memcmp(b->key, key, klen) == 0) return b;
    return NULL;
}

/* Room for one more claim and klen more key bytes (charged to the memory budget). */
static bool chunk_room(rlt__rlqs_chunk *ch, size_t klen)
{
    if (ch->n == ch->cap) {
        size_t cap = ch->cap ? ch->cap * 2 : RLT__RLQS_CHUNK;
        if (!rlt__mem_conn_take((cap - ch->cap) * sizeof *ch->c)) return false;
        rlt__rlqs_claim *c = realloc(ch->c, cap * sizeof *c);
        if (c == NULL) {
            rlt__mem_conn_give((cap - ch->cap) * sizeof *ch->c);
            return false;
        }
        ch->c = c;
        ch->cap = cap;
    }
    if (ch->kused + klen > ch->kcap) {
        size_t cap = ch->kcap ? ch->kcap : 16384;
        while (cap < ch->kused + klen)
            cap *= 2;
        if (!rlt__mem_conn_take(cap - ch->kcap)) return false;
        char *k = realloc(ch->keys, cap);
        if (k == NULL) {
            rlt__mem_conn_give(cap - ch->kcap);
            return false;
        }
        ch->keys = k;
        ch->kcap = cap;
    }
    return true;
}

static rlt__rlqs_claim *chunk_add(rlt__rlqs_chunk *ch, const char *key, size_t klen)
{
    rlt__rlqs_claim *x = &ch->c[ch->n++];
    memset(x, 0, sizeof *x);
    memcpy(ch->keys + ch->kused, key, klen);
    x->x.key = (const char *)(uintptr_t)ch->kused; /* an offset until the chunk is complete */
    x->x.klen = klen;
    ch->kused += klen;
    return x;
}

/* A policy bucket's exchange: demand (an unknown one counts as Q, an active member with no
 * rate as one token: it must get a part), held (max(live sums, the part divided now) + what
 * retired buckets of its key carry). */
static bool snap_bucket(const rlt__rlqs *q, rlt__rlqs_chunk *ch, const bucket *b, rlt_ns now,
                        rlt_ns extra)
{
    rlt__quota_totals t;
    if (b->kind != RLT__QUOTA_POLICY ||
        rlt__quota_bucket_totals(b->dv->div, b->qb, now, &t) != RLT_OK)
        return true;
    if (!chunk_room(ch, b->klen)) return false;
    rlt__rlqs_claim *x = chunk_add(ch, b->key, b->klen);
    carried(q, b->hash, b->key, b->klen, now, NULL, &x->carried_q, &x->carried_b, NULL);
    x->id = b->id;
    x->hash = b->hash;
    int64_t demand = t.demand + (int64_t)t.unknown * b->cap_q;
    x->x.demand = demand == 0 && t.active > 0 ? 1 : demand;
    x->x.held_q = max64(t.tokens_per_fill, t.fill_capacity) + x->carried_q;
    x->x.held_b = max64(t.max_tokens, t.burst) + x->carried_b;
    x->x.cap_q = b->cap_q;
    x->x.cap_b = b->cap_b;
    x->x.ttl = b->ttl + extra + hold_of(b);
    /* its field should be there: not finding it means the fleet's claims were lost */
    if (b->claim_expires > 0 && now < b->claim_expires - CLAIM_MARGIN)
        x->x.flags = RLT__QUOTA_X_EXPECT;
    return true;
}

/* A key only retired buckets hold: exchanged with no demand so that its claim keeps covering
 * what they carry (id 0: nothing to apply). */
static bool snap_carry(const rlt__rlqs *q, rlt__rlqs_chunk *ch, const carry *c, rlt_ns now,
                       rlt_ns extra)
{
    bool first;
    int64_t cq, cb;
    if (c->until <= now || find_key(q, c->hash, c->key, c->klen) != NULL) return true;
    carried(q, c->hash, c->key, c->klen, now, c, &cq, &cb, &first);
    if (!first) return true;
    if (!chunk_room(ch, c->klen)) return false;
    rlt__rlqs_claim *x = chunk_add(ch, c->key, c->klen);
    x->hash = c->hash;
    x->x.held_q = cq;
    x->x.held_b = cb;
    x->x.cap_q = c->cap_q;
    x->x.cap_b = c->cap_b;
    x->x.ttl = c->ttl + extra;
    return true;
}

void rlt__rlqs_chunk_begin(rlt__rlqs_chunk *ch)
{
    ch->slot = 0;
    ch->phase = 0;
    ch->n = 0;
}

/* The table is walked by slot: it only grows, and a bucket at old slot i moves to i or
 * i + old cap, so a walk across a growth visits some buckets twice and misses none. */
int rlt__rlqs_claims(rlt__rlqs *q, rlt_ns now, rlt_ns extra, rlt__rlqs_chunk *ch)
{
    ch->n = 0;
    ch->kused = 0;
    bool ok = true;
    pthread_mutex_lock(&q->lock);
    while (ok && ch->n < RLT__RLQS_CHUNK) {
        if (ch->phase == 0 && ch->slot >= q->cap) {
            ch->phase = 1;
            ch->slot = 0;
        }
        if (ch->phase == 1 && (q->carry == NULL || ch->slot >= RLT__RLQS_CARRY_SLOTS)) {
            ch->phase = 2;
        }
        if (ch->phase == 2) break;
        size_t n0 = ch->n, k0 = ch->kused;
        if (ch->phase == 0) {
            for (const bucket *b = q->tab[ch->slot]; ok && b != NULL; b = b->next)
                ok = snap_bucket(q, ch, b, now, extra);
        } else {
            for (const carry *c = q->carry[ch->slot]; ok && c != NULL; c = c->next)
                ok = snap_carry(q, ch, c, now, extra);
        }
        if (!ok) { /* out of memory: this slot is taken again at the next call */
            ch->n = n0;
            ch->kused = k0;
            break;
        }
        ch->slot++;
    }
    pthread_mutex_unlock(&q->lock);
    for (size_t i = 0; i < ch->n; i++)
        ch->c[i].x.key = ch->keys + (uintptr_t)ch->c[i].x.key;
    if (!ok && ch->n == 0) return RLT_ENOMEM;
    return RLT_OK;
}

size_t rlt__rlqs_claims_apply(rlt__rlqs *q, const rlt__rlqs_claim *cs, size_t n, rlt_ns now)
{
    size_t failing = 0;
    pthread_mutex_lock(&q->lock);
    for (size_t i = 0; i < n; i++) {
        const rlt__rlqs_claim *c = &cs[i];
        if (c->id == 0) continue; /* a key only retired buckets hold */
        bucket *b = q->tab[c->hash & (q->cap - 1)];
        while (b != NULL && b->id != c->id)
            b = b->next;
        if (b == NULL || b->kind != RLT__QUOTA_POLICY) continue; /* retired meanwhile */
        const rlt__quota_exchange *x = &c->x;
        /* the part to divide leaves room for what retired buckets of the key still hold */
        if (x->status == RLT_OK &&
            divide_part(b, x->budget_q - c->carried_q, x->budget_b - c->carried_b) == RLT_OK) {
            b->claim = RLT__RLQS_CLAIMED;
            b->claim_until = c->began + (x->ttl - hold_of(b) - b->ttl) - CLAIM_MARGIN;
            b->claim_expires = c->began + x->ttl;
            b->claim_q = x->claim_q - c->carried_q;
            b->claim_b = x->claim_b - c->carried_b;
            continue;
        }
        enter_fail(b, now); /* unreachable, or a budget the division refused */
        failing++;
    }
    pthread_mutex_unlock(&q->lock);
    return failing;
}

void rlt__rlqs_chunk_free(rlt__rlqs_chunk *ch)
{
    rlt__mem_conn_give(ch->cap * sizeof *ch->c + ch->kcap);
    free(ch->c);
    free(ch->keys);
    memset(ch, 0, sizeof *ch);
}
