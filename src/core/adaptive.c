/* Adaptive concurrency limits: a limit between a floor and a ceiling, learned from what each
 * finished request reports (latency, outcome, how many were in flight when it started).
 *
 * State (rlt_adapt_state, 32 bytes, all zero = fresh): the limit x 1000, so that growth by
 * less than one request per release accumulates; for Vegas the least latency seen since the
 * last probe (rtt_noload) and when that probe began; for AIMD probe_at is the instant of the
 * last cut.
 *
 * Both controllers move the limit once per round trip, as TCP does: a release moves it by
 * 1/L of the round trip's step (L = the current limit), so L releases, about one round trip
 * of traffic at the limit, make one whole step, whatever the request rate.
 *
 * AIMD (Netflix's AIMDLimit, TCP Reno's window): a success while at least half the limit is
 * in use adds 1 per round trip; a drop (reported, or a success slower than slow_ns) multiplies
 * the limit by backoff_pm / 1000, at most once per round trip (a burst of drops from one
 * overload cuts once, not to the floor).
 *
 * Vegas (Netflix's VegasLimit, TCP Vegas): queue = ceil(L x (rtt - rtt_noload) / rtt), the
 * requests waiting rather than served; with d = max(1, floor(log10 L)), alpha = 3d, beta = 6d:
 * queue <= d grows by beta per round trip, queue < alpha by d, queue > beta shrinks by the
 * excess (queue - beta, at least d: the waiting requests beyond beta are removed in one round
 * trip, so a capacity that halves is followed within a few round trips), else holds.  A drop
 * shrinks by d.  Releases while less than half the limit is in use say nothing about the
 * limit (the client is the bottleneck) and are ignored, as in Netflix's.  rtt_noload is taken
 * afresh probe_ns after it was last set, so a backend that became slower for good is learned.
 *
 * Everything is integer: L <= 65536 and rtt <= 1 h keep L x rtt below 2^58. */
#include "ratelimit/adaptive.h"

#include "internal.h"

#define MILLI 1000

static bool policy_valid(const rlt_adapt_policy *p)
{
    return p && (p->algo == RLT_ADAPT_AIMD || p->algo == RLT_ADAPT_VEGAS) && p->floor >= 1 &&
           p->floor <= p->ceiling && p->ceiling <= RLT_CONCURRENCY_MAX && p->initial >= p->floor &&
           p->initial <= p->ceiling && p->slow_ns >= 0 && p->slow_ns <= RLT_ADAPT_LATENCY_MAX &&
           p->backoff_pm >= 500 && p->backoff_pm <= 999 && p->probe_ns >= RLT_NS_PER_MS &&
           p->probe_ns <= 86400 * RLT_NS_PER_S;
}

int rlt_adapt_policy_check(rlt_adapt_policy *p)
{
    if (!p) return RLT_EINVAL;
    rlt_adapt_policy q = *p;
    if (q.backoff_pm == 0) q.backoff_pm = 900;
    if (q.probe_ns == 0) q.probe_ns = 30 * RLT_NS_PER_S;
    if (!policy_valid(&q)) return RLT_EINVAL;
    *p = q;
    return RLT_OK;
}

static int64_t clamp_milli(const rlt_adapt_policy *p, int64_t m)
{
    if (m < p->floor * MILLI) return p->floor * MILLI;
    if (m > p->ceiling * MILLI) return p->ceiling * MILLI;
    return m;
}

static int64_t current_milli(const rlt_adapt_policy *p, const rlt_adapt_state *s)
{
    return s->limit_milli == 0 ? p->initial * MILLI : clamp_milli(p, s->limit_milli);
}

int64_t rlt_adapt_limit(const rlt_adapt_policy *p, const rlt_adapt_state *s)
{
    assert(policy_valid(p) && s);
    return current_milli(p, s) / MILLI;
}

