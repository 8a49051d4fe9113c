/* The Redis module's state layer (state.h): script values <-> core state blocks, decided by
 * rlt_decide.  The core's state layouts are read here as the algorithm files define them
 * (the algorithm files of src/core): fixed window {win, count}, sliding window {win, prev, curr},
 * token bucket {used, last ^ 2^63}, GCRA and leaky bucket {tat ^ 2^63}, sliding log {head, count,
 * ts[N]}, concurrency {last, reserved, {lease, expires}[N]}.
 *
 * GCRA and leaky bucket run with the origin at `now` (core now = 0): the core multiplies now by
 * scale_, which wall-clock nanoseconds would overflow for most rates, and their decisions depend
 * on tat - now only.  The scripts' amounts are in (us x scale) units, the core's in
 * (ns x scale_) units: a duration of x us is x*scale and 1000*x*scale_, so one script unit is
 * fac = 1000*scale_/scale core units (an integer: scale/scale_ = gcd(N,1000W)/gcd(N,W) divides
 * 1000), and every amount converts exactly both ways. */
#include "state.h"
#include "core/text.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

typedef __int128 i128;

#define SIGN (UINT64_C(1) << 63)

/* Splits "a:b[:c]" into exactly `n` integers. */
static bool parse_fields(const char *s, size_t len, int64_t *v, int n)
{
    size_t start = 0;
    for (int k = 0; k < n; k++) {
        size_t end = start;
        while (end < len && s[end] != ':')
            end++;
        if ((k < n - 1) != (end < len)) return false;
        if (!rlt__parse_i64(s + start, end - start, &v[k])) return false;
        start = end + 1;
    }
    return true;
}

int rlt__mpol_init(rlt__mpol *m, const rlt_policy *p)
{
    memset(m, 0, sizeof *m);
    /* Calendar windows would read the zone's file inside Redis: the library sends them to
     * the scripts instead (src/redis/call.c, build_module). */
    if (p->months != 0) return RLT_EINVAL;
    int rc = rlt__rpol_from(p, &m->rp);
    if (rc) return rc;
    m->p = *p;
    if (p->algo == RLT_SLIDING_LOG || p->algo == RLT_CONCURRENCY || p->algo == RLT_FIXED_WINDOW) {
        rc = rlt_policy_init(&m->pu, p->algo, p->limit, m->rp.W, p->burst, p->queue, p->delay);
        if (!rc && p->block > 0) /* its "ns" are us: so are its blocks' */
            rc = rlt_policy_set_block(&m->pu, m->rp.blk, m->rp.bfac, m->rp.bmax);
        if (rc) return rc;
    }
    m->btl = (size_t)rlt__block_tail(p, m->btail);
    int64_t f = 1000 * p->scale_;
    if (f % m->rp.scale != 0) return RLT_EINVAL; /* unreachable by the gcd argument above */
    m->fac = f / m->rp.scale;
    m->tl = (size_t)rlt__key_tail(p, m->tail);
    return RLT_OK;
}

bool rlt__mpol_is_string(const rlt__mpol *m)
{
    return m->p.algo != RLT_SLIDING_LOG && m->p.algo != RLT_CONCURRENCY;
}

size_t rlt__mpol_scratch(const rlt__mpol *m)
{
    return rlt__mpol_is_string(m) ? 0 : rlt_state_size(&m->pu);
}

int64_t rlt__mttl_ms(const rlt_decision *d, int64_t floor_ms)
{
    int64_t ms = rlt_retry_after_ms(d->reset_after);
    if (ms < floor_ms) ms = floor_ms;
    return ms < 1 ? 1 : ms;
}

/* A decision of the microsecond policy `pu`, in ns. */
static int64_t us_ns(int64_t us)
{
    int64_t ns;
    return __builtin_mul_overflow(us, RLT_NS_PER_US, &ns) ? INT64_MAX : ns;
}

static void us_to_ns(rlt_decision *d)
{
    if (d->retry_after > 0) d->retry_after = us_ns(d->retry_after);
    d->reset_after = us_ns(d->reset_after);
    d->delay = us_ns(d->delay);
}

