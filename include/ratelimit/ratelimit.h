/* libratelimit: every rate-limiting algorithm as exact integer code with `now` passed in.
 *
 * The contract of this header, in one paragraph:
 *   - Time is a parameter: every call takes `now` as integer nanoseconds from any origin.
 *     Nothing here reads a clock, allocates on the decision path, locks, prints or exits.
 *   - Integers only.  A rate "N per W" is kept as the exact rational N/W, reduced, so a
 *     month of simulated time admits exactly what the arithmetic says.
 *   - Denied is not an error.  Functions return a status (RLT_OK or a negative RLT_E*
 *     code: could the question be answered?); the decision answers the question.
 *   - Rejected requests consume nothing.  A clock that steps backwards never mints allowance.
 *   - Algorithm state is a caller-owned, zero-initialisable byte block of
 *     rlt_state_size(policy) bytes: all-zero means "fresh" (never used).
 *
 * Thread-safety: every function here is reentrant.  One state block must not be used by two
 * threads at once without the caller's lock (the keyed store, store.h, does that for you).
 */
#ifndef RATELIMIT_RATELIMIT_H
#define RATELIMIT_RATELIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Nanoseconds.  Durations and instants alike; instants have an arbitrary origin. */
typedef int64_t rlt_ns;

#define RLT_NS_PER_US INT64_C(1000)
#define RLT_NS_PER_MS INT64_C(1000000)
#define RLT_NS_PER_S INT64_C(1000000000)

/* Status codes.  0 is success; every failure is negative.  One list, one strerror. */
#define RLT_ERRNO_MAP(X)                                                                           \
    X(OK, 0, "success")                                                                            \
    X(EINVAL, -1, "invalid argument")                                                              \
    X(ERANGE, -2, "value out of range: the arithmetic would overflow int64")                       \
    X(ENOMEM, -3, "out of memory")                                                                 \
    X(ENEVER, -4, "the cost can never fit this policy")                                            \
    X(EPARSE, -5, "cannot parse the text")                                                         \
    X(ENOENT, -6, "no such entry")                                                                 \
    X(EKEYLEN, -7, "key is empty or longer than the maximum")                                      \
    X(EFULL, -8, "store is full and fails closed")                                                 \
    X(EIO, -9, "input/output error")                                                               \
    X(ECORRUPT, -10, "file is damaged, truncated or of an unknown version")                        \
    X(ENOSPC, -11, "output buffer too small")                                                      \
    X(EBACKEND, -12, "backend unavailable")                                                        \
    X(ETIMEDOUT, -13, "backend timed out")

typedef enum rlt_status {
#define RLT__ENUM(name, value, text) RLT_##name = (value),
    RLT_ERRNO_MAP(RLT__ENUM)
#undef RLT__ENUM
} rlt_status;

/* A static, never-NULL English description of status `code` ("unknown status" for codes not
 * in the list). */
const char *rlt_strerror(int code);

