/* Connections to Redis nodes: deadline-bounded pipelined I/O on hiredis, the per-node circuit
 * breaker with exponential backoff, Redis Cluster slot routing (CLUSTER SLOTS, MOVED/ASK; the
 * map read again periodically and soon after a node fails), and Redis Sentinel (the master
 * asked of the sentinels, followed on +switch-master, asked again after a failure).
 *
 * hiredis is used only for what both 0.14 and 1.x offer: redisConnectWithTimeout,
 * redisAppendCommandArgv, redisBufferWrite, redisBufferRead and redisGetReplyFromReader.  The
 * socket is switched to non-blocking after connect and every wait is our own poll() against
 * the call's deadline, so a stopped server costs a caller at most the timeout, never one
 * timeout per read. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int64_t rlt__mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * RLT_NS_PER_S + ts.tv_nsec;
}

/* ---- nodes and breaker ----------------------------------------------------------------- */

unsigned rlt__node_find_or_add(rlt_redis *r, const char *host, size_t hlen, int port)
{
    for (unsigned i = 0; i < r->nnodes; i++)
        if (r->nodes[i].port == port && strlen(r->nodes[i].host) == hlen &&
            memcmp(r->nodes[i].host, host, hlen) == 0)
            return i;
    if (r->nnodes == RLT__MAX_NODES || hlen == 0 || hlen >= sizeof r->nodes[0].host)
        return RLT__NO_NODE;
    rlt__node *n = &r->nodes[r->nnodes];
    memset(n, 0, sizeof *n);
    memcpy(n->host, host, hlen);
    n->host[hlen] = '\0';
    n->port = port;
    n->backoff = r->opt.backoff_min;
    return r->nnodes++;
}

void rlt__node_drop(rlt__node *n)
{
    if (n->c) redisFree(n->c);
    n->c = NULL;
}

bool rlt__node_usable(rlt_redis *r, rlt__node *n, int64_t now)
{
    (void)r;
    if (!n->open) return true;
    if (now >= n->retry_at) {
        /* Half-open: this call is the trial.  Until it reports, others wait a backoff more,
         * so one trial at a time goes out even if the caller interleaves calls. */
        n->retry_at = now + n->backoff;
        return true;
    }
    return false;
}

void rlt__node_success(rlt_redis *r, rlt__node *n)
{
    (void)r;
    n->failures = 0;
    n->open = false;
    n->backoff = r->opt.backoff_min;
}

void rlt__node_failure(rlt_redis *r, rlt__node *n, int64_t now)
{
    rlt__node_drop(n);
    rlt__topology_stale(r, now); /* a failover may have moved what it served */
    n->failures++;
    if (n->open) { /* a failed trial: wait longer */
        n->backoff = n->backoff > r->opt.backoff_max / 2 ? r->opt.backoff_max : n->backoff * 2;
        n->retry_at = now + n->backoff;
    } else if (n->failures >= r->opt.breaker_failures) {
        n->open = true;
        n->backoff = r->opt.backoff_min;
        n->retry_at = now + n->backoff;
        r->st.breaker_opened++;
    }
}

/* ---- deadline I/O ---------------------------------------------------------------------- */

/* Waits for `events` on fd until the deadline.  1 ready, 0 timed out, -1 error. */
static int wait_fd(int fd, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - rlt__mono_ns();
        if (left <= 0) return 0;
        int ms = (int)((left + RLT_NS_PER_MS - 1) / RLT_NS_PER_MS);
        struct pollfd p = {.fd = fd, .events = events};
        int rc = poll(&p, 1, ms);
        if (rc > 0) return 1;
        if (rc < 0 && errno != EINTR) return -1;
    }
}

/* True when a connection that owes us no reply has become readable: the server closed it
 * (restart, timeout, kill).  Checked before each use so a stale connection is replaced
 * before a command is sent on it, rather than failing a call that would have succeeded. */
static bool stale(redisContext *c)
{
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    return poll(&p, 1, 0) != 0;
}

/* Once per connection: is the module loaded (its RL.DECIDE), and does it take caller time (its
 * RL.TESTTIME, registered only with `testing yes`)?  A server that refuses COMMAND INFO gets the
 * scripts.  Only a lost connection is a failure. */
