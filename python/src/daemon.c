/* The ratelimitd store's operations (backend.h): RL.* commands over RESP (hiredis), one
 * pooled connection per call.  The daemon reads its own clock and answers in milliseconds
 * rounded up (docs/server.md): the decisions here carry those, converted to ns. */
#include "backend.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void close_daemon(void *c)
{
    redisFree(c);
}

/* A connection for one call (GIL released): opened, its timeouts set, AUTH sent. */
static int daemon_connect(StoreObject *s, redisContext **out)
{
    struct timeval tv = {(time_t)(s->timeout / RLT_NS_PER_S),
                         (suseconds_t)(s->timeout % RLT_NS_PER_S / 1000)};
    redisContext *c = redisConnectWithTimeout(s->host, s->port, tv);
    if (!c) return RLT_ENOMEM;
    if (c->err || redisSetTimeout(c, tv) != REDIS_OK) {
        redisFree(c);
        return RLT_EBACKEND;
    }
    if (s->password) {
        redisReply *r = redisCommand(c, "AUTH %s", s->password);
        int bad = !r || r->type == REDIS_REPLY_ERROR;
        if (r) freeReplyObject(r);
        if (bad) {
            redisFree(c);
            return RLT_EBACKEND;
        }
    }
    *out = c;
    return RLT_OK;
}

static int64_t ival(const redisReply *r, size_t i)
{
    return r->type == REDIS_REPLY_ARRAY && i < r->elements &&
                   r->element[i]->type == REDIS_REPLY_INTEGER
               ? r->element[i]->integer
               : 0;
}

static rlt_ns ms_ns(int64_t ms)
{
    return ms < 0 ? -1 : ms * RLT_NS_PER_MS;
}

/* Runs one command (GIL released) and turns its reply into *d and the outputs. */
static int run(StoreObject *s, redisContext **cp, int op, int argc, const char **argv,
               const size_t *argl, rlt_decision *d, uint64_t *out_id, int *refused)
{
    int rc = RLT_OK;
    if (!*cp && (rc = daemon_connect(s, cp)) != RLT_OK) return rc;
    redisReply *r = redisCommandArgv(*cp, argc, argv, argl);
    if (!r) {
        rc = (*cp)->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK) ? RLT_ETIMEDOUT
                                                                                     : RLT_EBACKEND;
        redisFree(*cp); /* its stream is out of step now */
        *cp = NULL;
        return rc;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        rc = strstr(r->str, "unknown reservation")   ? RLT_ENOENT
             : strstr(r->str, "reservation refused") ? RLT_EFULL
             : strstr(r->str, "store is full")       ? RLT_EFULL
                                                     : RLT_EBACKEND;
    } else if (op == 'x' || op == 'l') {
        rc = r->type == REDIS_REPLY_INTEGER && r->integer == 0 ? RLT_ENOENT : RLT_OK;
    } else if (r->type != REDIS_REPLY_ARRAY || r->elements < 5) {
        rc = RLT_EBACKEND;
    } else {
        memset(d, 0, sizeof *d);
        d->allowed = ival(r, 0) != 0;
        d->limit = ival(r, 1);
        d->remaining = ival(r, 2);
        d->retry_after = d->allowed ? 0 : ms_ns(ival(r, 3));
        if (op == 'a') {
            d->lease = ival(r, 4);
        } else {
            d->reset_after = ms_ns(ival(r, 4));
            if (op == 'c' || op == 'm') d->delay = ms_ns(ival(r, 5));
        }
        if (op == 'm' && refused) *refused = (int)ival(r, 6);
        if (op == 'r' && out_id) {
            const redisReply *e = r->elements > 5 ? r->element[5] : NULL;
            *out_id = e && e->type == REDIS_REPLY_STRING ? strtoull(e->str, NULL, 16) : 0;
        }
    }
    freeReplyObject(r);
    return rc;
}

/* Decides on the daemon.  op: 'c' check or acquire (by the policy), 'm' multi over n checks,
 * 'x' reset, 'l' release `lease`, 'r' reserve (c->cost the estimate, `timeout` ns), 's' settle
 * reservation `id` (c->cost the real cost).  With the GIL held; releases it for the I/O.  A
 * failure of the daemon fills *d with the fail-mode decision. */
