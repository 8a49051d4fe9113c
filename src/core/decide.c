/* The public decision functions: argument checks at the boundary, then the algorithm's
 * operations (algo.h). */
#include "algo.h"

#include "ratelimit/adaptive.h"

static bool valid(const rlt_policy *p)
{
    return p && rlt__algo_known(p) && p->scale_ > 0 && p->unit_ > 0 && p->limit > 0 &&
           p->period > 0 && (p->months == 0 || rlt__calendar_valid(p));
}

/* The algorithm, inside the penalty box when the policy has one (block.c). */
static int dispatch(const rlt_policy *p, void *st, rlt_ns now, int64_t cost, rlt_decision *d,
                    int commit)
{
    if (p->block > 0) return rlt__block_decide(p, st, now, cost, d, commit);
    return rlt__algo_decide(p, st, now, cost, d, commit);
}

int rlt_decide(const rlt_policy *p, void *state, rlt_ns now, int64_t cost, rlt_decision *d)
{
    if (!valid(p) || !state || !d || cost < 0) return RLT_EINVAL;
    if (p->algo == RLT_CONCURRENCY && cost > 1) return RLT_EINVAL;
    return dispatch(p, state, now, cost, d, 1);
}

int rlt_when(const rlt_policy *p, const void *state, rlt_ns now, int64_t cost, rlt_ns *at)
{
    if (!valid(p) || !state || !at || cost < 1) return RLT_EINVAL;
    if (p->algo == RLT_CONCURRENCY && cost > 1) return RLT_EINVAL;
    rlt_decision d;
    /* commit = 0: the algorithms only read the state on this path. */
    int rc = dispatch(p, (void *)state, now, cost, &d, 0);
    if (rc) return rc;
    if (d.allowed)
        *at = now;
    else if (d.retry_after < 0)
        return RLT_ENEVER;
    else
        *at = rlt__sat_add(now, d.retry_after);
    return RLT_OK;
}

int rlt_release(const rlt_policy *p, void *state, rlt_ns now, int64_t lease)
{
    if (!valid(p) || !state || p->algo != RLT_CONCURRENCY) return RLT_EINVAL;
    return rlt__concurrency_release(p, state, now, lease);
}

int rlt_release_report(const rlt_policy *p, void *state, rlt_ns now, int64_t lease,
                       rlt_ns latency_ns, int outcome)
{
    if (!valid(p) || !state || p->algo != RLT_CONCURRENCY || latency_ns < 0 ||
        (outcome != RLT_OUTCOME_SUCCESS && outcome != RLT_OUTCOME_DROPPED &&
         outcome != RLT_OUTCOME_IGNORE))
        return RLT_EINVAL;
    if (latency_ns > RLT_ADAPT_LATENCY_MAX || now < 0) return RLT_ERANGE;
    return rlt__concurrency_release_report(p, state, now, lease, latency_ns, outcome);
}

int64_t rlt_concurrency_limit(const rlt_policy *p, const void *state)
{
    if (!valid(p) || !state || p->algo != RLT_CONCURRENCY) return -1;
    return rlt__concurrency_cap(p, state);
}

bool rlt_is_fresh(const rlt_policy *p, const void *state, rlt_ns now)
{
    if (!valid(p) || !state) return false;
    return rlt__algos[p->algo].fresh(p, state, now) &&
           (p->block <= 0 || rlt__block_fresh(p, state, now));
}

int rlt_state_shift(const rlt_policy *p, void *state, rlt_ns delta)
{
    if (!valid(p) || !state) return RLT_EINVAL;
    int rc = rlt__algos[p->algo].shift(p, state, delta);
    if (rc == RLT_OK && p->block > 0) rlt__block_shift(p, state, delta);
    return rc;
}

/* ceil(v x num / den) for v >= 0, num >= 0, den > 0; RLT_ERANGE if it leaves int64. */
static int scale_up(int64_t v, int64_t num, int64_t den, int64_t *out)
{
    __int128 x = (__int128)v * num;
    __int128 q = x / den + (x % den != 0);
    if (q > INT64_MAX) return RLT_ERANGE;
    *out = (int64_t)q;
    return RLT_OK;
}

/* Carries used amount `v` (0 <= v; above from_cap it is a debt left by rlt_settle) scaled by
 * num/den, rounded up: the part within the old capacity is capped at the new one (a policy
 * change never leaves a key more than full), and a debt carries over on top of it, scaled the
 * same way: a change of policy forgives no debt (and a reload of the same policy changes no
 * state at all: rlt_store_set_policy skips it). */
static int carry(int64_t v, int64_t from_cap, int64_t to_cap, int64_t num, int64_t den,
                 int64_t *out)
{
    int64_t debt = v > from_cap ? v - from_cap : 0, in, owed;
    int rc = scale_up(v - debt, num, den, &in);
    if (!rc) rc = scale_up(debt, num, den, &owed);
    if (rc) return rc;
    if (in > to_cap) in = to_cap;
    return __builtin_add_overflow(in, owed, out) ? RLT_ERANGE : RLT_OK;
}

