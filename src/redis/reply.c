/* The decoding of libratelimit_redis's replies: the multi-limit script's full decisions, the
 * one-algorithm scripts' compact replies (from which the rest of the decision is derived here,
 * exactly as src/core derives it), and the module's RL.DECIDE strings.  Pure: no I/O. */
#include "reply.h"

#include <stdlib.h>
#include <string.h>

#define NOW_MAX RLT__NOW_MAX

static rlt_ns us_ns(long long us, long long ns)
{
    int64_t v;
    if (__builtin_mul_overflow((int64_t)us, RLT_NS_PER_US, &v)) return INT64_MAX;
    return v > INT64_MAX - ns ? INT64_MAX : v + ns;
}

/* A decision from its seven numbers {allowed, limit, remaining, retry_after, reset_after,
 * delay, lease} (durations in ns), in both replies' order. */
static void decision_from(rlt_decision *d, const long long v[7])
{
    memset(d, 0, sizeof *d);
    d->allowed = v[0] != 0;
    d->limit = v[1];
    d->remaining = v[2];
    d->retry_after = v[3];
    d->reset_after = v[4];
    d->delay = v[5];
    d->lease = v[6];
}

/* The scripts' durations are us and the ns below them, as two numbers: Lua's doubles are exact
 * to 2^53 only. */
int rlt__parse_decision(const redisReply *e, rlt_decision *d)
{
    if (e->type != REDIS_REPLY_ARRAY || e->elements != 10) return RLT_EBACKEND;
    long long v[10];
    for (int i = 0; i < 10; i++) {
        if (e->element[i]->type != REDIS_REPLY_INTEGER) return RLT_EBACKEND;
        v[i] = e->element[i]->integer;
    }
    long long ns[7] = {
        v[0], v[1], v[2], v[3] < 0 ? -1 : us_ns(v[3], v[4]), us_ns(v[5], v[6]), us_ns(v[7], v[8]),
        v[9]};
    decision_from(d, ns);
    return RLT_OK;
}

/* What every one-algorithm script's reply fixes alike: the limit (`size` costs), allowed only
 * when the cost can fit, and a wait of -1 when it never can.  RLT_EBACKEND when the script
 * allowed what never fits. */
static int decision_head(rlt_decision *d, bool allowed, int64_t need, int64_t size)
{
    memset(d, 0, sizeof *d);
    d->limit = size;
    d->allowed = allowed && need <= size;
    if (allowed != d->allowed) return RLT_EBACKEND;
    if (need > size) d->retry_after = -1;
    return RLT_OK;
}

static rlt_ns sat_add(rlt_ns a, rlt_ns b)
{
    return a > INT64_MAX - b ? INT64_MAX : a + b;
}

/* ceil(a x 1000 / scale) ns, the duration of the amount a (scaled microseconds), saturated. */
static rlt_ns amount_ns(unsigned __int128 a, int64_t scale)
{
    unsigned __int128 ns = (a * 1000 + (unsigned __int128)scale - 1) / (unsigned __int128)scale;
    return ns > (unsigned __int128)INT64_MAX ? INT64_MAX : (rlt_ns)ns;
}

/* The amount of a GCRA, leaky bucket or token bucket script's reply (gcra.lua,
 * token_bucket.lua): the amount used after the charge when allowed, or the amount used when
 * denied, as an integer n (>= 0 allowed, -(n + 1) denied), or {q, f} = q x scale + f (GCRA and
 * leaky bucket, denied, too big for one number), or {allowed, amount, wait} (token bucket
 * whose clock stepped back: refill waits `wait` us). */
static int bucket_amount(const rlt__limit *l, const redisReply *e, unsigned __int128 *a,
                         bool *allowed, rlt_ns *wait)
{
    const rlt__rpol *p = &l->rp;
    long long v[3] = {0};
    size_t nv = e->type == REDIS_REPLY_ARRAY ? e->elements : 0;
    *wait = 0;
    if (nv == 2 || nv == 3)
        for (size_t i = 0; i < nv; i++) {
            if (e->element[i]->type != REDIS_REPLY_INTEGER || e->element[i]->integer < 0)
                return RLT_EBACKEND;
            v[i] = e->element[i]->integer;
        }
    if (e->type == REDIS_REPLY_INTEGER) {
        *allowed = e->integer >= 0;
        *a = (unsigned __int128)(*allowed ? e->integer : -(e->integer + 1));
    } else if (nv == 2 && p->algo != RLT_TOKEN_BUCKET && v[1] < p->scale) {
        *allowed = false;
        *a = (unsigned __int128)v[0] * (unsigned __int128)p->scale + (unsigned __int128)v[1];
    } else if (nv == 3 && p->algo == RLT_TOKEN_BUCKET && v[0] <= 1 && v[2] < RLT_REDIS_NUM_MAX) {
        *allowed = v[0] == 1;
        *a = (unsigned __int128)v[1];
        *wait = v[2] * RLT_NS_PER_US;
    } else {
        return RLT_EBACKEND;
    }
    return RLT_OK;
}