static int daemon_op(StoreObject *s, int op, const pyrlt_check *c, size_t n, rlt_ns timeout,
                     uint64_t id, int64_t lease, rlt_decision *d, uint64_t *out_id, int *refused)
{
    const char *argv[3 + 3 * 64];
    size_t argl[3 + 3 * 64];
    char nums[64][24], extra[2][24];
    int argc = 0;
    const rlt_policy *p = &c->lim->pol[c->pidx];
#define ARG(ptr, len) (argv[argc] = (ptr), argl[argc++] = (len))
#define STR(t) ARG((t), strlen(t))
    if (op == 'c' && p->algo == RLT_CONCURRENCY && c->cost == 1) op = 'a';
    STR(op == 'c'   ? "RL.CHECK"
        : op == 'a' ? "RL.ACQUIRE"
        : op == 'm' ? "RL.MULTI"
        : op == 'x' ? "RL.RESET"
        : op == 'l' ? "RL.RELEASE"
        : op == 'r' ? "RL.RESERVE"
                    : "RL.SETTLE");
    if (op != 'm') n = 1;
    for (size_t i = 0; i < n; i++) {
        ARG(c[i].k, c[i].kl);
        STR(c[i].lim->text[c[i].pidx]);
        if (op == 'c' || op == 'm' || op == 'r') {
            snprintf(nums[i], sizeof nums[i], "%" PRId64, c[i].cost);
            STR(nums[i]);
        }
    }
    if (op == 'l') {
        snprintf(extra[0], sizeof extra[0], "%" PRId64, lease);
        STR(extra[0]);
    } else if (op == 'r' && timeout > 0) {
        STR("TIMEOUT");
        snprintf(extra[0], sizeof extra[0], "%" PRId64,
                 (timeout + RLT_NS_PER_MS - 1) / RLT_NS_PER_MS);
        STR(extra[0]);
    } else if (op == 's') {
        snprintf(extra[0], sizeof extra[0], "%016" PRIx64, id);
        STR(extra[0]);
        snprintf(extra[1], sizeof extra[1], "%" PRId64, c->cost);
        STR(extra[1]);
    }
#undef ARG
#undef STR
    rlt_decision tmp;
    if (!d) d = &tmp;
    if (refused) *refused = -1;
    if (out_id) *out_id = 0;
    redisContext *conn = pyrlt_pool_take(&s->pool);
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = run(s, &conn, op, argc, argv, argl, d, out_id, refused);
    Py_END_ALLOW_THREADS pyrlt_pool_give(&s->pool, conn, close_daemon);
    if ((rc == RLT_EBACKEND || rc == RLT_ETIMEDOUT) && op != 'x' && op != 'l' && op != 's') {
        bool open = (c->lim->flags & RLT_REDIS_FAIL_OPEN) != 0;
        *d = (rlt_decision){
            .allowed = open, .limit = rlt_policy_limit(p), .retry_after = open ? 0 : RLT_NS_PER_S};
    }
    return rc;
}

/* ---- The operations -------------------------------------------------------------------- */

static int daemon_open(StoreObject *s, const pyrlt_store_args *a)
{
    if (!a->host || !*a->host || a->port < 1 || a->port > 65535) {
        PyErr_SetString(PyExc_ValueError, "DaemonStore needs a host and a port in 1..65535");
        return -1;
    }
    s->host = strdup(a->host);
    s->password = a->password ? strdup(a->password) : NULL;
    s->port = a->port;
    if (!s->host || (a->password && !s->password)) return PyErr_NoMemory(), -1;
    return 0;
}

static void daemon_close(StoreObject *s)
{
    pyrlt_pool_clear(&s->pool, close_daemon);
    free(s->host);
    free(s->password);
    s->host = s->password = NULL;
}

static PyObject *daemon_stats(StoreObject *s)
{
    return Py_BuildValue("{sn}", "connections", (Py_ssize_t)s->pool.n);
}

/* The daemon checks the policies' texts itself, at each command. */
static int daemon_prepare(StoreObject *s, LimiterObject *lim)
{
    (void)s;
    (void)lim;
    return 0;
}

