/* One Redis call of libratelimit_redis: the arguments of a decision in its two forms (the
 * algorithm's EVALSHA, the module's RL.DECIDE), built lazily because which one a node runs is
 * known only once it is connected; and the run of a call with NOSCRIPT recovery, cluster
 * redirects and the breaker.  The decoding of replies is reply.c. */
#include "call.h"

#include "reply.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NOW_MAX RLT__NOW_MAX
#define KEYNAME_MAX RLT__KEYNAME_MAX
#define POLTEXT_MAX RLT__POLTEXT_MAX
#define FIELDS RLT__FIELDS

rlt__call *rlt__call_new(size_t cap)
{
    void *mem = malloc(rlt__call_size(cap));
    return mem ? rlt__call_init(mem, cap) : NULL;
}

void rlt__arg_num(rlt__call *c, int64_t v)
{
    char *b = c->nums[c->nnums++];
    int n = snprintf(b, 24, "%lld", (long long)v);
    rlt__arg(c, b, (size_t)n);
}

int rlt__now_arg(unsigned flags, rlt_ns now, int64_t *now_us)
{
    if (!(flags & RLT_REDIS_CALLER_TIME)) {
        *now_us = -1;
        return RLT_OK;
    }
    if (now < 0 || now / RLT_NS_PER_US > NOW_MAX) return RLT_ERANGE;
    *now_us = now / RLT_NS_PER_US;
    return RLT_OK;
}

/* The GCRA, token bucket and leaky bucket scripts' arguments after now (gcra.lua): charge,
 * room, scale, for a bucket of rlt__bucket_size(p) costs of `unit` each.  The leaky bucket's
 * cap is Q x unit and src/core/leaky.c admits a backlog up to cap - (need - 1) x unit, which is
 * (Q + 1) x unit - need x unit: the same test with a bucket of Q + 1. */
static void bucket_args(rlt__call *c, const rlt__limit *l)
{
    const rlt__rpol *p = &l->rp;
    int64_t need = l->cost > 0 ? l->cost : 1, size = rlt__bucket_size(p);
    if (need > size) { /* never fits: nothing is charged, every state denies */
        rlt__arg(c, "0", 1);
        rlt__arg(c, "-1", 2);
    } else {
        rlt__arg_num(c, l->cost > 0 ? need * p->unit : 0);
        rlt__arg_num(c, (size - need) * p->unit);
    }
    rlt__arg_num(c, p->scale);
}

/* The handle is not thread-safe: the cache is part of its state, hence the cast. */
const struct rlt__ptext *rlt__policy_texts(const rlt_redis *rc, const rlt_policy *p)
{
    rlt_redis *r = (rlt_redis *)rc;
    for (int i = 0; i < RLT__PTEXT_CACHE; i++) {
        const rlt_policy *q = &r->ptext[i].p;
        if (r->ptext[i].used && q->algo == p->algo && q->limit == p->limit &&
            q->period == p->period && q->burst == p->burst && q->queue == p->queue &&
            q->delay == p->delay && q->block == p->block && q->block_factor == p->block_factor &&
            q->block_max == p->block_max && q->months == p->months &&
            (p->months == 0 || rlt_policy_calendar_equal(q, p))) /* no call for most policies */
            return &r->ptext[i];
    }
    struct rlt__ptext *e = &r->ptext[r->ptext_next++ % RLT__PTEXT_CACHE];
    e->p = *p;
    e->used = true;
    e->len = rlt_policy_format(p, e->text, sizeof e->text);
    e->tl = rlt__key_tail(p, e->tail);
    return e;
}

/* The penalty boxes' companion keys (rlt__block_tail) of the n names of build_names, as
 * KEYS[n + 1..2n] (a limit without block= gets one too, never touched). */