/* The GCRA, token bucket and leaky bucket scripts' reply (bucket_amount: the amount used, or
 * the leaky bucket's backlog, after the charge, or when denied); the rest of the decision is
 * derived exactly as src/core/bucket.c and leaky.c derive it, on a bucket of
 * rlt__bucket_size(p) costs (Q + 1 for the leaky bucket: see there). */
static int parse_bucket(const rlt__limit *l, const redisReply *e, rlt_decision *d)
{
    const rlt__rpol *p = &l->rp;
    unsigned __int128 a;
    bool allowed;
    rlt_ns wait;
    if (bucket_amount(l, e, &a, &allowed, &wait)) return RLT_EBACKEND;
    int64_t size = rlt__bucket_size(p), cap = size * p->unit, need = l->cost > 0 ? l->cost : 1;
    if (decision_head(d, allowed, need, size)) return RLT_EBACKEND;
    d->remaining = a >= (unsigned __int128)cap ? 0 : (cap - (int64_t)a) / p->unit;
    d->reset_after = sat_add(amount_ns(a, p->scale), wait);
    if (need > size) return RLT_OK;
    if (!allowed) {
        int64_t room = cap - need * p->unit;
        if (a <= (unsigned __int128)room) return RLT_EBACKEND; /* a denial that fits */
        d->retry_after = sat_add(amount_ns(a - (unsigned __int128)room, p->scale), wait);
    } else if (p->algo == RLT_LEAKY_BUCKET) { /* the backlog beyond delay= waits */
        unsigned __int128 backlog = a, charge = (unsigned __int128)(need * p->unit);
        if (l->cost > 0) {
            if (a < charge) return RLT_EBACKEND;
            backlog = a - charge;
        }
        unsigned __int128 free_ = (unsigned __int128)p->D * (unsigned __int128)p->unit;
        if (backlog > free_) d->delay = amount_ns(backlog - free_, p->scale);
    }
    return RLT_OK;
}

/* The fixed window script's reply {a, e} (fixed_window.lua): a = the count after the charge
 * when allowed, -(count + 1) when denied; e = us until the counting window ends.  The rest is
 * derived as src/core/fixed_window.c derives it. */
static int parse_fixed(const rlt__limit *l, const redisReply *e, rlt_decision *d)
{
    const rlt__rpol *p = &l->rp;
    if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
        e->element[0]->type != REDIS_REPLY_INTEGER || e->element[1]->type != REDIS_REPLY_INTEGER)
        return RLT_EBACKEND;
    long long a = e->element[0]->integer, end_us = e->element[1]->integer;
    if (end_us <= 0 || end_us > NOW_MAX) return RLT_EBACKEND;
    bool allowed = a >= 0;
    int64_t count = allowed ? a : -(a + 1), need = l->cost > 0 ? l->cost : 1;
    if (decision_head(d, allowed, need, p->N)) return RLT_EBACKEND;
    if (need <= p->N && !allowed) d->retry_after = end_us * RLT_NS_PER_US;
    d->remaining = p->N - count > 0 ? p->N - count : 0;
    d->reset_after = count > 0 ? end_us * RLT_NS_PER_US : 0;
    return RLT_OK;
}

typedef __int128 i128;

/* The sliding window script's reply {c, p, x} (sliding_window.lua): c = the current window's
 * count after the charge when allowed, -(count + 1) when denied; p = the previous window's
 * count; x = us until the current window ends (> W when the clock stepped back behind it).
 * The rest is derived as src/core/sliding_window.c derives it, in ns: the window starts are
 * now + x + (step - 1) x W, which keeps the core's arithmetic (its emin is in ns). */
