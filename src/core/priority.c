/* Priority classes: the part of a limit each class may use.  Critical may use the whole
 * limit; each step down loses R = ceil(limit x reserve% / 100), so a reserve of 20 % keeps
 * the top fifth for critical and the next fifth for default and critical (Stripe keeps 20 %
 * of its concurrency for critical traffic).  The rule is the same for a rate limit's
 * remaining allowance and a concurrency limit's slots: the caller passes what is in use.
 * Integers only: limit <= 2^62 keeps limit x 100 and 2R within int64. */
#include "ratelimit/adaptive.h"

#include "internal.h"

static const char *const names[RLT_CLASS_COUNT] = {"critical", "default", "sheddable"};

int rlt_class_parse(const char *s, size_t len, rlt_class *c)
{
    if (!s || !c) return RLT_EINVAL;
    for (int i = 0; i < RLT_CLASS_COUNT; i++)
        if (strlen(names[i]) == len && memcmp(names[i], s, len) == 0) {
            *c = (rlt_class)i;
            return RLT_OK;
        }
    return RLT_EINVAL;
}

const char *rlt_class_name(rlt_class c)
{
    return (unsigned)c < RLT_CLASS_COUNT ? names[c] : "?";
}

int rlt_class_ceiling(int64_t limit, int reserve_pct, rlt_class c, int64_t *ceiling)
{
    if (!ceiling || limit < 0 || limit > INT64_MAX / 128 || reserve_pct < 0 || reserve_pct > 100 ||
        (unsigned)c >= RLT_CLASS_COUNT)
        return RLT_EINVAL;
    int64_t r = rlt__ceil_div(limit * reserve_pct, 100);
    int64_t top = limit - (int64_t)c * r;
    *ceiling = top > 0 ? top : 0;
    return RLT_OK;
}

int rlt_class_admits(int64_t limit, int reserve_pct, rlt_class c, int64_t in_use, int64_t cost,
                     bool *admit)
{
    int64_t top;
    if (!admit || in_use < 0 || cost < 0) return RLT_EINVAL;
    int rc = rlt_class_ceiling(limit, reserve_pct, c, &top);
    if (rc) return rc;
    *admit = in_use <= top && cost <= top - in_use;
    return RLT_OK;
}

/* What a decision reports as its limit: the burst of a token bucket or GCRA, the queue + 1 of a
 * leaky bucket, N otherwise; the ceilings are shares of it. */
static int64_t capacity(const rlt_policy *p, const void *st)
{
    /* an adaptive concurrency limit: the classes share the limit in force now */
    if (p->algo == RLT_CONCURRENCY && p->adapt && p->limit > 0 && p->limit <= RLT_CONCURRENCY_MAX)
        return rlt__concurrency_cap(p, st);
    if (p->algo == RLT_TOKEN_BUCKET || p->algo == RLT_GCRA) return p->burst;
    if (p->algo == RLT_LEAKY_BUCKET) return p->queue + 1;
    return p->limit;
}

int rlt_decide_class(const rlt_policy *p, void *state, rlt_ns now, int64_t cost, rlt_class c,
                     int reserve_pct, rlt_decision *d)
{
    int64_t top;
    if (!p || !state || !d || cost < 0) return RLT_EINVAL;
    if (reserve_pct == -1) reserve_pct = p->reserve; /* the policy's reserve= */
    int rc = rlt_class_ceiling(capacity(p, state), reserve_pct, c, &top);
    if (rc) return rc;
    if (top == capacity(p, state)) return rlt_decide(p, state, now, cost, d);
    if (p->algo == RLT_CONCURRENCY) {
        /* rlt_decide's own checks of a concurrency policy, without a call per decision */
        if (cost > 1 || p->block > 0 || p->limit <= 0 || p->limit > RLT_CONCURRENCY_MAX ||
            p->period <= 0 || p->scale_ <= 0 || p->unit_ <= 0)
            return RLT_EINVAL;
        return rlt__concurrency_decide_under(p, state, now, cost, top, d, 1);
    }
    /* Any other algorithm: admitted when a request of cost + R would be now (R = limit - top,
     * what the class may not use), then charged its own cost; the first pass only reads. */
    int64_t reserve = capacity(p, state) - top, need;
    if (__builtin_add_overflow(cost > 0 ? cost : 1, reserve, &need)) return RLT_ERANGE;
    rlt_ns at = now;
    int fits = rlt_when(p, state, now, need, &at);
    if (fits != RLT_OK && fits != RLT_ENEVER) return fits;
    if (fits == RLT_ENEVER || at > now) {
        if ((rc = rlt_decide(p, state, now, 0, d)) != RLT_OK) return rc; /* nothing charged */
        d->allowed = false;
        d->lease = 0;
        d->delay = 0;
        d->retry_after = fits == RLT_ENEVER ? -1 : at - now;
    } else if ((rc = rlt_decide(p, state, now, cost, d)) != RLT_OK) {
        return rc;
    }
    d->limit = top;
    d->remaining = d->remaining > reserve ? d->remaining - reserve : 0;
    return RLT_OK;
}