static int block_names(rlt__call *c, const rlt__limit *l, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char tail[RLT__BLKTAIL_MAX];
        int tl = rlt__block_tail(l[i].p, tail);
        if (tl == 0) tl = snprintf(tail, sizeof tail, ":blk:0:0:0");
        size_t len = c->lens[3 + i];
        if (len + (size_t)tl > KEYNAME_MAX) return RLT_EKEYLEN;
        memcpy(c->keys[n + i], c->keys[i], len);
        memcpy(c->keys[n + i] + len, tail, (size_t)tl);
        rlt__arg(c, c->keys[n + i], len + (size_t)tl);
    }
    return RLT_OK;
}

/* The head both forms share: "EVALSHA sha n" and the key names (in c->keys, c->lens[3..]). */
static int build_names(const rlt_redis *r, rlt__call *c, const rlt__limit *l,
                       const rlt_redis_check *ck, size_t n, bool multi)
{
    assert(multi || n == 1);
    c->argc = 0;
    c->nnums = 0;
    c->boxed = false;
    for (size_t i = 0; i < n; i++)
        c->boxed = c->boxed || l[i].p->block > 0;
    /* block= runs in multi.lua only (lib/60_block.lua), even for one limit */
    c->script = multi || c->boxed ? RLT__S_MULTI : l[0].rp.algo;
    rlt__arg(c, "EVALSHA", 7);
    rlt__arg(c, rlt__redis_scripts[c->script].sha, 40);
    rlt__arg_num(c, (int64_t)(c->boxed ? 2 * n : n));
    for (size_t i = 0; i < n; i++) {
        const struct rlt__ptext *t = rlt__policy_texts(r, l[i].p);
        int len = rlt__key_name_tail(r->prefix, r->prefix_len, t->tail, (size_t)t->tl, ck[i].key,
                                     ck[i].klen, c->keys[i], KEYNAME_MAX);
        if (len < 0) return len == RLT_ENOSPC ? RLT_EKEYLEN : len;
        unsigned slot = r->opt.cluster ? rlt__key_slot(c->keys[i], (size_t)len) : 0;
        if (i == 0) c->slot = slot;
        if (r->opt.cluster && slot != c->slot) return RLT_EINVAL; /* would be CROSSSLOT */
        for (size_t j = 0; j < i; j++)
            if (c->lens[3 + j] == (size_t)len && memcmp(c->keys[j], c->keys[i], (size_t)len) == 0)
                return RLT_EINVAL; /* the same limit twice */
        rlt__arg(c, c->keys[i], (size_t)len);
    }
    if (c->boxed) return block_names(c, l, n);
    return RLT_OK;
}

/* The script's arguments after the keys. */
static void build_script(rlt__call *c)
{
    const rlt_redis *r = c->r;
    const rlt__limit *l = c->l;
    size_t n = c->n;
    int64_t now_us = c->now_us;
    bool multi = c->multi;
    int64_t floor_ms = rlt_retry_after_ms(r->opt.ttl_floor);
    if (c->script == RLT_FIXED_WINDOW || c->script == RLT_SLIDING_WINDOW) {
        /* fixed_window.lua, sliding_window.lua: now N W cost [floor [calendar]] */
        rlt__arg_num(c, now_us);
        rlt__arg_num(c, l[0].rp.N);
        rlt__arg_num(c, l[0].rp.W);
        rlt__arg_num(c, l[0].cost);
        if (floor_ms > 0 || l[0].rp.cal[0]) rlt__arg_num(c, floor_ms);
        if (l[0].rp.cal[0]) rlt__arg(c, l[0].rp.cal, strlen(l[0].rp.cal));
        return;
    }
    if (c->script == RLT_GCRA || c->script == RLT_TOKEN_BUCKET ||
        c->script == RLT_LEAKY_BUCKET) { /* gcra.lua, token_bucket.lua */
        rlt__arg_num(c, now_us);
        bucket_args(c, &l[0]);
        if (floor_ms > 0) rlt__arg_num(c, floor_ms);
        return;
    }
    multi = multi || c->boxed;
    if (multi) rlt__arg(c, c->boxed ? "b" : "d", 1);
    rlt__arg_num(c, now_us);
    rlt__arg_num(c, floor_ms);
    if (multi) rlt__arg_num(c, (int64_t)n);
    for (size_t i = 0; i < n; i++) {
        const rlt__rpol *p = &l[i].rp;
        int64_t v[FIELDS - 1] = {p->algo, l[i].cost, p->N,     p->W,   p->B,
                                 p->Q,    p->D,      p->scale, p->unit};
        for (int f = multi ? 0 : 1; f < FIELDS - 1; f++) /* a one-algorithm script knows its algo */
            rlt__arg_num(c, v[f]);
        if (multi) rlt__arg(c, p->cal, strlen(p->cal)); /* "" but for calendar windows */
        if (c->boxed) {
            rlt__arg_num(c, p->blk);
            rlt__arg_num(c, p->bfac);
            rlt__arg_num(c, p->bmax);
        }
    }
}