static int detect_engine(rlt_redis *r, rlt__node *n, int64_t deadline)
{
    n->module_time = false;
    if (r->opt.engine != RLT_REDIS_ENGINE_AUTO) {
        n->engine = r->opt.engine;
        if (r->opt.engine == RLT_REDIS_ENGINE_SCRIPTS) return RLT_OK;
    } else {
        n->engine = RLT_REDIS_ENGINE_SCRIPTS;
    }
    const char *argv[4] = {"COMMAND", "INFO", "RL.DECIDE", "RL.TESTTIME"};
    size_t lens[4] = {7, 4, 9, 11};
    rlt__cmd cmd = {4, argv, lens};
    redisReply *rep = NULL;
    int rc = rlt__node_exec(r, n, &cmd, 1, &rep, deadline);
    if (rc) return rc;
    if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2) {
        bool has = rep->element[0]->type == REDIS_REPLY_ARRAY;
        if (has && r->opt.engine == RLT_REDIS_ENGINE_AUTO) n->engine = RLT_REDIS_ENGINE_MODULE;
        n->module_time = has && rep->element[1]->type == REDIS_REPLY_ARRAY;
    }
    freeReplyObject(rep);
    return RLT_OK;
}

static int connect_node(rlt_redis *r, rlt__node *n, int64_t deadline)
{
    int64_t left = deadline - rlt__mono_ns();
    if (left <= 0) return RLT_ETIMEDOUT;
    if (n->port == 0) return RLT_EBACKEND; /* Sentinel: no master known yet */
    struct timeval tv = {.tv_sec = (time_t)(left / RLT_NS_PER_S),
                         .tv_usec = (suseconds_t)(left % RLT_NS_PER_S / 1000)};
    redisContext *c = redisConnectWithTimeout(n->host, n->port, tv);
    if (!c) return RLT_ENOMEM;
    if (c->err) {
        int timed_out = c->err == REDIS_ERR_IO && (errno == ETIMEDOUT || errno == EINPROGRESS);
        redisFree(c);
        return timed_out ? RLT_ETIMEDOUT : RLT_EBACKEND;
    }
    /* Our own poll() bounds every wait: make the socket non-blocking and tell hiredis so
     * (it then treats EAGAIN as "try later", which is what we want). */
    int fl = fcntl(c->fd, F_GETFL);
    if (fl < 0 || fcntl(c->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        redisFree(c);
        return RLT_EBACKEND;
    }
    c->flags &= ~REDIS_BLOCK;
    n->c = c;
    r->st.connects++;
    if (n->sentinel) return RLT_OK;
    if (r->password) {
        const char *argv[2] = {"AUTH", r->password};
        size_t lens[2] = {4, strlen(r->password)};
        rlt__cmd cmd = {2, argv, lens};
        redisReply *rep = NULL;
        int rc = rlt__node_exec(r, n, &cmd, 1, &rep, deadline);
        if (rc) return rc;
        bool ok = rep->type != REDIS_REPLY_ERROR;
        freeReplyObject(rep);
        if (!ok) {
            rlt__node_drop(n);
            return RLT_EBACKEND;
        }
    }
    return detect_engine(r, n, deadline);
}

int rlt__node_ensure(rlt_redis *r, rlt__node *n, int64_t deadline)
{
    if (n->c && stale(n->c)) rlt__node_drop(n);
    return n->c ? RLT_OK : connect_node(r, n, deadline);
}

int rlt__node_exec(rlt_redis *r, rlt__node *n, const rlt__cmd *cmds, size_t ncmd,
                   redisReply **replies, int64_t deadline)
{
    if (n->c && stale(n->c)) rlt__node_drop(n);
    if (!n->c) {
        int rc = connect_node(r, n, deadline);
        if (rc) return rc;
    }
    redisContext *c = n->c;
    for (size_t i = 0; i < ncmd; i++)
        if (redisAppendCommandArgv(c, cmds[i].argc, (const char **)cmds[i].argv, cmds[i].argvlen) !=
            REDIS_OK) {
            rlt__node_drop(n);
            return RLT_ENOMEM;
        }
    r->st.round_trips++;
    int rc = RLT_OK;
    size_t got = 0;
    for (int done = 0; !done;) {
        if (redisBufferWrite(c, &done) != REDIS_OK) {
            rc = RLT_EBACKEND;
            goto fail;
        }
        if (!done) {
            int w = wait_fd(c->fd, POLLOUT, deadline);
            if (w <= 0) {
                rc = w == 0 ? RLT_ETIMEDOUT : RLT_EBACKEND;
                goto fail;
            }
        }
    }
    while (got < ncmd) {
        void *rep = NULL;
        if (redisGetReplyFromReader(c, &rep) != REDIS_OK) {
            rc = RLT_EBACKEND;
            goto fail;
        }
        if (rep) {
            replies[got++] = rep;
            continue;
        }
        int w = wait_fd(c->fd, POLLIN, deadline);
        if (w <= 0) {
            rc = w == 0 ? RLT_ETIMEDOUT : RLT_EBACKEND;
            goto fail;
        }
        if (redisBufferRead(c) != REDIS_OK) {
            rc = RLT_EBACKEND;
            goto fail;
        }
    }
    return RLT_OK;
fail:
    /* The connection's state is unknown (a reply may still come): never reuse it. */
    for (size_t i = 0; i < got; i++)
        freeReplyObject(replies[i]);
    rlt__node_drop(n);
    if (rc == RLT_ETIMEDOUT) r->st.timeouts++;
    return rc;
}

/* ---- cluster --------------------------------------------------------------------------- */

int rlt__cluster_refresh(rlt_redis *r, int64_t deadline)
{
    const char *argv[2] = {"CLUSTER", "SLOTS"};
    size_t lens[2] = {7, 5};
    rlt__cmd cmd = {2, argv, lens};
    int rc = RLT_EBACKEND;
    int64_t now = rlt__mono_ns();
    r->topo_last = now;
    r->topo_at = now + RLT__TOPO_GAP; /* unless it succeeds */
    r->st.topology_reads++;
    /* Nodes with a closed breaker first, starting at a different one each time, so a dead
     * node is not asked first every time; then those whose breaker lets a trial through. */
    unsigned start = (unsigned)(r->st.topology_reads % r->nnodes), nn = r->nnodes;
    for (unsigned a = 0; a < 2 * nn; a++) {
        rlt__node *n = &r->nodes[(start + a) % nn];
        if (a < nn ? n->open : (!n->open || !rlt__node_usable(r, n, now))) continue;
        redisReply *rep = NULL;
        rc = rlt__node_exec(r, n, &cmd, 1, &rep, deadline);
        if (rc) {
            rlt__node_failure(r, n, rlt__mono_ns());
            if (rc == RLT_ETIMEDOUT) return rc; /* the deadline is spent */
            continue;
        }
        rlt__node_success(r, n);
        if (rep->type != REDIS_REPLY_ARRAY) {
            freeReplyObject(rep);
            rc = RLT_EBACKEND;
            continue;
        }
        for (size_t s = 0; s < RLT__SLOTS; s++)
            r->slots[s] = RLT__NO_NODE;
        for (size_t k = 0; k < rep->elements; k++) {
            redisReply *e = rep->element[k];
            if (e->type != REDIS_REPLY_ARRAY || e->elements < 3) continue;
            redisReply *lo = e->element[0], *hi = e->element[1], *m = e->element[2];
            if (lo->type != REDIS_REPLY_INTEGER || hi->type != REDIS_REPLY_INTEGER ||
                m->type != REDIS_REPLY_ARRAY || m->elements < 2 ||
                m->element[0]->type != REDIS_REPLY_STRING ||
                m->element[1]->type != REDIS_REPLY_INTEGER)
                continue;
            const char *host = m->element[0]->str;
            size_t hlen = m->element[0]->len;
            if (hlen == 0) { /* "" means: the node we asked */
                host = n->host;
                hlen = strlen(n->host);
            }
            unsigned idx = rlt__node_find_or_add(r, host, hlen, (int)m->element[1]->integer);
            for (long long s = lo->integer; s <= hi->integer && s < RLT__SLOTS; s++)
                if (s >= 0) r->slots[s] = (uint16_t)idx;
        }
        freeReplyObject(rep);
        r->refresh = false;
        r->topo_at = rlt__mono_ns() + r->opt.refresh_interval;
        return RLT_OK;
    }
    return rc;
}

void rlt__topology_stale(rlt_redis *r, int64_t now)
{
    if (!r->opt.cluster && !r->master_name) return;
    int64_t at = r->topo_last + RLT__TOPO_GAP;
    if (at < now) at = now;
    if (at < r->topo_at) r->topo_at = at;
}

/* ---- Sentinel -------------------------------------------------------------------------- */

/* Points node 0 (the master) at host:port; a new address starts with a fresh connection and
 * a closed breaker (it is another server). */
static void set_master(rlt_redis *r, const char *host, size_t hlen, long port)
{
    rlt__node *m = &r->nodes[0];
    if (hlen == 0 || hlen >= sizeof m->host || port <= 0 || port > 65535) return;
    if (m->port == (int)port && strlen(m->host) == hlen && memcmp(m->host, host, hlen) == 0) return;
    if (m->port != 0) r->st.master_switches++;
    rlt__node_drop(m);
    memcpy(m->host, host, hlen);
    m->host[hlen] = '\0';
    m->port = (int)port;
    m->failures = 0;
    m->open = false;
    m->backoff = r->opt.backoff_min;
    m->engine = RLT_REDIS_ENGINE_AUTO;
    m->module_time = false;
}

int rlt__sentinel_resolve(rlt_redis *r, int64_t deadline)
{
    const char *argv[3] = {"SENTINEL", "get-master-addr-by-name", r->master_name};
    size_t lens[3] = {8, 23, strlen(r->master_name)};
    rlt__cmd cmd = {3, argv, lens};
    int64_t now = rlt__mono_ns();
    r->topo_last = now;
    r->topo_at = now + RLT__TOPO_GAP; /* unless it succeeds */
    r->st.topology_reads++;
    int rc = RLT_EBACKEND;
    for (unsigned k = 0; k < r->nsents; k++) {
        rlt__node *s = &r->sents[(r->sent_next + k) % r->nsents];
        /* Each sentinel gets an equal share of what is left, so a stopped one leaves time
         * for the others. */
        int64_t t = rlt__mono_ns(), slice = (deadline - t) / (int64_t)(r->nsents - k);
        if (slice <= 0) return RLT_ETIMEDOUT;
        redisReply *rep = NULL;
        rc = rlt__node_exec(r, s, &cmd, 1, &rep, t + slice);
        if (rc) continue;
        if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
            rep->element[0]->type == REDIS_REPLY_STRING &&
            rep->element[1]->type == REDIS_REPLY_STRING) {
            char *end;
            long port = strtol(rep->element[1]->str, &end, 10);
            if (end != rep->element[1]->str && *end == '\0') {
                set_master(r, rep->element[0]->str, rep->element[0]->len, port);
                freeReplyObject(rep);
                r->sent_next = (r->sent_next + k) % r->nsents; /* ask it first next time */
                r->topo_at = rlt__mono_ns() + r->opt.refresh_interval;
                return RLT_OK;
            }
        }
        freeReplyObject(rep); /* nil: it does not know the name (yet) */
        rc = RLT_EBACKEND;
    }
    r->sent_next = (r->sent_next + 1) % r->nsents;
    return rc;
}

