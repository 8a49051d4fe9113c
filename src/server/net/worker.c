/* The connection layer's workers (conn_internal.h): one thread and event loop each, the
 * listeners they share with SO_REUSEPORT, accepting (with a pause when descriptors run out),
 * and the daemon's start and stop.  Connections themselves are conn.c's. */
#define _GNU_SOURCE /* accept4 */
#include "server/net/conn.h"
#include "server/net/conn_internal.h"

#include "server/base/log.h"
#include "server/base/mem.h"
#include "server/net/listen.h"
#include "server/request/srv.h"

#include <errno.h>
#include <event2/thread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define ACCEPT_PAUSE_MS 250   /* no accept() for this long after EMFILE/ENFILE */
#define ACCEPTS_PER_WAKEUP 64 /* fairness between listeners and connections */
#define FD_RESERVE 64         /* descriptors kept for listeners, snapshots, logs, Redis */

/* ---- accepting --------------------------------------------------------------------------- */

static void set_accepting(worker *w, bool on)
{
    for (size_t i = 0; i < w->nlis; i++) {
        if (on)
            event_add(w->lis[i].ev, NULL);
        else
            event_del(w->lis[i].ev);
    }
}

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    worker *w = arg;
    w->paused = false;
    set_accepting(w, true);
}

static void on_accept(evutil_socket_t lfd, short what, void *arg)
{
    (void)what;
    listener_ev *l = arg;
    worker *w = l->w;
    for (int i = 0; i < ACCEPTS_PER_WAKEUP; i++) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            rlt__conn_accepted(w, l->proto, fd);
            continue;
        }
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            /* Out of descriptors: the backlog keeps the listener readable, so stop asking
             * for a while instead of spinning, and say so once per pause. */
            int64_t cur = __atomic_load_n(&w->d->s->metrics.connections_current, __ATOMIC_RELAXED);
            rlt__log(RLT__LOG_WARN,
                     "accept (%s): %s with %lld connections open; not accepting for %d ms",
                     l->proto->name, strerror(errno), (long long)cur, ACCEPT_PAUSE_MS);
            w->paused = true;
            set_accepting(w, false);
            struct timeval tv;
            tv_of(ACCEPT_PAUSE_MS * RLT_NS_PER_MS, &tv);
            event_add(w->resume_ev, &tv);
        }
        return; /* EAGAIN: the backlog is empty */
    }
}

/* ---- workers ----------------------------------------------------------------------------- */

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
        rlt__worker_finish_turn(w);
        if (r != 0) break; /* an error, or nothing left to wait for */
    }
    return NULL;
}

static int worker_init(worker *w, char *err, size_t errlen)
{
    w->base = event_base_new();
    w->pipe = rlt__pipe_new();
    w->scratch_sc = rlt__scratch_new(RLT__SCRATCH_CAP);
    w->stop_ev = w->base ? event_new(w->base, -1, 0, on_stop, w) : NULL;
    w->resume_ev = w->base ? event_new(w->base, -1, 0, on_resume, w) : NULL;
    if (w->base == NULL || w->pipe == NULL || w->scratch_sc == NULL || w->stop_ev == NULL || w->resume_ev == NULL) {
        snprintf(err, errlen, "out of memory");
        return RLT_ENOMEM;
    }
    for (size_t i = 0; i < w->nlis; i++) {
        listener_ev *l = &w->lis[i];
        l->w = w;
        l->ev = event_new(w->base, l->fd, EV_READ | EV_PERSIST, on_accept, l);
        if (l->ev == NULL || event_add(l->ev, NULL) != 0) {
            snprintf(err, errlen, "cannot listen (libevent)");
            return RLT_ENOMEM;
        }
    }
    return RLT_OK;
}

