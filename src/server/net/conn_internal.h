/* The connection layer's own types, shared by its two files: conn.c (connections: reading,
 * feeding, the turn, writing, closing) and worker.c (worker threads, listeners, accepting, the
 * daemon's start and stop).  worker.c calls into conn.c, never the other way. */
#ifndef RLT_SERVER_NET_CONN_INTERNAL_H
#define RLT_SERVER_NET_CONN_INTERNAL_H

#include "server/base/obuf.h"
#include "server/base/scratch.h"
#include "server/net/pipe.h"
#include "server/net/protocol.h"
#include "server/request/request.h"
#include "server/request/srv.h"

#include <event2/event.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#define READ_CHUNK 16384
#define MAX_LISTENERS 8 /* protocols served at once */

typedef struct worker worker;

typedef struct listener_ev {
    worker *w;
    const rlt__proto *proto;
    int fd;
    struct event *ev;
} listener_ev;

struct rlt__conn {
    worker *w;
    const rlt__proto *proto;
    void *pstate; /* the protocol's */
    int fd;
    struct event *rev, *wev;
    char *in;
    size_t in_len, in_cap;
    rlt__obuf out;
    rlt__session ss;
    rlt_ns started;      /* first byte of the pending partial request; 0 = none */
    rlt_ns linger_until; /* draining: closed at this instant whatever still arrives */
    rlt_ns idle_armed;   /* the read timer holds the idle timeout (+1; 0: a deadline or none) */
    bool writing;        /* wev is added: the socket did not take all the output */
    bool draining;       /* replies sent, write side shut: discarding input until EOF */
    bool in_turn;        /* read in this turn: on the worker's `turn` list */
    bool refused;        /* answered with the protocol's refusal: close after sending */
    struct rlt__conn *prev, *next;
    struct rlt__conn *turn_next;
};

struct worker {
    struct rlt__daemon *d;
    unsigned idx;
    pthread_t th;
    bool started;
    struct event_base *base;
    listener_ev lis[MAX_LISTENERS];
    size_t nlis;
    struct event *resume_ev; /* re-enables accepting after a pause */
    bool paused;
    rlt__conn *conns;
    rlt__pipe *pipe;
    rlt__conn *turn;          /* connections read in this turn */
    rlt_ns turn_now;          /* the clock for this turn's requests; 0 = not read yet */
    size_t turn_reqs;         /* requests in this turn, for the latency histogram */
    struct event *stop_ev;    /* made active by rlt__daemon_stop */
    bool stop;                /* atomic: leave the loop */
    rlt__scratch *scratch_sc; /* the handlers' per-request room (base/scratch.h) */
    char scratch[READ_CHUNK]; /* where a connection with nothing pending reads */
};

struct rlt__daemon {
    rlt__srv *s;
    worker *w;
    unsigned n;
    size_t fd_cap; /* max connections the descriptor limit allows */
};

static inline void tv_of(rlt_ns t, struct timeval *tv)
{
    tv->tv_sec = t / RLT_NS_PER_S;
    tv->tv_usec = (t % RLT_NS_PER_S) / RLT_NS_PER_US;
}

/* A connection accepted on fd for `proto` joins worker w (conn.c); refused with the
 * protocol's answer when past max_connections. */
void rlt__conn_accepted(worker *w, const rlt__proto *proto, int fd);
/* The end of a turn (conn.c): decides what is staged, then completes every connection read
 * in it (sends, deadlines, lingering closes). */
void rlt__worker_finish_turn(worker *w);
/* Closes a connection at once and frees it (conn.c): the daemon's stop. */
void rlt__conn_free(rlt__conn *c);

#endif