/* The algorithms.  Values are stable (they are written into snapshots).  Each contract, with
 * N = limit, W = period, B = burst, Q = queue, D = delay, c = cost (docs/algorithms.md has
 * the formulas and examples):
 *
 * RLT_FIXED_WINDOW   windows [kW, (k+1)W) counted from now = 0; allowed iff the window's
 *                    accepted cost + c <= N.  Up to 2N in a span of W across a boundary.
 *                    limit N; remaining N - count; retry_after and reset_after: to the end of
 *                    the window.  A clock stepping back into an earlier window keeps counting
 *                    in the latest window seen.  Calendar windows (months > 0, "/1mo", "/1y"):
 *                    the windows are K local months of p->zone at Unix time origin + now,
 *                    each from the first instant whose local date is in its first month;
 *                    retry_after and reset_after end at that real boundary.
 * RLT_SLIDING_LOG    exact: a timestamp t counts at now iff now - t < W, and the accepted cost
 *                    in any half-open span of length W never exceeds N.  limit N; retry_after:
 *                    until enough of the oldest timestamps expire; reset_after: until the
 *                    newest expires.  A request at a now earlier than the newest entry is
 *                    recorded at the newest entry's time (kept longer, never shorter).
 * RLT_SLIDING_WINDOW estimate = prev x (W - elapsed) / W + curr (two fixed windows), allowed
 *                    iff estimate + c <= N, compared in integers with no rounding.  At most N
 *                    per fixed window, so at most 2N in any span of W.  retry_after: the exact
 *                    first ns at which the estimate lets c in; reset_after: until both counts
 *                    have left the estimate.  A clock stepping back counts as the start of the
 *                    latest window seen (the previous window weighs fully).
 * RLT_TOKEN_BUCKET   capacity B (default N), refilled N per W, starts full; allowed iff
 *                    tokens >= c.  limit B; remaining floor(tokens); retry_after: until
 *                    c tokens exist; reset_after: until full.  Elapsed time is clamped at 0:
 *                    a clock stepping back neither mints nor drains, and refill resumes from
 *                    the latest charge (retry_after includes that wait).
 * RLT_GCRA           the token bucket's decisions, fields and all, from one 64-bit word (the
 *                    theoretical arrival time) on every trace whose clock never steps back.
 *                    A clock stepping back sees a fuller bucket (it may deny what the token
 *                    bucket would allow; it never mints).  |now| x (N/gcd(N,W)) must fit
 *                    int64, else RLT_ERANGE.
 * RLT_LEAKY_BUCKET   a shaper: accepted requests leave exactly W/N apart; a request finding
 *                    a backlog of more than Q x W/N is rejected (nginx's excess > burst); the
 *                    first D of the queue pass undelayed (nginx's delay=D), the rest get
 *                    d->delay.  limit Q + 1; reset_after: until the queue is empty.
 * RLT_CONCURRENCY    at most N leases in flight; a lease expires W after it was taken (default
 *                    RLT_CONCURRENCY_DEFAULT_TIMEOUT) and its slot is reclaimed.  retry_after:
 *                    until the earliest lease expires (a release may come sooner).
 *
 * For every algorithm: a denied request changes nothing; cost 0 peeks; a cost that can never
 * fit (c > N, c > B, c > Q + 1) is denied with retry_after -1. */
typedef enum rlt_algo {
    RLT_ALGO_NONE = 0,
    RLT_FIXED_WINDOW = 1,   /* windows [kW,(k+1)W); allow while count + cost <= N */
    RLT_SLIDING_LOG = 2,    /* exact: accepted cost in any half-open span of W never > N */
    RLT_SLIDING_WINDOW = 3, /* prev*(W-elapsed)/W + curr + cost <= N, integer-exact */
    RLT_TOKEN_BUCKET = 4,   /* capacity B, refill N per W, starts full */
    RLT_GCRA = 5,           /* token bucket stored as one 64-bit theoretical arrival time */
    RLT_LEAKY_BUCKET = 6,   /* shaper: sends spaced W/N apart, queue Q, nginx delay=D */
    RLT_CONCURRENCY = 7     /* at most N in flight; leases expire after W */
} rlt_algo;

/* Largest N a sliding log accepts (its state is 8 bytes per unit of N). */
#define RLT_SLIDING_LOG_MAX INT64_C(1048576)
/* Largest N a concurrency limiter accepts (its state is 16 bytes per slot). */
#define RLT_CONCURRENCY_MAX INT64_C(65536)
/* Lease timeout of a concurrency policy written without a period. */
#define RLT_CONCURRENCY_DEFAULT_TIMEOUT (60 * RLT_NS_PER_S)

/* ---- Calendar windows (docs/algorithms.md "Calendar windows") ----------------------------
 *
 * A zone is the current rule of a time zone as POSIX TZ text (the footer of a TZif v2+ file,
 * e.g. "CET-1CEST,M3.5.0,M10.5.0/3") parsed into integers: a plain, copyable value.  Only the
 * current rule is kept: instants before a zone's last rule change (Europe/Paris 1996,
 * America/New_York 2007, Australia/Lord_Howe 2008) use today's rule, not the historic one.
 * An all-zero zone is UTC. */

/* One DST transition date of a POSIX rule. */
typedef struct rlt_zone_date {
    int32_t kind;  /* 0 Jn (1..365, Feb 29 never counted), 1 n (0..365), 2 Mm.w.d */
    int32_t day;   /* Jn: n; n: n; Mm.w.d: d (0 = Sunday .. 6) */
    int32_t month; /* Mm.w.d: m (1..12) */
    int32_t week;  /* Mm.w.d: w (1..5, 5 = the last) */
    int32_t secs;  /* local time of day of the change, -167h..167h (RFC 8536), default 2h */
} rlt_zone_date;

/* Largest zone name (with its NUL) that a zone keeps. */
#define RLT_ZONE_NAME_MAX 64

