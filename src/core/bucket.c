/* Token bucket and GCRA: one arithmetic, two representations.
 *
 * Both count the *used* part of the bucket in scaled units: one unit of cost is unit_ and
 * one nanosecond of refill is scale_ (unit_/scale_ = W/N exactly, reduced by their gcd), so
 * refill is an integer product and nothing drifts.  The bucket holds cap_ = B x unit_.
 *
 *   token bucket: state {used, last}; used(now) = max(0, used - (now - last) x scale_),
 *                 with now - last clamped at 0 so a clock stepping back neither mints nor drains.
 *   GCRA:         state {tat}, the theoretical arrival time in ns x scale_;
 *                 used(now) = max(0, tat - now x scale_).
 *
 * With a clock that never steps back the two used(now) are the same number, so they make the
 * same decisions, with the same remaining, retry_after and reset_after.  A GCRA clock stepping
 * back sees a fuller bucket (it drains for a while, never mints). */
#include "internal.h"

typedef struct tb_state {
    int64_t used; /* scaled units; 0 = full bucket */
    int64_t last; /* ns: latest `now` that charged the bucket, sign bit flipped so that the
                     all-zero fresh state means INT64_MIN ("never"), not t = 0 */
} tb_state;

static tb_state tb_load(const void *st)
{
    tb_state s;
    memcpy(&s, st, sizeof s);
    s.last = (int64_t)((uint64_t)s.last ^ (UINT64_C(1) << 63));
    return s;
}

static void tb_store(void *st, tb_state s)
{
    s.last = (int64_t)((uint64_t)s.last ^ (UINT64_C(1) << 63));
    memcpy(st, &s, sizeof s);
}

/* Stores the bucket after a charge at `now`: GCRA its word `tat` (now x scale_ + used, checked
 * by the caller), a token bucket `used` and the latest charge. */
static void store_used(const rlt_policy *p, void *st, rlt_ns now, int64_t tat, int64_t used)
{
    if (p->algo == RLT_GCRA) {
        rlt__tat_store(st, tat);
        return;
    }
    tb_state s = tb_load(st);
    s.used = used;
    if (now > s.last) s.last = now;
    tb_store(st, s);
}

/* used(now) of either representation; *now_s gets now x scale_ for GCRA.  *wait gets how
 * long refill is held back: a token bucket whose clock stepped back refills only from its
 * last charge on (0 otherwise). */
static int used_at(const rlt_policy *p, const void *st, rlt_ns now, int64_t *used, int64_t *now_s,
                   rlt_ns *wait)
{
    *wait = 0;
    if (p->algo == RLT_GCRA) return rlt__tat_ahead(p, st, now, used, now_s);
    tb_state s = tb_load(st);
    int64_t elapsed = rlt__sat_sub(now, s.last), refill;
    if (elapsed < 0 && s.used > 0) *wait = rlt__sat_sub(s.last, now);
    if (elapsed <= 0 || s.used == 0)
        *used = s.used;
    else if (rlt__mul_overflow(elapsed, p->scale_, &refill) || refill >= s.used)
        *used = 0;
    else
        *used = s.used - refill;
    return RLT_OK;
}

int rlt__bucket_decide(const rlt_policy *p, void *st, rlt_ns now, int64_t cost, rlt_decision *d,
                       int commit)
{
    int64_t used, now_s = 0;
    rlt_ns wait;
    int rc = used_at(p, st, now, &used, &now_s, &wait);
    if (rc) return rc;

    const int64_t cap = p->cap_, unit = p->unit_;
    int64_t need = cost > 0 ? cost : 1; /* a peek asks about a cost-1 request */
    rlt__decision_clear(d, p->burst);
    if (need > p->burst) { /* can never fit, however long one waits */
        d->retry_after = -1;
        d->remaining = used >= cap ? 0 : (cap - used) / unit;
        d->reset_after = rlt__sat_add(wait, rlt__ceil_div(used, p->scale_));
        return RLT_OK;
    }
    int64_t need_s = need * unit; /* <= cap: cannot overflow */
    d->allowed = used <= cap - need_s;
    int64_t after = used;
    if (d->allowed) {
        after = used + (cost > 0 ? need_s : 0);
    } else {
        d->retry_after = rlt__sat_add(wait, rlt__ceil_div(used - (cap - need_s), p->scale_));
    }
    d->remaining = after >= cap ? 0 : (cap - after) / unit;
    d->reset_after = p->scale_ == 1 ? after : rlt__ceil_div(after, p->scale_);
    if (wait) d->reset_after = rlt__sat_add(d->reset_after, wait);

    int64_t tat = 0; /* checked even when only asked (rlt_when), to answer as decide would */
    if (p->algo == RLT_GCRA && d->allowed && cost > 0 && __builtin_add_overflow(now_s, after, &tat))
        return RLT_ERANGE;
    if (commit && d->allowed && cost > 0) store_used(p, st, now, tat, after);
    return RLT_OK;
}

