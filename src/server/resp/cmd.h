/* RESP commands (cmd.c): the RL.* family, redis-cell's CL.THROTTLE, and the connection
 * commands every Redis client or tool sends (PING, AUTH, HELLO, CLIENT, COMMAND, INFO,
 * QUIT, ...).  A command is parsed and validated once; its decision is made at once or staged
 * in a pipe.  No sockets here: tests drive it as the connection layer does. */
#ifndef RLT_SERVER_RESP_CMD_H
#define RLT_SERVER_RESP_CMD_H

#include "ratelimit/ratelimit.h"
#include "server/base/obuf.h"
#include "server/base/scratch.h"
#include "server/net/pipe.h"
#include "server/request/request.h"
#include "server/resp/resp.h"

#include <stddef.h>

struct rlt__srv;

/* Executes one command (argc >= 1) of session ss at `now` and appends its reply to out.
 * With a pipe, the decision of a well-formed CL.THROTTLE, RL.CHECK or RL.PEEK is staged and
 * its reply written at rlt__pipe_flush; every other command flushes the pipe first, so every
 * connection's replies stay in order.  Without a pipe (NULL) it is decided at once: the same
 * parsing, the same reply.  Error replies are counted in the metrics.  The command's keys
 * and vectors are built in sc (a worker's scratch), released to where it was when done. */
void rlt__cmd_exec(struct rlt__srv *s, rlt__session *ss, rlt__pipe *p, rlt__scratch *sc,
                   const rlt__resp_arg *argv, size_t argc, rlt_ns now, rlt__obuf *out);

#endif