/* A time zone's current rule.  Offsets are seconds east of UTC (local = UTC + offset). */
typedef struct rlt_zone {
    char name[RLT_ZONE_NAME_MAX]; /* "Europe/Paris"; "" for the all-zero UTC zone */
    int32_t std_off;              /* standard time's offset */
    int32_t dst_off;              /* daylight time's offset (has_dst only) */
    int32_t has_dst;              /* 1: the rule switches between start and end */
    rlt_zone_date start, end;     /* into DST (local standard time), out of it (local DST) */
} rlt_zone;

/* A policy: which algorithm, with which numbers.  Fill it with rlt_policy_init() or
 * rlt_policy_parse(); both validate and compute the derived fields, which the decision
 * functions rely on.  A policy is immutable after init and may be shared by any threads. */
typedef struct rlt_policy {
    rlt_algo algo;
    int64_t limit; /* N: requests (units of cost) per period; slots for concurrency */
    rlt_ns period; /* W: the window, or the time N units take to refill; lease timeout */
    int64_t burst; /* B: token bucket / GCRA capacity (defaults to N) */
    int64_t queue; /* Q: leaky bucket queue, in requests (default 0) */
    int64_t delay; /* D: leaky bucket requests passed without delay (nginx delay=); 0 */

    /* Derived by init; do not set.  The rate N/W reduced: one unit of cost is `unit_`
     * scaled time units and one nanosecond is `scale_` of them (unit_/scale_ = W/N). */
    int64_t scale_; /* N / gcd(N, W) */
    int64_t unit_;  /* W / gcd(N, W) */
    int64_t cap_;   /* B * unit_ (token bucket, GCRA); Q * unit_ (leaky); N * W (sliding) */
    int64_t free_;  /* D * unit_ (leaky bucket) */

    /* Options every algorithm takes; all zero: none.  rlt_policy_init clears them; set them
     * after it with rlt_policy_set_block and rlt_policy_set_jitter (or write them in the text:
     * ",block=", ",jitter="). */
    rlt_ns block;         /* penalty box: the first block's length; 0 = no penalty box */
    int64_t block_factor; /* escalation: each breach within W of the last block's end
                             multiplies the block by this (1 = every block is `block` long) */
    rlt_ns block_max;     /* the longest block (equals `block` when block_factor is 1) */
    int64_t jitter;       /* percent (1..100) of retry_after added as a per-key spread; 0 = none */
    /* Calendar windows (fixed_window only; all zero for every other policy).  `period` is
     * then the nominal mean length (months x 2629746 s) that headers and rates report. */
    int32_t months; /* window length in calendar months (12 = a year); 0: not calendar */
    rlt_ns origin;  /* Unix-epoch ns at now = 0 (rlt_policy_set_origin); 0: now is Unix time */
    rlt_zone zone;  /* the zone whose local months the windows follow (all-zero: UTC) */
    /* Adaptive concurrency (concurrency only; all zero: a static limit).  The limit in force
     * moves between adapt_min and `limit` (the ceiling: the slots), learned from what
     * releases report (rlt_release_report, ratelimit/adaptive.h).  Set them after init with
     * rlt_policy_set_adaptive, or in the text: ",adaptive=vegas,min=10[,init=20][,slow=1s]". */
    int32_t adapt;      /* 0: static; RLT_ADAPT_AIMD (1) or RLT_ADAPT_VEGAS (2) */
    int64_t adapt_min;  /* the floor, 1..limit */
    int64_t adapt_init; /* where a fresh key starts, adapt_min..limit */
    rlt_ns adapt_slow;  /* AIMD: a success slower than this counts as a drop; 0: none */
    /* Priority classes: the percent (0..100) of the limit kept from each lower class when a
     * request names its class but no reserve (rlt_decide_class with reserve_pct -1); text
     * ",reserve=P%".  0: every class equal unless the request gives a reserve. */
    int32_t reserve;
} rlt_policy;

/* Validates the numbers and fills `p`.  burst <= 0 means "N"; queue and delay < 0 are
 * invalid; for RLT_CONCURRENCY, period <= 0 means RLT_CONCURRENCY_DEFAULT_TIMEOUT.
 * Returns RLT_OK; RLT_EINVAL for a NULL pointer, an unknown algorithm, N <= 0, W <= 0,
 * negative burst/queue/delay; RLT_ERANGE when the derived arithmetic would overflow int64
 * (e.g. burst x unit) or the state would exceed the per-algorithm maximum. */