static int daemon_decide(StoreObject *s, const pyrlt_check *c, rlt_ns now, rlt_decision *d)
{
    (void)now;
    return daemon_op(s, 'c', c, 1, 0, 0, 0, d, NULL, NULL);
}

static int daemon_multi(StoreObject *s, const pyrlt_check *c, size_t n, rlt_ns now, rlt_decision *d,
                        int *refused)
{
    (void)now;
    return daemon_op(s, 'm', c, n, 0, 0, 0, d, NULL, refused);
}

static int daemon_reset(StoreObject *s, const pyrlt_check *c)
{
    return daemon_op(s, 'x', c, 1, 0, 0, 0, NULL, NULL, NULL);
}

static int daemon_release(StoreObject *s, const pyrlt_check *c, rlt_ns now, int64_t lease)
{
    (void)now;
    return daemon_op(s, 'l', c, 1, 0, 0, lease, NULL, NULL, NULL);
}

static int daemon_reserve(StoreObject *s, const pyrlt_check *c, rlt_ns now, rlt_ns timeout,
                          rlt_decision *d, uint64_t *id)
{
    (void)now;
    return daemon_op(s, 'r', c, 1, timeout, 0, 0, d, id, NULL);
}

static int daemon_settle(StoreObject *s, const pyrlt_check *c, rlt_ns now, uint64_t id,
                         rlt_decision *d)
{
    (void)now;
    return daemon_op(s, 's', c, 1, 0, id, 0, d, NULL, NULL);
}

/* ---- Reservations over several limits: RL.MRESERVE / RL.MSETTLE ----------------------- */

/* "name=count,..." of u into buf (at most 8 names of 15 bytes and 13 digits: fits 256). */
static void usage_text(const rlt_usage *u, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (uint32_t j = 0; j < u->n && len < cap; j++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%s=%" PRId64, j ? "," : "",
                                u->item[j].name, u->item[j].count);
    if (u->n == 0) snprintf(buf, cap, "-");
}

/* Runs one RL.MRESERVE (settle false) or RL.MSETTLE (GIL released) into the outputs. */
static int run_budget(StoreObject *s, redisContext **cp, bool settle, int argc, const char **argv,
                      const size_t *argl, size_t n, rlt_decision *combined, rlt_decision *each,
                      int *refused, uint64_t *id, int64_t *charged)
{
    int rc = RLT_OK;
    if (!*cp && (rc = daemon_connect(s, cp)) != RLT_OK) return rc;
    redisReply *r = redisCommandArgv(*cp, argc, argv, argl);
    if (!r) {
        rc = (*cp)->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK) ? RLT_ETIMEDOUT
                                                                                     : RLT_EBACKEND;
        redisFree(*cp);
        *cp = NULL;
        return rc;
    }
    size_t at = settle ? 5 : 7; /* the per-limit rows */
    if (r->type == REDIS_REPLY_ERROR) {
        rc = strstr(r->str, "unknown reservation")      ? RLT_ENOENT
             : strstr(r->str, "out of range")           ? RLT_ERANGE
             : strstr(r->str, "reservation table full") ? RLT_EFULL
             : strstr(r->str, "Redis could not answer") ? RLT_EBACKEND
                                                        : RLT_EINVAL;
    } else if (r->type != REDIS_REPLY_ARRAY || r->elements <= at ||
               r->element[at]->type != REDIS_REPLY_ARRAY || r->element[at]->elements != n) {
        rc = RLT_EBACKEND;
    } else {
        memset(combined, 0, sizeof *combined);
        combined->allowed = ival(r, 0) != 0;
        combined->limit = ival(r, 1);
        combined->remaining = ival(r, 2);
        combined->retry_after = combined->allowed ? 0 : ms_ns(ival(r, 3));
        combined->reset_after = ms_ns(ival(r, 4));
        if (!settle) {
            const redisReply *e = r->element[5];
            *id = e->type == REDIS_REPLY_STRING ? strtoull(e->str, NULL, 16) : 0;
            *refused = (int)ival(r, 6);
        }
        for (size_t i = 0; i < n; i++) {
            const redisReply *x = r->element[at]->element[i];
            each[i] = (rlt_decision){.allowed = combined->allowed || (int)i != *refused,
                                     .limit = ival(x, 0),
                                     .remaining = ival(x, 1),
                                     .reset_after = ms_ns(ival(x, 2))};
            if (settle && charged) charged[i] = ival(x, 3);
        }
    }
    freeReplyObject(r);
    return rc;
}

