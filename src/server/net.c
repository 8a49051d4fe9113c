/* Worker threads, listeners and RESP connections.  Each worker owns an event_base, a RESP
 * listening socket and an HTTP one (SO_REUSEPORT: the kernel spreads connections), and the
 * connections it accepted.  Its loop works in turns, as Redis's does: in one turn, every
 * readable connection reads what is there and parses every whole command with the sans-I/O
 * parser; the decisions of all of them wait in the worker's pipe (cmd.h) and go to the store
 * in batches at the end of the turn, with one clock reading per turn; then each connection
 * writes all its replies with one send.  One send per connection per turn also lets the
 * client find many replies per wakeup. */
#include "server/cmd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <event2/thread.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define READ_CHUNK 16384
#define MAX_INPUT (1u << 20) /* one connection's unparsed input */

typedef struct worker worker;

typedef struct conn {
    worker *w;
    int fd;
    struct event *rev, *wev;
    char *in;
    size_t in_len, in_cap;
    rlt__obuf out;
    rlt__session ss;
    rlt_ns partial_since; /* when the pending partial command started; 0 = none */
    bool timed;           /* rev carries the client_timeout */
    bool writing;         /* wev is added: the socket did not take all the output */
    bool draining;        /* replies sent, write side shut: discarding input until EOF */
    bool in_turn;         /* read in this turn: on the worker's `turn` list */
    size_t consumed;      /* bytes of `in` parsed in this turn, dropped at its end */
    struct conn *prev, *next;
    struct conn *turn_next;
} conn;

struct worker {
    rlt__daemon *d;
    unsigned idx;
    pthread_t th;
    bool started;
    struct event_base *base;
    struct evconnlistener *lis;
    struct evhttp *http;
    int resp_fd, http_fd;
    conn *conns;
    rlt__resp_arg *argv;
    rlt__pipe *pipe;       /* deferred decisions of this turn; empty between turns */
    conn *turn;            /* connections read in this turn */
    rlt_ns turn_now;       /* the clock for this turn's commands; 0 = not read yet */
    size_t turn_cmds;      /* commands executed in this turn */
    struct event *stop_ev; /* made active by rlt__daemon_stop */
    bool stop;             /* atomic: leave the loop */
};

struct rlt__daemon {
    rlt__srv *s;
    worker *w;
    unsigned n;
};

bool rlt__is_loopback(const char *a)
{
    if (strcmp(a, "localhost") == 0 || strcmp(a, "::1") == 0) return true;
    struct in_addr v4;
    if (inet_pton(AF_INET, a, &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
    return false;
}

bool rlt__bind_valid(const char *a)
{
    if (a[0] == '\0') return false;
    unsigned char buf[sizeof(struct in6_addr)];
    if (inet_pton(AF_INET, a, buf) == 1 || inet_pton(AF_INET6, a, buf) == 1) return true;
    /* Only digits and dots, or a colon: meant as a numeric address, and not one. */
    if (strspn(a, "0123456789.") == strlen(a) || strchr(a, ':') != NULL) return false;
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *res = NULL;
    if (getaddrinfo(a, NULL, &hints, &res) != 0) return false;
    freeaddrinfo(res);
    return true;
}

/* One listening socket on addr:port with SO_REUSEPORT.  Returns the fd or -1. */
static int listen_on(const char *addr, int port, char *err, size_t errlen)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int gai = getaddrinfo(addr, ps, &hints, &res);
    if (gai != 0) {
        snprintf(err, errlen, "bind address %s: %s", addr, gai_strerror(gai));
        return -1;
    }
    int fd = socket(res->ai_family, res->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0 ||
        bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, 511) < 0) {
        snprintf(err, errlen, "listen on %s:%d: %s", addr, port, strerror(errno));
        if (fd >= 0) close(fd);
        freeaddrinfo(res);
        return -1;
    }
    freeaddrinfo(res);
    return fd;
}

static int bound_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0) return -1;
    if (ss.ss_family == AF_INET6) return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

/* ---- connections --------------------------------------------------------------------- */

static void conn_close(conn *c)
{
    worker *w = c->w;
    if (c->in_turn) {
        /* Deferred decisions may point into c: decide them now, and leave the turn. */
        rlt__pipe_flush(w->pipe, w->d->s);
        conn **pp = &w->turn;
        while (*pp != c)
            pp = &(*pp)->turn_next;
        *pp = c->turn_next;
    }
    if (c->prev)
        c->prev->next = c->next;
    else
        w->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    event_free(c->rev);
    event_free(c->wev);
    close(c->fd);
    free(c->in);
    rlt__obuf_free(&c->out);
    free(c);
    __atomic_fetch_sub(&w->d->s->metrics.connections_current, 1, __ATOMIC_RELAXED);
}

