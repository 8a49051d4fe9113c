/* Quota division for Envoy's Rate Limit Quota Service (RLQS): one global budget divided among
 * the Envoys (streams) that report a bucket, each of which enforces its share locally as a
 * token bucket.  Pure: libc only, no clock (every call takes `now` in ns), integers only.
 *
 * Internal (src/quota/, rlt__ names) rather than include/ratelimit/: its users are the daemon
 * (the RLQS gRPC service) and the CLI's fleet simulator, both in this tree; the server phase
 * (Redis mode, the proto mapping) will still change it, and nothing here belongs in
 * libratelimit's ABI.  It compiles alone all the same.
 *
 * The model, in one paragraph (docs/quota.md has the derivations):
 *   - A bucket has a budget: N tokens per P ns (the rate R), a burst B, and a fill interval F
 *     shared by its assignments.  The rate is divided in whole tokens per fill: the bucket has
 *     Q = floor(N x F / P) of them, so that sum(tokens_per_fill) <= Q gives sum(r_i) <= R
 *     exactly, with no rounding drift.
 *   - Each stream reporting the bucket is a member; its demand is (allowed + denied) over the
 *     time_elapsed of its last RLT__QUOTA_HISTORY reports.  The division is max-min fair
 *     water-filling of Q - reserve (and of B - reserve for bursts) over the members' wants,
 *     want = demand + headroom (at least one token each); bursts follow the rate shares.
 *   - A ledger holds every live assignment: the last one sent to each member, including a
 *     departed (closed or silent) member's, until its TTL has run out (its Envoy enforces it
 *     until then).  An assignment never raises the ledger above Q or B: a member gets
 *     min(target, free + what it holds).  So at every instant sum(r_i) <= R and
 *     sum(b_i) <= B over the assignments Envoys may enforce (for a fixed budget).
 *   - Resend rule: a member is sent an assignment on its first report, when its TTL is within
 *     `renew_before`, or when its share changed materially (by change_permille, or any
 *     decrease while another member waits for capacity); never two assignments with a burst
 *     within `min_resend` (G) of each other.
 *   - The bound: Envoy starts each new assignment full, so over any window of length T the
 *     fleet admits at most R x T + B + B x (1 + T / G) requests; with renewals alone (no
 *     material change), G becomes ttl - renew_before.  rlt__quota_excess_bound computes it.
 *
 * Time: every call that changes the state takes `now`; a `now` earlier than the latest one
 * seen counts as the latest (a clock stepping back neither revives an expired assignment nor
 * shortens a gap).
 *
 * Thread-safety: none; one rlt__quota is used by one thread at a time (the caller locks).
 * Memory: bounded by the caps in rlt__quota_options; a call that would pass one is refused
 * with RLT_EFULL and changes nothing.
 */
#ifndef RLT_QUOTA_QUOTA_H
#define RLT_QUOTA_QUOTA_H

#include "ratelimit/ratelimit.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Reports a member's demand is measured over (a sliding sum of counts and of elapsed time). */
#define RLT__QUOTA_HISTORY 3

/* The largest tokens_per_fill and max_tokens: the RLQS TokenBucket fields are uint32. */
#define RLT__QUOTA_TOKENS_MAX INT64_C(4294967295)

typedef struct rlt__quota rlt__quota;

/* Options.  report_interval is required; every other field all-zero means its default. */
typedef struct rlt__quota_options {
    rlt_ns report_interval;        /* I: the Envoys' reporting_interval, > 0 */
    rlt_ns ttl;                    /* assignment_time_to_live; 0 = 8 x I */
    rlt_ns renew_before;           /* resend when the TTL has this little left; 0 = 2 x I */
    rlt_ns min_resend;             /* G: the shortest time between two assignments with a burst
                                      to one member; 0 = I.  ttl >= renew_before + G. */
    uint32_t headroom_permille;    /* want = demand + max(1, demand x this / 1000); 0 = 250 */
    uint32_t reserve_permille;     /* kept out of the division for joiners, but no more than
                                      one joiner's share, ceil(Q / (members + 1)), and at least
                                      one token when Q or B >= 2; 0 = 50; at most 500 */
    uint32_t change_permille;      /* a material change: |new - old| x 1000 >= this x old;
                                      0 = 125; at most 1000 */
    size_t max_streams;            /* open streams; 0 = 65536 */
    size_t max_buckets;            /* buckets, closing ones included; 0 = 65536 */
    size_t max_buckets_per_stream; /* buckets one stream may report; 0 = 1024 */
    size_t max_members;            /* (stream, bucket) members, departed ones awaiting their TTL
                                      included; 0 = 1,048,576 */
} rlt__quota_options;

/* A bucket's budget: its part of R and B (the whole of them, or in Redis mode the part this
 * server divides). */