int rlt_policy_init(rlt_policy *p, rlt_algo algo, int64_t limit, rlt_ns period, int64_t burst,
                    int64_t queue, int64_t delay);

/* Parses policy text "ALGORITHM:N/PERIOD[,burst=B][,queue=Q][,delay=D|,nodelay]
 * [,block=DURATION[*FACTOR..MAX]][,jitter=P%][,reserve=P%]" (reserve= 0..100: the class
 * reserve, rlt_policy.reserve; each option at most once; for leaky_bucket,
 * nginx's "burst=" is another name for queue=; block= and jitter= apply to every algorithm:
 * rlt_policy_set_block, rlt_policy_set_jitter), with
 * ALGORITHM one of fixed_window sliding_log sliding_window token_bucket gcra leaky_bucket
 * concurrency (concurrency takes "concurrency:N[/TIMEOUT]", and for an adaptive limit
 * ",adaptive=aimd|vegas,min=F[,init=I][,slow=DURATION]": rlt_policy_set_adaptive) and PERIOD an integer with a unit
 * ns us ms s m h d (a bare unit means 1 of it: "100/s"); fixed_window also takes calendar
 * periods "Kmo" and "Ky" (1..1200 months) with ",tz=ZONE", a tz database name read here with
 * rlt_zone_load (UTC without it).  `len` is the text's length.
 * On error returns RLT_EPARSE or RLT_ERANGE and, when `err` is not NULL, writes a
 * NUL-terminated message naming the offending part into err[0..errlen). */
int rlt_policy_parse(rlt_policy *p, const char *text, size_t len, char *err, size_t errlen);

/* Writes the canonical text of `p` (parseable by rlt_policy_parse) into buf[0..cap) with a
 * NUL.  Returns the length without the NUL, RLT_ENOSPC if it does not fit, or RLT_EINVAL for
 * a NULL argument or a policy that rlt_policy_init did not fill. */
int rlt_policy_format(const rlt_policy *p, char *buf, size_t cap);

/* Penalty box (src/core/block.c has the state and the maths): once a request of cost >= 1 is
 * denied by the algorithm (with a wait that can end: retry_after >= 0), every request of the
 * key is denied for a block of `block` ns, with retry_after to the block's end (or the
 * algorithm's own wait, if longer), and charges nothing.  A breach at t within the window
 * W = p->period after the previous block's end e (e <= t < e + W) escalates: the block is
 * block x factor^k after k consecutive such breaches, capped at block_max; a breach later
 * than that starts over at `block`.  Peeks (cost 0) and rlt_when see a block but never start
 * one; rlt_release still releases a concurrency lease while blocked.  The state grows by 16
 * bytes, after the algorithm's, and all-zero is still fresh.
 * block > 0 is required; factor 1 means no escalation (max is then ignored and set to block);
 * factor >= 2 needs block_max >= block.  block 0 removes the penalty box.
 * Returns RLT_OK; RLT_EINVAL for NULL, a policy rlt_policy_init did not fill, or numbers out
 * of range (block < 0, factor < 1, max < block). */
int rlt_policy_set_block(rlt_policy *p, rlt_ns block, int64_t factor, rlt_ns block_max);

/* Jitter: a spread of retry_after over [exact, exact + floor(exact x percent / 100)], so that
 * many clients told to wait the same time do not all come back at once.  0 removes it.
 * Returns RLT_OK; RLT_EINVAL for NULL, an unfilled policy or percent outside 0..100. */
int rlt_policy_set_jitter(rlt_policy *p, int64_t percent);

/* The jittered wait for `exact` (a decision's retry_after) under policy `p`: a value in
 * [exact, exact + floor(exact x p->jitter / 100)], a pure function of (key_hash, now, exact),
 * so the same key at the same instant always gets the same value, on every backend.  Never
 * below exact: a client that waits what it is told still succeeds.  key_hash is
 * rlt_hash_fnv1a of the key's bytes (the one every part uses for this).  exact <= 0 (allowed,
 * or -1: never) and a policy without jitter return exact unchanged; the sum saturates at
 * INT64_MAX.  rlt_decide itself never jitters (it does not know the key): the store and the
 * Redis library apply this to the decisions they return. */
rlt_ns rlt_jitter(const rlt_policy *p, uint64_t key_hash, rlt_ns now, rlt_ns exact);

/* The `limit` every decision under `p` reports: B for the token bucket and GCRA, Q + 1 for the
 * leaky bucket, N for the others.  0 for NULL. */