static void marg(rlt__call *c, const char *s, size_t len)
{
    c->margv[c->margc] = s;
    c->mlens[c->margc++] = len;
}

static void marg_num(rlt__call *c, int64_t v)
{
    char *b = c->nums[c->nnums++];
    int n = snprintf(b, 24, "%lld", (long long)v);
    marg(c, b, (size_t)n);
}

/* The module's RL.DECIDE now_us floor_ms (name policy cost)... on the names of build_names. */
static void build_module(rlt__call *c)
{
    const rlt_redis *r = c->r;
    int64_t floor_ms = rlt_retry_after_ms(r->opt.ttl_floor);
    c->margc = 0;
    marg(c, "RL.DECIDE", 9);
    marg_num(c, c->now_us);
    marg_num(c, floor_ms);
    for (size_t i = 0; i < c->n; i++) {
        const struct rlt__ptext *t = rlt__policy_texts(r, c->l[i].p);
        /* calendar windows run as scripts: the module would read the zone inside Redis */
        if (t->len < 0 || t->len > POLTEXT_MAX || c->l[i].p->months != 0) {
            c->module_ok = false; /* the scripts only */
            return;
        }
        memcpy(c->pols[i], t->text, (size_t)t->len);
        marg(c, c->keys[i], c->lens[3 + i]);
        marg(c, c->pols[i], (size_t)t->len);
        marg_num(c, c->l[i].cost);
    }
}

static inline int build_decide(const rlt_redis *r, rlt__call *c, const rlt__limit *l,
                               const rlt_redis_check *ck, size_t n, int64_t now_us, bool multi)
{
    int rc = build_names(r, c, l, ck, n, multi);
    if (rc) return rc;
    c->r = r;
    c->l = l;
    c->n = n;
    c->now_us = now_us;
    c->multi = multi;
    c->caller_time = now_us >= 0;
    c->script_done = c->module_done = false;
    c->module_ok = true;
    return RLT_OK;
}

int rlt__build_decide(const rlt_redis *r, rlt__call *c, const rlt__limit *l,
                      const rlt_redis_check *ck, size_t n, int64_t now_us, bool multi)
{
    return build_decide(r, c, l, ck, n, now_us, multi);
}

/* Its own copy, n = 1 and not multi known to the compiler (60 instructions fewer a decision
 * than rlt__build_decide's loops over n). */
int rlt__build_one(const rlt_redis *r, rlt__call *c, const rlt__limit *l, const rlt_redis_check *ck,
                   int64_t now_us)
{
    return build_decide(r, c, l, ck, 1, now_us, false);
}

rlt__cmd rlt__form(rlt__call *c, bool mod)
{
    if (mod && !c->module_done) {
        build_module(c);
        c->module_done = true;
    }
    if (mod && c->module_ok) return (rlt__cmd){c->margc, c->margv, c->mlens};
    if (!c->script_done) {
        build_script(c);
        c->script_done = true;
    }
    return (rlt__cmd){c->argc, c->argv, c->lens};
}