typedef struct rlt__quota_budget {
    int64_t limit;        /* N tokens ... */
    rlt_ns period;        /* ... per P ns: R = N / P; both > 0 */
    int64_t burst;        /* B tokens, 1..RLT__QUOTA_TOKENS_MAX */
    rlt_ns fill_interval; /* F of every assignment; 0 = P.  Q = floor(N x F / P) must be
                             1..RLT__QUOTA_TOKENS_MAX.  A larger F makes finer shares. */
} rlt__quota_budget;

/* One usage report of one bucket on one stream, as RLQS's BucketQuotaUsage carries it. */
typedef struct rlt__quota_usage {
    uint64_t allowed; /* num_requests_allowed */
    uint64_t denied;  /* num_requests_denied */
    rlt_ns elapsed;   /* time_elapsed: >= 0; 0 carries no rate (the counts are not used) */
} rlt__quota_usage;

/* An assignment, as RLQS's QuotaAssignmentAction carries it. */
typedef struct rlt__quota_assignment {
    bool deny_all;            /* a BlanketRule DENY_ALL (no capacity was free); else a bucket */
    uint32_t max_tokens;      /* b_i >= 1 (0 with deny_all) */
    uint32_t tokens_per_fill; /* q_i >= 1 (0 with deny_all): r_i = q_i / F */
    rlt_ns fill_interval;     /* F */
    rlt_ns ttl;               /* assignment_time_to_live */
    rlt_ns expires_at;        /* sent_at + ttl (saturated), in the caller's clock */
} rlt__quota_assignment;

/* Why rlt__quota_report answered as it did. */
typedef enum rlt__quota_reason {
    RLT__QUOTA_KEEP = 0,  /* nothing to send: the Envoy keeps its live assignment */
    RLT__QUOTA_FIRST = 1, /* the member's first assignment (or its last one expired) */
    RLT__QUOTA_RENEW = 2, /* the live one's TTL is within renew_before */
    RLT__QUOTA_CHANGE = 3 /* the share changed materially */
} rlt__quota_reason;

typedef struct rlt__quota_answer {
    rlt__quota_reason reason;         /* KEEP, or send `assignment` to the stream now */
    rlt__quota_assignment assignment; /* the member's live assignment after this report */
} rlt__quota_answer;

/* Creates a division state.  Returns RLT_OK and *out; RLT_EINVAL (NULL, report_interval <= 0,
 * ttl < renew_before + min_resend after the defaults, a permille out of range, a cap over
 * UINT32_MAX - 1); RLT_ENOMEM. */
int rlt__quota_open(rlt__quota **out, const rlt__quota_options *opt);

/* Frees everything.  NULL is a no-op. */
void rlt__quota_close(rlt__quota *q);

/* Adds a bucket with budget `b`; *bucket gets its id (a small integer, reused after the
 * bucket is freed).  The caller maps RLQS BucketIds to ids.  Returns RLT_OK; RLT_EINVAL
 * (NULL, a budget field out of range); RLT_ERANGE (Q or B beyond RLT__QUOTA_TOKENS_MAX, or
 * N x F overflowing); RLT_EFULL (max_buckets); RLT_ENOMEM. */
int rlt__quota_bucket_open(rlt__quota *q, const rlt__quota_budget *b, uint32_t *bucket);

/* Replaces the budget of `bucket` (Redis mode: this server's part of R and B changed).
 * F must stay as it is.  Unlike rlt__quota_bucket_open, a zero limit (Q = 0) or a zero burst
 * is accepted: a zero budget, under which every member is answered deny-all (Redis mode: the
 * server holds no claim on the bucket).  Live assignments stay until replaced or expired: after a
 * decrease the ledger may exceed the new Q or B; no member is raised until it is back under (each
 * report's answer only lowers it), so the sums are bounded by the old budget until then,
 * at most one TTL.  Returns RLT_OK, RLT_EINVAL (unknown or closing bucket, a bad budget,
 * another F), RLT_ERANGE as rlt__quota_bucket_open. */
int rlt__quota_bucket_budget(rlt__quota *q, uint32_t bucket, const rlt__quota_budget *b);

/* Closes `bucket`: its members leave it (as rlt__quota_stream_close) and it takes no more
 * reports; its slot is freed by rlt__quota_sweep once every assignment has expired.
 * Returns RLT_OK or RLT_EINVAL (unknown or already closing). */
int rlt__quota_bucket_close(rlt__quota *q, uint32_t bucket);

/* Opens a stream (one Envoy's StreamRateLimitQuotas call); *stream gets its id.  Returns
 * RLT_OK, RLT_EINVAL, RLT_EFULL (max_streams), RLT_ENOMEM. */
int rlt__quota_stream_open(rlt__quota *q, uint32_t *stream);