/* A message of the subscription: "+switch-master" "name oldip oldport newip newport". */
static void sub_message(rlt_redis *r, const redisReply *m)
{
    if (m->type != REDIS_REPLY_ARRAY || m->elements != 3) return;
    for (int i = 0; i < 3; i++)
        if (m->element[i]->type != REDIS_REPLY_STRING) return;
    if (strcmp(m->element[0]->str, "message") != 0 ||
        strcmp(m->element[1]->str, "+switch-master") != 0)
        return;
    char buf[600];
    if (m->element[2]->len >= sizeof buf) return;
    memcpy(buf, m->element[2]->str, m->element[2]->len + 1);
    char *f[5], *save = NULL;
    int nf = 0;
    for (char *t = strtok_r(buf, " ", &save); t && nf < 5; t = strtok_r(NULL, " ", &save))
        f[nf++] = t;
    if (nf != 5 || strcmp(f[0], r->master_name) != 0) return;
    char *end;
    long port = strtol(f[4], &end, 10);
    if (*end != '\0') return;
    set_master(r, f[3], strlen(f[3]), port);
    r->topo_at = rlt__mono_ns() + r->opt.refresh_interval;
}

/* Reads what the subscription has received, without waiting. */
static void sub_poll(rlt_redis *r, int64_t now)
{
    rlt__node *s = &r->sub;
    if (!s->c) return;
    struct pollfd p = {.fd = s->c->fd, .events = POLLIN};
    /* Replies already buffered (read with SUBSCRIBE's answer) are parsed even when the socket
     * has nothing new. */
    if (poll(&p, 1, 0) > 0 && redisBufferRead(s->c) != REDIS_OK) goto lost;
    for (;;) {
        void *rep = NULL;
        if (redisGetReplyFromReader(s->c, &rep) != REDIS_OK) goto lost;
        if (!rep) return;
        sub_message(r, rep);
        freeReplyObject(rep);
    }
lost: /* the sentinel went away: ask for the master soon, subscribe elsewhere */
    rlt__node_drop(s);
    r->sub_retry_at = now + r->opt.backoff_min;
    rlt__topology_stale(r, now);
}