int64_t rlt_policy_limit(const rlt_policy *p);

/* 64-bit FNV-1a of n bytes (offset basis 14695981039346656037): a fast, stable, unkeyed hash
 * for names and caches the caller controls (policy names, cache slots).  Never for keys an
 * attacker chooses into a table: the store hashes those with SipHash and a secret. */
uint64_t rlt_hash_fnv1a(const void *p, size_t n);

/* Greatest common divisor of a and b (both > 0). */
int64_t rlt_gcd(int64_t a, int64_t b);

/* The canonical name of an algorithm ("gcra"), or "none"; and the reverse (RLT_ALGO_NONE
 * when unknown). */
const char *rlt_algo_name(rlt_algo algo);
rlt_algo rlt_algo_from_name(const char *name, size_t len);

/* Bytes of state one key needs under `p`: 8 for GCRA and leaky bucket, 16 for fixed window
 * and token bucket, 24 for the sliding window counter, 16 + 8N for the sliding log,
 * 16 + 16N for concurrency; 16 more with a penalty box (block=).  All-zero state is fresh.
 * 0 for an invalid policy. */
size_t rlt_state_size(const rlt_policy *p);

/* A decision.  A denied request is not an error: the call returns RLT_OK. */
typedef struct rlt_decision {
    bool allowed;
    int64_t limit;      /* N (B for token bucket and GCRA, Q+1 for leaky bucket) */
    int64_t remaining;  /* cost-1 requests that would still be allowed now, after this one */
    rlt_ns retry_after; /* 0 when allowed; when denied, the exact wait after which the same
                           request is allowed if nothing else happens; -1 if it never can */
    rlt_ns reset_after; /* until the state is back to fresh (full bucket, empty window) */
    rlt_ns delay;       /* leaky bucket: how long the request waits before it is sent */
    int64_t lease;      /* concurrency: the lease to hand to rlt_release (> 0 when allowed) */
} rlt_decision;

/* Folds decision `d` of one limit of a multi-limit check into `acc`, the combined decision
 * (`first`: d is the first limit; acc is then overwritten).  The combined decision is allowed
 * only when every limit is; its remaining and limit are those of the limit with the fewest
 * remaining; its retry_after is the longest wait, or -1 (never) when any limit can never fit;
 * reset_after and delay are the longest; lease is 0.  Every part of the project that combines
 * limits (the store, the Redis library, the daemon) does it through this one function. */
void rlt_decision_combine(rlt_decision *acc, const rlt_decision *d, bool first);

/* Decides one request of `cost` at `now` and, if allowed, charges it to `state`.
 * cost >= 1 is a request; cost 0 is a peek: d->allowed, retry_after and delay tell what a
 * cost-1 request would get, d->remaining counts the allowance as it stands, and nothing is
 * consumed.  For RLT_CONCURRENCY a request acquires one slot (cost must be 0 or 1)
 * and d->lease names it.  `state` is rlt_state_size(p) bytes, zero for a fresh key.
 * Returns RLT_OK (allowed or denied, see d->allowed); RLT_EINVAL for NULL arguments, cost < 0
 * or a cost > 1 on a concurrency policy; RLT_ERANGE when `now` or `cost` is outside what the
 * policy's integer arithmetic can represent (then the state is unchanged). */
int rlt_decide(const rlt_policy *p, void *state, rlt_ns now, int64_t cost, rlt_decision *d);

/* The earliest time >= now at which a request of `cost` (>= 1) would be allowed if nothing
 * else happened, without changing the state.  Returns RLT_OK with *at set; RLT_ENEVER when
 * the cost exceeds what the policy can ever allow (cost > B, cost > N, ...); RLT_EINVAL,
 * RLT_ERANGE as rlt_decide. */
int rlt_when(const rlt_policy *p, const void *state, rlt_ns now, int64_t cost, rlt_ns *at);

/* Releases a concurrency lease.  Returns RLT_OK, or RLT_ENOENT when the lease is unknown,
 * already released, or was reclaimed because it outlived the policy's timeout. */
int rlt_release(const rlt_policy *p, void *state, rlt_ns now, int64_t lease);

/* True when `state` is, at `now`, equivalent to fresh: dropping it (re-zeroing it) would
 * change no decision at `now` or later.  O(1), except concurrency: O(N). */
bool rlt_is_fresh(const rlt_policy *p, const void *state, rlt_ns now);