/* argv of RL.MRESERVE (w != NULL) or RL.MSETTLE, then the call with the GIL released. */
static int daemon_budget(StoreObject *s, const pyrlt_check *c, const rlt_weights *w, size_t n,
                         uint64_t id, const rlt_usage *u, bool final, rlt_ns timeout,
                         rlt_decision *combined, rlt_decision *each, int *refused, uint64_t *out_id,
                         int64_t *charged)
{
    const char *argv[6 + 3 * RLT_BUDGET_LIMITS];
    size_t argl[6 + 3 * RLT_BUDGET_LIMITS];
    char wt[RLT_BUDGET_LIMITS][320], ut[320], num[2][24];
    int argc = 0, none = -1;
#define ARG(ptr, len) (argv[argc] = (ptr), argl[argc++] = (len))
#define STR(t) ARG((t), strlen(t))
    STR(w ? "RL.MRESERVE" : "RL.MSETTLE");
    if (!w) {
        snprintf(num[0], sizeof num[0], "%016" PRIx64, id);
        STR(num[0]);
    }
    usage_text(u, ut, sizeof ut);
    STR(ut);
    for (size_t i = 0; i < n; i++) {
        ARG(c[i].k, c[i].kl);
        STR(c[i].lim->text[c[i].pidx]);
        if (w) {
            rlt_weights_format(&w[i], wt[i], sizeof wt[i]);
            STR(wt[i]);
        }
    }
    if (w && timeout > 0) {
        STR("TIMEOUT");
        snprintf(num[1], sizeof num[1], "%" PRId64, (timeout + RLT_NS_PER_MS - 1) / RLT_NS_PER_MS);
        STR(num[1]);
    }
    if (!w && !final) STR("PARTIAL");
#undef ARG
#undef STR
    redisContext *conn = pyrlt_pool_take(&s->pool);
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = run_budget(s, &conn, !w, argc, argv, argl, n, combined, each,
                                           w ? refused : &none, out_id, charged);
    Py_END_ALLOW_THREADS pyrlt_pool_give(&s->pool, conn, close_daemon);
    if ((rc == RLT_EBACKEND || rc == RLT_ETIMEDOUT) && w) {
        bool open = (c->lim->flags & RLT_REDIS_FAIL_OPEN) != 0;
        *combined = (rlt_decision){.allowed = open,
                                   .limit = rlt_policy_limit(&c->lim->pol[c->pidx]),
                                   .retry_after = open ? 0 : RLT_NS_PER_S};
        for (size_t i = 0; i < n; i++)
            each[i] = *combined;
    }
    return rc;
}

static int daemon_reserve_limits(StoreObject *s, const pyrlt_check *c, const rlt_weights *w,
                                 size_t n, const rlt_usage *est, rlt_ns now, rlt_ns timeout,
                                 rlt_decision *combined, rlt_decision *each, int *refused,
                                 uint64_t *id)
{
    (void)now;
    *id = 0;
    *refused = -1;
    return daemon_budget(s, c, w, n, 0, est, true, timeout, combined, each, refused, id, NULL);
}

static int daemon_settle_limits(StoreObject *s, const pyrlt_check *c, size_t n, uint64_t id,
                                const rlt_usage *u, bool final, rlt_ns now, rlt_decision *combined,
                                rlt_decision *each, int64_t *charged)
{
    (void)now;
    return daemon_budget(s, c, NULL, n, id, u, final, 0, combined, each, NULL, NULL, charged);
}

const pyrlt_backend_ops pyrlt_daemon_ops = {
    .name = "daemon",
    .kind = PYRLT_DAEMON,
    .open = daemon_open,
    .close = daemon_close,
    .stats = daemon_stats,
    .prepare = daemon_prepare,
    .decide = daemon_decide,
    .multi = daemon_multi,
    .reset = daemon_reset,
    .release = daemon_release,
    .reserve = daemon_reserve,
    .settle = daemon_settle,
    .reserve_limits = daemon_reserve_limits,
    .settle_limits = daemon_settle_limits,
};
