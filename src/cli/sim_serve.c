/* `ratelimit sim --serve`: the embedded playground on a small HTTP/1.1 server (sim_serve.h).
 * One thread and poll(2), every socket non-blocking: a browser opens several connections at
 * once (and preconnects idle ones), so a connection that sends nothing, or does not read its
 * answer, must not hold up the others.  Bounds: MAX_CONNS connections, each closed IDLE_MS
 * after it was accepted whatever it did; when all are taken, a new client takes the place of
 * the one accepted first (it has waited longest without a whole request, or without reading
 * its answer), so the listener is always served.  Each connection gets one response and is
 * closed; only GET and HEAD of the embedded files are answered. */
#define _GNU_SOURCE /* accept4 */
#include "cli/sim_serve.h"
#include "webassets/webassets.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CMD "ratelimit sim"
#define MAX_CONNS 64  /* connections at once (64 x ~9 KB) */
#define REQ_MAX 8192  /* request head */
#define IDLE_MS 10000 /* a connection's whole life: its request read and its answer sent */
#define ACCEPTS 16    /* new connections taken per turn */

typedef struct client {
    int fd;
    long long since;        /* ms, when accepted */
    unsigned long long seq; /* accepted seq-th: the first accepted gives its place up */
    size_t len;             /* request bytes read into buf */
    /* The answer, once the head is whole: hdr then body (static: an embedded file or a
     * message), `sent` bytes of the two already sent. */
    bool answering;
    size_t hlen, blen, sent;
    const char *body;
    char hdr[512];
    char buf[REQ_MAX];
} client;

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static long long ms_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Sends what the socket takes now of c's answer.  Returns false (close) when all is sent or
 * the client is gone; true when the rest waits for POLLOUT. */
static bool flush(client *c)
{
    while (c->sent < c->hlen + c->blen) {
        bool in_hdr = c->sent < c->hlen;
        const char *p = in_hdr ? c->hdr + c->sent : c->body + (c->sent - c->hlen);
        size_t n = in_hdr ? c->hlen - c->sent : c->blen - (c->sent - c->hlen);
        ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
        if (w <= 0) return false;
        c->sent += (size_t)w;
    }
    return false;
}

/* Sets c's answer (body: static, not copied) and starts sending it. */
static bool reply(client *c, int code, const char *what, const char *type, const char *extra,
                  const void *body, size_t len, bool head)
{
    int n = snprintf(c->hdr, sizeof c->hdr,
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n%s\r\n",
                     code, what, type, len, extra ? extra : "");
    c->hlen = n < 0 ? 0 : (size_t)n < sizeof c->hdr ? (size_t)n : sizeof c->hdr - 1;
    c->body = body;
    c->blen = head ? 0 : len;
    c->sent = 0;
    c->answering = true;
    return flush(c);
}

/* The value of header `name` in the request's head (NULL if absent). */
static const char *header(const char *req, const char *name, size_t *vlen)
{
    size_t nl = strlen(name);
    for (const char *p = strstr(req, "\r\n"); p != NULL && p[2] != '\r';
         p = strstr(p + 2, "\r\n")) {
        const char *line = p + 2;
        if (strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
            const char *v = line + nl + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            const char *end = strstr(v, "\r\n");
            *vlen = end ? (size_t)(end - v) : strlen(v);
            return v;
        }
    }
    return NULL;
}

/* Answers one whole request head (NUL-terminated, in c->buf); returns flush's answer. */
static bool answer(client *c)
{
    const char *req = c->buf;
    static const char notfound[] = "not found: the playground is at /\n";
    const char *sp = strchr(req, ' ');
    const char *target = sp ? sp + 1 : NULL;
    const char *sp2 = target ? strchr(target, ' ') : NULL;
    if (sp == NULL || sp2 == NULL || strncmp(sp2 + 1, "HTTP/1.", 7) != 0)
        return reply(c, 400, "Bad Request", "text/plain", NULL, "bad request\n", 12, false);
    bool head = (size_t)(sp - req) == 4 && memcmp(req, "HEAD", 4) == 0;
    bool get = (size_t)(sp - req) == 3 && memcmp(req, "GET", 3) == 0;
    if (!get && !head)
        return reply(c, 405, "Method Not Allowed", "text/plain", "Allow: GET, HEAD\r\n",
                     "GET or HEAD\n", 12, false);
    size_t plen = (size_t)(sp2 - target);
    const char *q = memchr(target, '?', plen);
    if (q != NULL) plen = (size_t)(q - target);
    const rlt__webasset *a = rlt__webasset_find(target, plen);
    if (a == NULL)
        return reply(c, 404, "Not Found", "text/plain", NULL, notfound, sizeof notfound - 1, head);
    char hdr[RLT__WEBASSET_HEADERS];
    rlt__webasset_headers(a, hdr, sizeof hdr);
    size_t il;
    const char *inm = header(req, "If-None-Match", &il);
    if (inm != NULL && rlt__webasset_fresh(a, inm, il))
        return reply(c, 304, "Not Modified", a->type, hdr, a->data, a->len, true);
    return reply(c, 200, "OK", a->type, hdr, a->data, a->len, head);
}

