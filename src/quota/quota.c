/* The quota division state: buckets, streams, their members, the ledger of live assignments
 * and the resend rule (quota.h has the contract, docs/quota.md the bound's derivation).
 *
 * Layout.  Buckets and streams live in two arrays of slots indexed by their ids, with a stack
 * of free ids each.  A bucket owns an array of members; a stream owns an array of entries
 * (bucket id, index of its member there), and each member keeps the index of its entry, so a
 * member is found from a report in O(buckets of the stream) and removed by swapping the last
 * one into its place in O(1) on both sides.  A departed member keeps no stream (NO_ID) and
 * stays in its bucket until its assignment expires.
 *
 * The ledger.  A bucket's lq / lb are the sums of its members' live assignments; an expired
 * one is taken out at the next division or sweep, never before its expires_at, so between
 * the two the ledger over-counts, which only makes the next grants smaller.  Every answer
 * gives min(target, free + held), where free = max(0, Q - lq): the ledger never rises above
 * Q (or B), and while it is above (a lowered budget) no answer raises it. */
#include "quota/quota.h"

#include "quota/divide.h"

#include "core/internal.h"

#include <stdlib.h>

#define NO_ID UINT32_MAX

typedef struct member {
    uint32_t stream; /* NO_ID once departed */
    uint32_t slot;   /* the index of its entry in the stream's array */
    uint8_t nhist, hpos;
    bool live;                           /* an assignment is live (sent, not yet expired) */
    uint64_t hcount[RLT__QUOTA_HISTORY]; /* allowed + denied of its latest reports */
    rlt_ns hel[RLT__QUOTA_HISTORY];      /* and their time_elapsed */
    int64_t want_q, tq, tb;              /* the latest division's want and targets */
    int64_t aq, ab;                      /* the live assignment (0, 0: deny-all) */
    rlt_ns sent, expires;
} member;

typedef struct bucket {
    bool used, closing, divided, owed;
    rlt__quota_budget budget;
    int64_t cap_q, cap_b; /* Q and B */
    int64_t div_q, div_b; /* what the division hands out: Q and B less the reserve */
    int64_t lq, lb;       /* the ledger */
    rlt_ns divided_at;
    member *m;
    uint32_t n, cap, active;
} bucket;

typedef struct entry {
    uint32_t bucket, idx;
} entry;

typedef struct stream {
    bool used;
    uint32_t n, cap;
    entry *e;
} stream;

struct rlt__quota {
    rlt__quota_options o; /* defaults filled in */
    bucket *b;
    stream *s;
    uint32_t *bfree, *sfree; /* stacks of free ids */
    uint32_t nb, ns, nbfree, nsfree;
    uint32_t capb, caps, capbf, capsf, scratch_cap; /* allocated elements of each array */
    size_t members;
    rlt_ns latest; /* the latest `now` seen: time never steps back in here */
    rlt__quota_share *scratch;
};

