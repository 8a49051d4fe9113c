/* The connection layer: worker threads, listeners and the connections of every protocol.
 *
 * Each worker owns an event_base, one listening socket per listener (SO_REUSEPORT: the kernel
 * spreads connections over the workers), and the connections it accepted.  Its loop works in
 * turns, as Redis's does: in one turn, every readable connection reads what is there and feeds
 * it to its protocol, which answers at once or stages decisions in the worker's pipe; at the
 * turn's end the pipe is decided in one batch (one clock reading per turn), then each
 * connection writes all its replies with one send.
 *
 * Deadlines.  A request that has started (unparsed input is pending) must arrive whole within
 * client_timeout of its first byte: the read event's timer is re-armed at every turn to what
 * is left of that deadline, so a client trickling one byte at a time is closed on time (a
 * persistent event's timer alone would restart at every byte).  A connection with nothing
 * pending waits at most idle_timeout (0: forever).
 *
 * Descriptors.  At start the soft RLIMIT_NOFILE is raised to the hard limit and
 * max_connections fitted below it (Redis's maxclients).  When accept() still fails with
 * EMFILE/ENFILE, the worker stops accepting for ACCEPT_PAUSE_MS and logs once per pause
 * (nginx's approach): the listener stays readable while the backlog is full, so retrying at
 * once would spin.
 *
 * Memory.  An idle connection holds no input buffer: a read with nothing pending goes to the
 * worker's scratch buffer and is fed from there, and only the start of an unfinished request
 * is kept, in a buffer of its own that grows while that request is read and is let go when it
 * is consumed (nginx's and Redis's way: a few hundred bytes per idle client, not 32 KiB).  So
 * the connections' share of max_memory holds requests in flight and replies, and admission is
 * decided by max_connections alone, a refused client getting the protocol's clear error. */
#define _GNU_SOURCE /* accept4 */
#include "server/net/conn.h"
#include "server/net/conn_internal.h"

#include "server/base/clock.h"
#include "server/net/listen.h"
#include "server/base/log.h"
#include "server/base/mem.h"
#include "server/stats/metrics.h"
#include "server/request/srv.h"

#include <assert.h>
#include <errno.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define KEEP_ALWAYS 4096         /* the start of a request kept whatever the budget (conn_keep) */
#define MAX_INPUT RLT__MAX_INPUT /* one connection's unparsed input (config.h) */
#define LINGER_MS 1000           /* a closing connection drains its input at most this long */

/* ---- what protocols see ---------------------------------------------------------------- */

rlt__srv *rlt__conn_srv(const rlt__conn *c)
{
    return c->w->d->s;
}

rlt__session *rlt__conn_session(rlt__conn *c)
{
    return &c->ss;
}

rlt__obuf *rlt__conn_out(rlt__conn *c)
{
    return &c->out;
}

rlt__scratch *rlt__conn_scratch(rlt__conn *c)
{
    return c->w->scratch_sc;
}

rlt__pipe *rlt__conn_pipe(rlt__conn *c)
{
    return c->w->pipe;
}

void *rlt__conn_state(const rlt__conn *c)
{
    return c->pstate;
}

void rlt__conn_set_state(rlt__conn *c, void *state)
{
    c->pstate = state;
}

void rlt__conn_request_done(rlt__conn *c)
{
    c->w->turn_reqs++;
}

void rlt__conn_close_after(rlt__conn *c)
{
    c->ss.close = true;
}

size_t rlt__daemon_max_connections(const rlt__daemon *d)
{
    size_t m = rlt__srv_config(d->s)->set.max_connections;
    return m < d->fd_cap ? m : d->fd_cap;
}

/* ---- connections ----------------------------------------------------------------------- */

