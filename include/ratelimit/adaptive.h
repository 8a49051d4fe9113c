/* Protecting the service, not only the quota: priority classes with a reserve that lower
 * classes may not use (src/core/priority.c), and concurrency limits that learn from the
 * latency and outcome of finished requests (src/core/adaptive.c: AIMD and Vegas).  Pure
 * functions over caller-owned plain structs, integers only, time passed in; thread-safety is
 * the caller's (one state, one writer), as for rlt_decide. */
#ifndef RLT_ADAPTIVE_H
#define RLT_ADAPTIVE_H

#include "ratelimit/ratelimit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Priority classes ------------------------------------------------------------------ */

/* A request's class, most important first.  The all-zero value is critical only in this
 * enum's order; doors that take a class default to RLT_CLASS_DEFAULT when none is given. */
typedef enum rlt_class {
    RLT_CLASS_CRITICAL = 0,
    RLT_CLASS_DEFAULT = 1,
    RLT_CLASS_SHEDDABLE = 2,
} rlt_class;
#define RLT_CLASS_COUNT 3

/* Reads a class name: "critical", "default" or "sheddable" (exactly, `len` bytes, no NUL
 * needed).  Returns RLT_OK with *c set; RLT_EINVAL for NULL or an unknown name (*c
 * unchanged). */
int rlt_class_parse(const char *s, size_t len, rlt_class *c);

/* The class's name ("critical", ...), a static string; "?" for a value outside the enum. */
const char *rlt_class_name(rlt_class c);

/* How much of `limit` class c may use when reserve_pct percent of it is kept from each lower
 * class, step by step: critical may use all of it, default limit - R, sheddable limit - 2R,
 * where R = ceil(limit x reserve_pct / 100) (never below 0).  With reserve 20 on a limit of
 * 100: critical 100, default 80, sheddable 60.  A request of class c and cost k is admitted
 * when in_use + k <= the ceiling (rlt_class_admits).  Returns RLT_OK with *ceiling set;
 * RLT_EINVAL for NULL, limit < 0 or above INT64_MAX / 128, reserve_pct outside 0..100 or an
 * unknown class. */
int rlt_class_ceiling(int64_t limit, int reserve_pct, rlt_class c, int64_t *ceiling);

/* Whether a request of class c and cost `cost` fits when `in_use` of `limit` is taken, under
 * rlt_class_ceiling's rule.  Returns RLT_OK with *admit set (denied is not an error);
 * RLT_EINVAL as rlt_class_ceiling, or for in_use < 0 or cost < 0. */
int rlt_class_admits(int64_t limit, int reserve_pct, rlt_class c, int64_t in_use, int64_t cost,
                     bool *admit);

/* rlt_decide for a request of class c under a reserve of reserve_pct percent: admitted only
 * when, after its cost, what is used stays within the class's ceiling (rlt_class_ceiling of
 * p's limit); a request the class may not take consumes nothing.  d->limit is the class's
 * ceiling and d->remaining what the class may still take; retry_after is exact for every
 * algorithm but concurrency, where, when more than one lease must go, it is the wait until
 * every lease now held has timed out (a bound).  Critical, or a reserve of 0, is rlt_decide
 * itself.  The ceiling is a share of the limit the decision reports (the burst of a token
 * bucket or GCRA, the queue + 1 of a leaky bucket).  Non-concurrency policies take two passes
 * (rlt_when, then rlt_decide); concurrency one.  Returns as rlt_decide; RLT_EINVAL also for a
 * reserve outside 0..100, an unknown class, or a concurrency policy with a penalty box under a
 * class below critical.  reserve_pct -1 takes the policy's own (p->reserve, ",reserve=P%"). */
int rlt_decide_class(const rlt_policy *p, void *state, rlt_ns now, int64_t cost, rlt_class c,
                     int reserve_pct, rlt_decision *d);

/* ---- Adaptive concurrency limits ------------------------------------------------------- */

typedef enum rlt_adapt_algo {
    RLT_ADAPT_AIMD = 1,  /* +1 per round trip while half the limit is used, x backoff on a drop */
    RLT_ADAPT_VEGAS = 2, /* queue = limit x (1 - rtt_noload / rtt), kept between alpha, beta */
} rlt_adapt_algo;

/* What a finished request reports.  A drop is a timeout, an overload reply or a request
 * the client gave up on: the backend could not serve it in time. */
typedef enum rlt_outcome {
    RLT_OUTCOME_SUCCESS = 0,
    RLT_OUTCOME_DROPPED = 1,
    RLT_OUTCOME_IGNORE = 2, /* the request failed for its own reasons: no signal */
} rlt_outcome;

/* The longest latency a release may report (1 hour): anything above is refused as absurd. */
#define RLT_ADAPT_LATENCY_MAX (3600 * RLT_NS_PER_S)