/* Writes what it can.  Returns -1 when the connection was closed. */
static int conn_flush(conn *c)
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
            return 0;
        }
        conn_close(c);
        return -1;
    }
    /* (event_add/del take the base's lock: only when the state changes.) */
    if (c->writing) event_del(c->wev);
    c->writing = false;
    if (c->ss.close && !c->draining) {
        /* Lingering close: closing with unread input would send an RST that can destroy the
         * error reply before the client reads it.  Shut the write side, discard what still
         * comes, close on EOF or after a second. */
        shutdown(c->fd, SHUT_WR);
        c->draining = true;
        struct timeval tv = {.tv_sec = 1, .tv_usec = 0};
        event_add(c->rev, &tv);
    }
    return 0;
}

static void add_read(conn *c, rlt_ns t)
{
    if (t > 0) {
        struct timeval tv = {.tv_sec = t / RLT_NS_PER_S,
                             .tv_usec = (t % RLT_NS_PER_S) / RLT_NS_PER_US};
        event_add(c->rev, &tv);
    } else {
        event_add(c->rev, NULL);
    }
}

/* A pending partial command runs under client_timeout, an idle connection under
 * idle_timeout (a persistent event's timer restarts whenever a byte arrives). */
static void set_timeout(conn *c, const rlt__settings *set)
{
    bool want = c->in_len > 0 && set->client_timeout > 0;
    if (want == c->timed) return;
    c->timed = want;
    add_read(c, want ? set->client_timeout : set->idle_timeout);
}

static void on_write(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    conn_flush(arg);
}

/* Drops the input parsed in this turn (no deferred decision may point into it any more). */
static void consume_input(conn *c)
{
    if (c->consumed == 0) return;
    memmove(c->in, c->in + c->consumed, c->in_len - c->consumed);
    c->in_len -= c->consumed;
    c->consumed = 0;
    c->partial_since = 0;
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
    conn *c = arg;
    worker *w = c->w;
    rlt__srv *s = w->d->s;
    rlt__config *cfg = rlt__srv_config(s);
    if (what & EV_TIMEOUT) {
        /* No byte for a whole timeout: a stalled partial command, or idle. */
        conn_close(c);
        return;
    }
    if (c->draining) {
        char sink[4096];
        ssize_t k = recv(fd, sink, sizeof sink, 0);
        if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            conn_close(c);
        return;
    }
    if (c->in_turn) {
        /* A second read in one turn (libevent ran its loop twice in one EVLOOP_ONCE): settle
         * what the first read deferred before c->in moves. */
        rlt__pipe_flush(w->pipe, s);
        consume_input(c);
    }
    if (c->in_cap - c->in_len < READ_CHUNK) {
        size_t cap = c->in_cap ? c->in_cap * 2 : READ_CHUNK * 2;
        if (cap > MAX_INPUT + READ_CHUNK) cap = MAX_INPUT + READ_CHUNK;
        if (cap > c->in_cap) {
            char *n = realloc(c->in, cap);
            if (n == NULL) {
                conn_close(c);
                return;
            }
            c->in = n;
            c->in_cap = cap;
        }
    }
    if (c->in_len >= MAX_INPUT) {
        rlt__resp_error(&c->out, "ERR Protocol error: command too large");
        c->ss.close = true;
        conn_flush(c);
        return;
    }
    ssize_t n = recv(fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        conn_close(c);
        return;
    }
    if (n < 0) return;
    c->in_len += (size_t)n;

    /* The one clock reading for every command of this turn. */
    if (w->turn_now == 0) w->turn_now = rlt__now();
    rlt__resp_limits lim = {.max_args = cfg->set.max_args,
                            .max_bulk = cfg->set.max_bulk,
                            .max_inline = cfg->set.max_bulk};
    size_t off = 0;
    if (!c->in_turn) {
        c->in_turn = true; /* from here on, the pipe may point into c */
        c->turn_next = w->turn;
        w->turn = c;
    }
    while (off < c->in_len && !c->ss.close) {
        size_t argc;
        const char *perr = NULL;
        ssize_t r = rlt__resp_parse(c->in + off, c->in_len - off, &lim, w->argv, &argc, &perr);
        if (r == RLT__RESP_PARTIAL) break;
        if (r == RLT__RESP_ERROR) {
            rlt__pipe_flush(w->pipe, s); /* the replies before the error, in order */
            rlt__resp_errorf(&c->out, "ERR %s", perr);
            rlt__mslot *ms = rlt__mslot_get(&s->metrics);
            rlt__mcount(&ms->errors, 1);
            c->ss.close = true;
            off = c->in_len;
            break;
        }
        off += (size_t)r;
        if (argc == 0) continue;
        rlt__pipe_exec(w->pipe, s, &c->ss, w->argv, argc, w->turn_now, &c->out);
        w->turn_cmds++;
        if (c->out.overflow) break;
    }
    c->consumed = off;
}