/* Raises the soft descriptor limit to the hard one; returns the connections it allows. */
static size_t fit_descriptors(size_t want, size_t sockets)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return want;
    if (rl.rlim_cur < rl.rlim_max) {
        struct rlimit up = {.rlim_cur = rl.rlim_max, .rlim_max = rl.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &up) == 0) rl.rlim_cur = rl.rlim_max;
    }
    size_t reserve = FD_RESERVE + sockets;
    size_t cap = rl.rlim_cur == RLIM_INFINITY ? SIZE_MAX
                 : rl.rlim_cur > reserve      ? (size_t)rl.rlim_cur - reserve
                                              : 1;
    if (cap < want)
        rlt__log(RLT__LOG_WARN,
                 "max_connections %zu does not fit the descriptor limit (ulimit -n %llu): "
                 "serving at most %zu connections",
                 want, (unsigned long long)rl.rlim_cur, cap);
    return cap;
}

static int bind_all(rlt__daemon *d, rlt__listener *ls, size_t nls, const char *bind, char *err,
                    size_t errlen)
{
    for (size_t k = 0; k < nls; k++) {
        if (ls[k].port < 0) continue;
        for (unsigned i = 0; i < d->n; i++) {
            worker *w = &d->w[i];
            int fd;
            int st = rlt__listen_on(bind, ls[k].port, i == 0, &fd, err, errlen);
            if (st != RLT_OK) {
                /* Name what moves this listener: a busy port (a second daemon) is the first
                 * thing a new user hits. */
                static const char *const how[][3] = {{"resp", "--port", "port"},
                                                     {"http", "--http-port", "http_port"},
                                                     {"grpc", "--grpc-port", "grpc_port"},
                                                     {"spop", "--spop-port", "spop_port"}};
                for (size_t h = 0; h < sizeof how / sizeof how[0]; h++) {
                    size_t used = strlen(err);
                    if (strcmp(ls[k].proto->name, how[h][0]) == 0 && used < errlen)
                        snprintf(err + used, errlen - used,
                                 "; %s N (server.%s) moves the %s listener (0: any free port, "
                                 "-1: off)",
                                 how[h][1], how[h][2], how[h][0]);
                }
                return st;
            }
            /* The first socket picks the port (0 = any free one); the others join it. */
            if (i == 0) ls[k].port = rlt__bound_port(fd);
            w->lis[w->nlis++] = (listener_ev){.proto = ls[k].proto, .fd = fd};
        }
    }
    return RLT_OK;
}

int rlt__daemon_start(rlt__daemon **out, rlt__srv *s, rlt__listener *ls, size_t nls, char *err,
                      size_t errlen)
{
    *out = NULL;
    if (nls > MAX_LISTENERS) {
        snprintf(err, errlen, "at most %d listeners", MAX_LISTENERS);
        return RLT_EINVAL;
    }
    const rlt__settings *set = &rlt__srv_config(s)->set;
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
        return RLT_ENOMEM;
    }
    d->s = s;
    d->w = w;
    d->n = n;
    for (unsigned i = 0; i < n; i++) {
        w[i].d = d;
        w[i].idx = i;
    }
    d->fd_cap = fit_descriptors(set->max_connections, nls * n);
    rlt__mem_set_conn_limit(rlt__mem_conn_share(set->max_memory));
    int st = bind_all(d, ls, nls, set->bind, err, errlen);
    for (unsigned i = 0; i < n && st == RLT_OK; i++)
        st = worker_init(&w[i], err, errlen);
    if (st != RLT_OK) goto fail;
    /* Workers take no signals: the main thread handles them. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    for (unsigned i = 0; i < n; i++) {
        if (pthread_create(&w[i].th, NULL, worker_main, &w[i]) != 0) {
            pthread_sigmask(SIG_SETMASK, &old, NULL);
            snprintf(err, errlen, "cannot start worker threads");
            st = RLT_ENOMEM;
            goto fail;
        }
        w[i].started = true;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    *out = d;
    return RLT_OK;
fail:
    rlt__daemon_stop(d);
    return st;
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
            rlt__conn_free(w->conns);
        for (size_t k = 0; k < w->nlis; k++) {
            if (w->lis[k].ev) event_free(w->lis[k].ev);
            close(w->lis[k].fd);
        }
        if (w->stop_ev) event_free(w->stop_ev);
        if (w->resume_ev) event_free(w->resume_ev);
        if (w->base) event_base_free(w->base);
        rlt__pipe_free(w->pipe);
        rlt__scratch_free(w->scratch_sc);
    }
    free(d->w);
    free(d);
}
