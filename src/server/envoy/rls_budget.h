/* One reservation over a ShouldRateLimit request's descriptors (rls_budget.c): Envoy's
 * request-time call reserves, its stream-end call (apply_on_stream_done) settles.  A
 * descriptor whose last entry is `ratelimit.reserve` (or `ratelimit.settle`) with an id (the
 * request's x-request-id) marks the call; the entry is stripped before matching. */
#ifndef RLT_SERVER_ENVOY_RLS_BUDGET_H
#define RLT_SERVER_ENVOY_RLS_BUDGET_H

#include "server/config/config.h"
#include "server/request/request.h"

#include <ratelimit/store.h>

enum { RLT__BUDGET_NONE = 0, RLT__BUDGET_RESERVE = 1, RLT__BUDGET_SETTLE = 2 };
#define RLT__BUDGET_ID_MAX 128

/* Which mark the entry `last` (a descriptor's last) is (RLT__BUDGET_*); for a reserve or a
 * settle, id (RLT__BUDGET_ID_MAX bytes) gets its value NUL-terminated.  -1 with a message in
 * err for an id empty, longer than RLT__BUDGET_ID_MAX - 1 or holding a NUL. */
int rlt__envoy_budget_mark(const rlt__entry *last, char *id, char *err, size_t errlen);

/* Reserves (op RESERVE) the n counted limits checks[0..n) (cost: the estimate), all or
 * nothing, under id in the domain; or settles (op SETTLE) the reservation made under id:
 * each reserved limit charged the cost its check carries here (0 when the call lacks it),
 * once: a second settle, or one for an unknown id, charges nothing (*found false).  each[k]
 * gets limit k's state, *refused the index that refused (-1).  Returns RLT_OK or a store
 * error (RLT_EINVAL for more than RLT_USAGE_NAMES limits). */
int rlt__envoy_budget(struct rlt__srv *s, const rlt__session *ss, int op, const char *domain,
                      size_t dlen, const char *id, const rlt_check *checks, size_t n, rlt_ns now,
                      rlt_decision *each, int *refused, bool *found);

#endif