static void conn_close(rlt__conn *c)
{
    worker *w = c->w;
    if (c->in_turn) {
        /* Staged replies point at c->out: write them now, and leave the turn. */
        rlt__pipe_flush(w->pipe, w->d->s);
        rlt__conn **pp = &w->turn;
        while (*pp != c)
            pp = &(*pp)->turn_next;
        *pp = c->turn_next;
    }
    if (c->prev)
        c->prev->next = c->next;
    else
        w->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    if (c->proto->close) c->proto->close(c);
    rlt__session_free(&c->ss);
    if (c->rev) event_free(c->rev);
    if (c->wev) event_free(c->wev);
    close(c->fd);
    rlt__mem_conn_give(c->in_cap);
    free(c->in);
    rlt__obuf_free(&c->out);
    free(c);
    __atomic_fetch_sub(&w->d->s->metrics.connections_current, 1, __ATOMIC_RELAXED);
}

/* Starts the lingering close: closing with unread input would send an RST that can destroy
 * the last reply before the client reads it.  Shut the write side, discard what still comes,
 * close on EOF or after LINGER_MS. */
static void conn_linger(rlt__conn *c)
{
    shutdown(c->fd, SHUT_WR);
    c->draining = true;
    /* A deadline of its own: a persistent event's timer restarts at every byte, so a client
     * trickling bytes would otherwise hold the connection (and its slot) forever. */
    c->linger_until = rlt__now() + LINGER_MS * RLT_NS_PER_MS;
    c->idle_armed = 0;
    struct timeval tv;
    tv_of(LINGER_MS * RLT_NS_PER_MS, &tv);
    event_add(c->rev, &tv);
}

/* Writes what it can.  Returns false when the connection was closed (c is gone). */
static bool conn_flush(rlt__conn *c)
{
    while (c->out.len > 0) {
        ssize_t n = send(c->fd, c->out.data, c->out.len, MSG_NOSIGNAL);
        if (n > 0) {
            rlt__obuf_consume(&c->out, (size_t)n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!c->writing) event_add(c->wev, NULL);
            c->writing = true;
            return true;
        }
        conn_close(c);
        return false;
    }
    /* All sent: a buffer grown by a large reply is let go (an idle client keeps none). */
    if (c->out.cap > READ_CHUNK) rlt__obuf_free(&c->out);
    /* (event_add/del take the base's lock: only when the state changes.) */
    if (c->writing) event_del(c->wev);
    c->writing = false;
    /* Within a turn the pipe may still hold replies for c: finish_turn starts the linger. */
    if ((c->ss.close || c->refused) && !c->draining && !c->in_turn) conn_linger(c);
    return true;
}

/* Arms the read timer: what is left of a pending request's deadline, else the idle timeout. */
static void arm_timer(rlt__conn *c, const rlt__settings *set, rlt_ns now)
{
    rlt_ns t = set->idle_timeout;
    bool deadline = c->in_len > 0 && set->client_timeout > 0;
    if (deadline) {
        t = c->started + set->client_timeout - now;
        if (t < RLT_NS_PER_MS) t = RLT_NS_PER_MS;
    } else if (c->idle_armed == t + 1) {
        /* Already armed for idleness: the persistent event restarts that timer at every read
         * by itself, so the common turn (a whole request, no deadline pending) adds nothing. */
        return;
    }
    c->idle_armed = deadline ? 0 : t + 1;
    if (t > 0) {
        struct timeval tv;
        tv_of(t, &tv);
        event_add(c->rev, &tv);
    } else {
        event_add(c->rev, NULL);
    }
}

static void on_write(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    conn_flush(arg);
}

static void conn_unkeep(rlt__conn *c);

/* The last reply (the protocol's), then a lingering close. */
static void conn_refuse(rlt__conn *c, rlt__refusal why)
{
    if (c->proto->refuse) c->proto->refuse(c, why, &c->out);
    c->refused = true;
    c->in_len = 0;
    if (c->in_cap > 0) conn_unkeep(c);
}

/* Makes room for at least `want` more input bytes (pending input only: in_cap > 0). */
static bool grow_input(rlt__conn *c, size_t want)
{
    if (c->in_cap - c->in_len >= want) return true;
    size_t cap = c->in_cap * 2;
    while (cap - c->in_len < want)
        cap *= 2;
    if (cap > MAX_INPUT + READ_CHUNK) cap = MAX_INPUT + READ_CHUNK;
    if (cap <= c->in_cap) return true;
    if (!rlt__mem_conn_take(cap - c->in_cap)) return false;
    char *n = realloc(c->in, cap);
    if (n == NULL) {
        rlt__mem_conn_give(cap - c->in_cap);
        return false;
    }
    c->in = n;
    c->in_cap = cap;
    return true;
}