static void sub_start(rlt_redis *r, int64_t deadline)
{
    rlt__node *from = &r->sents[r->sent_next % r->nsents], *s = &r->sub;
    int64_t now = rlt__mono_ns();
    r->sub_retry_at = now + r->opt.backoff_min;
    memcpy(s->host, from->host, sizeof s->host);
    s->port = from->port;
    s->sentinel = true;
    const char *argv[2] = {"SUBSCRIBE", "+switch-master"};
    size_t lens[2] = {9, 14};
    rlt__cmd cmd = {2, argv, lens};
    redisReply *rep = NULL;
    /* At most half of what is left: the call itself comes after. */
    if (rlt__node_exec(r, s, &cmd, 1, &rep, now + (deadline - now) / 2) != RLT_OK) return;
    bool ok = rep->type == REDIS_REPLY_ARRAY;
    freeReplyObject(rep);
    if (!ok) rlt__node_drop(s);
}

static void sentinel_tick(rlt_redis *r, int64_t deadline)
{
    int64_t now = rlt__mono_ns();
    if (now - r->sub_polled_at >= RLT_NS_PER_MS || now < r->sub_polled_at) {
        r->sub_polled_at = now; /* a batch's checks share one look */
        sub_poll(r, now);
    }
    /* With a master known, asking again may take only half the call's time (a stopped
     * sentinel must not fail calls the master would answer). */
    if (now >= r->topo_at)
        (void)rlt__sentinel_resolve(r, r->nodes[0].port ? now + (deadline - now) / 2 : deadline);
    if (!r->sub.c && now >= r->sub_retry_at && rlt__mono_ns() < deadline) sub_start(r, deadline);
}

