/* libratelimit_redis's decisions: one limit, all-or-nothing multi-limit checks, pipelined
 * batches (one pipeline per node), and the concurrency release and the reset. */
#include "call.h"
#include "lease.h"
#include "reply.h"

#include <stdlib.h>
#include <string.h>

#define KEYNAME_MAX RLT__KEYNAME_MAX
#define MULTI_MAX 64

static int decide_one(rlt_redis *r, const rlt_policy *p, unsigned flags, const void *key,
                      size_t klen, rlt_ns now, int64_t cost, rlt_decision *d);

int rlt_redis_decide(rlt_redis *r, const rlt_policy *p, unsigned flags, const void *key,
                     size_t klen, rlt_ns now, int64_t cost, rlt_decision *d)
{
    int rc = decide_one(r, p, flags, key, klen, now, cost, d);
    if (rc == RLT_OK || rc == RLT_EBACKEND || rc == RLT_ETIMEDOUT)
        rlt__jitter_out(p, key, klen, now, d);
    return rc;
}

static int decide_one(rlt_redis *r, const rlt_policy *p, unsigned flags, const void *key,
                      size_t klen, rlt_ns now, int64_t cost, rlt_decision *d)
{
    if (!d) return RLT_EINVAL;
    memset(d, 0, sizeof *d);
    if (!r) return RLT_EINVAL;
    rlt_redis_check ck = {p, key, klen, cost};
    rlt__limit l;
    int64_t now_us;
    int rc = rlt__check_limit(&ck, &l);
    if (!rc) rc = rlt__now_arg(flags, now, &now_us);
    if (rc) return rc;
    if ((flags & RLT_REDIS_LEASE) && r->leases && rlt__leasable(p) && cost > 0)
        return rlt__lease_decide(r, &l, &ck, flags, now, now_us, d);
    int64_t retry_at = 0;
    rc = rlt__decide_call(r, &l, &ck, 1, false, now_us, d, &retry_at);
    if (rc == RLT_EINVAL || rc == RLT_EKEYLEN || rc == RLT_ENOMEM) return rc;
    if (rc) {
        rlt__fail_decision(r, p, flags, retry_at, d);
        return rc;
    }
    r->st.decisions++;
    return RLT_OK;
}

int rlt_redis_decide_multi(rlt_redis *r, const rlt_redis_check *checks, size_t n, unsigned flags,
                           rlt_ns now, rlt_decision *combined, int *refused)
{
    if (refused) *refused = -1;
    if (!combined) return RLT_EINVAL;
    memset(combined, 0, sizeof *combined);
    if (!r || !checks || n == 0 || n > MULTI_MAX) return RLT_EINVAL;
    rlt__limit l[MULTI_MAX];
    rlt_decision dec[MULTI_MAX];
    int64_t now_us;
    int rc = rlt__now_arg(flags, now, &now_us);
    for (size_t i = 0; i < n && !rc; i++) {
        rc = rlt__check_limit(&checks[i], &l[i]);
        if (!rc && checks[i].policy->algo == RLT_CONCURRENCY) rc = RLT_EINVAL;
    }
    if (rc) return rc;
    int64_t retry_at = 0;
    rc = rlt__decide_call(r, l, checks, n, true, now_us, dec, &retry_at);
    if (rc == RLT_EINVAL || rc == RLT_EKEYLEN || rc == RLT_ENOMEM) return rc;
    if (rc) {
        /* The most restrictive policy's limit is unknown without Redis: report the first. */
        rlt__fail_decision(r, checks[0].policy, flags, retry_at, combined);
        rlt__jitter_out(checks[0].policy, checks[0].key, checks[0].klen, now, combined);
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        if (!dec[i].allowed && refused && *refused < 0) *refused = (int)i;
        rlt__jitter_out(checks[i].policy, checks[i].key, checks[i].klen, now, &dec[i]);
        rlt_decision_combine(combined, &dec[i], i == 0);
    }
    r->st.decisions++;
    return RLT_OK;
}