/* floor(log10 x), at least 1. */
static int64_t log10_at_least_1(int64_t x)
{
    int64_t d = 0;
    while (x >= 10) {
        x /= 10;
        d++;
    }
    return d > 1 ? d : 1;
}

/* One round trip's step (whole requests) spread over L releases, in milli. */
static int64_t per_release(int64_t step, int64_t l_milli)
{
    int64_t l = l_milli / MILLI > 0 ? l_milli / MILLI : 1;
    int64_t m = step * MILLI / l;
    return m != 0 ? m : (step > 0 ? 1 : -1);
}

static int64_t aimd(const rlt_adapt_policy *p, rlt_adapt_state *s, rlt_ns now, rlt_ns latency,
                    int64_t in_flight, bool drop, int64_t l)
{
    if (p->slow_ns > 0 && latency > p->slow_ns) drop = true;
    if (drop) {
        /* once per round trip: the cut waits until the last one's round trip has passed */
        if (s->probe_at != 0 && now >= s->probe_at && now - s->probe_at < latency) return l;
        s->probe_at = now != 0 ? now : 1;
        return l / MILLI * p->backoff_pm + l % MILLI * p->backoff_pm / MILLI;
    }
    if (in_flight * 2 * MILLI < l) return l;
    return l + per_release(1, l);
}

static int64_t vegas(const rlt_adapt_policy *p, rlt_adapt_state *s, rlt_ns now, rlt_ns latency,
                     int64_t in_flight, bool drop, int64_t l)
{
    rlt_ns rtt = latency > 0 ? latency : 1;
    if (s->rtt_noload == 0 || now < s->probe_at || now - s->probe_at >= p->probe_ns) {
        s->rtt_noload = rtt;
        s->probe_at = now;
        return l;
    }
    if (rtt < s->rtt_noload) {
        s->rtt_noload = rtt;
        return l;
    }
    int64_t whole = l / MILLI, d = log10_at_least_1(whole);
    if (drop) return l + per_release(-d, l);
    if (in_flight * 2 * MILLI < l) return l;
    /* queue = ceil(x / rtt) <= k  <=>  x <= k x rtt: the division only when shrinking */
    int64_t x = whole * (rtt - s->rtt_noload), alpha = 3 * d, beta = 6 * d;
    if (x <= d * rtt) return l + per_release(beta, l);
    if (x <= (alpha - 1) * rtt) return l + per_release(d, l);
    if (x > beta * rtt) {
        int64_t excess = rlt__ceil_div(x, rtt) - beta;
        return l + per_release(-(excess > d ? excess : d), l);
    }
    return l;
}

int rlt_adapt_update(const rlt_adapt_policy *p, rlt_adapt_state *s, rlt_ns now, rlt_ns latency_ns,
                     int64_t in_flight, rlt_outcome outcome)
{
    if (!policy_valid(p) || !s || latency_ns < 0 || in_flight < 0 ||
        (outcome != RLT_OUTCOME_SUCCESS && outcome != RLT_OUTCOME_DROPPED &&
         outcome != RLT_OUTCOME_IGNORE))
        return RLT_EINVAL;
    if (latency_ns > RLT_ADAPT_LATENCY_MAX || now < 0) return RLT_ERANGE;
    if (in_flight > RLT_CONCURRENCY_MAX) in_flight = RLT_CONCURRENCY_MAX;
    if (outcome == RLT_OUTCOME_IGNORE) return RLT_OK;
    rlt_adapt_state t = *s;
    int64_t l = current_milli(p, &t);
    bool drop = outcome == RLT_OUTCOME_DROPPED;
    l = p->algo == RLT_ADAPT_AIMD ? aimd(p, &t, now, latency_ns, in_flight, drop, l)
                                  : vegas(p, &t, now, latency_ns, in_flight, drop, l);
    t.limit_milli = clamp_milli(p, l);
    if (t.updates < INT64_MAX) t.updates++;
    *s = t;
    return RLT_OK;
}