/* True when `state` (rlt_state_size(p) bytes, e.g. read back from a file) satisfies every
 * invariant the decision functions rely on: counts within N, ring indices in range, log
 * timestamps sorted, used allowance within capacity.  A state that fails must not be passed to
 * rlt_decide (doing so is memory-safe only for valid states); reset it instead.  O(size). */
bool rlt_state_valid(const rlt_policy *p, const void *state);

/* Moves every instant stored in `state` by `delta` ns (a snapshot restored under another
 * clock origin).  Instants pushed past INT64_MIN saturate (the state only looks older, which
 * credits less); an instant of a token bucket, GCRA or leaky bucket pushed past INT64_MAX
 * would credit time that never passed, so that returns RLT_ERANGE and leaves the state
 * unchanged (window, log and lease instants saturate: at the end of int64 time they never
 * expire either way).  Returns RLT_OK, RLT_EINVAL or RLT_ERANGE. */
int rlt_state_shift(const rlt_policy *p, void *state, rlt_ns delta);

/* How rlt_state_convert carries used allowance from one policy to another. */
typedef enum rlt_convert {
    RLT_CONVERT_KEEP = 0, /* the same amount stays used: 30 used of 100 becomes 30 of 200 */
    RLT_CONVERT_SCALE = 1 /* the same share stays used: 30 of 100 becomes 60 of 200 */
} rlt_convert;

/* Carries `state` from policy `from` to policy `to` at `now`.  Rounding never mints: the used
 * amount is rounded up.  Used allowance within the old capacity is capped at the new one; a
 * debt beyond it (rlt_settle) carries over on top, converted the same way, never forgiven.  Supported when both policies have the same algorithm and, for the
 * sliding log and concurrency, the same N (state size); otherwise returns RLT_EINVAL and the
 * caller resets the state instead.  Returns RLT_OK, RLT_EINVAL, RLT_ERANGE. */
int rlt_state_convert(const rlt_policy *from, const rlt_policy *to, void *state, rlt_ns now,
                      rlt_convert how);

/* ---- HTTP header arithmetic (text only, no I/O) ---------------------------------------- */

/* Whole seconds a client must wait, rounded up, so that waiting that long then succeeds.
 * 0 for 0, -1 for -1 (never), at least 1 for any positive wait. */
int64_t rlt_retry_after_seconds(rlt_ns retry_after);
/* The same in whole milliseconds, rounded up: 0 for 0, -1 for any negative (never). */
int64_t rlt_retry_after_ms(rlt_ns retry_after);

/* Which header families rlt_format_headers writes. */
enum {
    RLT_HDR_RETRY_AFTER = 1, /* Retry-After: 3 (only on a denied decision) */
    RLT_HDR_IETF = 2,   /* RateLimit-Policy: "name";q=100;w=60 and RateLimit: "name";r=20;t=12 */
    RLT_HDR_LEGACY = 4, /* RateLimit-Limit / RateLimit-Remaining / RateLimit-Reset */
    RLT_HDR_X = 8,      /* X-RateLimit-Limit / -Remaining / -Reset (reset in seconds) */
    RLT_HDR_ALL = 15
};

/* Writes "Field: value\r\n" lines for the families in `which` into buf[0..cap) with a NUL,
 * following draft-ietf-httpapi-ratelimit-headers-11 (docs/algorithms.md has the table and
 * examples for every algorithm).  The same four numbers feed every family:
 *   q  the sustained quota: N units per w seconds, never the burst or the queue.  w is the
 *      period in whole seconds rounded up, and q = floor(N x w / W), so q/w never exceeds N/W
 *      (q = N when W is whole seconds).  Concurrency: q = N with qu="concurrent-requests" and
 *      no w (its period is a lease timeout, not a window).
 *   r  d->remaining (at least 0): units that may be sent now; with a burst B > N it can
 *      exceed q.
 *   t  denied: Retry-After's value; denied with a cost that never fits: the seconds until
 *      fresh; allowed: the seconds until fresh (full bucket, empty windows, drained queue),
 *      rounded up.  An allowed concurrency decision has no t.
 * RateLimit-Limit / -Remaining / -Reset and their X- forms carry q, r and t (no Reset line
 * where there is no t).  Retry-After is written only for a denied decision that some wait can
 * turn into an allowed one (retry_after >= 0): a cost that can never fit gets none.
 * `name` is the policy's name for the IETF fields (a short token; NULL means "default").
 * Returns the length written without the NUL, RLT_ENOSPC if it does not fit, RLT_EINVAL
 * for NULL arguments, a policy rlt_policy_init did not fill, or a name that is not a token
 * of [A-Za-z0-9_.:-]{1,64}. */