/* The end of a turn: decide what waits, then complete every connection read in the turn. */
static void finish_turn(worker *w)
{
    if (w->turn == NULL) return;
    rlt__srv *s = w->d->s;
    rlt__config *cfg = rlt__srv_config(s);
    rlt_ns now = w->turn_now;
    rlt__pipe_flush(w->pipe, s);
    conn *c = w->turn;
    w->turn = NULL;
    while (c != NULL) {
        conn *next = c->turn_next;
        c->in_turn = false;
        c->turn_next = NULL;
        if (c->out.overflow) {
            /* The client does not read its replies: drop it (Redis's output buffer limit). */
            conn_close(c);
            c = next;
            continue;
        }
        consume_input(c);
        if (c->in_len > 0) {
            if (c->partial_since == 0)
                c->partial_since = now;
            else if (now - c->partial_since > cfg->set.client_timeout &&
                     cfg->set.client_timeout > 0) {
                /* A client trickling bytes: the command had its deadline. */
                rlt__resp_error(&c->out, "ERR client timeout: command not completed in time");
                c->ss.close = true;
            }
        }
        if (conn_flush(c) == 0 && !c->draining) set_timeout(c, &cfg->set);
        c = next;
    }
    if (w->turn_cmds > 0) {
        /* Latency per command: the turn's processing time shared by its commands. */
        rlt__mslot *ms = rlt__mslot_get(&s->metrics);
        rlt_ns per = (rlt__now() - now) / (rlt_ns)w->turn_cmds;
        for (size_t i = 0; i < w->turn_cmds; i++)
            rlt__metrics_latency(ms, per);
    }
    w->turn_cmds = 0;
    w->turn_now = 0;
}

static void on_accept(struct evconnlistener *lis, evutil_socket_t fd, struct sockaddr *sa,
                      int salen, void *arg)
{
    (void)lis;
    (void)sa;
    (void)salen;
    worker *w = arg;
    rlt__srv *s = w->d->s;
    rlt__config *cfg = rlt__srv_config(s);
    int64_t cur = __atomic_add_fetch(&s->metrics.connections_current, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&s->metrics.connections_total, 1, __ATOMIC_RELAXED);
    bool reject = (size_t)cur > cfg->set.max_connections;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    conn *c = calloc(1, sizeof *c);
    if (c == NULL) {
        close(fd);
        __atomic_fetch_sub(&s->metrics.connections_current, 1, __ATOMIC_RELAXED);
        return;
    }
    c->w = w;
    c->fd = fd;
    c->out.max = cfg->set.max_output;
    rlt__session_init(s, &c->ss);
    c->rev = event_new(w->base, fd, EV_READ | EV_PERSIST, on_read, c);
    c->wev = event_new(w->base, fd, EV_WRITE | EV_PERSIST, on_write, c);
    c->next = w->conns;
    if (w->conns) w->conns->prev = c;
    w->conns = c;
    if (c->rev == NULL || c->wev == NULL) {
        conn_close(c);
        return;
    }
    if (reject) {
        /* Answer, then close gracefully (the slot is held for at most the linger second). */
        __atomic_fetch_add(&s->metrics.connections_rejected, 1, __ATOMIC_RELAXED);
        rlt__resp_error(&c->out, "ERR max number of clients reached");
        c->ss.close = true;
        conn_flush(c);
        return;
    }
    add_read(c, cfg->set.idle_timeout);
}

/* ---- workers ------------------------------------------------------------------------- */

static void on_stop(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg; /* the flag is set: the loop below sees it after this turn */
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    rlt__metrics_bind_thread(w->idx + 1);
    /* One turn per iteration: run every ready callback, then finish the turn.  (A stop that
     * comes between two iterations is not lost: stop_ev stays active until the next one.) */
    while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) {
        int r = event_base_loop(w->base, EVLOOP_ONCE);
        finish_turn(w);
        if (r != 0) break; /* an error, or nothing left to wait for */
    }
    return NULL;
}