bool rlt__bucket_fresh(const rlt_policy *p, const void *st, rlt_ns now)
{
    int64_t used, now_s;
    rlt_ns wait;
    if (used_at(p, st, now, &used, &now_s, &wait)) return false;
    return used == 0;
}

/* Saturating toward the past is harmless (the true instant is earlier still: less credit);
 * toward the future it would credit time that did not pass, so that is RLT_ERANGE. */
int rlt__bucket_shift(const rlt_policy *p, void *st, rlt_ns delta)
{
    if (p->algo == RLT_GCRA) return rlt__tat_shift(p, st, delta);
    tb_state s = tb_load(st);
    if (s.last == INT64_MIN) return RLT_OK; /* fresh stays fresh */
    int64_t moved;
    if (__builtin_add_overflow(s.last, delta, &moved)) {
        if (delta > 0) return RLT_ERANGE;
        moved = INT64_MIN + 1;
    }
    s.last = moved;
    tb_store(st, s);
    return RLT_OK;
}

/* Used amount at `now` in the policy's scaled units (for rlt_state_convert). */
int rlt__bucket_used(const rlt_policy *p, const void *st, rlt_ns now, int64_t *used)
{
    int64_t now_s;
    rlt_ns wait;
    return used_at(p, st, now, used, &now_s, &wait);
}

int rlt__bucket_set_used(const rlt_policy *p, void *st, rlt_ns now, int64_t used)
{
    if (p->algo == RLT_GCRA) return rlt__tat_set_ahead(p, st, now, used);
    tb_store(st, (tb_state){used, now});
    return RLT_OK;
}

/* Settles a reservation (settle.c has the contract and the proof that a refund never mints).
 * The state is first brought to `now` (refill applied), then: an extra charge adds x x unit_
 * even past the capacity (debt: used > cap_, repaid by refill like any use); a refund takes
 * back R = min(k x unit_, max(0, e x unit_ - elapsed x scale_), used(now)) scaled units, with
 * elapsed = max(0, latest - reserved_at) and latest the latest instant the bucket has seen
 * (token bucket: max(now, last); GCRA: now, see rlt_settle's contract): the refill since the
 * reservation is assumed to have repaid the reservation first, so only what it can still hold
 * is given back.  A debt past what int64 holds saturates (used = INT64_MAX, or tat = INT64_MAX
 * for GCRA): the bucket then stays empty for centuries, which no client can tell from more. */
int rlt__bucket_settle(const rlt_policy *p, void *st, rlt_ns now, rlt_ns reserved_at,
                       int64_t estimate, int64_t real)
{
    int64_t used, now_s = 0;
    rlt_ns wait;
    int rc = used_at(p, st, now, &used, &now_s, &wait);
    if (rc) return rc;
    int64_t after;
    if (real > estimate) {
        /* Debt saturates at what the state can hold (a GCRA word: tat <= INT64_MAX): charged
         * as far as it fits, the rest is beyond any wait a client could see anyway. */
        int64_t extra;
        if (rlt__mul_overflow(real - estimate, p->unit_, &extra)) extra = INT64_MAX;
        after = rlt__sat_add(used, extra);
        if (p->algo == RLT_GCRA && now_s > 0 && after > INT64_MAX - now_s)
            after = INT64_MAX - now_s;
    } else {
        int64_t k = (estimate - real) * p->unit_; /* <= estimate x unit_ <= cap_: no overflow */
        int64_t held = estimate * p->unit_, refilled;
        /* Refill since the reservation: up to the latest instant the bucket has seen (a token
         * bucket remembers it; a GCRA word does not, so its caller passes it as `now`). */
        rlt_ns latest = now;
        if (p->algo == RLT_TOKEN_BUCKET && tb_load(st).last > latest) latest = tb_load(st).last;
        rlt_ns elapsed = latest > reserved_at ? rlt__sat_sub(latest, reserved_at) : 0;
        if (rlt__mul_overflow(elapsed, p->scale_, &refilled) || refilled >= held)
            held = 0;
        else
            held -= refilled;
        int64_t r = k < held ? k : held;
        if (r > used) r = used;
        after = used - r;
    }
    /* A GCRA bucket refunded back to full is stored as fresh only if it was: keep the word. */
    int64_t tat = 0;
    if (p->algo == RLT_GCRA && __builtin_add_overflow(now_s, after, &tat)) return RLT_ERANGE;
    store_used(p, st, now, tat, after);
    return RLT_OK;
}