int rlt_format_headers(char *buf, size_t cap, const char *name, const rlt_policy *p,
                       const rlt_decision *d, unsigned which);

/* ---- Calendar windows: zones and boundaries --------------------------------------------- */

/* Parses POSIX TZ text "STD offset [DST [offset] ,start[/time],end[/time]]" (names alphabetic
 * or <quoted>, times up to 167h as RFC 8536 allows) into `z` (name left empty).  A DST name
 * without a rule is refused.  Returns RLT_OK, RLT_EINVAL for NULL, RLT_EPARSE otherwise. */
int rlt_zone_parse_rule(rlt_zone *z, const char *rule, size_t len);

/* Reads the current rule of `z` from the bytes of a TZif file (RFC 8536, version 2 or later:
 * its footer).  Every count is checked against `len`.  Returns RLT_OK, RLT_EINVAL for NULL,
 * RLT_ECORRUPT for a damaged or version-1 file, RLT_EPARSE for an empty or unusable footer. */
int rlt_zone_from_tzif(rlt_zone *z, const void *data, size_t len);

/* Loads zone `name` ("Europe/Paris", "UTC") from the system tz database (RLT_ZONEINFO_DIR,
 * /usr/share/zoneinfo by default; the environment is not read) and names `z` after it.  The
 * name must be [A-Za-z0-9_+-] parts joined by '/' (no '.': no "..", no absolute path), at
 * most RLT_ZONE_NAME_MAX - 1 bytes.  Reads one file (of at most 1 MiB), once: call it when a
 * configuration is read, never on a decision path.  Returns RLT_OK; RLT_EINVAL for NULL;
 * RLT_ENOMEM; RLT_EPARSE for a bad name, a zone that is not there, or a file that is not a
 * TZif v2+ zone with a rule, with a NUL-terminated message in err[0..errlen) (`z` is then
 * all-zero). */
int rlt_zone_load(rlt_zone *z, const char *name, size_t len, char *err, size_t errlen);

/* The offset (seconds east of UTC) of `z` at Unix time `t` (seconds).  RLT_OK, RLT_EINVAL,
 * RLT_ERANGE when t is beyond +-2^55 s. */
int rlt_zone_offset(const rlt_zone *z, int64_t t, int32_t *off);

/* The first Unix second whose local date under `z` is in month `month` (months since
 * 1970-01, local: 0 is January 1970; negative before): local midnight of the 1st, or, when
 * that midnight is skipped by a DST change, the change's instant; when it happens twice, the
 * first.  Returns RLT_OK, RLT_EINVAL, RLT_ERANGE for |month| beyond 2^36. */
int rlt_zone_month_start(const rlt_zone *z, int64_t month, int64_t *t);

/* Sets a policy's origin: the Unix-epoch ns at which its `now` is 0 (the daemon: its clock's
 * origin; replay: its trace's epoch).  Only calendar windows read it.  RLT_OK or RLT_EINVAL. */
int rlt_policy_set_origin(rlt_policy *p, rlt_ns origin);

/* Copies the calendar fields (months, origin, zone) of `src` into `dst`, a policy that
 * rlt_policy_init has just filled from src's numbers (the store re-derives its policies so).
 * Returns RLT_OK (nothing to do for a policy without calendar windows) or RLT_EINVAL when
 * src's calendar fields are not valid for dst (not a fixed window, months out of range). */
int rlt_policy_copy_calendar(rlt_policy *dst, const rlt_policy *src);

/* True when a and b have the same calendar fields (months and zone; the origin aside):
 * for callers that compare policies field by field. */
bool rlt_policy_calendar_equal(const rlt_policy *a, const rlt_policy *b);

/* True when a and b decide alike: the same algorithm, numbers (limit, period, burst, queue,
 * delay), options every algorithm takes (block=, jitter=) and calendar fields (months, zone,
 * origin).  Every part that asks "did this policy change?" (a reload, a store's policy
 * replacement, the nginx module's zones) asks this one function.  Two NULLs are equal. */
bool rlt_policy_equal(const rlt_policy *a, const rlt_policy *b);

/* ---- Duration text ---------------------------------------------------------------------- */

/* Parses "250ms", "1s", "3h", "15" (with `default_unit` ns when no unit is written; 0 means a
 * unit is required).  Units: ns us ms s m h d.  Returns RLT_OK, RLT_EPARSE, or RLT_ERANGE on
 * overflow. */