/* Keeps the unfinished start of a request read into the scratch buffer.  A small one is kept
 * whatever the budget (counted, never refused: a client whose request spans two segments is
 * not refused because others hold the budget; bounded by max_connections x KEEP_ALWAYS, and
 * by client_timeout in time); a larger one only within the budget. */
static bool conn_keep(rlt__conn *c, const char *p, size_t n)
{
    assert(c->in == NULL && c->in_cap == 0);
    size_t cap = KEEP_ALWAYS;
    while (cap < n + n / 2)
        cap *= 2;
    if (cap > MAX_INPUT + READ_CHUNK) return false;
    if (cap == KEEP_ALWAYS)
        rlt__mem_conn_take_always(cap);
    else if (!rlt__mem_conn_take(cap))
        return false;
    c->in = malloc(cap);
    if (c->in == NULL) {
        rlt__mem_conn_give(cap);
        return false;
    }
    c->in_cap = cap;
    memcpy(c->in, p, n);
    c->in_len = n;
    return true;
}

/* Lets the input buffer go once every pending byte is consumed. */
static void conn_unkeep(rlt__conn *c)
{
    rlt__mem_conn_give(c->in_cap);
    free(c->in);
    c->in = NULL;
    c->in_cap = 0;
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
    rlt__conn *c = arg;
    worker *w = c->w;
    if (what & EV_TIMEOUT) {
        if (c->draining || c->in_len == 0) {
            conn_close(c); /* lingered long enough, or idle */
            return;
        }
        /* A started request missed its deadline: answer, then close. */
        rlt__pipe_flush(w->pipe, w->d->s);
        conn_refuse(c, RLT__REFUSE_TIMEOUT);
        conn_flush(c);
        return;
    }
    if (c->draining || c->refused) {
        char sink[4096];
        ssize_t k = recv(fd, sink, sizeof sink, 0);
        if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            conn_close(c);
        } else if (c->draining) {
            rlt_ns left = c->linger_until - rlt__now();
            if (left <= 0) {
                conn_close(c);
            } else {
                struct timeval tv;
                tv_of(left, &tv);
                event_add(c->rev, &tv);
            }
        }
        return;
    }
    /* Nothing pending: read into the worker's scratch buffer (no buffer of the connection's
     * own); else after the pending bytes, in the connection's buffer. */
    bool pending = c->in_len > 0;
    if (pending && (c->in_len >= MAX_INPUT || !grow_input(c, READ_CHUNK))) {
        /* Too large, or out of the connections' budget: answered, then a lingering close
         * (an abrupt one would send an RST that can destroy the replies already queued). */
        rlt__pipe_flush(w->pipe, w->d->s);
        conn_refuse(c, RLT__REFUSE_TOO_LARGE);
        conn_flush(c);
        return;
    }
    char *buf = pending ? c->in : w->scratch;
    size_t have = pending ? c->in_len : 0, cap = pending ? c->in_cap : sizeof w->scratch;
    ssize_t n = recv(fd, buf + have, cap - have, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        conn_close(c);
        return;
    }
    if (n < 0) return;
    /* The one clock reading for every request of this turn. */
    if (w->turn_now == 0) w->turn_now = rlt__now();
    if (!pending) c->started = w->turn_now;
    have += (size_t)n;
    if (!c->in_turn) {
        c->in_turn = true; /* from here on, the pipe may hold replies for c->out */
        c->turn_next = w->turn;
        w->turn = c;
    }
    size_t used = c->ss.close ? have : c->proto->feed(c, buf, have, w->turn_now);
    if (c->ss.close) used = have; /* framing lost or QUIT: the rest is discarded */
    /* What is left is the start of the next request: its deadline starts now. */
    if (used > 0) c->started = w->turn_now;
    if (!pending) {
        if (used < have && !conn_keep(c, buf + used, have - used)) {
            rlt__pipe_flush(w->pipe, w->d->s);
            conn_refuse(c, RLT__REFUSE_TOO_LARGE);
            conn_flush(c);
        }
        return;
    }
    if (used > 0) memmove(c->in, c->in + used, have - used);
    c->in_len = have - used;
    if (c->in_len == 0) conn_unkeep(c);
}

