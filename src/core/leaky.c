/* Leaky bucket as a shaper, in nginx's two-stage form (limit_req burst=Q delay=D).
 *
 * The state is one word: the time the queue drains, tat, in ns x scale_ (see bucket.c for the
 * scaled units; one request is unit_ = W/N ns x scale_).  A request at `now` finds a backlog
 * b = max(0, tat - now): it is sent after b, so accepted requests leave exactly W/N apart.
 * It is rejected when b > Q x W/N (more than Q requests' worth already waiting: nginx's
 * "excess > burst"); requests within the first D of the queue pass at once (nginx's delay=D),
 * the rest wait b - D x W/N.  Integer per-second rates on whole-millisecond traffic give
 * nginx's decisions and, truncated to milliseconds, its delays; elsewhere this is exact where
 * nginx rounds to 0.001 r/s and 1 ms.  A cost c takes c consecutive send slots. */
#include "internal.h"

int rlt__leaky_decide(const rlt_policy *p, void *st, rlt_ns now, int64_t cost, rlt_decision *d,
                      int commit)
{
    int64_t backlog, now_s;
    int rc = rlt__tat_ahead(p, st, now, &backlog, &now_s);
    if (rc) return rc;
    const int64_t cap = p->cap_, unit = p->unit_;
    int64_t need = cost > 0 ? cost : 1;
    rlt__decision_clear(d, p->queue + 1);
    int64_t remaining_now = backlog > cap ? 0 : (cap - backlog) / unit + 1;
    if (need > p->queue + 1) {
        d->retry_after = -1;
        d->remaining = remaining_now;
        d->reset_after = rlt__ceil_div(backlog, p->scale_);
        return RLT_OK;
    }
    int64_t extra = (need - 1) * unit; /* <= cap */
    d->allowed = backlog <= cap - extra;
    int64_t after = backlog;
    if (d->allowed) {
        if (backlog > p->free_) d->delay = rlt__ceil_div(backlog - p->free_, p->scale_);
        if (cost > 0 && __builtin_add_overflow(backlog, need * unit, &after)) return RLT_ERANGE;
    } else {
        d->retry_after = rlt__ceil_div(backlog - (cap - extra), p->scale_);
    }
    d->remaining = after > cap ? 0 : (cap - after) / unit + 1;
    d->reset_after = rlt__ceil_div(after, p->scale_);
    int64_t tat = 0; /* checked even when only asked (rlt_when), to answer as decide would */
    if (d->allowed && cost > 0 && __builtin_add_overflow(now_s, after, &tat)) return RLT_ERANGE;
    if (commit && d->allowed && cost > 0) rlt__tat_store(st, tat);
    return RLT_OK;
}

bool rlt__leaky_fresh(const rlt_policy *p, const void *st, rlt_ns now)
{
    int64_t backlog, now_s;
    if (rlt__tat_ahead(p, st, now, &backlog, &now_s)) return false;
    return backlog == 0;
}

int rlt__leaky_shift(const rlt_policy *p, void *st, rlt_ns delta)
{
    return rlt__tat_shift(p, st, delta);
}

int rlt__leaky_backlog(const rlt_policy *p, const void *st, rlt_ns now, int64_t *backlog)
{
    int64_t now_s;
    return rlt__tat_ahead(p, st, now, backlog, &now_s);
}

int rlt__leaky_set_backlog(const rlt_policy *p, void *st, rlt_ns now, int64_t backlog)
{
    return rlt__tat_set_ahead(p, st, now, backlog);
}
