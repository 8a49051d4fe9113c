/* `ratelimit quota`'s parts: the options and the table (quota.c), the streams over HTTP/2
 * (quota_h2.c: one connection per stream, as one Envoy each) and the local enforcement
 * (quota_enforce.h).  Internal to src/cli. */
#ifndef RLT_CLI_QUOTA_H2_H
#define RLT_CLI_QUOTA_H2_H

#include "cli/quota_enforce.h"
#include "proto/rlqs_client.h"
#include "ratelimit/ratelimit.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RLT__Q_MAX_BUCKETS 8
#define RLT__Q_MAX_STREAMS 64

/* One --bucket: its pairs point into the option's text (copied, NUL-separated). */
typedef struct rlt__q_bucket {
    char text[512]; /* "k=v,k=v" as given, for display */
    char store[512];
    rlt__rlqsc_pair pairs[RLT__RLQSC_MAX_PAIRS];
    size_t n;
} rlt__q_bucket;

typedef struct rlt__q_opts {
    const char *connect; /* HOST:PORT */
    const char *domain;
    const char *token; /* bearer token, or NULL */
    rlt__q_bucket bucket[RLT__Q_MAX_BUCKETS];
    size_t nb;
    int streams;
    int64_t demand[RLT__Q_MAX_STREAMS]; /* requests per second of each stream */
    int64_t interval_ns;
    int64_t seconds_ns;
    bool no_assignment_deny, expired_allow;
    size_t nbudget; /* --budget given for the first nbudget buckets */
    rlt_policy budget[RLT__Q_MAX_BUCKETS];
} rlt__q_opts;

/* One stream's view of a bucket over one interval. */
typedef struct rlt__q_count {
    uint64_t allowed, denied;
    uint64_t answers; /* assignments received for it in the interval */
} rlt__q_count;

/* An opened stream (quota_h2.c). */
typedef struct rlt__q_stream rlt__q_stream;

/* Connects stream `index` to o->connect and starts StreamRateLimitQuotas on it, its buckets'
 * behaviours set from o.  Returns the stream, or NULL with a message in err (the server is
 * unreachable). */
rlt__q_stream *rlt__q_open(const rlt__q_opts *o, int index, char *err, size_t errlen);

/* Closes the connection and frees the stream; NULL is a no-op. */
void rlt__q_close(rlt__q_stream *s);

/* The socket, and the events poll(2) should wait for on it. */
int rlt__q_fd(const rlt__q_stream *s);
short rlt__q_events(const rlt__q_stream *s);

/* Reads what has arrived and applies each assignment at `now`; sends what is queued.
 * Returns 0, or -1 with a message in err when the stream failed or the server is not an
 * RLQS server (what it answered instead). */
int rlt__q_pump(rlt__q_stream *s, int64_t now, char *err, size_t errlen);

/* Whether the server answered the call's headers (an RLQS stream is open). */
bool rlt__q_ready(const rlt__q_stream *s);

/* Queues a report of every bucket: the counts of the interval just ended and its elapsed
 * time (0 for the first report); the counts are then cleared. */
int rlt__q_report(rlt__q_stream *s, int64_t elapsed_ns, char *err, size_t errlen);

/* The stream's local state of bucket b (enforced with rlt__qe_admit), and its counts. */
rlt__qe_bucket *rlt__q_qe(rlt__q_stream *s, size_t b);
rlt__q_count *rlt__q_counts(rlt__q_stream *s, size_t b);
/* Assignments received for bucket b over the whole run. */
uint64_t rlt__q_assignments(const rlt__q_stream *s, size_t b);
/* The shortest assignment_time_to_live the stream received (0: none yet). */
int64_t rlt__q_min_ttl(const rlt__q_stream *s);

#endif