/* Reads what the client sent, and answers once the head is whole.  Returns false (close) on
 * EOF, an error, or an answer sent whole; true while the head or the answer is unfinished. */
static bool feed(client *c)
{
    if (c->answering) return flush(c); /* the rest of the request is not read */
    ssize_t r = recv(c->fd, c->buf + c->len, REQ_MAX - 1 - c->len, 0);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) return true;
    if (r <= 0) return false;
    c->len += (size_t)r;
    c->buf[c->len] = '\0';
    if (strstr(c->buf, "\r\n\r\n") != NULL) return answer(c);
    if (c->len == REQ_MAX - 1)
        return reply(c, 431, "Request Header Fields Too Large", "text/plain", NULL, "too large\n",
                     10, false);
    return true;
}

static int listen_on(const char *addr, char *shown, size_t cap)
{
    char host[256] = "127.0.0.1", port[16];
    const char *colon = strrchr(addr, ':');
    const char *p = colon ? colon + 1 : addr;
    if (colon != NULL) {
        size_t hl = (size_t)(colon - addr);
        if (hl >= sizeof host) return -2;
        if (hl > 0) {
            memcpy(host, addr, hl);
            host[hl] = '\0';
        }
        if (host[0] == '[' && hl > 1 && host[hl - 1] == ']') { /* [::1]:8090 */
            memmove(host, host + 1, hl - 2);
            host[hl - 2] = '\0';
        }
    }
    char *end;
    long pn = strtol(p, &end, 10);
    if (*p == '\0' || *end != '\0' || pn < 0 || pn > 65535) return -2;
    snprintf(port, sizeof port, "%ld", pn);
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai;
    if (getaddrinfo(host, port, &hints, &ai) != 0) return -2;
    int fd = -1;
    for (struct addrinfo *x = ai; x != NULL && fd < 0; x = x->ai_next) {
        fd = socket(x->ai_family, x->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, x->ai_protocol);
        if (fd < 0) continue;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, x->ai_addr, x->ai_addrlen) != 0 || listen(fd, 64) != 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    if (fd < 0) return -1;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char h[NI_MAXHOST], sv[NI_MAXSERV];
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0 ||
        getnameinfo((struct sockaddr *)&ss, sl, h, sizeof h, sv, sizeof sv,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
        close(fd);
        return -1;
    }
    snprintf(shown, cap, strchr(h, ':') ? "[%s]:%s" : "%s:%s", h, sv);
    return fd;
}

int rlt__sim_serve(const char *addr)
{
    if (addr == NULL) addr = RLT__SERVE_DEFAULT;
    char shown[NI_MAXHOST + NI_MAXSERV + 4];
    int lfd = listen_on(addr, shown, sizeof shown);
    if (lfd == -2) {
        fprintf(stderr, CMD ": --serve: not an address: %s (HOST:PORT or PORT)\n", addr);
        return 2;
    }
    if (lfd < 0) {
        fprintf(stderr, CMD ": --serve: cannot listen on %s: %s\n", addr, strerror(errno));
        return 1;
    }
    struct sigaction sa = {.sa_handler = on_signal}; /* no SA_RESTART: poll returns */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    printf(CMD ": the playground on http://%s/ (Ctrl-C stops)%s\n", shown,
           rlt__webassets_built ? "" : "; it was not built (RLT_WASM off): a page says so");
    fflush(stdout);
    static client cs[MAX_CONNS];
    size_t n = 0;
    unsigned long long accepted = 0;
    while (!stop) {
        struct pollfd pf[MAX_CONNS + 1];
        /* At most a second: a signal between the loop's test and poll is seen within it. */
        long long now = ms_now(), wait = 1000;
        pf[0] = (struct pollfd){.fd = lfd, .events = POLLIN};
        for (size_t i = 0; i < n; i++) {
            pf[i + 1] =
                (struct pollfd){.fd = cs[i].fd, .events = cs[i].answering ? POLLOUT : POLLIN};
            long long left = cs[i].since + IDLE_MS - now;
            if (left < wait) wait = left < 0 ? 0 : left;
        }
        if (poll(pf, n + 1, (int)wait + 1) < 0 && errno != EINTR) break;
        now = ms_now();
        for (size_t i = n; i-- > 0;) {
            bool keep = now - cs[i].since < IDLE_MS;
            if (keep && pf[i + 1].revents != 0) keep = feed(&cs[i]);
            if (!keep) {
                close(cs[i].fd);
                cs[i] = cs[--n];
            }
        }
        for (int k = 0; k < ACCEPTS && (pf[0].revents & POLLIN); k++) {
            int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
            if (fd < 0) break;    /* EAGAIN: no more; EMFILE and others: next turn */
            if (n == MAX_CONNS) { /* the place of the one accepted first */
                size_t old = 0;
                for (size_t i = 1; i < n; i++)
                    if (cs[i].seq < cs[old].seq) old = i;
                close(cs[old].fd);
                cs[old] = cs[--n];
            }
            cs[n] = (client){.fd = fd, .since = now, .seq = ++accepted};
            n++;
        }
    }
    for (size_t i = 0; i < n; i++)
        close(cs[i].fd);
    close(lfd);
    return 0;
}