/* Grows *p (of *cap elements of `size` bytes) to hold at least `need`, doubling. */
static int grow(void **p, uint32_t *cap, size_t size, uint32_t need)
{
    if (need <= *cap) return RLT_OK;
    uint64_t c = *cap ? *cap : 4;
    while (c < need)
        c *= 2;
    if (c > NO_ID - 1) c = NO_ID - 1;
    void *n = realloc(*p, (size_t)c * size);
    if (!n) return RLT_ENOMEM;
    *p = n;
    *cap = (uint32_t)c;
    return RLT_OK;
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

int rlt__quota_open(rlt__quota **out, const rlt__quota_options *opt)
{
    if (!out || !opt || opt->report_interval <= 0) return RLT_EINVAL;
    rlt__quota_options o = *opt;
    const rlt_ns i = o.report_interval;
    if (o.ttl == 0) o.ttl = i > INT64_MAX / 8 ? INT64_MAX : 8 * i;
    if (o.renew_before == 0) o.renew_before = i > INT64_MAX / 2 ? INT64_MAX : 2 * i;
    if (o.min_resend == 0) o.min_resend = i;
    if (o.headroom_permille == 0) o.headroom_permille = 250;
    if (o.reserve_permille == 0) o.reserve_permille = 50;
    if (o.change_permille == 0) o.change_permille = 125;
    if (o.max_streams == 0) o.max_streams = 65536;
    if (o.max_buckets == 0) o.max_buckets = 65536;
    if (o.max_buckets_per_stream == 0) o.max_buckets_per_stream = 1024;
    if (o.max_members == 0) o.max_members = (size_t)1 << 20;
    if (o.ttl < 0 || o.renew_before < 0 || o.min_resend < 0 ||
        o.ttl < rlt__sat_add(o.renew_before, o.min_resend) || o.headroom_permille > 100000 ||
        o.reserve_permille > 500 || o.change_permille > 1000 || o.max_streams >= NO_ID ||
        o.max_buckets >= NO_ID || o.max_buckets_per_stream >= NO_ID || o.max_members >= NO_ID)
        return RLT_EINVAL;
    rlt__quota *q = calloc(1, sizeof *q);
    if (!q) return RLT_ENOMEM;
    q->o = o;
    q->latest = INT64_MIN;
    *out = q;
    return RLT_OK;
}

void rlt__quota_close(rlt__quota *q)
{
    if (!q) return;
    for (uint32_t i = 0; i < q->nb; i++)
        free(q->b[i].m);
    for (uint32_t i = 0; i < q->ns; i++)
        free(q->s[i].e);
    free(q->b);
    free(q->s);
    free(q->bfree);
    free(q->sfree);
    free(q->scratch);
    free(q);
}

/* Validates `b` and derives Q, B and the division's capacities into `k`.  `zero_ok`: a zero
 * limit or burst is a zero budget (rlt__quota_bucket_budget), not an error. */
static int set_budget(bucket *k, const rlt__quota_budget *b, bool zero_ok)
{
    int64_t least = zero_ok ? 0 : 1;
    if (b->limit < least || b->period <= 0 || b->burst < least || b->fill_interval < 0)
        return RLT_EINVAL;
    if (b->burst > RLT__QUOTA_TOKENS_MAX) return RLT_ERANGE;
    rlt_ns f = b->fill_interval ? b->fill_interval : b->period;
    __int128 cap_q = (__int128)b->limit * f / b->period;
    if (cap_q < least || cap_q > RLT__QUOTA_TOKENS_MAX) return RLT_ERANGE;
    k->budget = *b;
    k->budget.fill_interval = f;
    k->cap_q = (int64_t)cap_q;
    k->cap_b = b->burst;
    return RLT_OK;
}

/* The reserve kept for joiners: permille of the capacity, but no more than one joiner's equal
 * share among `members` + 1 (a joiner is answered at once with its equal share; more reserve
 * would only idle: with 1,000 members 5 % is fifty joiners' shares), and at least one token
 * when there are two or more, so a joiner finds one free at once. */
static int64_t after_reserve(int64_t cap, uint32_t permille, uint32_t members)
{
    int64_t r = cap * (int64_t)permille / 1000;
    int64_t share = (cap + members) / ((int64_t)members + 1); /* rounded up */
    if (r > share) r = share;
    if (r < 1 && cap >= 2) r = 1;
    return cap - r;
}

static void set_division(const rlt__quota *q, bucket *k)
{
    k->div_q = after_reserve(k->cap_q, q->o.reserve_permille, k->active);
    k->div_b = after_reserve(k->cap_b, q->o.reserve_permille, k->active);
    k->divided = false;
}

int rlt__quota_bucket_open(rlt__quota *q, const rlt__quota_budget *b, uint32_t *bucket_id)
{
    if (!q || !b || !bucket_id) return RLT_EINVAL;
    bucket k = {0};
    int rc = set_budget(&k, b, false);
    if (rc) return rc;
    set_division(q, &k);
    uint32_t id;
    if (q->nbfree) {
        id = q->bfree[q->nbfree - 1];
    } else {
        if (q->nb >= q->o.max_buckets) return RLT_EFULL;
        /* the free stack can hold every id there is */
        if (grow((void **)&q->bfree, &q->capbf, sizeof *q->bfree, q->nb + 1) ||
            grow((void **)&q->b, &q->capb, sizeof *q->b, q->nb + 1))
            return RLT_ENOMEM;
        id = q->nb;
        q->b[id] = (bucket){0};
    }
    /* Keep the slot's member array for reuse; take everything else from k. */
    k.m = q->b[id].m;
    k.cap = q->b[id].cap;
    k.used = true;
    q->b[id] = k;
    if (q->nbfree)
        q->nbfree--;
    else
        q->nb++;
    *bucket_id = id;
    return RLT_OK;
}

static bucket *bucket_get(const rlt__quota *q, uint32_t id)
{
    return q && id < q->nb && q->b[id].used ? &q->b[id] : NULL;
}

static stream *stream_get(const rlt__quota *q, uint32_t id)
{
    return q && id < q->ns && q->s[id].used ? &q->s[id] : NULL;
}

int rlt__quota_bucket_budget(rlt__quota *q, uint32_t bucket_id, const rlt__quota_budget *b)
{
    bucket *k = bucket_get(q, bucket_id);
    if (!k || k->closing || !b) return RLT_EINVAL;
    bucket n = *k;
    int rc = set_budget(&n, b, true);
    if (rc) return rc;
    if (n.budget.fill_interval != k->budget.fill_interval) return RLT_EINVAL;
    set_division(q, &n);
    *k = n;
    return RLT_OK;
}

/* Removes entry `slot` of stream `sid`, moving its last entry into the hole. */
static void entry_remove(rlt__quota *q, uint32_t sid, uint32_t slot)
{
    stream *s = &q->s[sid];
    uint32_t last = s->n - 1;
    if (slot != last) {
        s->e[slot] = s->e[last];
        q->b[s->e[slot].bucket].m[s->e[slot].idx].slot = slot;
    }
    s->n--;
}

/* The member leaves its stream; its live assignment stays in the ledger until it expires. */
static void depart(bucket *k, member *m)
{
    m->stream = NO_ID;
    k->active--;
}

int rlt__quota_bucket_close(rlt__quota *q, uint32_t bucket_id)
{
    bucket *k = bucket_get(q, bucket_id);
    if (!k || k->closing) return RLT_EINVAL;
    for (uint32_t i = 0; i < k->n; i++) {
        member *m = &k->m[i];
        if (m->stream == NO_ID) continue;
        entry_remove(q, m->stream, m->slot);
        depart(k, m);
    }
    k->closing = true;
    return RLT_OK;
}

int rlt__quota_stream_open(rlt__quota *q, uint32_t *stream_id)
{
    if (!q || !stream_id) return RLT_EINVAL;
    uint32_t id;
    if (q->nsfree) {
        id = q->sfree[--q->nsfree];
    } else {
        if (q->ns >= q->o.max_streams) return RLT_EFULL;
        if (grow((void **)&q->sfree, &q->capsf, sizeof *q->sfree, q->ns + 1) ||
            grow((void **)&q->s, &q->caps, sizeof *q->s, q->ns + 1))
            return RLT_ENOMEM;
        id = q->ns++;
        q->s[id] = (stream){0};
    }
    q->s[id].used = true;
    q->s[id].n = 0;
    *stream_id = id;
    return RLT_OK;
}

int rlt__quota_stream_close(rlt__quota *q, uint32_t stream_id)
{
    stream *s = stream_get(q, stream_id);
    if (!s) return RLT_EINVAL;
    for (uint32_t i = 0; i < s->n; i++) {
        bucket *k = &q->b[s->e[i].bucket];
        depart(k, &k->m[s->e[i].idx]);
    }
    s->n = 0;
    s->used = false;
    q->sfree[q->nsfree++] = stream_id; /* sfree holds as many ids as slots exist */
    return RLT_OK;
}

/* Takes the assignments expired at `now` out of the ledger. */
static void expire(bucket *k, rlt_ns now)
{
    for (uint32_t i = 0; i < k->n; i++) {
        member *m = &k->m[i];
        if (m->live && m->expires <= now) {
            k->lq -= m->aq;
            k->lb -= m->ab;
            m->live = false;
        }
    }
    assert(k->lq >= 0 && k->lb >= 0);
}

static int64_t member_demand(const bucket *k, const member *m)
{
    return rlt__quota_demand(m->hcount, m->hel, m->nhist, k->budget.fill_interval, k->cap_q);
}

/* Redivides the bucket among its active members: rates by water-filling their wants, then
 * bursts by water-filling wants proportional to the rate targets. */
static void divide(rlt__quota *q, bucket *k, rlt_ns now)
{
    expire(k, now);
    k->div_q = after_reserve(k->cap_q, q->o.reserve_permille, k->active);
    k->div_b = after_reserve(k->cap_b, q->o.reserve_permille, k->active);
    rlt__quota_share *sc = q->scratch;
    size_t n = 0;
    for (uint32_t i = 0; i < k->n; i++) {
        member *m = &k->m[i];
        m->tq = m->tb = 0;
        if (m->stream == NO_ID) continue;
        m->want_q = rlt__quota_want(member_demand(k, m), q->o.headroom_permille, k->div_q);
        sc[n++] = (rlt__quota_share){m->want_q, 0, i};
    }
    assert(n == k->active);
    rlt__quota_fill(sc, n, k->div_q);
    size_t nb = 0;
    for (size_t j = 0; j < n; j++) {
        member *m = &k->m[sc[j].idx];
        m->tq = sc[j].got;
        if (m->tq < 1) continue;
        /* the burst in proportion to the rate share, rounded up, at least one token */
        __int128 w = ((__int128)k->div_b * m->tq + k->div_q - 1) / k->div_q;
        sc[nb++] = (rlt__quota_share){w < 1 ? 1 : (int64_t)w, 0, sc[j].idx};
    }
    rlt__quota_fill(sc, nb, k->div_b);
    for (size_t j = 0; j < nb; j++)
        k->m[sc[j].idx].tb = sc[j].got;
    /* Owed: the raises the targets ask for do not fit in what is free, so decreases, even
     * immaterial ones, must be sent to make room. */
    int64_t need_q = 0, need_b = 0;
    for (uint32_t i = 0; i < k->n; i++) {
        const member *m = &k->m[i];
        if (m->stream == NO_ID) continue;
        int64_t hq = m->live ? m->aq : 0, hb = m->live ? m->ab : 0;
        if (m->tq > hq) need_q += m->tq - hq;
        if (m->tb > hb) need_b += m->tb - hb;
    }
    k->owed = need_q > (k->cap_q > k->lq ? k->cap_q - k->lq : 0) ||
              need_b > (k->cap_b > k->lb ? k->cap_b - k->lb : 0);
    k->divided = true;
    k->divided_at = now;
}

/* |to - from| is material against `from`. */
static bool material(const rlt__quota *q, int64_t from, int64_t to)
{
    if (to == from) return false;
    if (from == 0) return true;
    __int128 d = to > from ? to - from : from - to;
    return d * 1000 >= (__int128)q->o.change_permille * from;
}

static void fill_assignment(const rlt__quota *q, const bucket *k, const member *m,
                            rlt__quota_assignment *a)
{
    *a = (rlt__quota_assignment){0};
    a->deny_all = !m->live || m->aq == 0;
    if (m->live) {
        a->max_tokens = (uint32_t)m->ab;
        a->tokens_per_fill = (uint32_t)m->aq;
        a->expires_at = m->expires;
    }
    a->fill_interval = k->budget.fill_interval;
    a->ttl = q->o.ttl;
}

/* The resend rule for member `m` at `now`: what to grant, and whether to send it. */
static rlt__quota_reason answer(rlt__quota *q, bucket *k, member *m, rlt_ns now)
{
    if (m->live && m->expires <= now) {
        k->lq -= m->aq;
        k->lb -= m->ab;
        m->live = false;
    }
    int64_t hq = m->live ? m->aq : 0, hb = m->live ? m->ab : 0;
    int64_t nq = min64(m->tq, (k->cap_q > k->lq ? k->cap_q - k->lq : 0) + hq);
    int64_t nb = min64(m->tb, (k->cap_b > k->lb ? k->cap_b - k->lb : 0) + hb);
    if (nq < 1 || nb < 1) nq = nb = 0; /* no whole token of both: deny-all, holding nothing */
    rlt__quota_reason why = RLT__QUOTA_KEEP;
    if (!m->live)
        why = RLT__QUOTA_FIRST;
    else if (m->ab > 0 && rlt__sat_sub(now, m->sent) < q->o.min_resend)
        why = RLT__QUOTA_KEEP; /* the bound counts one burst per member per G at most */
    else if (rlt__sat_sub(m->expires, now) <= q->o.renew_before)
        why = RLT__QUOTA_RENEW;
    else if (material(q, m->aq, nq) || material(q, m->ab, nb) ||
             (k->owed && (nq < m->aq || nb < m->ab)))
        why = RLT__QUOTA_CHANGE;
    if (why == RLT__QUOTA_KEEP) return why;
    k->lq += nq - hq;
    k->lb += nb - hb;
    assert(k->lq <= k->cap_q || nq <= hq);
    m->aq = nq;
    m->ab = nb;
    m->sent = now;
    m->expires = rlt__sat_add(now, q->o.ttl);
    m->live = true;
    return why;
}

/* The streams open on the division: the Envoys that may report any of its buckets. */
static uint32_t open_streams(const rlt__quota *q)
{
    return q->ns - q->nsfree;
}

/* A joiner's first target, at most its equal share of the division among n = max(active
 * members, open streams): every open stream is taken as a member to come, so that a fleet
 * reporting a new bucket at once (a cold start: 1,000 Envoys in one millisecond) is answered
 * with about Q / n each, not the whole division for the first and deny-all for the rest
 * until the first ones may be lowered, G later.  The cost: a bucket that only a few of the
 * open streams report starts each of them at Q / n and reaches its share at the member's next
 * answer after G. */
static void first_share(const rlt__quota *q, bucket *k, member *m)
{
    uint32_t n = open_streams(q);
    if (n < k->active) n = k->active;
    if (n == 0) n = 1;
    int64_t dq = after_reserve(k->cap_q, q->o.reserve_permille, n);
    int64_t db = after_reserve(k->cap_b, q->o.reserve_permille, n);
    int64_t sq = dq >= n ? dq / n : 0, sb = db >= n ? db / n : 0;
    m->tq = min64(m->tq, sq);
    m->tb = min64(m->tb, sb);
}

/* Joins stream `sid` to bucket `bid`: a new member whose target is its first share until
 * the next division.  Everything that can fail is done before anything changes. */
static int join(rlt__quota *q, uint32_t sid, uint32_t bid, member **out)
{
    stream *s = &q->s[sid];
    bucket *k = &q->b[bid];
    if (s->n >= q->o.max_buckets_per_stream || q->members >= q->o.max_members) return RLT_EFULL;
    if (grow((void **)&k->m, &k->cap, sizeof *k->m, k->n + 1) ||
        grow((void **)&s->e, &s->cap, sizeof *s->e, s->n + 1) ||
        grow((void **)&q->scratch, &q->scratch_cap, sizeof *q->scratch, k->n + 1))
        return RLT_ENOMEM;
    member *m = &k->m[k->n];
    *m = (member){0};
    m->stream = sid;
    m->slot = s->n;
    s->e[s->n++] = (entry){bid, k->n++};
    k->active++;
    q->members++;
    m->want_q = m->tq = k->div_q;
    m->tb = k->div_b;
    first_share(q, k, m);
    *out = m;
    return RLT_OK;
}

static member *find(const rlt__quota *q, const stream *s, uint32_t bid)
{
    for (uint32_t i = 0; i < s->n; i++)
        if (s->e[i].bucket == bid) return &q->b[bid].m[s->e[i].idx];
    return NULL;
}

int rlt__quota_report(rlt__quota *q, uint32_t stream_id, uint32_t bucket_id,
                      const rlt__quota_usage *u, rlt_ns now, rlt__quota_answer *a)
{
    stream *s = stream_get(q, stream_id);
    bucket *k = bucket_get(q, bucket_id);
    if (!s || !k || k->closing || !u || !a || u->elapsed < 0) return RLT_EINVAL;
    member *m = find(q, s, bucket_id);
    bool joined = false;
    if (!m) {
        int rc = join(q, stream_id, bucket_id, &m);
        if (rc) return rc;
        joined = true;
    }
    /* A clock stepping back is held at the latest instant: an assignment expired then must
     * not come back to life (and be kept) at an earlier one. */
    if (now < q->latest) now = q->latest;
    q->latest = now;
    if (u->elapsed > 0) {
        uint64_t c = u->allowed + u->denied;
        if (c < u->allowed) c = UINT64_MAX;
        m->hcount[m->hpos] = c;
        m->hel[m->hpos] = u->elapsed;
        m->hpos = (uint8_t)((m->hpos + 1) % RLT__QUOTA_HISTORY);
        if (m->nhist < RLT__QUOTA_HISTORY) m->nhist++;
    }
    if (!k->divided || rlt__sat_sub(now, k->divided_at) >= q->o.report_interval / 4) {
        divide(q, k, now); /* moves no member: m stays valid */
        if (joined) first_share(q, k, m);
    }
    a->reason = answer(q, k, m, now);
    fill_assignment(q, k, m, &a->assignment);
    return RLT_OK;
}

/* Removes member i of bucket k (no live assignment), moving the last one into its place. */
static void member_remove(rlt__quota *q, bucket *k, uint32_t i)
{
    member *m = &k->m[i];
    assert(!m->live);
    if (m->stream != NO_ID) {
        entry_remove(q, m->stream, m->slot);
        k->active--;
    }
    uint32_t last = k->n - 1;
    if (i != last) {
        k->m[i] = k->m[last];
        if (k->m[i].stream != NO_ID) q->s[k->m[i].stream].e[k->m[i].slot].idx = i;
    }
    k->n--;
    q->members--;
}

void rlt__quota_sweep(rlt__quota *q, rlt_ns now)
{
    if (!q) return;
    if (now < q->latest) now = q->latest;
    q->latest = now;
    for (uint32_t b = 0; b < q->nb; b++) {
        bucket *k = &q->b[b];
        if (!k->used) continue;
        expire(k, now);
        for (uint32_t i = k->n; i-- > 0;)
            if (!k->m[i].live) member_remove(q, k, i);
        if (k->closing && k->n == 0) {
            k->used = false;
            q->bfree[q->nbfree++] = b;
        }
    }
}

int rlt__quota_bucket_totals(const rlt__quota *q, uint32_t bucket_id, rlt_ns now,
                             rlt__quota_totals *t)
{
    const bucket *k = bucket_get(q, bucket_id);
    if (!k || !t) return RLT_EINVAL;
    *t = (rlt__quota_totals){0};
    for (uint32_t i = 0; i < k->n; i++) {
        const member *m = &k->m[i];
        if (m->live && m->expires > now) {
            t->tokens_per_fill += m->aq;
            t->max_tokens += m->ab;
        }
        if (m->stream == NO_ID) continue;
        /* against the largest budget, not this one: in Redis mode the demand is what asks
         * for a larger part, so it must not be capped by the part held now */
        int64_t d = rlt__quota_demand(m->hcount, m->hel, m->nhist, k->budget.fill_interval,
                                      RLT__QUOTA_TOKENS_MAX);
        if (d < 0)
            t->unknown++;
        else
            t->demand += d; /* at most 2^32 members of at most 2^32 - 1: no overflow */
    }
    t->fill_capacity = k->cap_q;
    t->burst = k->cap_b;
    t->fill_interval = k->budget.fill_interval;
    t->members = k->n;
    t->active = k->active;
    return RLT_OK;
}

int rlt__quota_member(const rlt__quota *q, uint32_t stream_id, uint32_t bucket_id, rlt_ns now,
                      rlt__quota_member_info *info)
{
    const stream *s = stream_get(q, stream_id);
    const bucket *k = bucket_get(q, bucket_id);
    if (!s || !k || !info) return RLT_EINVAL;
    const member *m = find(q, s, bucket_id);
    if (!m) return RLT_ENOENT;
    info->demand = member_demand(k, m);
    info->want_q = m->want_q;
    info->target_q = m->tq;
    info->target_b = m->tb;
    member live = *m;
    if (live.live && live.expires <= now) live.live = false;
    fill_assignment(q, k, &live, &info->live);
    return RLT_OK;
}

int rlt__quota_excess_bound(const rlt__quota *q, uint32_t bucket_id, rlt_ns window, bool steady,
                            int64_t *excess)
{
    const bucket *k = bucket_get(q, bucket_id);
    if (!k || !excess || window < 0) return RLT_EINVAL;
    rlt_ns g = steady ? q->o.ttl - q->o.renew_before : q->o.min_resend;
    if (g <= 0) {
        *excess = INT64_MAX;
        return RLT_ERANGE;
    }
    __int128 e = (__int128)k->cap_b + (__int128)k->cap_b * window / g;
    if (e > INT64_MAX) {
        *excess = INT64_MAX;
        return RLT_ERANGE;
    }
    *excess = (int64_t)e;
    return RLT_OK;
}
