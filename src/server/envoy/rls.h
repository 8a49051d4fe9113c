/* envoyproxy/ratelimit's decision (rls.c), shared by every front end that speaks it: the
 * HTTP /json endpoint (proto3 JSON, httpin.c) and gRPC ShouldRateLimit (protobuf, grpc.c).
 * A request (a domain, descriptors, hits_addend) is matched against the config's descriptor
 * trees, decided all or nothing through the seam (decide.h), and turned into one status per
 * descriptor; the renderers only format statuses.  Units and windows are envoyproxy/ratelimit's:
 * fixed windows of 1 s, 60 s, 3600 s, 86400 s, 7 x 86400 s (WEEK), 30 x 86400 s (MONTH) and
 * 365 x 86400 s (YEAR) aligned to multiples of their length since the Unix epoch. */
#ifndef RLT_SERVER_ENVOY_RLS_H
#define RLT_SERVER_ENVOY_RLS_H

#include "ratelimit/ratelimit.h"
#include "ratelimit/store.h"
#include "server/config/config.h"
#include "server/config/units.h"
#include "server/base/obuf.h"
#include "server/base/scratch.h"
#include "server/request/request.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rlt__srv;

#define RLT__ENVOY_MAX_DESCRIPTORS 32
#define RLT__ENVOY_MAX_ENTRIES 16

/* The protobuf enum values of RateLimitResponse.RateLimit.Code. */
enum { RLT__CODE_UNKNOWN = 0, RLT__CODE_OK = 1, RLT__CODE_OVER_LIMIT = 2 };

/* One request descriptor. */
typedef struct rlt__envoy_desc {
    size_t nentries;
    rlt__entry entries[RLT__ENVOY_MAX_ENTRIES];
    int64_t hits_addend;       /* -1: unset (the request's); 0: check without counting */
    int64_t limit_rpu;         /* the request's `limit` override: requests_per_unit; -1: none */
    int limit_unit;            /* its unit (RLT__UNIT_*) */
} rlt__envoy_desc;

typedef struct rlt__envoy_req {
    void *json; /* the JSON parse tree the strings point into (/json), or NULL */
    const char *domain;
    size_t dlen;
    size_t ndesc;
    rlt__envoy_desc desc[RLT__ENVOY_MAX_DESCRIPTORS];
    int64_t hits_addend; /* the request's, already 1 when it was 0 or unset */
} rlt__envoy_req;

/* Clears r to an empty request (no descriptors, hits_addend 1). */
void rlt__envoy_req_init(rlt__envoy_req *r);
/* Sets up a descriptor being added: no entries, hits_addend and limit unset. */
void rlt__envoy_desc_init(rlt__envoy_desc *d);

/* One descriptor's answer. */
typedef struct rlt__envoy_status {
    int code;               /* RLT__CODE_OK or RLT__CODE_OVER_LIMIT */
    bool has_limit;         /* current_limit present (false: no rule, or a replaced one) */
    bool unlimited;         /* the rule is `unlimited`: limit_remaining is UINT32_MAX */
    int64_t requests_per_unit;
    int unit;               /* RLT__UNIT_* */
    const char *name;       /* rate_limit.name ("" when none); lives as long as the config */
    int64_t remaining;      /* limit_remaining */
    int64_t reset_s;        /* duration_until_reset, whole seconds rounded up (0: omitted) */
    int policy_id;          /* the store policy (-1: none), for headers */
    rlt_decision d;         /* the limit's decision as it now stands (for headers) */
} rlt__envoy_status;

typedef struct rlt__envoy_result {
    bool over; /* overall_code OVER_LIMIT */
    size_t n;
    rlt__envoy_status st[RLT__ENVOY_MAX_DESCRIPTORS];
} rlt__envoy_result;

/* The store key of a descriptor (entries[0..n)) of `domain`: the session's tenant prefix,
 * then the domain and every entry, length-prefixed so that no two descriptors collide
 * ("2:rl|8:category=books").  out gets RLT_KEY_MAX bytes.  Returns RLT_OK and *len, or
 * RLT_EKEYLEN when it does not fit (or n > RLT__ENVOY_MAX_ENTRIES). */
int rlt__envoy_key(const char *domain, size_t dlen, const rlt__entry *entries, size_t n,
                   const rlt__session *ss, char *out, size_t *len);

/* Decides an envoy request of session ss (its tenant prefix goes before every key) at `now`
 * (the daemon's clock; rlt__clock_origin() gives the epoch alignment of the long units): the
 * rule of every descriptor (or its `limit` override), `replaces`, then one all-or-nothing
 * charge of every counted limit (per-descriptor hits_addend, 0 = a peek), shadow rules
 * decided apart (never denying); with a `ratelimit.reserve` or `ratelimit.settle` entry, one
 * reservation over the counted limits or its settle (rls_budget.h).  Counts the per-rule envoy metrics.  Returns RLT_OK with
 * *res filled, or an RLT_* code with a message in err: a bad request (a key too long, a cost
 * out of range) or, in Redis mode, a backend failure not covered by a fail mode; RLT_ENOMEM
 * when sc (the worker's scratch, where the keys are built and released) has no room. */
int rlt__envoy_decide(struct rlt__srv *s, const rlt__envoy_req *r, const rlt__session *ss,
                      rlt__scratch *sc, rlt_ns now, rlt__envoy_result *res, char *err,
                      size_t errlen);

/* Appends the proto3-JSON reply of /json for `res` (zero fields omitted). */
void rlt__envoy_render_json(const rlt__envoy_result *res, rlt__obuf *out);
/* Both: decides and appends the JSON reply; *http_status 200 or 429.  Returns as
 * rlt__envoy_decide. */
int rlt__envoy_decide_json(struct rlt__srv *s, const rlt__envoy_req *r, const rlt__session *ss,
                           rlt__scratch *sc, rlt_ns now, rlt__obuf *out, int *http_status,
                           char *err, size_t errlen);

/* Calls fn(ctx, name, value) for each header of `res` to add to the client's response: the
 * most restrictive limited status (the lowest limit_remaining; OVER_LIMIT first) gives the
 * values, as envoyproxy/ratelimit does.  Names of the X trio come from the config
 * (x_limit_header ...).  Nothing when no descriptor has a limit. */
void rlt__envoy_headers(struct rlt__srv *s, const rlt__envoy_result *res,
                        void (*fn)(void *ctx, const char *name, const char *value), void *ctx);

#endif