bool rlt__is_error(const redisReply *rep, const char *prefix)
{
    size_t n = strlen(prefix);
    return rep->type == REDIS_REPLY_ERROR && rep->len >= n && memcmp(rep->str, prefix, n) == 0;
}

int rlt__run(rlt_redis *r, rlt__call *c, int64_t deadline, redisReply **out, int64_t *retry_at,
             bool *used_module)
{
    unsigned idx = rlt__route(r, c->slot, deadline);
    bool ask = false, loaded = false;
    int tries = 0; /* TRYAGAIN */
    *retry_at = 0;
    *used_module = false;
    for (int hop = 0; hop < 6; hop++) {
        rlt__node *n = &r->nodes[idx];
        int64_t now = rlt__mono_ns();
        if (!rlt__node_usable(r, n, now)) {
            r->st.short_circuited++;
            rlt__topology_stale(r, now); /* whatever it served may be elsewhere by now */
            *retry_at = n->retry_at;
            return RLT_EBACKEND;
        }
        static const char *asking[1] = {"ASKING"};
        static const size_t asking_len[1] = {6};
        const rlt__script *sc = &rlt__redis_scripts[c->script];
        const char *load_argv[3] = {"SCRIPT", "LOAD", sc->text};
        size_t load_len[3] = {6, 4, sc->len};
        rlt__cmd cmds[4];
        size_t nc = 0;
        redisReply *reps[4] = {0};
        int rc = rlt__node_ensure(r, n, deadline); /* its engine is known once connected */
        bool mod = rlt__use_module(r, n, c);
        rlt__cmd mine = rlt__form(c, mod);
        mod = mod && c->module_ok;
        if (mod) loaded = false;
        if (loaded) cmds[nc++] = (rlt__cmd){3, load_argv, load_len};
        if (ask) cmds[nc++] = (rlt__cmd){1, asking, asking_len};
        cmds[nc++] = mine;
        if (!rc) rc = rlt__node_exec(r, n, cmds, nc, reps, deadline);
        if (rc) {
            r->st.errors++;
            rlt__node_failure(r, n, rlt__mono_ns());
            *retry_at = n->open ? n->retry_at : rlt__mono_ns();
            return rc;
        }
        redisReply *rep = reps[nc - 1];
        bool load_failed = loaded && reps[0]->type == REDIS_REPLY_ERROR;
        for (size_t i = 0; i + 1 < nc; i++)
            freeReplyObject(reps[i]);
        if (!mod && rlt__is_error(rep, "NOSCRIPT") && !loaded && !load_failed) {
            freeReplyObject(rep);
            r->st.script_loads++;
            rlt__node_success(r, n); /* it answered: the breaker closes before the retry */
            loaded = true;
            hop--; /* the same node again, with the script */
            continue;
        }
        loaded = false;
        if (r->opt.cluster && rlt__is_error(rep, "TRYAGAIN")) {
            /* A multi-key call during a slot migration whose keys are split between the two
             * nodes: it did not run.  Retried after 1, 2, 4, 8 ms while the deadline allows,
             * from the slot's owner again (which may answer ASK by then). */
            freeReplyObject(rep);
            r->st.tryagain++;
            rlt__node_success(r, n);
            int64_t wait = RLT_NS_PER_MS << tries;
            if (tries == 4 || rlt__mono_ns() + wait >= deadline) {
                r->st.errors++;
                *retry_at = rlt__mono_ns() + wait;
                return RLT_EBACKEND;
            }
            tries++;
            struct timespec ts = {0, (long)wait};
            nanosleep(&ts, NULL);
            ask = false;
            idx = rlt__route(r, c->slot, deadline);
            hop--;
            continue;
        }
        unsigned to;
        if (r->opt.cluster && rlt__parse_redirect(r, rep, &ask, &to)) {
            freeReplyObject(rep);
            r->st.redirects++;
            idx = to;
            rlt__node_success(r, n);
            continue;
        }
        if (r->opt.cluster && rlt__is_error(rep, "CLUSTERDOWN")) {
            /* The cluster's word on this slot (not served, or the cluster is failing over),
             * answered at once by a healthy node: the fail mode decides and the slot map is
             * read again soon, but the node's breaker is left alone, so its other slots and
             * the other nodes keep deciding in Redis. */
            freeReplyObject(rep);
            r->st.errors++;
            rlt__topology_stale(r, rlt__mono_ns());
            *retry_at = rlt__mono_ns() + RLT__TOPO_GAP;
            return RLT_EBACKEND;
        }
        if (rep->type == REDIS_REPLY_ERROR) {
            /* LOADING, BUSY, OOM, READONLY (a failed-over master)...: the node
             * cannot serve us now.  The script did not run (or ran and failed with no write). */
            freeReplyObject(rep);
            r->st.errors++;
            rlt__node_failure(r, n, rlt__mono_ns());
            *retry_at = n->open ? n->retry_at : rlt__mono_ns();
            return RLT_EBACKEND;
        }
        rlt__node_success(r, n);
        *out = rep;
        *used_module = mod;
        if (mod) r->st.module_calls++;
        return RLT_OK;
    }
    *retry_at = rlt__mono_ns();
    r->st.errors++;
    return RLT_EBACKEND; /* redirect loop */
}