int rlt_redis_decide_batch(rlt_redis *r, const rlt_redis_check *checks, size_t n, unsigned flags,
                           rlt_ns now, rlt_decision *out, int *status)
{
    if (n == 0) return RLT_OK;
    if (!r || !checks || !out || !status) return RLT_EINVAL;
    int64_t now_us;
    int first = rlt__now_arg(flags, now, &now_us);
    if (first) {
        for (size_t i = 0; i < n; i++) {
            memset(&out[i], 0, sizeof out[i]);
            status[i] = first;
        }
        return first;
    }
    /* Validate and build every call; group them by node. */
    size_t csz = (rlt__call_size(1) + 15) & ~(size_t)15;
    char *calls_mem = malloc(n * csz);
    unsigned *node = malloc(n * sizeof *node);
    bool *sent = calloc(n, sizeof *sent);
    bool *mods = calloc(n, sizeof *mods); /* per command of a node's pipeline: on the module */
    rlt__cmd *cmds = malloc(n * sizeof *cmds);
    redisReply **reps = calloc(n, sizeof *reps);
    size_t *which = malloc(n * sizeof *which);
    rlt__limit *lim = malloc(n * sizeof *lim);
    if (!calls_mem || !node || !sent || !mods || !cmds || !reps || !which || !lim) {
        free(mods);
        free(calls_mem), free(node), free(sent), free(cmds), free(reps), free(which), free(lim);
        return RLT_ENOMEM;
    }
    int64_t deadline = rlt__mono_ns() + r->opt.timeout;
    for (size_t i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        status[i] = rlt__check_limit(&checks[i], &lim[i]);
        rlt__call *ci = rlt__call_init(calls_mem + i * csz, 1);
        if (!status[i]) status[i] = rlt__build_one(r, ci, &lim[i], &checks[i], now_us);
        sent[i] = status[i] != RLT_OK; /* nothing to send for a bad check */
        if (!status[i]) node[i] = rlt__route(r, ci->slot, deadline);
    }
    for (size_t i = 0; i < n; i++) {
        if (sent[i]) continue;
        /* One pipeline per node: every unsent check routed to node[i], on the engine it
         * serves (known once connected; a failed connect fails the exec below too). */
        rlt__node *nd = &r->nodes[node[i]];
        (void)rlt__node_ensure(r, nd, deadline);
        size_t m = 0;
        for (size_t j = i; j < n; j++)
            if (!sent[j] && node[j] == node[i]) {
                rlt__call *cj = (rlt__call *)(void *)(calls_mem + j * csz);
                which[m] = j;
                mods[m] = rlt__use_module(r, nd, cj);
                cmds[m] = rlt__form(cj, mods[m]);
                mods[m] = mods[m] && cj->module_ok;
                m++;
                sent[j] = true;
            }
        int64_t t = rlt__mono_ns();
        int rc;
        if (!rlt__node_usable(r, nd, t)) {
            r->st.short_circuited += m;
            rlt__topology_stale(r, t);
            rc = RLT_EBACKEND;
        } else {
            rc = rlt__node_exec(r, nd, cmds, m, reps, deadline);
            if (rc) {
                r->st.errors++;
                rlt__node_failure(r, nd, rlt__mono_ns());
            }
        }
        if (rc) {
            for (size_t k = 0; k < m; k++) {
                size_t j = which[k];
                status[j] = rc;
                rlt__fail_decision(r, checks[j].policy, flags, nd->open ? nd->retry_at : t,
                                   &out[j]);
            }
            continue;
        }
        bool ok = true;
        for (size_t k = 0; k < m; k++) {
            size_t j = which[k];
            redisReply *rep = reps[k];
            if (rep->type != REDIS_REPLY_ERROR &&
                (mods[k] ? rlt__parse_module(rep, 1, &out[j])
                         : rlt__parse_single(&lim[j], rep, &out[j])) == RLT_OK) {
                r->st.decisions++;
                if (mods[k]) r->st.module_calls++;
            } else if (rlt__is_error(rep, "NOSCRIPT") || rlt__is_error(rep, "MOVED") ||
                       rlt__is_error(rep, "ASK") || rlt__is_error(rep, "TRYAGAIN")) {
                /* Did not run: send it alone, which loads the script or follows the
                 * redirect. */
                int64_t retry_at = 0;
                redisReply *single = NULL;
                bool mod;
                status[j] = rlt__run(r, (rlt__call *)(void *)(calls_mem + j * csz), deadline,
                                     &single, &retry_at, &mod);
                if (!status[j]) {
                    status[j] = mod ? rlt__parse_module(single, 1, &out[j])
                                    : rlt__parse_single(&lim[j], single, &out[j]);
                    freeReplyObject(single);
                }
                if (status[j])
                    rlt__fail_decision(r, checks[j].policy, flags, retry_at, &out[j]);
                else
                    r->st.decisions++;
            } else if (r->opt.cluster && rlt__is_error(rep, "CLUSTERDOWN")) {
                /* As in rlt__run(): the fail mode, the slot map read again, no breaker failure. */
                status[j] = RLT_EBACKEND;
                r->st.errors++;
                rlt__topology_stale(r, rlt__mono_ns());
                rlt__fail_decision(r, checks[j].policy, flags, rlt__mono_ns() + RLT__TOPO_GAP,
                                   &out[j]);
            } else {
                ok = false;
                status[j] = RLT_EBACKEND;
                rlt__fail_decision(r, checks[j].policy, flags, rlt__mono_ns(), &out[j]);
            }
            freeReplyObject(rep);
        }
        if (ok) {
            rlt__node_success(r, nd);
        } else {
            /* CLUSTERDOWN, READONLY (a demoted master), LOADING...: this node cannot serve
             * now.  Like rlt__run(): a failure for its breaker, and the topology is read again. */
            r->st.errors++;
            rlt__node_failure(r, nd, rlt__mono_ns());
        }
    }
    for (size_t i = 0; i < n; i++)
        if (status[i] == RLT_OK || status[i] == RLT_EBACKEND || status[i] == RLT_ETIMEDOUT)
            rlt__jitter_out(checks[i].policy, checks[i].key, checks[i].klen, now, &out[i]);
    for (size_t i = 0; i < n && !first; i++)
        first = status[i];
    free(mods);
    free(calls_mem), free(node), free(sent), free(cmds), free(reps), free(which), free(lim);
    return first;
}