unsigned rlt__route(rlt_redis *r, unsigned slot, int64_t deadline)
{
    if (r->master_name) {
        sentinel_tick(r, deadline);
        return 0;
    }
    if (!r->opt.cluster) return 0;
    int64_t now = rlt__mono_ns();
    bool known = r->slots[slot] != RLT__NO_NODE;
    /* With the slot's node known, reading the map may take only half the call's time (a
     * stopped node asked first must not fail a call its owner would answer). */
    if (r->refresh || now >= r->topo_at || (!known && now >= r->topo_last + RLT__TOPO_GAP))
        (void)rlt__cluster_refresh(r, known ? now + (deadline - now) / 2 : deadline);
    unsigned idx = r->slots[slot];
    return idx == RLT__NO_NODE ? 0 : idx;
}

bool rlt__parse_redirect(rlt_redis *r, const redisReply *rep, bool *ask, unsigned *node)
{
    if (rep->type != REDIS_REPLY_ERROR) return false;
    const char *s = rep->str;
    size_t len = rep->len;
    if (len > 6 && memcmp(s, "MOVED ", 6) == 0) {
        *ask = false;
        s += 6, len -= 6;
    } else if (len > 4 && memcmp(s, "ASK ", 4) == 0) {
        *ask = true;
        s += 4, len -= 4;
    } else {
        return false;
    }
    const char *sp = memchr(s, ' ', len);
    if (!sp) return false;
    char *end;
    long slot = strtol(s, &end, 10);
    if (end != sp || slot < 0 || slot >= RLT__SLOTS) return false;
    const char *addr = sp + 1;
    size_t alen = len - (size_t)(addr - s);
    const char *colon = NULL;
    for (size_t i = alen; i > 0; i--)
        if (addr[i - 1] == ':') {
            colon = addr + i - 1;
            break;
        }
    if (!colon) return false;
    long port = strtol(colon + 1, &end, 10);
    if (port <= 0 || port > 65535) return false;
    unsigned idx = rlt__node_find_or_add(r, addr, (size_t)(colon - addr), (int)port);
    if (idx == RLT__NO_NODE) return false;
    if (!*ask) {
        r->slots[slot] = (uint16_t)idx;
        r->refresh = true; /* a MOVED usually means more slots moved */
    }
    *node = idx;
    return true;
}
