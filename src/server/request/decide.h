/* The decision seam (decide.c): every decision ratelimitd makes goes through these functions,
 * whatever protocol asked.  They call the backend chosen at start (backend.h), count the
 * outcome per policy in the metrics, and apply shadow mode: with `shadow` (or the global
 * shadow_mode) a denial is counted, logged (rate-limited) and reported as allowed, with no
 * charge.  Every function returns an RLT_* status: RLT_OK with a decision, else why the
 * question could not be answered. */
#ifndef RLT_SERVER_REQUEST_DECIDE_H
#define RLT_SERVER_REQUEST_DECIDE_H

#include "ratelimit/budget.h"
#include "ratelimit/ratelimit.h"
#include "ratelimit/store.h"

#include <stdbool.h>
#include <stddef.h>

struct rlt__srv;

/* The backend's name ("local", "redis"). */
const char *rlt__decide_backend_name(const struct rlt__srv *s);

int rlt__decide(struct rlt__srv *s, int policy_id, bool shadow, const void *key, size_t klen,
                rlt_ns now, int64_t cost, rlt_decision *d);
/* As rlt__decide for a request of priority class c under a reserve of reserve_pct percent
 * (rlt_store_decide_class); critical or a reserve of 0 is rlt__decide.  RLT_EBACKEND when
 * the backend has no classes (Redis mode). */
int rlt__decide_class(struct rlt__srv *s, int policy_id, bool shadow, const void *key, size_t klen,
                      rlt_ns now, int64_t cost, rlt_class c, int reserve_pct, rlt_decision *d);
/* Decides n independent requests (a turn's), as n calls of rlt__decide would, in order for
 * every key, in as few backend calls as it can (store batches; Redis pipelines).  status[i]
 * is RLT_OK (out[i] the decision, counted, shadow mode applied with shadow[i]) or the item's
 * error. */
void rlt__decide_batch(struct rlt__srv *s, const int *policy, const bool *shadow,
                       const rlt_key *keys, size_t n, rlt_ns now, const int64_t *costs,
                       rlt_decision *out, int *status);
/* Shadow-mode log lines per second per worker thread; more are counted and summed up. */
#define RLT__SHADOW_LOG_PER_S 10
/* Under the key's tier policy (rlt__srv_tier_policy); RLT_ENOENT for an unknown tier. */
int rlt__decide_tier(struct rlt__srv *s, const char *default_tier, const void *key, size_t klen,
                     rlt_ns now, int64_t cost, rlt_decision *d);
/* All or nothing over n limits; *refused is the index of the first refusing limit or -1. */
int rlt__decide_multi(struct rlt__srv *s, const rlt_check *checks, size_t n, rlt_ns now,
                      rlt_decision *combined, int *refused);
int rlt__decide_reset(struct rlt__srv *s, int policy_id, const void *key, size_t klen);
/* latency_ns >= 0 reports the request's latency and outcome (rlt_outcome) to an adaptive
 * concurrency policy (rlt_store_release_report); < 0 releases only. */
int rlt__decide_release(struct rlt__srv *s, int policy_id, const void *key, size_t klen, rlt_ns now,
                        int64_t lease, rlt_ns latency_ns, int outcome);
/* A peek (cost 0) that is not counted in the metrics: per-descriptor details. */
int rlt__decide_peek(struct rlt__srv *s, int policy_id, const void *key, size_t klen, rlt_ns now,
                     rlt_decision *d);

/* Charge after the response.  Whether the backend holds reservations (the local store does;
 * Redis does not: the commands refuse with a message saying so). */
bool rlt__decide_can_reserve(const struct rlt__srv *s);
/* A reservation of `estimate` on behalf of `holder` (rlt_store_reserve_for; 0: anonymous),
 * counted as a decision, shadow mode applied (a denial reported allowed has no reservation:
 * *reservation 0).  RLT_EINVAL when the backend cannot reserve or the policy cannot settle. */
int rlt__decide_reserve(struct rlt__srv *s, uint64_t holder, int policy_id, bool shadow,
                        const void *key, size_t klen, rlt_ns now, int64_t estimate, rlt_ns timeout,
                        rlt_decision *d, uint64_t *reservation);
/* The timeout of a reservation asked for `ms` ms (0: none given): ms, or the default 300 s,
 * at most max_reservation_timeout.  -1 with a message when `ms` is over that bound. */
rlt_ns rlt__decide_reserve_timeout(struct rlt__srv *s, int64_t ms, char *err, size_t errlen);
/* Settles a reservation at its real cost (rlt_store_settle); not counted as a decision. */
int rlt__decide_settle(struct rlt__srv *s, int policy_id, const void *key, size_t klen, rlt_ns now,
                       uint64_t reservation, int64_t real_cost, rlt_decision *d);

/* The message (without "ERR ") for status `st` of a reservation (settle false) or a settle
 * on policy `id`, naming what the client can change.  Returns a constant or buf. */
const char *rlt__decide_reserve_strerror(struct rlt__srv *s, int id, rlt_ns now, int st,
                                         bool settle, char *buf, size_t cap);

/* The message (without "ERR ") for status `st` of a decision on policy `id` at `now`
 * (id -1: unknown): names what is out of range, the cost or the policy's rate.  Returns a
 * constant or buf. */
const char *rlt__decide_strerror(struct rlt__srv *s, int id, rlt_ns now, int st, char *buf,
                                 size_t cap);

/* Whether the backend holds multi-limit reservations (the local store does; Redis not yet). */
bool rlt__decide_can_reserve_limits(const struct rlt__srv *s);
/* One reservation over n limits (rlt_store_reserve_limits's contract), counted as
 * rlt__decide_multi counts; RLT_EINVAL also when the backend cannot hold them. */
int rlt__decide_reserve_limits(struct rlt__srv *s, uint64_t holder, const rlt_limit *limits,
                               size_t n, const rlt_usage *estimate, rlt_ns now, rlt_ns timeout,
                               rlt_decision *combined, rlt_decision *each, int *refused,
                               uint64_t *reservation);
/* Settles one (rlt_store_settle_limits's contract); not counted as a decision; RLT_EINVAL
 * also when the backend cannot hold them. */
int rlt__decide_settle_limits(struct rlt__srv *s, uint64_t reservation, const rlt_check *keys,
                              size_t n, const rlt_usage *usage, bool final, rlt_ns now,
                              rlt_decision *combined, rlt_decision *each, int64_t *charged);

#endif