static int64_t sat128(i128 v)
{
    return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

static int64_t ceil_div128(i128 a, int64_t b)
{
    return sat128((a + b - 1) / b);
}

/* ---- the penalty box's 16 bytes ---------------------------------------------------------- */

/* Core instants are (us - base) x mul: mul 1000 for the ns algorithms (base 0, or now for GCRA
 * and the leaky bucket, which run with the origin at now), 1 for those of `pu`. */
typedef struct tbase {
    int64_t base, mul;
} tbase;

static void blk_in(const rlt_policy *p, void *st, const rlt__mblk *b, tbase tb)
{
    if (p->block <= 0) return;
    int64_t f[2] = {0, 0}; /* all-zero: never blocked */
    if (b && b->set) {
        f[0] = (int64_t)((uint64_t)((b->until - tb.base) * tb.mul) ^ SIGN);
        f[1] = b->level;
    }
    memcpy((unsigned char *)st + rlt_state_size(p) - sizeof f, f, sizeof f);
}

static void blk_out(const rlt_policy *p, const void *st, rlt__mblk *b, tbase tb, bool *changed)
{
    *changed = false;
    if (p->block <= 0 || !b) return;
    int64_t f[2];
    memcpy(f, (const unsigned char *)st + rlt_state_size(p) - sizeof f, sizeof f);
    rlt__mblk n = {false, 0, 0};
    if (f[0] != 0 || f[1] != 0) {
        int64_t until = (int64_t)((uint64_t)f[0] ^ SIGN);
        n = (rlt__mblk){true, until / tb.mul + tb.base, f[1]}; /* a whole us: set from us */
    }
    *changed = n.set != b->set || n.until != b->until || n.level != b->level;
    *b = n;
}

int rlt__mblk_parse(const char *val, size_t vlen, rlt__mblk *b)
{
    *b = (rlt__mblk){false, 0, 0};
    if (!val) return RLT_OK;
    int64_t v[2];
    /* until <= now + the longest block: at most 2^52 + 2^50 us (and + W still x 1000 in int64) */
    if (!parse_fields(val, vlen, v, 2) || v[0] < 0 || v[0] > RLT__NOW_MAX + RLT__LIM || v[1] < 0 ||
        v[1] > 64)
        return RLT_ECORRUPT;
    *b = (rlt__mblk){true, v[0], v[1]};
    return RLT_OK;
}

size_t rlt__mblk_format(const rlt__mblk *b, char out[48])
{
    return (size_t)snprintf(out, 48, "%lld:%lld", (long long)b->until, (long long)b->level);
}

int64_t rlt__mblk_ttl_ms(const rlt__mpol *m, const rlt__mblk *b, int64_t now_us, int64_t floor_ms)
{
    int64_t end = b->until + (m->rp.bfac > 1 ? m->rp.W : 0);
    int64_t ms = end > now_us ? (end - now_us + 999) / 1000 : 0;
    if (ms < floor_ms) ms = floor_ms;
    return ms < 1 ? 1 : ms;
}

/* GCRA and leaky bucket when tat - now is beyond int64 in core units (a clock stepped far
 * back): certainly denied; the core's formulas in 128 bits. */
static void tat_huge(const rlt__mpol *m, i128 used, int64_t cost, rlt_decision *d)
{
    const rlt_policy *p = &m->p;
    int64_t need = cost > 0 ? cost : 1;
    memset(d, 0, sizeof *d);
    d->limit = rlt_policy_limit(p);
    d->reset_after = ceil_div128(used, p->scale_);
    i128 room;
    if (p->algo == RLT_GCRA) {
        if (need > p->burst) {
            d->retry_after = -1;
            return;
        }
        room = (i128)p->cap_ - (i128)need * p->unit_;
    } else {
        if (need > p->queue + 1) {
            d->retry_after = -1;
            return;
        }
        room = (i128)p->cap_ - (i128)(need - 1) * p->unit_;
    }
    d->retry_after = ceil_div128(used - room, p->scale_);
}

/* The penalty box around tat_huge's decision, where the core cannot hold the state: the rule of
 * src/core/block.c (its header has the maths) in microseconds, as lib/60_block.lua runs it. */
static void tat_huge_block(const rlt__mpol *m, int64_t now_us, int64_t cost, rlt_decision *d,
                           rlt__mblk *b, bool *bch)
{
    const rlt__rpol *r = &m->rp;
    if (r->blk <= 0 || !b) return;
    int64_t W = r->bfac > 1 ? r->W : 0;
    if (b->set && now_us < b->until) {
        if (d->retry_after < 0) return; /* can never fit: still -1 */
        int64_t left = (b->until - now_us) * RLT_NS_PER_US;
        int64_t mem = (b->until + W - now_us) * RLT_NS_PER_US;
        if (left > d->retry_after) d->retry_after = left;
        if (mem > d->reset_after) d->reset_after = mem;
        d->remaining = d->delay = d->lease = 0;
        return;
    }
    if (d->retry_after >= 0 && cost > 0) { /* always denied here: a breach */
        int64_t k = 0;
        if (b->set && now_us < b->until + r->W) {
            int64_t len = r->blk;
            for (int64_t i = 0; i < b->level && len < r->bmax; i++)
                len = len > r->bmax / r->bfac ? r->bmax : len * r->bfac;
            k = len >= r->bmax || b->level >= 64 ? b->level : b->level + 1;
        }
        int64_t len = r->blk;
        for (int64_t i = 0; i < k && len < r->bmax; i++)
            len = len > r->bmax / r->bfac ? r->bmax : len * r->bfac;
        *b = (rlt__mblk){true, now_us + len, k};
        *bch = true;
        if (len * RLT_NS_PER_US > d->retry_after) d->retry_after = len * RLT_NS_PER_US;
        d->remaining = 0;
    }
    if (b->set) {
        int64_t mem = (b->until + W - now_us) * RLT_NS_PER_US;
        if (mem > d->reset_after) d->reset_after = mem;
    }
}

static int tat_decide(const rlt__mpol *m, const char *val, size_t vlen, int64_t now_us,
                      int64_t cost, rlt_decision *d, char *out, size_t *outlen, rlt__mblk *b,
                      bool *bch)
{
    i128 used = 0; /* script units */
    if (val) {
        int64_t v[2] = {0, 0};
        if (!parse_fields(val, vlen, v, 1) && !parse_fields(val, vlen, v, 2)) return RLT_ECORRUPT;
        if (v[1] < 0 || v[1] >= m->rp.scale || v[0] < -RLT__NUM_VAL_MAX || v[0] > RLT__NUM_VAL_MAX)
            return RLT_ECORRUPT;
        int64_t q = v[0] - now_us;
        if (q >= 0) used = (i128)q * m->rp.scale + v[1];
    }
    i128 uc = used * m->fac;
    if (uc > INT64_MAX) {
        tat_huge(m, uc, cost, d);
        tat_huge_block(m, now_us, cost, d, b, bch);
        return RLT_OK;
    }
    uint64_t w[3] = {(uint64_t)(int64_t)uc ^ SIGN, 0, 0}; /* tat; the penalty box's 16 bytes */
    const tbase tb = {now_us, RLT_NS_PER_US};
    blk_in(&m->p, w, b, tb);
    int rc = rlt_decide(&m->p, w, 0, cost, d);
    if (rc) return rc;
    blk_out(&m->p, w, b, tb, bch);
    if (d->allowed && cost > 0) {
        int64_t after = (int64_t)(w[0] ^ SIGN);
        assert(after % m->fac == 0);
        after /= m->fac;
        int64_t sc = m->rp.scale, k = after / sc;
        int n = sc == 1 ? snprintf(out, RLT__MVAL_MAX, "%lld", (long long)(now_us + after))
                        : snprintf(out, RLT__MVAL_MAX, "%lld:%lld", (long long)(now_us + k),
                                   (long long)(after - k * sc));
        *outlen = (size_t)n;
    }
    return RLT_OK;
}

static int bucket_decide(const rlt__mpol *m, const char *val, size_t vlen, int64_t now_us,
                         int64_t cost, rlt_decision *d, char *out, size_t *outlen, rlt__mblk *b,
                         bool *bch)
{
    int64_t s[4] = {0, 0, 0, 0}; /* used, last ^ 2^63; zero = never charged; the box's 16 */
    if (val) {
        int64_t v[2];
        /* used above B x unit: a debt a settle charged (the settle script, rlt_settle) */
        if (!parse_fields(val, vlen, v, 2) || v[0] < 0 || v[0] > RLT__NUM_VAL_MAX ||
            v[1] < -RLT__NUM_VAL_MAX || v[1] > RLT__NUM_VAL_MAX)
            return RLT_ECORRUPT;
        if (__builtin_mul_overflow(v[0], m->fac, &s[0])) return RLT_ERANGE;
        s[1] = (int64_t)((uint64_t)(v[1] * RLT_NS_PER_US) ^ SIGN);
    }
    const tbase tb = {0, RLT_NS_PER_US};
    blk_in(&m->p, s, b, tb);
    int rc = rlt_decide(&m->p, s, now_us * RLT_NS_PER_US, cost, d);
    if (rc) return rc;
    blk_out(&m->p, s, b, tb, bch);
    if (d->allowed && cost > 0) {
        int64_t last = (int64_t)((uint64_t)s[1] ^ SIGN);
        assert(s[0] % m->fac == 0 && last % RLT_NS_PER_US == 0);
        *outlen = (size_t)snprintf(out, RLT__MVAL_MAX, "%lld:%lld", (long long)(s[0] / m->fac),
                                   (long long)(last / RLT_NS_PER_US));
    }
    return RLT_OK;
}

static int window_decide(const rlt__mpol *m, const char *val, size_t vlen, int64_t now_us,
                         int64_t cost, rlt_decision *d, char *out, size_t *outlen, rlt__mblk *b,
                         bool *bch)
{
    bool sliding = m->p.algo == RLT_SLIDING_WINDOW;
    int n = sliding ? 3 : 2;
    int64_t s[5] = {0, 0, 0, 0, 0}; /* the box's 16 bytes after the window's */
    if (val) {
        if (!parse_fields(val, vlen, s, n)) return RLT_ECORRUPT;
        /* a window's instants stay within the scripts' 2^53 us */
        if (s[0] > RLT__NUM_VAL_MAX / m->rp.W || s[0] < -RLT__NUM_VAL_MAX / m->rp.W)
            return RLT_ECORRUPT;
        /* above N: a debt a settle charged (settle.lua saturates it at 2^52); the core
         * weighs a sliding window's counts in 128 bits */
        for (int i = 1; i < n; i++)
            if (s[i] < 0 || s[i] > RLT__NUM_VAL_MAX) return RLT_ECORRUPT;
    }
    /* Fixed window in us (its replies are whole us), sliding window in ns (exact retry). */
    const rlt_policy *cp = sliding ? &m->p : &m->pu;
    const tbase tb = {0, sliding ? RLT_NS_PER_US : 1};
    blk_in(cp, s, b, tb);
    int rc = sliding ? rlt_decide(&m->p, s, now_us * RLT_NS_PER_US, cost, d)
                     : rlt_decide(&m->pu, s, now_us, cost, d);
    if (rc) return rc;
    blk_out(cp, s, b, tb, bch);
    if (!sliding) us_to_ns(d);
    if (d->allowed && cost > 0)
        *outlen = sliding ? (size_t)snprintf(out, RLT__MVAL_MAX, "%lld:%lld:%lld", (long long)s[0],
                                             (long long)s[1], (long long)s[2])
                          : (size_t)snprintf(out, RLT__MVAL_MAX, "%lld:%lld", (long long)s[0],
                                             (long long)s[1]);
    return RLT_OK;
}

int rlt__mstr_decide_blk(const rlt__mpol *m, const char *val, size_t vlen, int64_t now_us,
                         int64_t cost, rlt_decision *d, char out[RLT__MVAL_MAX], size_t *outlen,
                         rlt__mblk *b, bool *bchanged)
{
    *outlen = 0;
    bool ignored;
    if (!bchanged) bchanged = &ignored;
    *bchanged = false;
    if (now_us < 0 || now_us > RLT__NOW_MAX || cost < 0) return RLT_ERANGE;
    switch (m->p.algo) {
    case RLT_GCRA:
    case RLT_LEAKY_BUCKET:
        return tat_decide(m, val, vlen, now_us, cost, d, out, outlen, b, bchanged);
    case RLT_TOKEN_BUCKET:
        return bucket_decide(m, val, vlen, now_us, cost, d, out, outlen, b, bchanged);
    case RLT_FIXED_WINDOW:
    case RLT_SLIDING_WINDOW:
        return window_decide(m, val, vlen, now_us, cost, d, out, outlen, b, bchanged);
    default:
        return RLT_EINVAL;
    }
}

int rlt__mstr_decide(const rlt__mpol *m, const char *val, size_t vlen, int64_t now_us, int64_t cost,
                     rlt_decision *d, char out[RLT__MVAL_MAX], size_t *outlen)
{
    return rlt__mstr_decide_blk(m, val, vlen, now_us, cost, d, out, outlen, NULL, NULL);
}

/* ---- sliding log: a list of "t:c" runs ------------------------------------------------- */

int rlt__mlog_decide(const rlt__mpol *m, const char *const *items, const size_t *lens, size_t n,
                     int64_t now_us, int64_t cost, void *scratch, rlt_decision *d,
                     rlt__mlog_edit *e, bool *write)
{
    return rlt__mlog_decide_blk(m, items, lens, n, now_us, cost, scratch, d, e, write, NULL, NULL);
}

int rlt__mlog_decide_blk(const rlt__mpol *m, const char *const *items, const size_t *lens, size_t n,
                         int64_t now_us, int64_t cost, void *scratch, rlt_decision *d,
                         rlt__mlog_edit *e, bool *write, rlt__mblk *b, bool *bchanged)
{
    bool ignored;
    if (!bchanged) bchanged = &ignored;
    *bchanged = false;
    *write = false;
    if (now_us < 0 || now_us > RLT__NOW_MAX || cost < 0) return RLT_ERANGE;
    const int64_t N = m->pu.limit, W = m->pu.period;
    int64_t *st = scratch; /* head, count, ts[N] */
    if ((int64_t)n > N) return RLT_ECORRUPT;
    int64_t total = 0, gone_runs = 0, last_t = 0, last_c = 0;
    bool live_seen = false;
    for (size_t i = 0; i < n; i++) {
        int64_t v[2];
        if (!parse_fields(items[i], lens[i], v, 2) || v[1] <= 0 || v[1] > N - total || v[0] < 0 ||
            v[0] > RLT__NUM_VAL_MAX || (i > 0 && v[0] < last_t))
            return RLT_ECORRUPT;
        for (int64_t k = 0; k < v[1]; k++)
            st[2 + total + k] = v[0];
        total += v[1];
        if (!live_seen && now_us - v[0] >= W)
            gone_runs++;
        else
            live_seen = true;
        last_t = v[0];
        last_c = v[1];
    }
    st[0] = 0;
    st[1] = total;
    const tbase tb = {0, 1};
    blk_in(&m->pu, st, b, tb);
    int rc = rlt_decide(&m->pu, st, now_us, cost, d);
    if (rc) return rc;
    blk_out(&m->pu, st, b, tb, bchanged);
    us_to_ns(d);
    if (!(d->allowed && cost > 0)) return RLT_OK;
    /* The newest entry is the one just charged (the core records at max(now, newest)). */
    int64_t newest = st[2 + (st[0] + st[1] - 1) % N];
    memset(e, 0, sizeof *e);
    *write = true;
    if (gone_runs == (int64_t)n) {
        e->del = true;
        e->ilen = (size_t)snprintf(e->item, sizeof e->item, "%lld:%lld", (long long)newest,
                                   (long long)cost);
        return RLT_OK;
    }
    e->trim = gone_runs;
    e->lset = last_t == newest;
    e->ilen = (size_t)snprintf(e->item, sizeof e->item, "%lld:%lld", (long long)newest,
                               (long long)(e->lset ? last_c + cost : cost));
    return RLT_OK;
}

/* ---- concurrency: a hash {n: last lease, s<i>: "lease:expiry"} ------------------------- */

static int cc_load(const rlt__mpol *m, const char *const *kv, const size_t *kvlen, size_t npairs,
                   int64_t *st)
{
    const int64_t N = m->pu.limit;
    memset(st, 0, (size_t)(2 + 2 * N) * sizeof *st);
    for (size_t i = 0; i < npairs; i++) {
        const char *f = kv[2 * i], *v = kv[2 * i + 1];
        size_t fl = kvlen[2 * i], vl = kvlen[2 * i + 1];
        int64_t x[2], idx;
        if (fl == 1 && f[0] == 'n') {
            if (!rlt__parse_i64(v, vl, &x[0]) || x[0] < 0) return RLT_ECORRUPT;
            st[0] = x[0];
        } else if (fl >= 2 && f[0] == 's' && rlt__parse_i64(f + 1, fl - 1, &idx) && idx >= 0 &&
                   idx < N && parse_fields(v, vl, x, 2) && x[0] > 0 && x[1] >= -RLT__NUM_VAL_MAX &&
                   x[1] <= RLT__NUM_VAL_MAX) {
            st[2 + 2 * idx] = x[0];
            st[3 + 2 * idx] = x[1];
        } else {
            return RLT_ECORRUPT;
        }
    }
    for (int64_t i = 0; i < N; i++)
        if (st[2 + 2 * i] > st[0]) return RLT_ECORRUPT; /* ids come from the last one */
    return RLT_OK;
}

int rlt__mcc_decide(const rlt__mpol *m, const char *const *kv, const size_t *kvlen, size_t npairs,
                    int64_t now_us, int64_t cost, void *scratch, rlt_decision *d, int64_t *slot,
                    char val[48], size_t *vlen)
{
    return rlt__mcc_decide_blk(m, kv, kvlen, npairs, now_us, cost, scratch, d, slot, val, vlen,
                               NULL, NULL);
}

int rlt__mcc_decide_blk(const rlt__mpol *m, const char *const *kv, const size_t *kvlen,
                        size_t npairs, int64_t now_us, int64_t cost, void *scratch, rlt_decision *d,
                        int64_t *slot, char val[48], size_t *vlen, rlt__mblk *b, bool *bchanged)
{
    bool ignored;
    if (!bchanged) bchanged = &ignored;
    *bchanged = false;
    *slot = -1;
    if (now_us < 0 || now_us > RLT__NOW_MAX || cost < 0) return RLT_ERANGE;
    int64_t *st = scratch;
    int rc = cc_load(m, kv, kvlen, npairs, st);
    if (rc) return rc;
    const tbase tb = {0, 1};
    blk_in(&m->pu, st, b, tb);
    rc = rlt_decide(&m->pu, st, now_us, cost, d);
    if (rc) return rc;
    blk_out(&m->pu, st, b, tb, bchanged);
    us_to_ns(d);
    if (d->lease > 0) {
        for (int64_t i = 0; i < m->pu.limit; i++)
            if (st[2 + 2 * i] == d->lease) *slot = i;
        assert(*slot >= 0);
        *vlen = (size_t)snprintf(val, 48, "%lld:%lld", (long long)d->lease,
                                 (long long)st[3 + 2 * *slot]);
    }
    return RLT_OK;
}

int rlt__mcc_release(const rlt__mpol *m, const char *const *kv, const size_t *kvlen, size_t npairs,
                     int64_t now_us, int64_t lease, void *scratch, int64_t *slot)
{
    *slot = -1;
    int64_t *st = scratch;
    int rc = cc_load(m, kv, kvlen, npairs, st);
    if (rc) return rc;
    if (lease <= 0) return RLT_ENOENT;
    for (int64_t i = 0; i < m->pu.limit; i++)
        if (st[2 + 2 * i] == lease) *slot = i;
    return rlt_release(&m->pu, st, now_us, lease);
}