/* The end of a turn: decide what is staged, then complete every connection read in it. */
void rlt__conn_free(rlt__conn *c)
{
    conn_close(c);
}

void rlt__worker_finish_turn(worker *w)
{
    if (w->turn == NULL) return;
    rlt__srv *s = w->d->s;
    const rlt__settings *set = &rlt__srv_config(s)->set;
    rlt_ns now = w->turn_now;
    rlt__pipe_flush(w->pipe, s);
    rlt__conn *c = w->turn;
    w->turn = NULL;
    while (c != NULL) {
        rlt__conn *next = c->turn_next;
        c->in_turn = false;
        c->turn_next = NULL;
        if (c->out.overflow) {
            /* The client does not read its replies: drop it (Redis's output buffer limit). */
            conn_close(c);
        } else if (c->in_len > 0 && set->client_timeout > 0 &&
                   now - c->started >= set->client_timeout) {
            conn_refuse(c, RLT__REFUSE_TIMEOUT);
            conn_flush(c);
        } else if (conn_flush(c) && !c->draining) {
            arm_timer(c, set, now);
        }
        c = next;
    }
    if (w->turn_reqs > 0) {
        rlt__mslot *ms = rlt__mslot_get(&s->metrics);
        rlt_ns per = (rlt__now() - now) / (rlt_ns)w->turn_reqs;
        for (size_t i = 0; i < w->turn_reqs; i++)
            rlt__metrics_latency(ms, per);
    }
    w->turn_reqs = 0;
    w->turn_now = 0;
}

/* The peer's address as per-address budgets count it: a hash of its IP (an IPv4-mapped IPv6
 * address as the IPv4 one), odd; 0 when it has none (not IP). */
static uint64_t peer_addr(int fd)
{
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    if (getpeername(fd, (struct sockaddr *)&sa, &sl) != 0) return 0;
    if (sa.ss_family == AF_INET) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)&sa;
        return rlt_hash_fnv1a(&v4->sin_addr, 4) | 1;
    }
    if (sa.ss_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)&sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a)) return rlt_hash_fnv1a(a->s6_addr + 12, 4) | 1;
        return rlt_hash_fnv1a(a->s6_addr, 16) | 1;
    }
    return 0;
}

void rlt__conn_accepted(worker *w, const rlt__proto *proto, int fd)
{
    rlt__srv *s = w->d->s;
    const rlt__settings *set = &rlt__srv_config(s)->set;
    int64_t cur = __atomic_add_fetch(&s->metrics.connections_current, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&s->metrics.connections_total, 1, __ATOMIC_RELAXED);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    rlt__conn *c = calloc(1, sizeof *c);
    if (c == NULL) {
        close(fd);
        __atomic_fetch_sub(&s->metrics.connections_current, 1, __ATOMIC_RELAXED);
        return;
    }
    c->w = w;
    c->proto = proto;
    c->fd = fd;
    c->out.max = set->max_output;
    c->out.budgeted = true;
    rlt__session_init(s, &c->ss);
    c->ss.addr = peer_addr(fd);
    c->rev = event_new(w->base, fd, EV_READ | EV_PERSIST, on_read, c);
    c->wev = event_new(w->base, fd, EV_WRITE | EV_PERSIST, on_write, c);
    c->next = w->conns;
    if (w->conns) w->conns->prev = c;
    w->conns = c;
    if (c->rev == NULL || c->wev == NULL || (proto->open && proto->open(c) != RLT_OK)) {
        conn_close(c);
        return;
    }
    if ((size_t)cur > rlt__daemon_max_connections(w->d)) {
        /* Answer, then close gracefully (the slot is held for at most the linger). */
        __atomic_fetch_add(&s->metrics.connections_rejected, 1, __ATOMIC_RELAXED);
        conn_refuse(c, RLT__REFUSE_FULL);
        conn_flush(c);
        return;
    }
    arm_timer(c, set, 0);
}