int rlt__run_free(rlt_redis *r, rlt__call *c, redisReply **out, int64_t *retry_at)
{
    int64_t at;
    bool mod;
    int rc = rlt__run(r, c, rlt__mono_ns() + r->opt.timeout, out, retry_at ? retry_at : &at, &mod);
    free(c);
    return rc;
}

void rlt__fail_decision(rlt_redis *r, const rlt_policy *p, unsigned flags, int64_t retry_at,
                        rlt_decision *d)
{
    memset(d, 0, sizeof *d);
    d->limit = p ? rlt_policy_limit(p) : 0;
    d->allowed = (flags & RLT_REDIS_FAIL_OPEN) != 0;
    if (d->allowed) {
        r->st.fail_open++;
    } else {
        r->st.fail_closed++;
        rlt_ns wait = retry_at - rlt__mono_ns();
        d->retry_after = wait < RLT_NS_PER_MS ? RLT_NS_PER_MS : wait;
        d->reset_after = d->retry_after;
    }
    r->st.decisions++;
}

int rlt__decide_call(rlt_redis *r, const rlt__limit *l, const rlt_redis_check *ck, size_t n,
                     bool multi, int64_t now_us, rlt_decision *dec, int64_t *retry_at)
{
    rlt__call *c = rlt__call_new(n);
    if (!c) return RLT_ENOMEM;
    int rc = rlt__build_decide(r, c, l, ck, n, now_us, multi);
    if (rc) {
        free(c);
        return rc;
    }
    redisReply *rep = NULL;
    bool mod;
    rc = rlt__run(r, c, rlt__mono_ns() + r->opt.timeout, &rep, retry_at, &mod);
    free(c);
    if (rc) return rc;
    if (mod) {
        rc = rlt__parse_module(rep, n, dec);
    } else if (!multi) {
        rc = rlt__parse_single(&l[0], rep, &dec[0]);
    } else {
        if (rep->type != REDIS_REPLY_ARRAY || rep->elements != n) rc = RLT_EBACKEND;
        for (size_t i = 0; i < n && !rc; i++)
            rc = rlt__parse_decision(rep->element[i], &dec[i]);
    }
    freeReplyObject(rep);
    if (rc) {
        r->st.errors++;
        *retry_at = rlt__mono_ns();
    }
    return rc;
}