static int worker_init(worker *w, rlt__srv *s, char *err, size_t errlen)
{
    w->base = event_base_new();
    w->argv = calloc(rlt__srv_config(s)->set.max_args, sizeof *w->argv);
    w->pipe = rlt__pipe_new();
    w->stop_ev = w->base ? event_new(w->base, -1, 0, on_stop, w) : NULL;
    if (w->base == NULL || w->argv == NULL || w->pipe == NULL || w->stop_ev == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (w->resp_fd >= 0) {
        w->lis = evconnlistener_new(w->base, on_accept, w, LEV_OPT_CLOSE_ON_FREE, -1, w->resp_fd);
        if (w->lis == NULL) {
            snprintf(err, errlen, "cannot listen (libevent)");
            return -1;
        }
        w->resp_fd = -1; /* owned by the listener now */
    }
    if (w->http_fd >= 0) {
        w->http = rlt__http_attach(w->base, s, w->http_fd);
        if (w->http == NULL) {
            snprintf(err, errlen, "cannot serve HTTP (libevent)");
            return -1;
        }
        w->http_fd = -1;
    }
    return 0;
}

int rlt__daemon_start(rlt__daemon **out, rlt__srv *s, int *resp_port, int *http_port, char *err,
                      size_t errlen)
{
    *out = NULL;
    rlt__settings *set = &rlt__srv_config(s)->set;
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, (void (*)(void))evthread_use_pthreads);
    unsigned n = set->threads > 0 ? (unsigned)set->threads : 0;
    if (n == 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        n = cores > 0 ? (unsigned)cores : 1;
    }
    if (n > RLT__METRIC_SLOTS - 1) n = RLT__METRIC_SLOTS - 1;
    rlt__daemon *d = calloc(1, sizeof *d);
    worker *w = calloc(n, sizeof *w);
    if (d == NULL || w == NULL) {
        free(d);
        free(w);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    d->s = s;
    d->w = w;
    d->n = n;
    for (unsigned i = 0; i < n; i++) {
        w[i].d = d;
        w[i].idx = i;
        w[i].resp_fd = w[i].http_fd = -1;
    }
    *resp_port = set->port;
    *http_port = set->http_port;
    /* The first socket picks the port (0 = any free one); the others join it. */
    for (unsigned i = 0; i < n; i++) {
        if (*resp_port >= 0) {
            w[i].resp_fd = listen_on(set->bind, *resp_port, err, errlen);
            if (w[i].resp_fd < 0) goto fail;
            if (i == 0) *resp_port = bound_port(w[i].resp_fd);
        }
        if (*http_port >= 0) {
            w[i].http_fd = listen_on(set->bind, *http_port, err, errlen);
            if (w[i].http_fd < 0) goto fail;
            if (i == 0) *http_port = bound_port(w[i].http_fd);
        }
    }
    for (unsigned i = 0; i < n; i++)
        if (worker_init(&w[i], s, err, errlen) < 0) goto fail;
    /* Workers take no signals: the main thread handles them. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    for (unsigned i = 0; i < n; i++) {
        if (pthread_create(&w[i].th, NULL, worker_main, &w[i]) != 0) {
            pthread_sigmask(SIG_SETMASK, &old, NULL);
            snprintf(err, errlen, "cannot start worker threads");
            goto fail;
        }
        w[i].started = true;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    *out = d;
    return 0;
fail:
    rlt__daemon_stop(d);
    return -1;
}

void rlt__daemon_stop(rlt__daemon *d)
{
    if (d == NULL) return;
    for (unsigned i = 0; i < d->n; i++) {
        if (!d->w[i].started) continue;
        __atomic_store_n(&d->w[i].stop, true, __ATOMIC_RELEASE);
        event_active(d->w[i].stop_ev, EV_READ, 0);
    }
    for (unsigned i = 0; i < d->n; i++)
        if (d->w[i].started) pthread_join(d->w[i].th, NULL);
    for (unsigned i = 0; i < d->n; i++) {
        worker *w = &d->w[i];
        while (w->conns != NULL)
            conn_close(w->conns);
        if (w->lis) evconnlistener_free(w->lis);
        if (w->http) evhttp_free(w->http);
        if (w->stop_ev) event_free(w->stop_ev);
        if (w->resp_fd >= 0) close(w->resp_fd);
        if (w->http_fd >= 0) close(w->http_fd);
        if (w->base) event_base_free(w->base);
        free(w->argv);
        rlt__pipe_free(w->pipe);
    }
    free(d->w);
    free(d);
}
