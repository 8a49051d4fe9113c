/* The connection layer (conn.c, worker.c): listeners, worker threads and their event loops, and every
 * connection of every protocol.  It accepts (stopping for a short pause when descriptors run
 * out, never spinning), keeps one count of connections across protocols against
 * max_connections (fitted to the descriptor limit at start), buffers input and output (the
 * output capped by max_output), and enforces two deadlines: a started request must arrive
 * whole within client_timeout whatever the pace of its bytes, and an idle connection is closed
 * after idle_timeout.  Its loop works in turns: every readable connection is read and fed to
 * its protocol, the decisions staged in the worker's pipe are decided in one batch at the
 * turn's end with one clock read, then each connection sends its replies with one send. */
#ifndef RLT_SERVER_NET_CONN_H
#define RLT_SERVER_NET_CONN_H

#include "server/base/obuf.h"
#include "server/base/scratch.h"
#include "server/net/pipe.h"
#include "server/net/protocol.h"
#include "server/request/request.h"

#include <stdbool.h>
#include <stddef.h>

struct rlt__srv;

/* One listener: a protocol on a port of the config's bind address.  port 0 = any free port,
 * -1 = off.  rlt__daemon_start writes the bound port back (-1 when off). */
typedef struct rlt__listener {
    const rlt__proto *proto;
    int port;
} rlt__listener;

typedef struct rlt__daemon rlt__daemon;

/* Binds every listener (SO_REUSEPORT among the daemon's own worker sockets only: a port that
 * another process holds is an error naming it), raises the descriptor soft limit to the hard
 * limit and fits max_connections to it (logged), and starts the worker threads (the config's
 * `threads`; 0 = one per core), each with its own event loop.  Returns RLT_OK, or an RLT_* code
 * with a message in err (nothing is left running). */
int rlt__daemon_start(rlt__daemon **out, struct rlt__srv *s, rlt__listener *ls, size_t nls,
                      char *err, size_t errlen);
/* Stops the workers, closes every connection and frees the daemon.  NULL is a no-op. */
void rlt__daemon_stop(rlt__daemon *d);
/* The connection limit in force: max_connections, or less when descriptors do not allow it. */
size_t rlt__daemon_max_connections(const rlt__daemon *d);

/* ---- for protocols: one connection ---- */

struct rlt__srv *rlt__conn_srv(const rlt__conn *c);
rlt__session *rlt__conn_session(rlt__conn *c);
rlt__obuf *rlt__conn_out(rlt__conn *c);
/* The worker's scratch arena (base/scratch.h), for one request at a time: take a mark, use it,
 * release to the mark.  Counted in max_memory (used_memory_connections). */
rlt__scratch *rlt__conn_scratch(rlt__conn *c);
/* The worker's pipe: staged replies are written before the connection sends. */
rlt__pipe *rlt__conn_pipe(rlt__conn *c);
/* The protocol's per-connection state (NULL until set). */
void *rlt__conn_state(const rlt__conn *c);
void rlt__conn_set_state(rlt__conn *c, void *state);
/* Counts one request of this turn: the latency histogram (and the command count) shares the
 * turn's processing time among the turn's requests. */
void rlt__conn_request_done(rlt__conn *c);
/* Closes the connection once its replies are sent (the rest of the input is discarded). */
void rlt__conn_close_after(rlt__conn *c);

#endif