/* One count (window algorithms): keep the amount, or keep the share of N. */
static int convert_count(const rlt_policy *from, const rlt_policy *to, rlt_convert how,
                         int64_t *count)
{
    return how == RLT_CONVERT_SCALE
               ? carry(*count, from->limit, to->limit, to->limit, from->limit, count)
               : carry(*count, from->limit, to->limit, 1, 1, count);
}

int rlt_state_convert(const rlt_policy *from, const rlt_policy *to, void *state, rlt_ns now,
                      rlt_convert how)
{
    if (!valid(from) || !valid(to) || !state || from->algo != to->algo) return RLT_EINVAL;
    /* The penalty box's fields stay as they are (a block keeps its end under the new policy);
     * a policy gaining or losing block= changes the state's size: the caller resets. */
    if ((from->block > 0) != (to->block > 0)) return RLT_EINVAL;
    int64_t v, c[2];
    int rc;
    switch (from->algo) {
    case RLT_GCRA:
    case RLT_TOKEN_BUCKET:
        if ((rc = rlt__bucket_used(from, state, now, &v))) return rc;
        rc = how == RLT_CONVERT_SCALE ? carry(v, from->cap_, to->cap_, to->cap_, from->cap_, &v)
                                      : carry(v, from->cap_, to->cap_, to->unit_, from->unit_, &v);
        if (rc) return rc;
        return rlt__bucket_set_used(to, state, now, v);
    case RLT_LEAKY_BUCKET:
        if ((rc = rlt__leaky_backlog(from, state, now, &v))) return rc;
        rc = how == RLT_CONVERT_SCALE
                 ? scale_up(v, to->cap_ + to->unit_, from->cap_ + from->unit_, &v)
                 : scale_up(v, to->unit_, from->unit_, &v);
        if (rc) return rc;
        return rlt__leaky_set_backlog(to, state, now, v);
    case RLT_FIXED_WINDOW:
        rlt__fixed_window_counts(from, state, now, &v, 0);
        if ((rc = convert_count(from, to, how, &v))) return rc;
        /* Window indices of calendar and plain windows do not compare: start afresh. */
        if (!rlt_policy_calendar_equal(from, to)) memset(state, 0, 16);
        return rlt__fixed_window_counts(to, state, now, &v, 1);
    case RLT_SLIDING_WINDOW:
        rlt__sliding_window_counts(from, state, now, c, 0);
        if ((rc = convert_count(from, to, how, &c[0])) ||
            (rc = convert_count(from, to, how, &c[1])))
            return rc;
        return rlt__sliding_window_counts(to, state, now, c, 1);
    case RLT_SLIDING_LOG:
    case RLT_CONCURRENCY:
        /* Same slots: the entries keep their meaning under the new period; an adaptive limit
         * keeps what it learned only under the same controller and bounds. */
        return from->limit == to->limit && from->adapt == to->adapt &&
                       from->adapt_min == to->adapt_min && from->adapt_init == to->adapt_init
                   ? RLT_OK
                   : RLT_EINVAL;
    default:
        return RLT_EINVAL;
    }
}

/* Invariants of each state layout (see the algorithm files).  Time values may be anything:
 * every instant is handled with saturating arithmetic; counts and indices may not. */
static bool algo_valid(const rlt_policy *p, const void *state);

bool rlt_state_valid(const rlt_policy *p, const void *state)
{
    if (!valid(p) || !state) return false;
    return algo_valid(p, state) && (p->block <= 0 || rlt__block_valid(p, state));
}

static bool algo_valid(const rlt_policy *p, const void *state)
{
    const unsigned char *b = state;
    int64_t w[3];
    switch (p->algo) {
    case RLT_GCRA:
    case RLT_LEAKY_BUCKET:
        return true; /* any tat is a time; backlog is computed with saturation */
    case RLT_TOKEN_BUCKET:
        memcpy(w, b, 16);
        return w[0] >= 0; /* above cap_: a debt (rlt_settle) */
    case RLT_FIXED_WINDOW:
        memcpy(w, b, 16);
        return w[1] >= 0; /* above N: a debt (rlt_settle) */
    case RLT_SLIDING_WINDOW:
        memcpy(w, b, 24);
        return w[1] >= 0 && w[2] >= 0; /* above N: a debt (rlt_settle) */
    case RLT_SLIDING_LOG: {
        memcpy(w, b, 16);
        /* head's bits 32..62: the slots of a compact state, 0 for N (sliding_log.h) */
        int64_t n = w[0] >> 32 ? w[0] >> 32 : p->limit, head = w[0] & INT64_C(0xffffffff);
        int64_t count = w[1], prev = INT64_MIN, t;
        if (w[0] < 0 || n > p->limit || head >= n || count < 0 || count > n) return false;
        for (int64_t i = 0; i < count; i++) {
            memcpy(&t, b + 16 + 8 * ((head + i) % n), 8);
            if (t < prev) return false;
            prev = t;
        }
        return true;
    }
    case RLT_CONCURRENCY: {
        memcpy(w, b, 8);
        for (int64_t i = 0; i < p->limit; i++) {
            int64_t lease;
            memcpy(&lease, b + 16 + 16 * i, 8);
            if (lease < 0 || lease > w[0]) return false; /* ids come from last_lease */
        }
        return rlt__concurrency_adapt_valid(p, b);
    }
    default:
        return false;
    }
}
