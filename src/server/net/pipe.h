/* Deferred decisions (pipe.c): the checks of every connection read in one event-loop turn wait
 * here and go to the seam in batches at the turn's end, so one thread overlaps the cache
 * misses of many keys (or sends one Redis pipeline).  Any protocol stages into it: each item
 * carries its own reply function, called at the flush with the decision, in staging order.
 * A worker owns one pipe; not thread-safe. */
#ifndef RLT_SERVER_NET_PIPE_H
#define RLT_SERVER_NET_PIPE_H

#include "ratelimit/ratelimit.h"
#include "ratelimit/store.h"
#include "server/base/obuf.h"
#include "server/request/request.h"

#include <stdbool.h>
#include <stdint.h>

struct rlt__srv;

/* Most decisions one pipe holds before it decides them (then it flushes by itself). */
#define RLT__PIPE_MAX 256

typedef struct rlt__pipe rlt__pipe;

/* What a staged item's reply needs besides the decision: where it goes and the protocol's
 * own values (CL.THROTTLE's max_burst + 1, HTTP's keep-alive and HEAD flags, the name of the
 * RateLimit field). */
typedef struct rlt__pipe_reply {
    rlt__obuf *out;
    /* Writes the reply of one item: st RLT_OK with *d, or an error status.  cost and policy
     * are the item's. */
    void (*fn)(struct rlt__srv *s, const struct rlt__pipe_reply *r, int policy_id, int64_t cost,
               rlt_ns now, int st, const rlt_decision *d);
    int64_t arg;
    unsigned flags;
    char name[RLT_NAME_MAX + 1];
} rlt__pipe_reply;

/* A new, empty pipe; NULL when out of memory.  rlt__pipe_free(NULL) is a no-op; pending
 * items are dropped, so flush first. */
rlt__pipe *rlt__pipe_new(void);
void rlt__pipe_free(rlt__pipe *p);

/* Stages the check of target t (its key bytes are copied) with `cost` at `now`.  An item at a
 * different `now` than the pending ones flushes them first; a full pipe flushes itself. */
void rlt__pipe_add(rlt__pipe *p, struct rlt__srv *s, rlt_ns now, const rlt__target *t,
                   int64_t cost, const rlt__pipe_reply *r);

/* Decides the staged items through the seam (rlt__decide_batch: decisions on one key happen
 * in staging order) and calls each item's reply function, in order.  Empty: a no-op. */
void rlt__pipe_flush(rlt__pipe *p, struct rlt__srv *s);

/* Whether items are staged (their replies and out buffers are pending). */
bool rlt__pipe_pending(const rlt__pipe *p);

#endif