/* A call on one key (release, reset): *out with the key's name in keys[0] and its slot.  The
 * name's length, or RLT_ENOMEM, RLT_EKEYLEN, RLT_EINVAL (nothing to free then). */
static int key_call(rlt_redis *r, const rlt_policy *p, const void *key, size_t klen,
                    rlt__call **out)
{
    rlt__call *c = rlt__call_new(1);
    if (!c) return RLT_ENOMEM;
    int len = rlt__redis_name(r, p, key, klen, c->keys[0], KEYNAME_MAX);
    if (len < 0) {
        free(c);
        return len == RLT_ENOSPC ? RLT_EKEYLEN : len;
    }
    c->slot = rlt__key_slot(c->keys[0], (size_t)len);
    *out = c;
    return len;
}

int rlt_redis_release(rlt_redis *r, const rlt_policy *p, unsigned flags, const void *key,
                      size_t klen, rlt_ns now, int64_t lease)
{
    if (!r || !p) return RLT_EINVAL;
    rlt__rpol rp;
    int64_t now_us;
    int rc = rlt__rpol_from(p, &rp);
    if (!rc && p->algo != RLT_CONCURRENCY) rc = RLT_EINVAL;
    if (!rc) rc = rlt__now_arg(flags, now, &now_us);
    if (rc) return rc;
    if (lease <= 0) return RLT_ENOENT;
    rlt__call *c;
    int len = key_call(r, p, key, klen, &c);
    if (len < 0) return len;
    c->script = RLT__S_MULTI; /* it holds the release */
    rlt__arg(c, "EVALSHA", 7);
    rlt__arg(c, rlt__redis_scripts[RLT__S_MULTI].sha, 40);
    rlt__arg(c, "1", 1);
    rlt__arg(c, c->keys[0], (size_t)len);
    rlt__arg(c, "r", 1);
    rlt__arg_num(c, now_us);
    rlt__arg_num(c, lease);
    redisReply *rep = NULL;
    rc = rlt__run_free(r, c, &rep, NULL);
    if (rc) return rc;
    rc = rep->type != REDIS_REPLY_INTEGER ? RLT_EBACKEND : rep->integer ? RLT_OK : RLT_ENOENT;
    freeReplyObject(rep);
    return rc;
}

int rlt_redis_reset(rlt_redis *r, const rlt_policy *p, const void *key, size_t klen)
{
    if (!r) return RLT_EINVAL;
    rlt__rpol rp;
    int rc = rlt__rpol_from(p, &rp);
    if (rc) return rc;
    rlt__call *c;
    int len = key_call(r, p, key, klen, &c);
    if (len < 0) return len;
    rlt__lease_forget(r, c->keys[0], (size_t)len);
    rlt__arg(c, "DEL", 3);
    rlt__arg(c, c->keys[0], (size_t)len);
    if (p->block > 0) { /* and the penalty box's companion key (same slot) */
        char tail[RLT__BLKTAIL_MAX];
        int tl = rlt__block_tail(p, tail);
        if ((size_t)len + (size_t)tl > KEYNAME_MAX) {
            free(c);
            return RLT_EKEYLEN;
        }
        memcpy(c->keys[1], c->keys[0], (size_t)len);
        memcpy(c->keys[1] + len, tail, (size_t)tl);
        rlt__arg(c, c->keys[1], (size_t)len + (size_t)tl);
    }
    redisReply *rep = NULL;
    rc = rlt__run_free(r, c, &rep, NULL);
    if (rc) return rc;
    freeReplyObject(rep);
    return RLT_OK;
}