/* Closes `stream` (the call ended or broke): its members depart.  A departed member's live
 * assignment stays in the ledger until it expires (its Envoy may enforce it until then);
 * the stream id is free at once.  Returns RLT_OK or RLT_EINVAL (unknown stream). */
int rlt__quota_stream_close(rlt__quota *q, uint32_t stream);

/* One report of `bucket` on `stream` at `now`: records the usage, joins the stream to the
 * bucket on its first report, redivides the bucket when its division is older than I / 4,
 * and applies the resend rule.  a->reason says whether to send a->assignment now.
 * A joiner's first answer comes at once: its target is at most its equal share among
 * max(the bucket's active members, the streams open on this rlt__quota), so that a fleet
 * reporting a new bucket at once gets about Q / n each rather than first come, first served;
 * capped by what the ledger has free (the reserve); the others give way at their next answers.
 * Costs O(buckets of the stream), plus O(n log n) for a bucket of n members when it redivides.
 * Returns RLT_OK; RLT_EINVAL (NULL, unknown stream or bucket, a closing bucket, elapsed < 0);
 * RLT_EFULL (max_buckets_per_stream or max_members: the stream is not joined); RLT_ENOMEM (not
 * joined).  On error nothing changes. */
int rlt__quota_report(rlt__quota *q, uint32_t stream, uint32_t bucket, const rlt__quota_usage *u,
                      rlt_ns now, rlt__quota_answer *a);

/* Frees the ledger entries expired at `now` in every bucket, removes members with no live
 * assignment (departed, or silent for their whole TTL), and frees closed buckets left empty.
 * O(members).  Reports expire their own bucket's entries at each division; call this every
 * TTL or so to bound memory held by departed members. */
void rlt__quota_sweep(rlt__quota *q, rlt_ns now);

/* A bucket's ledger counted exactly at `now`: the sums over assignments whose TTL has not
 * run out (departed members' included), the budget, and the member counts. */
typedef struct rlt__quota_totals {
    int64_t tokens_per_fill; /* sum of live q_i: <= fill_capacity for a fixed budget */
    int64_t max_tokens;      /* sum of live b_i: <= burst */
    int64_t fill_capacity;   /* Q */
    int64_t burst;           /* B */
    rlt_ns fill_interval;    /* F */
    uint32_t members;        /* members, departed ones awaiting their TTL included */
    uint32_t active;         /* members whose stream is open */
    int64_t demand;          /* sum of the active members' demands, tokens per F rounded up, each
                                capped at RLT__QUOTA_TOKENS_MAX (not at Q: Redis mode reports it to
                                ask for a larger part of the global budget) */
    uint32_t unknown;        /* active members whose demand is not known yet (no rate reported) */
} rlt__quota_totals;

/* Fills *t for `bucket` at `now` (O(members)).  RLT_OK or RLT_EINVAL. */
int rlt__quota_bucket_totals(const rlt__quota *q, uint32_t bucket, rlt_ns now,
                             rlt__quota_totals *t);

/* One member as the latest division sees it (for the simulator, metrics and tests). */
typedef struct rlt__quota_member_info {
    int64_t demand;             /* tokens per F, rounded up; -1 while unknown */
    int64_t want_q;             /* what the division was asked for (demand + headroom, <= Q) */
    int64_t target_q;           /* what the division gave it, tokens per F */
    int64_t target_b;           /* and in burst tokens */
    rlt__quota_assignment live; /* its live assignment (max_tokens 0 and deny_all when none) */
} rlt__quota_member_info;

/* Fills *info for `stream`'s membership of `bucket` at `now`.  RLT_OK; RLT_ENOENT (the stream
 * never reported the bucket, or was removed); RLT_EINVAL. */
int rlt__quota_member(const rlt__quota *q, uint32_t stream, uint32_t bucket, rlt_ns now,
                      rlt__quota_member_info *info);

/* The documented bound on over-admission for `bucket`: how many requests beyond R x T + B the
 * whole fleet can admit in any window of length `window` ns, B + floor(B x window / G), with
 * G = min_resend (`steady` false: any demand pattern) or ttl - renew_before (`steady` true:
 * no material change and no join in or just before the window, renewals only).  Holds while
 * every Envoy applies an answer when the server gives it and admits nothing with no live
 * assignment (no_assignment and expired_assignment behaviours deny); an Envoy on a fallback
 * token bucket of rate f and burst b adds f x T + b while on it (the static split R / N, B / N
 * for all N: R x d + B over the start, d the round trip; docs/quota.md).  It covers the start:
 * first answers are in the ledger like any other.  Returns RLT_OK, RLT_EINVAL, RLT_ERANGE
 * (saturates *excess at INT64_MAX). */
int rlt__quota_excess_bound(const rlt__quota *q, uint32_t bucket, rlt_ns window, bool steady,
                            int64_t *excess);

#endif
