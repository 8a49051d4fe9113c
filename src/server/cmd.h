/* Pipelined execution of RESP commands (cmd.c): the decisions of a pipeline read go to the
 * store in batches, so that one thread overlaps the cache misses of many keys.  net.c feeds
 * every parsed command through rlt__pipe_exec and calls rlt__pipe_flush before it sends the
 * output or moves the input; tests drive it the same way without sockets. */
#ifndef RLT_SERVER_CMD_H
#define RLT_SERVER_CMD_H

#include "server/srv.h"

/* Most decisions one pipe holds before it decides them (then it flushes by itself). */
#define RLT__PIPE_MAX 256

typedef struct rlt__pipe rlt__pipe;

/* A pipe for one thread (not thread-safe).  A worker's connections share one: it collects the
 * decisions of every connection read in one event-loop turn.  NULL when out of memory. */
rlt__pipe *rlt__pipe_new(void);
/* Frees a pipe.  NULL is a no-op.  Pending decisions are dropped: flush first. */
void rlt__pipe_free(rlt__pipe *p);

/* Executes one command exactly as rlt__cmd_exec would, with its reply in the same place of
 * `out`, except that a well-formed CL.THROTTLE, RL.CHECK or RL.PEEK may be deferred: its
 * key and policy are resolved now, its decision and reply wait for rlt__pipe_flush (or for
 * the next command, of any connection, that cannot be deferred: it flushes first, so every
 * connection's replies stay in order).  Until the flush, a deferred command keeps pointers
 * into argv's bytes and to `out`: neither may change or go away.  Deferred commands are
 * decided at the `now` of the first one (a different `now` flushes first).  Counts error
 * replies in s's metrics. */
void rlt__pipe_exec(rlt__pipe *p, rlt__srv *s, rlt__session *ss, const rlt__resp_arg *argv,
                    size_t argc, rlt_ns now, rlt__obuf *out);

/* Decides the deferred commands (one store batch per run of the same policy: decisions on
 * one key happen in command order) and appends each reply to its command's `out`, in order.
 * An empty pipe is a no-op. */
void rlt__pipe_flush(rlt__pipe *p, rlt__srv *s);

#endif