static int parse_sliding(const rlt__limit *l, const redisReply *e, rlt_decision *d)
{
    const rlt__rpol *p = &l->rp;
    if (e->type != REDIS_REPLY_ARRAY || e->elements != 3) return RLT_EBACKEND;
    long long v[3];
    for (int i = 0; i < 3; i++) {
        if (e->element[i]->type != REDIS_REPLY_INTEGER) return RLT_EBACKEND;
        v[i] = e->element[i]->integer;
    }
    bool allowed = v[0] >= 0;
    int64_t c = allowed ? v[0] : -(v[0] + 1), prev = v[1], x = v[2];
    /* prev > N: a debt a settle charged (rlt_redis_settle), saturated at the scripts' 2^52 */
    if (c < 0 || prev < 0 || prev > NOW_MAX || x <= 0 || x > 2 * NOW_MAX) return RLT_EBACKEND;
    int64_t need = l->cost > 0 ? l->cost : 1;
    if (decision_head(d, allowed, need, p->N)) return RLT_EBACKEND;
    const i128 W = (i128)p->W * RLT_NS_PER_US, NW = (i128)p->N * W, X = (i128)x * RLT_NS_PER_US;
    i128 e0 = X <= W ? W - X : 0; /* elapsed part of the window, 0 behind it (as the core) */
    i128 weighted = (i128)prev * (W - e0);
    int64_t curr = allowed && l->cost > 0 ? c - l->cost : c, curr_after = c;
    if (curr < 0) return RLT_EBACKEND;
    if (need <= p->N && !allowed) {
        if (weighted + ((i128)curr + need) * W <= NW) return RLT_EBACKEND; /* a denial that fits */
        i128 at = -1; /* the core's earliest(), relative to now */
        for (int step = 0; step < 3 && at < 0; step++) {
            int64_t P = step == 0 ? prev : step == 1 ? curr : 0;
            int64_t C = step == 0 ? curr : 0;
            i128 slack = ((i128)p->N - C - need) * W;
            if (slack < 0) continue;
            i128 emin = P == 0 ? 0 : W - slack / P;
            if (emin < (step == 0 ? e0 : 0)) emin = step == 0 ? e0 : 0;
            if (emin < W) at = X + (step - 1) * W + emin;
        }
        if (at < 0) return RLT_EBACKEND; /* unreachable for need <= N */
        d->retry_after = at > INT64_MAX ? INT64_MAX : (rlt_ns)at;
    }
    i128 left = NW - weighted - (i128)curr_after * W;
    d->remaining = left <= 0 ? 0 : (int64_t)(left / W);
    if (curr_after > 0)
        d->reset_after = (rlt_ns)(X + W);
    else if (prev > 0)
        d->reset_after = (rlt_ns)X;
    return RLT_OK;
}

int rlt__parse_single(const rlt__limit *l, const redisReply *e, rlt_decision *d)
{
    if (l->p->block > 0) { /* multi.lua's reply of one limit (build_names) */
        if (e->type != REDIS_REPLY_ARRAY || e->elements != 1) return RLT_EBACKEND;
        return rlt__parse_decision(e->element[0], d);
    }
    if (l->rp.algo == RLT_GCRA || l->rp.algo == RLT_TOKEN_BUCKET || l->rp.algo == RLT_LEAKY_BUCKET)
        return parse_bucket(l, e, d);
    if (l->rp.algo == RLT_FIXED_WINDOW) return parse_fixed(l, e, d);
    if (l->rp.algo == RLT_SLIDING_WINDOW) return parse_sliding(l, e, d);
    return rlt__parse_decision(e, d);
}

int rlt__parse_module(const redisReply *e, size_t n, rlt_decision *dec)
{
    if (e->type != REDIS_REPLY_ARRAY || e->elements != n) return RLT_EBACKEND;
    for (size_t i = 0; i < n; i++) {
        const redisReply *x = e->element[i];
        if (x->type != REDIS_REPLY_STRING) return RLT_EBACKEND;
        long long v[7];
        const char *p = x->str, *end = x->str + x->len;
        for (int k = 0; k < 7; k++) {
            char *q;
            if (p >= end) return RLT_EBACKEND;
            v[k] = strtoll(p, &q, 10);
            if (q == p || (q < end && *q != ' ') || (k == 6) != (q == end)) return RLT_EBACKEND;
            p = q + 1;
        }
        if (v[3] < -1 || v[4] < 0 || v[5] < 0 || v[6] < 0) return RLT_EBACKEND;
        decision_from(&dec[i], v);
    }
    return RLT_OK;
}
