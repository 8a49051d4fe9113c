/* The front ends' shared half of multi-limit reservations (RESP's RL.MRESERVE / RL.MSETTLE,
 * HTTP's /v1/mreserve and /v1/msettle): one limit's (key, policy, weighting) resolved, a
 * usage read, and the error texts, so both doors say the same thing. */
#ifndef RLT_SERVER_REQUEST_LIMITS_H
#define RLT_SERVER_REQUEST_LIMITS_H

#include "ratelimit/budget.h"
#include "server/request/request.h"

#include <stdbool.h>
#include <stddef.h>

struct rlt__srv;

/* Resolves one limit: the key with the session's prefix (into kbuf, RLT_KEY_MAX bytes), the
 * policy (named or inline; no tiers), and, when w is not NULL, its weighting text
 * (rlt_weights_parse) into out->weights.  Returns RLT_OK and *out (its key in kbuf or the
 * argument), or an RLT_* code with a message (no "ERR ") in err. */
int rlt__limit_resolve(struct rlt__srv *s, const rlt__session *ss, const char *key, size_t klen,
                       const char *policy, size_t plen, const char *w, size_t wlen, rlt_ns now,
                       char *kbuf, rlt_limit *out, char *err, size_t errlen);

/* Reads a usage text (rlt_usage_parse) for `what` ("estimate" or "usage").  Returns RLT_OK or
 * the code with a message in err. */
int rlt__limit_usage(const char *p, size_t n, const char *what, rlt_usage *u, char *err,
                     size_t errlen);

/* The message for status st of a multi-limit reserve (settle false) or settle. */
const char *rlt__limits_strerror(const struct rlt__srv *s, int st, bool settle);

#endif