/* An adaptive limit's settings; validated by rlt_adapt_policy_check.  Limits are whole
 * requests in flight, floor <= initial <= ceiling <= RLT_CONCURRENCY_MAX, floor >= 1. */
typedef struct rlt_adapt_policy {
    rlt_adapt_algo algo;
    int64_t floor, ceiling, initial;
    /* AIMD: a success slower than this counts as a drop (Netflix's AIMD "timeout"); 0: only
     * reported drops count.  0..RLT_ADAPT_LATENCY_MAX. */
    rlt_ns slow_ns;
    /* AIMD: the limit is multiplied by backoff_pm / 1000 on a drop (default 900 if 0);
     * 500..999. */
    int backoff_pm;
    /* Vegas: the no-load latency is forgotten (taken again from the next sample) this long
     * after it was set, so that a backend that got slower for good is learned; 0: 30 s.
     * 1 ms..1 day. */
    rlt_ns probe_ns;
} rlt_adapt_policy;

/* The state of one adaptive limit: 32 bytes whatever the traffic (bounded per key).  All
 * zero is fresh: the limit starts at the policy's initial on the first update or read. */
typedef struct rlt_adapt_state {
    int64_t limit_milli; /* the limit x 1000 (fractional growth accumulates); 0 = fresh */
    rlt_ns rtt_noload;   /* Vegas: the least latency seen since probe_at; 0 = none yet */
    rlt_ns probe_at;     /* Vegas: when rtt_noload was last taken afresh */
    int64_t updates;     /* releases that moved or held the limit (saturating) */
} rlt_adapt_state;

/* Checks a policy (and fills defaults of zero fields: backoff_pm, probe_ns).  Returns RLT_OK;
 * RLT_EINVAL for NULL, an unknown algorithm, floor < 1, floor > ceiling, ceiling above
 * RLT_CONCURRENCY_MAX, initial outside floor..ceiling, or a field outside its range. */
int rlt_adapt_policy_check(rlt_adapt_policy *p);

/* The current limit, whole requests, always within floor..ceiling (initial for a fresh
 * state).  p must have passed rlt_adapt_policy_check; s not NULL. */
int64_t rlt_adapt_limit(const rlt_adapt_policy *p, const rlt_adapt_state *s);

/* Learns from one finished request: its latency (ns), its outcome, and how many requests
 * were in flight when it started (counting itself).  Time is passed in (`now`, ns); nothing
 * reads a clock.  Returns RLT_OK with the state moved (the limit stays within floor..ceiling);
 * RLT_EINVAL (state unchanged) for NULL, an unchecked policy, a negative latency or in_flight,
 * an unknown outcome; RLT_ERANGE (state unchanged) for a latency above RLT_ADAPT_LATENCY_MAX
 * or a clock outside what the probe arithmetic can add to. */
int rlt_adapt_update(const rlt_adapt_policy *p, rlt_adapt_state *s, rlt_ns now, rlt_ns latency_ns,
                     int64_t in_flight, rlt_outcome outcome);

/* ---- An adaptive limit in a concurrency policy ---------------------------------------- */

/* Makes concurrency policy p adaptive: its limit in force starts at `initial` (0: floor) and
 * moves between floor and p->limit (the ceiling) under controller `algo` (RLT_ADAPT_AIMD or
 * RLT_ADAPT_VEGAS; 0 makes p static again), learned from rlt_release_report; slow_ns as
 * rlt_adapt_policy's (AIMD only; 0: none).  The state grows by 32 bytes (rlt_adapt_state,
 * after the slots; all-zero is fresh).  The text form: "concurrency:200/30s,adaptive=vegas,
 * min=10[,init=20][,slow=1s]".  Returns RLT_OK; RLT_EINVAL for NULL, a policy that is not an
 * initialised concurrency policy, or bounds that rlt_adapt_policy_check refuses. */
int rlt_policy_set_adaptive(rlt_policy *p, int algo, int64_t floor, int64_t initial,
                            rlt_ns slow_ns);

/* rlt_release that reports how the request went: its latency (ns, 0..RLT_ADAPT_LATENCY_MAX)
 * and outcome (rlt_outcome), which an adaptive policy learns from (with the number of live
 * leases, this one included, as the load it saw); a static policy ignores them.  A lease that
 * already timed out teaches nothing.  Returns as rlt_release; RLT_EINVAL (nothing released)
 * for a negative latency or an unknown outcome, RLT_ERANGE (nothing released) for a latency
 * above RLT_ADAPT_LATENCY_MAX or now < 0. */
int rlt_release_report(const rlt_policy *p, void *state, rlt_ns now, int64_t lease,
                       rlt_ns latency_ns, int outcome);

/* The limit in force for a concurrency policy's state: p->limit for a static policy, the
 * learned limit (floor..ceiling) for an adaptive one.  -1 for NULL or another algorithm. */
int64_t rlt_concurrency_limit(const rlt_policy *p, const void *state);

#ifdef __cplusplus
}
#endif

#endif
