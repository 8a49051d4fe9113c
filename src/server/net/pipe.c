/* Deferred decisions of one worker's loop turn, decided in batches through the seam. */
#include "server/net/pipe.h"

#include "server/request/decide.h"

#include <stdlib.h>
#include <string.h>

struct rlt__pipe {
    size_t n;
    rlt_ns now;
    int ids[RLT__PIPE_MAX];
    bool shadows[RLT__PIPE_MAX];
    rlt_key keys[RLT__PIPE_MAX];
    int64_t costs[RLT__PIPE_MAX];
    rlt_decision out[RLT__PIPE_MAX];
    int status[RLT__PIPE_MAX];
    rlt__pipe_reply reply[RLT__PIPE_MAX];
    char kbuf[RLT__PIPE_MAX][RLT_KEY_MAX];
};

rlt__pipe *rlt__pipe_new(void)
{
    return calloc(1, sizeof(rlt__pipe));
}

void rlt__pipe_free(rlt__pipe *p)
{
    free(p);
}

bool rlt__pipe_pending(const rlt__pipe *p)
{
    return p->n > 0;
}

void rlt__pipe_add(rlt__pipe *p, struct rlt__srv *s, rlt_ns now, const rlt__target *t,
                   int64_t cost, const rlt__pipe_reply *r)
{
    if (p->n > 0 && now != p->now) rlt__pipe_flush(p, s);
    size_t i = p->n++;
    p->now = now;
    /* A copy: the caller's input may move or be freed before the flush. */
    memcpy(p->kbuf[i], t->key, t->klen);
    p->keys[i] = (rlt_key){.key = p->kbuf[i], .klen = t->klen};
    p->ids[i] = t->policy_id;
    p->shadows[i] = t->shadow;
    p->costs[i] = cost;
    p->reply[i] = *r;
    if (p->n == RLT__PIPE_MAX) rlt__pipe_flush(p, s);
}

void rlt__pipe_flush(rlt__pipe *p, struct rlt__srv *s)
{
    size_t n = p->n;
    if (n == 0) return;
    p->n = 0;
    rlt__decide_batch(s, p->ids, p->shadows, p->keys, n, p->now, p->costs, p->out, p->status);
    for (size_t i = 0; i < n; i++) {
        const rlt__pipe_reply *r = &p->reply[i];
        r->fn(s, r, p->ids[i], p->costs[i], p->now, p->status[i], &p->out[i]);
    }
}
