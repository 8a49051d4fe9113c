/* RESP's multi-limit reservations (cmd_limits.c): RL.MRESERVE and RL.MSETTLE. */
#ifndef RLT_SERVER_RESP_CMD_LIMITS_H
#define RLT_SERVER_RESP_CMD_LIMITS_H

#include "server/base/obuf.h"
#include "server/request/request.h"
#include "server/resp/resp.h"

#include <stdbool.h>
#include "server/base/scratch.h"

#include <stddef.h>

struct rlt__srv;

/* Runs a[0] when it is RL.MRESERVE or RL.MSETTLE (argc n >= 1) at `now`, appending the reply
 * (or an error) to o, and returns true; false for any other command (nothing written).  The
 * keys are built in sc (the caller releases it after the command). */
bool rlt__cmd_limits(struct rlt__srv *s, rlt__session *ss, rlt__scratch *sc,
                     const rlt__resp_arg *a, size_t n, rlt_ns now, rlt__obuf *o);

#endif