int rlt_duration_parse(const char *text, size_t len, rlt_ns default_unit, rlt_ns *out);

/* ---- Charge after the response: settling a reservation --------------------------------- */

/* Whether policy `p` can settle reservations: fixed window, sliding log, sliding window,
 * token bucket and GCRA.  Not the leaky bucket (what was queued or sent cannot be taken
 * back) nor concurrency (a lease has no cost).  False for NULL. */
bool rlt_settle_supported(const rlt_policy *p);

/* Settles a reservation: a request of cost `estimate` that rlt_decide allowed and charged to
 * `state` at instant `reserved_at` turned out to cost `real_cost`.
 *   real_cost > estimate: the difference is charged at `now`, even past the limit (debt:
 *     token bucket and GCRA hold more than B used, fixed and sliding window count past N;
 *     later requests are denied until it is repaid).  Debt saturates at what the state
 *     holds (an int64 count or scaled amount; GCRA's tat at INT64_MAX) instead of failing:
 *     a huge real_cost (2^63 - 1) leaves the state denying, never returning RLT_ERANGE on
 *     the next call.  The sliding log has N slots: it
 *     records at most N entries at `now`, dropping its oldest live ones to make room.
 *   real_cost < estimate: the difference is refunded, but only what the reservation still
 *     holds: fixed window, while `now` is in the window it was charged to; sliding window,
 *     while that window's count is in the estimate; sliding log, entries stamped no later
 *     than reserved_at that have not expired; token bucket and GCRA, at most
 *     estimate - elapsed x N/W units (elapsed = now - reserved_at), never past full.
 * `now` must not be earlier than any instant the state was decided at since reserved_at: with
 * a clock that stepped back, pass the latest instant seen (rlt_store_settle does).  A token
 * bucket protects itself (it keeps that instant); a GCRA state cannot, and an earlier `now`
 * would let its refund exceed what the reservation holds by the refill of the step.
 * The state afterwards is never more generous than had real_cost been charged at
 * reserved_at (src/core/settle.c has the proof).  Settling once per reservation is the
 * caller's duty (settling twice would refund twice; the store's rlt_store_settle keeps a
 * table for that).  *d is a peek (cost 0) at `now` after the settle.
 * Returns RLT_OK; RLT_EINVAL for NULL arguments, a policy that cannot settle
 * (rlt_settle_supported), estimate or real_cost < 0, or an estimate above
 * rlt_policy_limit(p) (no such request was ever allowed); RLT_ERANGE when the debt would
 * leave int64 (the state is then unchanged). */
int rlt_settle(const rlt_policy *p, void *state, rlt_ns now, rlt_ns reserved_at,
               int64_t estimate, int64_t real_cost, rlt_decision *d);

/* ---- Keys from client addresses --------------------------------------------------------- */

/* The longest key rlt_addr_key writes, NUL included ("ffff:...:ffff/128"). */
#define RLT_ADDR_KEY_MAX 48
/* The default IPv6 prefix: /56, what ISPs delegate to a home line (RIPE-690) and what
 * express-rate-limit masks to, so a household is one key; a /64 would give it 256. */
#define RLT_ADDR_V6_PREFIX 56

/* Turns a client address into the key that one client cannot multiply: an IPv4 address as
 * itself ("203.0.113.7"); IPv4-mapped (::ffff:a.b.c.d) and IPv4-compatible (::a.b.c.d, but
 * not :: or ::1) forms folded to that IPv4 address; any other IPv6 address masked to its first
 * v6_prefix bits and written in RFC 5952 form with the prefix ("2001:db8:0:ab00::/56").
 * The address is strict text: dotted quads of 0..255 without leading zeros, IPv6 as RFC 4291
 * writes it (hex groups of 1..4 digits, one "::", an IPv4 tail); no brackets, zone or port.
 * v6_prefix is 32..128 (0 means RLT_ADDR_V6_PREFIX).  Writes the key and a NUL into
 * out[0..cap).  Returns the key's length, RLT_EPARSE for a malformed address, RLT_EINVAL for
 * NULL or a prefix out of range, RLT_ENOSPC when cap < RLT_ADDR_KEY_MAX.  Pure, reentrant. */
int rlt_addr_key(const char *addr, size_t len, int v6_prefix, char *out, size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* RATELIMIT_RATELIMIT_H */
