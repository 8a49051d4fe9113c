/* The public API of libratelimit_redis: policy conversion to microseconds with the 2^53
 * bounds, Redis key names, the EVALSHA calls (one script per algorithm, one for multi-limit
 * checks) with NOSCRIPT recovery and cluster redirects, the decoding of the GCRA script's
 * one-number reply, fail-mode decisions, multi-limit checks, pipelined batches and the local
 * lease cache. */
#include "internal.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define LIM RLT__LIM
#define NOW_MAX RLT__NOW_MAX
#define KEYNAME_MAX RLT__KEYNAME_MAX
#define MULTI_MAX 64
#define FIELDS 10                        /* script arguments per limit (the last: calendar) */
#define BFIELDS 3                        /* and with a penalty box (op 'b'): blk fac max */
#define POLTEXT_MAX 160                  /* rlt_policy_format's text */
#define TTL_FLOOR_MAX (INT64_C(1) << 40) /* ns: 12 days */

typedef rlt__rpol rpol;

static int convert(const rlt_policy *p, rpol *o)
{
    return rlt__rpol_from(p, o);
}

int rlt_redis_policy_check(const rlt_policy *p)
{
    rpol rp;
    return convert(p, &rp);
}

/* ---- open / close ---------------------------------------------------------------------- */

static char *dup_str(const char *s)
{
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

typedef struct rlt__lease {
    char *name; /* Redis key name; NULL = empty entry */
    size_t len;
    int64_t units;        /* leased units not yet spent */
    int64_t expires;      /* ns (monotonic, or the caller's clock with RLT_REDIS_CALLER_TIME) */
    rlt_decision d;       /* the grant's decision, for limit and reset_after */
    int64_t denied_until; /* Redis denied a cost-1 request until then: deny locally */
    rlt_decision denied;  /* that denial */
} rlt__lease;

static int parse_servers(rlt_redis *r)
{
    const char *s = r->servers;
    while (*s) {
        const char *end = strchr(s, ',');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        const char *colon = NULL;
        for (size_t i = len; i > 0; i--)
            if (s[i - 1] == ':') {
                colon = s + i - 1;
                break;
            }
        if (!colon || colon == s) return RLT_EINVAL;
        char *e;
        long port = strtol(colon + 1, &e, 10);
        if (e != s + len || port <= 0 || port > 65535) return RLT_EINVAL;
        if (rlt__node_find_or_add(r, s, (size_t)(colon - s), (int)port) == RLT__NO_NODE)
            return RLT_EINVAL;
        s += len;
        if (*s == ',') s++;
    }
    if (r->nnodes == 0 || (!r->opt.cluster && r->nnodes != 1)) return RLT_EINVAL;
    return RLT_OK;
}

/* Sentinel: the sentinels of r->sentinel_list; node 0, the master, unknown until asked. */
static int parse_sentinels(rlt_redis *r)
{
    size_t ml = strlen(r->master_name);
    if (r->opt.cluster || ml == 0 || ml > RLT__MASTER_NAME_MAX ||
        strpbrk(r->master_name, " \t\r\n"))
        return RLT_EINVAL;
    const char *s = r->sentinel_list;
    while (*s) {
        const char *end = strchr(s, ',');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        const char *colon = NULL;
        for (size_t i = len; i > 0; i--)
            if (s[i - 1] == ':') {
                colon = s + i - 1;
                break;
            }
        if (!colon || colon == s || r->nsents == RLT__MAX_SENTINELS ||
            (size_t)(colon - s) >= sizeof r->sents[0].host)
            return RLT_EINVAL;
        char *e;
        long port = strtol(colon + 1, &e, 10);
        if (e != s + len || port <= 0 || port > 65535) return RLT_EINVAL;
        rlt__node *n = &r->sents[r->nsents++];
        memcpy(n->host, s, (size_t)(colon - s));
        n->host[colon - s] = '\0';
        n->port = (int)port;
        n->sentinel = true;
        s += len;
        if (*s == ',') s++;
    }
    if (r->nsents == 0) return RLT_EINVAL;
    memset(&r->nodes[0], 0, sizeof r->nodes[0]); /* the master: port 0 = not known yet */
    r->nodes[0].backoff = r->opt.backoff_min;
    r->nnodes = 1;
    return RLT_OK;
}

int rlt_redis_open(rlt_redis **out, const rlt_redis_options *opt)
{
    if (!out) return RLT_EINVAL;
    *out = NULL;
    rlt_redis_options o = {0};
    if (opt) o = *opt;
    if (o.timeout < 0 || o.backoff_min < 0 || o.backoff_max < 0 || o.lease_units < 0 ||
        o.lease_ttl < 0 || o.ttl_floor < 0 || o.ttl_floor > TTL_FLOOR_MAX)
        return RLT_EINVAL;
    if (o.prefix && (strlen(o.prefix) > 64 || strpbrk(o.prefix, "{}"))) return RLT_EINVAL;
    if (!o.timeout) o.timeout = RLT_REDIS_DEFAULT_TIMEOUT;
    if (!o.breaker_failures) o.breaker_failures = 3;
    if (!o.backoff_min) o.backoff_min = 100 * RLT_NS_PER_MS;
    if (!o.backoff_max) o.backoff_max = 5 * RLT_NS_PER_S;
    if (o.backoff_max < o.backoff_min) o.backoff_max = o.backoff_min;
    if (!o.lease_ttl) o.lease_ttl = 100 * RLT_NS_PER_MS;
    if (!o.lease_keys) o.lease_keys = 1024;
    if (o.refresh_interval < 0) return RLT_EINVAL;
    if (!o.refresh_interval) o.refresh_interval = RLT_NS_PER_S;
    if (o.sentinels && !o.master_name) return RLT_EINVAL;
    rlt_redis *r = calloc(1, sizeof *r);
    if (!r) return RLT_ENOMEM;
    r->opt = o;
    r->servers = dup_str(o.servers ? o.servers : "127.0.0.1:6379");
    r->prefix = dup_str(o.prefix ? o.prefix : "rlt:");
    r->password = o.password ? dup_str(o.password) : NULL;
    r->sentinel_list = o.sentinels ? dup_str(o.sentinels) : NULL;
    r->master_name = o.sentinels ? dup_str(o.master_name) : NULL;
    r->slots = malloc(RLT__SLOTS * sizeof *r->slots);
    if (o.lease_units > 0) {
        r->nleases = o.lease_keys;
        r->leases = calloc(r->nleases, sizeof *r->leases);
    }
    if (!r->servers || !r->prefix || (o.password && !r->password) || !r->slots ||
        (o.sentinels && (!r->sentinel_list || !r->master_name)) ||
        (o.lease_units > 0 && !r->leases)) {
        rlt_redis_close(r);
        return RLT_ENOMEM;
    }
    r->opt.servers = r->servers;
    r->opt.prefix = r->prefix;
    r->opt.password = r->password;
    r->prefix_len = strlen(r->prefix);
    for (size_t s = 0; s < RLT__SLOTS; s++)
        r->slots[s] = RLT__NO_NODE;
    r->opt.sentinels = r->sentinel_list;
    r->opt.master_name = r->master_name;
    r->refresh = o.cluster;
    int rc = r->master_name ? parse_sentinels(r) : parse_servers(r);
    if (rc) {
        rlt_redis_close(r);
        return rc;
    }
    *out = r;
    return RLT_OK;
}

void rlt_redis_close(rlt_redis *r)
{
    if (!r) return;
    for (unsigned i = 0; i < r->nnodes; i++)
        rlt__node_drop(&r->nodes[i]);
    for (unsigned i = 0; i < r->nsents; i++)
        rlt__node_drop(&r->sents[i]);
    rlt__node_drop(&r->sub);
    free(r->sentinel_list);
    free(r->master_name);
    for (size_t i = 0; i < r->nleases; i++)
        free(r->leases[i].name);
    free(r->leases);
    free(r->slots);
    free(r->servers);
    free(r->prefix);
    free(r->password);
    free(r);
}

void rlt_redis_stats_get(const rlt_redis *r, rlt_redis_stats *out)
{
    if (!r || !out) return;
    *out = r->st;
    out->nodes = r->nnodes;
    out->nodes_open = 0;
    for (unsigned i = 0; i < r->nnodes; i++)
        if (r->nodes[i].open) out->nodes_open++;
}

int rlt_redis_node_info_get(const rlt_redis *r, unsigned i, rlt_redis_node_info *out)
{
    if (!r || !out) return RLT_EINVAL;
    if (i >= r->nnodes) return RLT_ENOENT;
    const rlt__node *n = &r->nodes[i];
    memset(out, 0, sizeof *out);
    snprintf(out->addr, sizeof out->addr, "%s:%d", n->host, n->port);
    out->engine = n->engine;
    out->caller_time = n->engine == RLT_REDIS_ENGINE_MODULE && n->module_time;
    out->connected = n->c != NULL;
    out->breaker_open = n->open;
    return RLT_OK;
}

/* ---- key names --------------------------------------------------------------------------- */

/* The one naming rule (layout.c), with this handle's prefix. */
static int key_name(const rlt_redis *r, const rlt_policy *p, const void *key, size_t klen,
                    char *buf, size_t cap)
{
    return rlt__key_name(r->prefix, r->prefix_len, p, key, klen, buf, cap);
}

int rlt_redis_key_name(const rlt_redis *r, const rlt_policy *p, const void *key, size_t klen,
                       char *buf, size_t cap)
{
    rpol rp;
    if (!r || !buf) return RLT_EINVAL;
    int rc = convert(p, &rp);
    if (rc) return rc;
    return key_name(r, p, key, klen, buf, cap);
}

/* ---- one script call --------------------------------------------------------------------- */

/* The arguments of one EVALSHA for up to `cap` limits, in one allocation (call_new). */
typedef struct call {
    int argc;
    int nnums;
    unsigned slot;
    int script; /* rlt__script_id of the EVALSHA */
    const char **argv;
    size_t *lens;
    char (*keys)[KEYNAME_MAX];
    char (*nums)[24];
    /* The same decision as the module's RL.DECIDE (margc 0: scripts only). */
    int margc;
    const char **margv;
    size_t *mlens;
    char (*pols)[POLTEXT_MAX];
    bool caller_time;
    /* Each form is built when a node first needs it (build_decide builds the key names). */
    const rlt_redis *r;
    const struct limit *l;
    size_t n;
    int64_t now_us;
    bool multi, script_done, module_done, module_ok;
    bool boxed; /* a limit has block=: multi.lua's op 'b', with the companion keys after */
} call;

static size_t call_size(size_t cap)
{
    size_t args = 3 + 2 * cap + 4 + (FIELDS + BFIELDS) * cap + 3 + 3 * cap; /* script, module */
    return sizeof(call) + args * (sizeof(char *) + sizeof(size_t)) + 2 * cap * KEYNAME_MAX +
           (4 + (FIELDS + BFIELDS) * cap + 1 + 2 + cap) * 24 + cap * POLTEXT_MAX;
}

/* Lays out a call for `cap` limits in mem[0..call_size(cap)). */
static call *call_init(void *mem, size_t cap)
{
    call *c = mem;
    size_t args = 3 + 2 * cap + 4 + (FIELDS + BFIELDS) * cap;
    char *p = (char *)(c + 1);
    c->argv = (const char **)(void *)p, p += args * sizeof(char *);
    c->lens = (size_t *)(void *)p, p += args * sizeof(size_t);
    size_t margs = 3 + 3 * cap;
    c->margv = (const char **)(void *)p, p += margs * sizeof(char *);
    c->mlens = (size_t *)(void *)p, p += margs * sizeof(size_t);
    c->keys = (char(*)[KEYNAME_MAX])p, p += 2 * cap * KEYNAME_MAX; /* [cap..): block= keys */
    c->pols = (char(*)[POLTEXT_MAX])p, p += cap * POLTEXT_MAX;
    c->nums = (char(*)[24])p;
    c->margc = 0;
    c->caller_time = false;
    c->script_done = true; /* a call built by hand (release, reset) is a script call */
    c->module_done = c->module_ok = false;
    c->argc = c->nnums = 0;
    c->slot = 0;
    c->script = RLT__S_MULTI;
    c->boxed = false;
    return c;
}

static call *call_new(size_t cap)
{
    void *mem = malloc(call_size(cap));
    return mem ? call_init(mem, cap) : NULL;
}

static void arg(call *c, const char *s, size_t len)
{
    c->argv[c->argc] = s;
    c->lens[c->argc++] = len;
}

static void arg_num(call *c, int64_t v)
{
    char *b = c->nums[c->nnums++];
    int n = snprintf(b, 24, "%lld", (long long)v);
    arg(c, b, (size_t)n);
}

/* Validated inputs of one limit. */
typedef struct limit limit;
struct limit {
    const rlt_policy *p;
    rpol rp;
    int64_t cost;
};

static int check_limit(const rlt_redis_check *ck, limit *l)
{
    if (!ck) return RLT_EINVAL;
    int rc = convert(ck->policy, &l->rp);
    if (rc) return rc;
    if (ck->cost < 0) return RLT_EINVAL;
    if (ck->policy->algo == RLT_CONCURRENCY && ck->cost > 1) return RLT_EINVAL;
    if (!ck->key || ck->klen == 0 || ck->klen > RLT_REDIS_KEY_MAX) return RLT_EKEYLEN;
    l->p = ck->policy;
    /* A cost beyond every limit (all <= 2^50) never fits whatever its size: clamp it so the
     * script's numbers stay exact. */
    l->cost = ck->cost > LIM * 2 ? LIM * 2 : ck->cost;
    return RLT_OK;
}

static int now_arg(unsigned flags, rlt_ns now, int64_t *now_us)
{
    if (!(flags & RLT_REDIS_CALLER_TIME)) {
        *now_us = -1;
        return RLT_OK;
    }
    if (now < 0 || now / RLT_NS_PER_US > NOW_MAX) return RLT_ERANGE;
    *now_us = now / RLT_NS_PER_US;
    return RLT_OK;
}

/* The GCRA and token bucket scripts' arguments after now: charge, room, scale (gcra.lua). */
static void gcra_args(call *c, const limit *l)
{
    const rpol *p = &l->rp;
    int64_t need = l->cost > 0 ? l->cost : 1, cap = p->B * p->unit;
    if (need > p->B) { /* never fits: nothing is charged, every state denies */
        arg(c, "0", 1);
        arg(c, "-1", 2);
    } else {
        arg_num(c, l->cost > 0 ? need * p->unit : 0);
        arg_num(c, cap - need * p->unit);
    }
    arg_num(c, p->scale);
}

/* The leaky bucket's arguments of gcra.lua after now: the same backlog test with
 * cap = Q x unit and room = cap - (need - 1) x unit (src/core/leaky.c admits a backlog up to
 * cap - extra); never fits when need > Q + 1. */
static void leaky_args(call *c, const limit *l)
{
    const rpol *p = &l->rp;
    int64_t need = l->cost > 0 ? l->cost : 1, cap = p->Q * p->unit;
    if (need > p->Q + 1) {
        arg(c, "0", 1);
        arg(c, "-1", 2);
    } else {
        arg_num(c, l->cost > 0 ? need * p->unit : 0);
        arg_num(c, cap - (need - 1) * p->unit);
    }
    arg_num(c, p->scale);
}

/* Builds the EVALSHA of limits l[0..n): with `multi`, the multi-limit script
 * (n keys... 'd' now floor n fields...), else (n = 1) the algorithm's own script. */
/* The texts of `p` from the handle's small cache of recent policies (the handle is not
 * thread-safe: the cache is part of its state). */
static const struct rlt__ptext *policy_texts(const rlt_redis *rc, const rlt_policy *p)
{
    rlt_redis *r = (rlt_redis *)rc;
    for (int i = 0; i < RLT__PTEXT_CACHE; i++) {
        const rlt_policy *q = &r->ptext[i].p;
        if (r->ptext[i].used && q->algo == p->algo && q->limit == p->limit &&
            q->period == p->period && q->burst == p->burst && q->queue == p->queue &&
            q->delay == p->delay && q->block == p->block && q->block_factor == p->block_factor &&
            q->block_max == p->block_max && rlt_policy_calendar_equal(q, p))
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
static int block_names(call *c, const limit *l, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char tail[RLT__BLKTAIL_MAX];
        int tl = rlt__block_tail(l[i].p, tail);
        if (tl == 0) tl = snprintf(tail, sizeof tail, ":blk:0:0:0");
        size_t len = c->lens[3 + i];
        if (len + (size_t)tl > KEYNAME_MAX) return RLT_EKEYLEN;
        memcpy(c->keys[n + i], c->keys[i], len);
        memcpy(c->keys[n + i] + len, tail, (size_t)tl);
        arg(c, c->keys[n + i], len + (size_t)tl);
    }
    return RLT_OK;
}

/* The head both forms share: "EVALSHA sha n" and the key names (in c->keys, c->lens[3..]). */
static int build_names(const rlt_redis *r, call *c, const limit *l, const rlt_redis_check *ck,
                       size_t n, bool multi)
{
    assert(multi || n == 1);
    c->argc = 0;
    c->nnums = 0;
    c->boxed = false;
    for (size_t i = 0; i < n; i++)
        c->boxed = c->boxed || l[i].p->block > 0;
    /* block= runs in multi.lua only (lib/60_block.lua), even for one limit */
    c->script = multi || c->boxed ? RLT__S_MULTI : l[0].rp.algo;
    arg(c, "EVALSHA", 7);
    arg(c, rlt__redis_scripts[c->script].sha, 40);
    arg_num(c, (int64_t)(c->boxed ? 2 * n : n));
    for (size_t i = 0; i < n; i++) {
        const struct rlt__ptext *t = policy_texts(r, l[i].p);
        int len = rlt__key_name_tail(r->prefix, r->prefix_len, t->tail, (size_t)t->tl, ck[i].key,
                                     ck[i].klen, c->keys[i], KEYNAME_MAX);
        if (len < 0) return len == RLT_ENOSPC ? RLT_EKEYLEN : len;
        unsigned slot = r->opt.cluster ? rlt__key_slot(c->keys[i], (size_t)len) : 0;
        if (i == 0) c->slot = slot;
        if (r->opt.cluster && slot != c->slot) return RLT_EINVAL; /* would be CROSSSLOT */
        for (size_t j = 0; j < i; j++)
            if (c->lens[3 + j] == (size_t)len && memcmp(c->keys[j], c->keys[i], (size_t)len) == 0)
                return RLT_EINVAL; /* the same limit twice */
        arg(c, c->keys[i], (size_t)len);
    }
    if (c->boxed) return block_names(c, l, n);
    return RLT_OK;
}

/* The script's arguments after the keys. */
static void build_script(call *c)
{
    const rlt_redis *r = c->r;
    const limit *l = c->l;
    size_t n = c->n;
    int64_t now_us = c->now_us;
    bool multi = c->multi;
    int64_t floor_ms = rlt_retry_after_ms(r->opt.ttl_floor);
    if (c->script == RLT_FIXED_WINDOW || c->script == RLT_SLIDING_WINDOW) {
        /* fixed_window.lua, sliding_window.lua: now N W cost [floor [calendar]] */
        arg_num(c, now_us);
        arg_num(c, l[0].rp.N);
        arg_num(c, l[0].rp.W);
        arg_num(c, l[0].cost);
        if (floor_ms > 0 || l[0].rp.cal[0]) arg_num(c, floor_ms);
        if (l[0].rp.cal[0]) arg(c, l[0].rp.cal, strlen(l[0].rp.cal));
        return;
    }
    if (c->script == RLT_GCRA || c->script == RLT_TOKEN_BUCKET) {
        arg_num(c, now_us);
        gcra_args(c, &l[0]);
        if (floor_ms > 0) arg_num(c, floor_ms);
        return;
    }
    if (c->script == RLT_LEAKY_BUCKET) { /* gcra.lua */
        arg_num(c, now_us);
        leaky_args(c, &l[0]);
        if (floor_ms > 0) arg_num(c, floor_ms);
        return;
    }
    multi = multi || c->boxed;
    if (multi) arg(c, c->boxed ? "b" : "d", 1);
    arg_num(c, now_us);
    arg_num(c, floor_ms);
    if (multi) arg_num(c, (int64_t)n);
    for (size_t i = 0; i < n; i++) {
        const rpol *p = &l[i].rp;
        int64_t v[FIELDS - 1] = {p->algo, l[i].cost, p->N,     p->W,   p->B,
                                 p->Q,    p->D,      p->scale, p->unit};
        for (int f = multi ? 0 : 1; f < FIELDS - 1; f++) /* a one-algorithm script knows its algo */
            arg_num(c, v[f]);
        if (multi) arg(c, p->cal, strlen(p->cal)); /* "" but for calendar windows */
        if (c->boxed) {
            arg_num(c, p->blk);
            arg_num(c, p->bfac);
            arg_num(c, p->bmax);
        }
    }
}

static void marg(call *c, const char *s, size_t len)
{
    c->margv[c->margc] = s;
    c->mlens[c->margc++] = len;
}

static void marg_num(call *c, int64_t v)
{
    char *b = c->nums[c->nnums++];
    int n = snprintf(b, 24, "%lld", (long long)v);
    marg(c, b, (size_t)n);
}

/* The module's RL.DECIDE now_us floor_ms (name policy cost)... on the names of build_names. */
static void build_module(call *c)
{
    const rlt_redis *r = c->r;
    int64_t floor_ms = rlt_retry_after_ms(r->opt.ttl_floor);
    c->margc = 0;
    marg(c, "RL.DECIDE", 9);
    marg_num(c, c->now_us);
    marg_num(c, floor_ms);
    for (size_t i = 0; i < c->n; i++) {
        const struct rlt__ptext *t = policy_texts(r, c->l[i].p);
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

/* Prepares a decision of limits l[0..n) (which must outlive the call): the key names now; the
 * EVALSHA's arguments or the module's RL.DECIDE when a node first needs one (form()). */
static int build_decide(const rlt_redis *r, call *c, const limit *l, const rlt_redis_check *ck,
                        size_t n, int64_t now_us, bool multi)
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

/* Whether node n runs call c on the module. */
static bool use_module(const rlt_redis *r, const rlt__node *n, const call *c)
{
    return c->module_ok && n->engine == RLT_REDIS_ENGINE_MODULE &&
           (!c->caller_time || n->module_time || r->opt.engine == RLT_REDIS_ENGINE_MODULE);
}

/* The command of call c on the module (`mod`) or as a script, built on first use. */
static rlt__cmd form(call *c, bool mod)
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

static bool is_error(const redisReply *rep, const char *prefix)
{
    size_t n = strlen(prefix);
    return rep->type == REDIS_REPLY_ERROR && rep->len >= n && memcmp(rep->str, prefix, n) == 0;
}

/* Runs command `c` (an EVALSHA) on the node serving c->slot: loads the script after a NOSCRIPT
 * (the only retry: the script certainly did not run), follows MOVED and ASK (the command did
 * not run there either), and feeds the breaker.  On RLT_OK *out is the script's reply (caller
 * frees).  On failure *retry_at is when the failing node's breaker next lets a call through. */
static int run(rlt_redis *r, call *c, int64_t deadline, redisReply **out, int64_t *retry_at,
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
        bool mod = use_module(r, n, c);
        rlt__cmd mine = form(c, mod);
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
        if (!mod && is_error(rep, "NOSCRIPT") && !loaded && !load_failed) {
            freeReplyObject(rep);
            r->st.script_loads++;
            rlt__node_success(r, n); /* it answered: the breaker closes before the retry */
            loaded = true;
            hop--; /* the same node again, with the script */
            continue;
        }
        loaded = false;
        if (r->opt.cluster && is_error(rep, "TRYAGAIN")) {
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
        if (r->opt.cluster && is_error(rep, "CLUSTERDOWN")) {
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

static rlt_ns us_ns(long long us, long long ns)
{
    int64_t v;
    if (__builtin_mul_overflow((int64_t)us, RLT_NS_PER_US, &v)) return INT64_MAX;
    return v > INT64_MAX - ns ? INT64_MAX : v + ns;
}

/* One limit's reply {allowed, limit, remaining, ru, rn, su, sn, du, dn, lease}. */
static int parse_decision(const redisReply *e, rlt_decision *d)
{
    if (e->type != REDIS_REPLY_ARRAY || e->elements != 10) return RLT_EBACKEND;
    long long v[10];
    for (int i = 0; i < 10; i++) {
        if (e->element[i]->type != REDIS_REPLY_INTEGER) return RLT_EBACKEND;
        v[i] = e->element[i]->integer;
    }
    memset(d, 0, sizeof *d);
    d->allowed = v[0] != 0;
    d->limit = v[1];
    d->remaining = v[2];
    d->retry_after = v[3] < 0 ? -1 : us_ns(v[3], v[4]);
    d->reset_after = us_ns(v[5], v[6]);
    d->delay = us_ns(v[7], v[8]);
    d->lease = v[9];
    return RLT_OK;
}

static rlt_ns sat_add(rlt_ns a, rlt_ns b)
{
    return a > INT64_MAX - b ? INT64_MAX : a + b;
}

/* ceil(a x 1000 / scale) ns, the duration of the amount a (scaled microseconds), saturated. */
static rlt_ns amount_ns(unsigned __int128 a, int64_t scale)
{
    unsigned __int128 ns = (a * 1000 + (unsigned __int128)scale - 1) / (unsigned __int128)scale;
    return ns > (unsigned __int128)INT64_MAX ? INT64_MAX : (rlt_ns)ns;
}

/* The amount of a GCRA, leaky bucket or token bucket script's reply (gcra.lua,
 * token_bucket.lua): the amount used after the charge when allowed, or the amount used when
 * denied, as an integer n (>= 0 allowed, -(n + 1) denied), or {q, f} = q x scale + f (GCRA and
 * leaky bucket, denied, too big for one number), or {allowed, amount, wait} (token bucket
 * whose clock stepped back: refill waits `wait` us). */
static int bucket_amount(const limit *l, const redisReply *e, unsigned __int128 *a, bool *allowed,
                         rlt_ns *wait)
{
    const rpol *p = &l->rp;
    long long v[3] = {0};
    size_t nv = e->type == REDIS_REPLY_ARRAY ? e->elements : 0;
    *wait = 0;
    if (nv == 2 || nv == 3)
        for (size_t i = 0; i < nv; i++) {
            if (e->element[i]->type != REDIS_REPLY_INTEGER || e->element[i]->integer < 0)
                return RLT_EBACKEND;
            v[i] = e->element[i]->integer;
        }
    if (e->type == REDIS_REPLY_INTEGER) {
        *allowed = e->integer >= 0;
        *a = (unsigned __int128)(*allowed ? e->integer : -(e->integer + 1));
    } else if (nv == 2 && p->algo != RLT_TOKEN_BUCKET && v[1] < p->scale) {
        *allowed = false;
        *a = (unsigned __int128)v[0] * (unsigned __int128)p->scale + (unsigned __int128)v[1];
    } else if (nv == 3 && p->algo == RLT_TOKEN_BUCKET && v[0] <= 1 && v[2] <= NOW_MAX) {
        *allowed = v[0] == 1;
        *a = (unsigned __int128)v[1];
        *wait = v[2] * RLT_NS_PER_US;
    } else {
        return RLT_EBACKEND;
    }
    return RLT_OK;
}

/* The GCRA and token bucket scripts' reply (bucket_amount); the rest of the decision is
 * derived here exactly as src/core/bucket.c derives it. */
static int parse_bucket(const limit *l, const redisReply *e, rlt_decision *d)
{
    const rpol *p = &l->rp;
    unsigned __int128 a;
    bool allowed;
    rlt_ns wait;
    if (bucket_amount(l, e, &a, &allowed, &wait)) return RLT_EBACKEND;
    int64_t cap = p->B * p->unit, need = l->cost > 0 ? l->cost : 1;
    memset(d, 0, sizeof *d);
    d->limit = p->B;
    d->allowed = allowed && need <= p->B;
    if (allowed != d->allowed) return RLT_EBACKEND; /* the script allowed what never fits */
    d->remaining = a >= (unsigned __int128)cap ? 0 : (cap - (int64_t)a) / p->unit;
    d->reset_after = amount_ns(a, p->scale);
    if (need > p->B) {
        d->retry_after = -1;
    } else if (!allowed) {
        int64_t room = cap - need * p->unit;
        if (a <= (unsigned __int128)room) return RLT_EBACKEND; /* a denial that fits */
        d->retry_after = sat_add(amount_ns(a - (unsigned __int128)room, p->scale), wait);
    }
    d->reset_after = sat_add(d->reset_after, wait);
    return RLT_OK;
}

/* The leaky bucket's reply from gcra.lua (bucket_amount: the backlog after the charge, or the
 * backlog when denied); the rest is derived exactly as src/core/leaky.c derives it. */
static int parse_leaky(const limit *l, const redisReply *e, rlt_decision *d)
{
    const rpol *p = &l->rp;
    unsigned __int128 a;
    bool allowed;
    rlt_ns wait;
    if (bucket_amount(l, e, &a, &allowed, &wait)) return RLT_EBACKEND;
    int64_t cap = p->Q * p->unit, need = l->cost > 0 ? l->cost : 1;
    memset(d, 0, sizeof *d);
    d->limit = p->Q + 1;
    d->allowed = allowed && need <= p->Q + 1;
    if (allowed != d->allowed) return RLT_EBACKEND; /* the script allowed what never fits */
    d->remaining = a > (unsigned __int128)cap ? 0 : (cap - (int64_t)a) / p->unit + 1;
    d->reset_after = amount_ns(a, p->scale);
    if (need > p->Q + 1) {
        d->retry_after = -1;
    } else if (allowed) {
        unsigned __int128 backlog = a, charge = (unsigned __int128)(need * p->unit);
        if (l->cost > 0) {
            if (a < charge) return RLT_EBACKEND;
            backlog = a - charge;
        }
        unsigned __int128 free_ = (unsigned __int128)p->D * (unsigned __int128)p->unit;
        if (backlog > free_) d->delay = amount_ns(backlog - free_, p->scale);
    } else {
        int64_t room = cap - (need - 1) * p->unit;
        if (a <= (unsigned __int128)room) return RLT_EBACKEND; /* a denial that fits */
        d->retry_after = amount_ns(a - (unsigned __int128)room, p->scale);
    }
    return RLT_OK;
}

/* The fixed window script's reply {a, e} (fixed_window.lua): a = the count after the charge
 * when allowed, -(count + 1) when denied; e = us until the counting window ends.  The rest is
 * derived as src/core/fixed_window.c derives it. */
static int parse_fixed(const limit *l, const redisReply *e, rlt_decision *d)
{
    const rpol *p = &l->rp;
    if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
        e->element[0]->type != REDIS_REPLY_INTEGER || e->element[1]->type != REDIS_REPLY_INTEGER)
        return RLT_EBACKEND;
    long long a = e->element[0]->integer, end_us = e->element[1]->integer;
    if (end_us <= 0 || end_us > NOW_MAX) return RLT_EBACKEND;
    bool allowed = a >= 0;
    int64_t count = allowed ? a : -(a + 1), need = l->cost > 0 ? l->cost : 1;
    memset(d, 0, sizeof *d);
    d->limit = p->N;
    d->allowed = allowed && need <= p->N;
    if (allowed != d->allowed) return RLT_EBACKEND; /* the script allowed what never fits */
    if (need > p->N)
        d->retry_after = -1;
    else if (!allowed)
        d->retry_after = end_us * RLT_NS_PER_US;
    d->remaining = p->N - count > 0 ? p->N - count : 0;
    d->reset_after = count > 0 ? end_us * RLT_NS_PER_US : 0;
    return RLT_OK;
}

typedef __int128 i128;

/* The sliding window script's reply {c, p, x} (sliding_window.lua): c = the current window's
 * count after the charge when allowed, -(count + 1) when denied; p = the previous window's
 * count; x = us until the current window ends (> W when the clock stepped back behind it).
 * The rest is derived as src/core/sliding_window.c derives it, in ns: the window starts are
 * now + x + (step - 1) x W, which keeps the core's arithmetic (its emin is in ns). */
static int parse_sliding(const limit *l, const redisReply *e, rlt_decision *d)
{
    const rpol *p = &l->rp;
    if (e->type != REDIS_REPLY_ARRAY || e->elements != 3) return RLT_EBACKEND;
    long long v[3];
    for (int i = 0; i < 3; i++) {
        if (e->element[i]->type != REDIS_REPLY_INTEGER) return RLT_EBACKEND;
        v[i] = e->element[i]->integer;
    }
    bool allowed = v[0] >= 0;
    int64_t c = allowed ? v[0] : -(v[0] + 1), prev = v[1], x = v[2];
    /* prev > N: a debt a settle charged (rlt_redis_settle), still below the scripts' 2^52 */
    if (c < 0 || prev < 0 || (i128)prev * p->W > (i128)NOW_MAX || x <= 0 || x > 2 * NOW_MAX)
        return RLT_EBACKEND;
    int64_t need = l->cost > 0 ? l->cost : 1;
    memset(d, 0, sizeof *d);
    d->limit = p->N;
    d->allowed = allowed && need <= p->N;
    if (allowed != d->allowed) return RLT_EBACKEND; /* the script allowed what never fits */
    const i128 W = (i128)p->W * RLT_NS_PER_US, NW = (i128)p->N * W, X = (i128)x * RLT_NS_PER_US;
    i128 e0 = X <= W ? W - X : 0; /* elapsed part of the window, 0 behind it (as the core) */
    i128 weighted = (i128)prev * (W - e0);
    int64_t curr = allowed && l->cost > 0 ? c - l->cost : c, curr_after = c;
    if (curr < 0) return RLT_EBACKEND;
    if (need > p->N) {
        d->retry_after = -1;
    } else if (!allowed) {
        if (weighted + ((i128)curr + need) * W <= NW) return RLT_EBACKEND; /* a denial that fits */
        i128 at = -1; /* the core's earliest(), relative to now */
        for (int step = 0; step < 3 && at < 0; step++) {
            int64_t P = step == 0 ? prev : step == 1 ? curr : 0;
            int64_t C = step == 0 ? curr : 0;
            i128 slack = ((i128)p->N - C - need) * W;
            if (slack < 0) continue;
            i128 emin = P == 0 ? 0 : W - slack / P;
            if (emin < (step == 0 ? e0 : 0)) emin = step == 0 ? e0 : 0;
            if (emin < W) at = X + (step - 1) * W + emin;
        }
        if (at < 0) return RLT_EBACKEND; /* unreachable for need <= N */
        d->retry_after = at > INT64_MAX ? INT64_MAX : (rlt_ns)at;
    }
    i128 left = NW - weighted - (i128)curr_after * W;
    d->remaining = left <= 0 ? 0 : (int64_t)(left / W);
    if (curr_after > 0)
        d->reset_after = (rlt_ns)(X + W);
    else if (prev > 0)
        d->reset_after = (rlt_ns)X;
    return RLT_OK;
}

/* A one-limit script's reply. */
static int parse_single(const limit *l, const redisReply *e, rlt_decision *d)
{
    if (l->p->block > 0) { /* multi.lua's reply of one limit (build_names) */
        if (e->type != REDIS_REPLY_ARRAY || e->elements != 1) return RLT_EBACKEND;
        return parse_decision(e->element[0], d);
    }
    if (l->rp.algo == RLT_GCRA || l->rp.algo == RLT_TOKEN_BUCKET) return parse_bucket(l, e, d);
    if (l->rp.algo == RLT_FIXED_WINDOW) return parse_fixed(l, e, d);
    if (l->rp.algo == RLT_SLIDING_WINDOW) return parse_sliding(l, e, d);
    if (l->rp.algo == RLT_LEAKY_BUCKET) return parse_leaky(l, e, d);
    return parse_decision(e, d);
}

/* The module's RL.DECIDE reply: an array of one string per limit, "allowed limit remaining
 * retry_after reset_after delay lease" (ns). */
static int parse_module(const redisReply *e, size_t n, rlt_decision *dec)
{
    if (e->type != REDIS_REPLY_ARRAY || e->elements != n) return RLT_EBACKEND;
    for (size_t i = 0; i < n; i++) {
        const redisReply *x = e->element[i];
        if (x->type != REDIS_REPLY_STRING) return RLT_EBACKEND;
        long long v[7];
        const char *p = x->str, *end = x->str + x->len;
        for (int k = 0; k < 7; k++) {
            char *q;
            if (p >= end) return RLT_EBACKEND;
            v[k] = strtoll(p, &q, 10);
            if (q == p || (q < end && *q != ' ') || (k == 6) != (q == end)) return RLT_EBACKEND;
            p = q + 1;
        }
        if (v[3] < -1 || v[4] < 0 || v[5] < 0 || v[6] < 0) return RLT_EBACKEND;
        rlt_decision *d = &dec[i];
        memset(d, 0, sizeof *d);
        d->allowed = v[0] != 0;
        d->limit = v[1];
        d->remaining = v[2];
        d->retry_after = v[3];
        d->reset_after = v[4];
        d->delay = v[5];
        d->lease = v[6];
    }
    return RLT_OK;
}

/* The decision made without Redis. */
static void fail_decision(rlt_redis *r, const rlt_policy *p, unsigned flags, int64_t retry_at,
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

/* Decides limits l[0..n) in one script (the multi-limit one with `multi`, else n = 1 and the
 * algorithm's own).  dec[i] per limit. */
static int decide_call(rlt_redis *r, const limit *l, const rlt_redis_check *ck, size_t n,
                       bool multi, int64_t now_us, rlt_decision *dec, int64_t *retry_at)
{
    call *c = call_new(n);
    if (!c) return RLT_ENOMEM;
    int rc = build_decide(r, c, l, ck, n, now_us, multi);
    if (rc) {
        free(c);
        return rc;
    }
    redisReply *rep = NULL;
    bool mod;
    rc = run(r, c, rlt__mono_ns() + r->opt.timeout, &rep, retry_at, &mod);
    free(c);
    if (rc) return rc;
    if (mod) {
        rc = parse_module(rep, n, dec);
    } else if (!multi) {
        rc = parse_single(&l[0], rep, &dec[0]);
    } else {
        if (rep->type != REDIS_REPLY_ARRAY || rep->elements != n) rc = RLT_EBACKEND;
        for (size_t i = 0; i < n && !rc; i++)
            rc = parse_decision(rep->element[i], &dec[i]);
    }
    freeReplyObject(rep);
    if (rc) {
        r->st.errors++;
        *retry_at = rlt__mono_ns();
    }
    return rc;
}

/* ---- local leases ------------------------------------------------------------------------ */

static bool leasable(const rlt_policy *p)
{
    /* Not with block=: a denied big lease would start a block that the cost alone escapes. */
    return p->block == 0 &&
           (p->algo == RLT_FIXED_WINDOW || p->algo == RLT_SLIDING_LOG ||
            p->algo == RLT_SLIDING_WINDOW || p->algo == RLT_TOKEN_BUCKET || p->algo == RLT_GCRA);
}

/* Decides from (or refills) the local lease of one key.  Returns RLT_OK with *d, or the
 * status of the Redis call. */
static int lease_decide(rlt_redis *r, const limit *l, const rlt_redis_check *ck, unsigned flags,
                        rlt_ns now_ns, int64_t now_us, rlt_decision *d)
{
    char name[KEYNAME_MAX];
    int len = key_name(r, l->p, ck->key, ck->klen, name, sizeof name);
    if (len < 0) return len == RLT_ENOSPC ? RLT_EKEYLEN : len;
    rlt__lease *e = &r->leases[rlt_hash_fnv1a(name, (size_t)len) % r->nleases];
    int64_t t = (flags & RLT_REDIS_CALLER_TIME) ? now_ns : rlt__mono_ns();
    bool mine = e->name && e->len == (size_t)len && memcmp(e->name, name, e->len) == 0;
    if (mine && t < e->denied_until && e->units < l->cost) {
        /* Redis said no request fits before denied_until if nothing else happens; other
         * servers can only use more, so the answer stands (it can only under-admit). */
        *d = e->denied;
        d->retry_after = e->denied_until - t;
        r->st.lease_local++;
        r->st.decisions++;
        return RLT_OK;
    }
    if (mine && t < e->expires && e->units >= l->cost) {
        e->units -= l->cost;
        *d = e->d;
        d->allowed = true;
        d->retry_after = 0;
        d->remaining += e->units;
        r->st.lease_local++;
        r->st.decisions++;
        return RLT_OK;
    }
    /* Take a new lease: max(lease_units, cost) in one script call.  What is left of an old
     * lease is dropped (never returned: a refund could mint when it comes late). */
    limit big = *l;
    big.cost = l->cost > r->opt.lease_units ? l->cost : r->opt.lease_units;
    int64_t retry_at = 0;
    int rc = decide_call(r, &big, ck, 1, false, now_us, d, &retry_at);
    if (rc) {
        fail_decision(r, l->p, flags, retry_at, d);
        return rc;
    }
    if (!d->allowed && big.cost > l->cost) {
        /* The lease did not fit (nothing was consumed): ask for the cost alone. */
        rc = decide_call(r, l, ck, 1, false, now_us, d, &retry_at);
        if (rc) {
            fail_decision(r, l->p, flags, retry_at, d);
            return rc;
        }
        if (d->allowed) {
            r->st.decisions++;
            return RLT_OK;
        }
    }
    if (!mine) { /* take over the cache entry (another key's lease is dropped) */
        char *copy = malloc((size_t)len);
        if (copy) {
            free(e->name);
            memcpy(copy, name, (size_t)len);
            e->name = copy;
            e->len = (size_t)len;
            mine = true;
        }
    }
    if (mine) {
        e->units = 0;
        e->denied_until = INT64_MIN;
        if (d->allowed) {
            e->units = big.cost - l->cost;
            e->expires = t + r->opt.lease_ttl;
            e->d = *d;
            d->remaining += e->units;
        } else if (d->retry_after > 0 && l->cost == 1) {
            e->denied_until = t + d->retry_after;
            e->denied = *d;
        }
    }
    if (d->allowed) r->st.lease_grants++;
    r->st.decisions++;
    return RLT_OK;
}

static void lease_forget(rlt_redis *r, const char *name, size_t len)
{
    if (!r->leases) return;
    rlt__lease *e = &r->leases[rlt_hash_fnv1a(name, len) % r->nleases];
    if (e->name && e->len == len && memcmp(e->name, name, len) == 0) {
        e->units = 0;
        e->denied_until = INT64_MIN;
    }
}

/* ---- public decisions -------------------------------------------------------------------- */

/* The policy's jitter on a decision's wait: rlt_jitter of the key's FNV-1a at the caller's
 * `now`, as the keyed store does, so both backends spread the same key alike.  Applied to
 * every decision returned (Redis's, a lease's, a fail mode's). */
static void jitter_out(const rlt_policy *p, const void *key, size_t klen, rlt_ns now,
                       rlt_decision *d)
{
    if (p && p->jitter > 0 && d->retry_after > 0 && key)
        d->retry_after = rlt_jitter(p, rlt_hash_fnv1a(key, klen), now, d->retry_after);
}

static int decide_one(rlt_redis *r, const rlt_policy *p, unsigned flags, const void *key,
                      size_t klen, rlt_ns now, int64_t cost, rlt_decision *d);

int rlt_redis_decide(rlt_redis *r, const rlt_policy *p, unsigned flags, const void *key,
                     size_t klen, rlt_ns now, int64_t cost, rlt_decision *d)
{
    int rc = decide_one(r, p, flags, key, klen, now, cost, d);
    if (rc == RLT_OK || rc == RLT_EBACKEND || rc == RLT_ETIMEDOUT) jitter_out(p, key, klen, now, d);
    return rc;
}

static int decide_one(rlt_redis *r, const rlt_policy *p, unsigned flags, const void *key,
                      size_t klen, rlt_ns now, int64_t cost, rlt_decision *d)
{
    if (!d) return RLT_EINVAL;
    memset(d, 0, sizeof *d);
    if (!r) return RLT_EINVAL;
    rlt_redis_check ck = {p, key, klen, cost};
    limit l;
    int64_t now_us;
    int rc = check_limit(&ck, &l);
    if (!rc) rc = now_arg(flags, now, &now_us);
    if (rc) return rc;
    if ((flags & RLT_REDIS_LEASE) && r->leases && leasable(p) && cost > 0)
        return lease_decide(r, &l, &ck, flags, now, now_us, d);
    int64_t retry_at = 0;
    rc = decide_call(r, &l, &ck, 1, false, now_us, d, &retry_at);
    if (rc == RLT_EINVAL || rc == RLT_EKEYLEN || rc == RLT_ENOMEM) return rc;
    if (rc) {
        fail_decision(r, p, flags, retry_at, d);
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
    limit l[MULTI_MAX];
    rlt_decision dec[MULTI_MAX];
    int64_t now_us;
    int rc = now_arg(flags, now, &now_us);
    for (size_t i = 0; i < n && !rc; i++) {
        rc = check_limit(&checks[i], &l[i]);
        if (!rc && checks[i].policy->algo == RLT_CONCURRENCY) rc = RLT_EINVAL;
    }
    if (rc) return rc;
    int64_t retry_at = 0;
    rc = decide_call(r, l, checks, n, true, now_us, dec, &retry_at);
    if (rc == RLT_EINVAL || rc == RLT_EKEYLEN || rc == RLT_ENOMEM) return rc;
    if (rc) {
        /* The most restrictive policy's limit is unknown without Redis: report the first. */
        fail_decision(r, checks[0].policy, flags, retry_at, combined);
        jitter_out(checks[0].policy, checks[0].key, checks[0].klen, now, combined);
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        if (!dec[i].allowed && refused && *refused < 0) *refused = (int)i;
        jitter_out(checks[i].policy, checks[i].key, checks[i].klen, now, &dec[i]);
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
    int first = now_arg(flags, now, &now_us);
    if (first) {
        for (size_t i = 0; i < n; i++) {
            memset(&out[i], 0, sizeof out[i]);
            status[i] = first;
        }
        return first;
    }
    /* Validate and build every call; group them by node. */
    size_t csz = (call_size(1) + 15) & ~(size_t)15;
    char *calls_mem = malloc(n * csz);
    unsigned *node = malloc(n * sizeof *node);
    bool *sent = calloc(n, sizeof *sent);
    bool *mods = calloc(n, sizeof *mods); /* per command of a node's pipeline: on the module */
    rlt__cmd *cmds = malloc(n * sizeof *cmds);
    redisReply **reps = calloc(n, sizeof *reps);
    size_t *which = malloc(n * sizeof *which);
    limit *lim = malloc(n * sizeof *lim);
    if (!calls_mem || !node || !sent || !mods || !cmds || !reps || !which || !lim) {
        free(mods);
        free(calls_mem), free(node), free(sent), free(cmds), free(reps), free(which), free(lim);
        return RLT_ENOMEM;
    }
    int64_t deadline = rlt__mono_ns() + r->opt.timeout;
    for (size_t i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        status[i] = check_limit(&checks[i], &lim[i]);
        call *ci = call_init(calls_mem + i * csz, 1);
        if (!status[i]) status[i] = build_decide(r, ci, &lim[i], &checks[i], 1, now_us, false);
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
                call *cj = (call *)(void *)(calls_mem + j * csz);
                which[m] = j;
                mods[m] = use_module(r, nd, cj);
                cmds[m] = form(cj, mods[m]);
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
                fail_decision(r, checks[j].policy, flags, nd->open ? nd->retry_at : t, &out[j]);
            }
            continue;
        }
        bool ok = true;
        for (size_t k = 0; k < m; k++) {
            size_t j = which[k];
            redisReply *rep = reps[k];
            if (rep->type != REDIS_REPLY_ERROR &&
                (mods[k] ? parse_module(rep, 1, &out[j]) : parse_single(&lim[j], rep, &out[j])) ==
                    RLT_OK) {
                r->st.decisions++;
                if (mods[k]) r->st.module_calls++;
            } else if (is_error(rep, "NOSCRIPT") || is_error(rep, "MOVED") ||
                       is_error(rep, "ASK") || is_error(rep, "TRYAGAIN")) {
                /* Did not run: send it alone, which loads the script or follows the
                 * redirect. */
                int64_t retry_at = 0;
                redisReply *single = NULL;
                bool mod;
                status[j] = run(r, (call *)(void *)(calls_mem + j * csz), deadline, &single,
                                &retry_at, &mod);
                if (!status[j]) {
                    status[j] = mod ? parse_module(single, 1, &out[j])
                                    : parse_single(&lim[j], single, &out[j]);
                    freeReplyObject(single);
                }
                if (status[j])
                    fail_decision(r, checks[j].policy, flags, retry_at, &out[j]);
                else
                    r->st.decisions++;
            } else if (r->opt.cluster && is_error(rep, "CLUSTERDOWN")) {
                /* As in run(): the fail mode, the slot map read again, no breaker failure. */
                status[j] = RLT_EBACKEND;
                r->st.errors++;
                rlt__topology_stale(r, rlt__mono_ns());
                fail_decision(r, checks[j].policy, flags, rlt__mono_ns() + RLT__TOPO_GAP, &out[j]);
            } else {
                ok = false;
                status[j] = RLT_EBACKEND;
                fail_decision(r, checks[j].policy, flags, rlt__mono_ns(), &out[j]);
            }
            freeReplyObject(rep);
        }
        if (ok) {
            rlt__node_success(r, nd);
        } else {
            /* CLUSTERDOWN, READONLY (a demoted master), LOADING...: this node cannot serve
             * now.  Like run(): a failure for its breaker, and the topology is read again. */
            r->st.errors++;
            rlt__node_failure(r, nd, rlt__mono_ns());
        }
    }
    for (size_t i = 0; i < n; i++)
        if (status[i] == RLT_OK || status[i] == RLT_EBACKEND || status[i] == RLT_ETIMEDOUT)
            jitter_out(checks[i].policy, checks[i].key, checks[i].klen, now, &out[i]);
    for (size_t i = 0; i < n && !first; i++)
        first = status[i];
    free(mods);
    free(calls_mem), free(node), free(sent), free(cmds), free(reps), free(which), free(lim);
    return first;
}

int rlt_redis_release(rlt_redis *r, const rlt_policy *p, unsigned flags, const void *key,
                      size_t klen, rlt_ns now, int64_t lease)
{
    if (!r || !p) return RLT_EINVAL;
    rpol rp;
    int64_t now_us;
    int rc = convert(p, &rp);
    if (!rc && p->algo != RLT_CONCURRENCY) rc = RLT_EINVAL;
    if (!rc) rc = now_arg(flags, now, &now_us);
    if (rc) return rc;
    if (lease <= 0) return RLT_ENOENT;
    call *c = call_new(1);
    if (!c) return RLT_ENOMEM;
    c->argc = 0;
    c->nnums = 0;
    int len = key_name(r, p, key, klen, c->keys[0], KEYNAME_MAX);
    if (len < 0) {
        free(c);
        return len == RLT_ENOSPC ? RLT_EKEYLEN : len;
    }
    c->slot = rlt__key_slot(c->keys[0], (size_t)len);
    c->script = RLT__S_MULTI; /* it holds the release */
    arg(c, "EVALSHA", 7);
    arg(c, rlt__redis_scripts[RLT__S_MULTI].sha, 40);
    arg(c, "1", 1);
    arg(c, c->keys[0], (size_t)len);
    arg(c, "r", 1);
    arg_num(c, now_us);
    arg_num(c, lease);
    redisReply *rep = NULL;
    int64_t retry_at = 0;
    bool mod;
    rc = run(r, c, rlt__mono_ns() + r->opt.timeout, &rep, &retry_at, &mod);
    free(c);
    if (rc) return rc;
    rc = rep->type != REDIS_REPLY_INTEGER ? RLT_EBACKEND : rep->integer ? RLT_OK : RLT_ENOENT;
    freeReplyObject(rep);
    return rc;
}

int rlt_redis_reset(rlt_redis *r, const rlt_policy *p, const void *key, size_t klen)
{
    if (!r) return RLT_EINVAL;
    rpol rp;
    int rc = convert(p, &rp);
    if (rc) return rc;
    call *c = call_new(1);
    if (!c) return RLT_ENOMEM;
    int len = key_name(r, p, key, klen, c->keys[0], KEYNAME_MAX);
    if (len < 0) {
        free(c);
        return len == RLT_ENOSPC ? RLT_EKEYLEN : len;
    }
    lease_forget(r, c->keys[0], (size_t)len);
    c->slot = rlt__key_slot(c->keys[0], (size_t)len);
    arg(c, "DEL", 3);
    arg(c, c->keys[0], (size_t)len);
    if (p->block > 0) { /* and the penalty box's companion key (same slot) */
        char tail[RLT__BLKTAIL_MAX];
        int tl = rlt__block_tail(p, tail);
        if ((size_t)len + (size_t)tl > KEYNAME_MAX) {
            free(c);
            return RLT_EKEYLEN;
        }
        memcpy(c->keys[1], c->keys[0], (size_t)len);
        memcpy(c->keys[1] + len, tail, (size_t)tl);
        arg(c, c->keys[1], (size_t)len + (size_t)tl);
    }
    redisReply *rep = NULL;
    int64_t retry_at = 0;
    bool mod;
    rc = run(r, c, rlt__mono_ns() + r->opt.timeout, &rep, &retry_at, &mod);
    free(c);
    if (rc) return rc;
    freeReplyObject(rep);
    return RLT_OK;
}

/* ---- charge after the response: reserve and settle (lua/settle.lua) ----------------------- */

/* The longest reservation suffix, ":r:" + 16 hex digits. */
#define RES_SUFFIX 19

/* 64 random bits, never 0: getrandom(2), else /dev/urandom.  Returns false if neither answers
 * (then no reservation is made: a guessable id would let a client settle another's). */
static bool random_id(uint64_t *id)
{
    for (int tries = 0; tries < 4; tries++) {
        uint64_t v = 0;
        ssize_t n = getrandom(&v, sizeof v, 0);
        if (n != (ssize_t)sizeof v) {
            FILE *f = fopen("/dev/urandom", "rb");
            n = f && fread(&v, sizeof v, 1, f) == 1 ? (ssize_t)sizeof v : -1;
            if (f) fclose(f);
        }
        if (n != (ssize_t)sizeof v) return false;
        if (v != 0) {
            *id = v;
            return true;
        }
    }
    return false;
}

/* Builds "EVALSHA settle 2 limit-key reservation-key op now floor algo amount N W B Q D scale
 * unit cal" for (p, key, id); the caller appends reserve's timeout. */
static int build_settle(rlt_redis *r, call *c, const limit *l, const void *key, size_t klen,
                        uint64_t id, const char *op, int64_t now_us)
{
    c->argc = 0;
    c->nnums = 0;
    const struct rlt__ptext *t = policy_texts(r, l->p);
    int len = rlt__key_name_tail(r->prefix, r->prefix_len, t->tail, (size_t)t->tl, key, klen,
                                 c->keys[0], KEYNAME_MAX);
    if (len < 0) return len == RLT_ENOSPC ? RLT_EKEYLEN : len;
    if ((size_t)len + RES_SUFFIX > KEYNAME_MAX) return RLT_EKEYLEN;
    memcpy(c->keys[1], c->keys[0], (size_t)len);
    snprintf(c->keys[1] + len, RES_SUFFIX + 1, ":r:%016llx", (unsigned long long)id);
    c->slot = r->opt.cluster ? rlt__key_slot(c->keys[0], (size_t)len) : 0;
    c->script = RLT__S_SETTLE;
    arg(c, "EVALSHA", 7);
    arg(c, rlt__redis_scripts[RLT__S_SETTLE].sha, 40);
    arg(c, "2", 1);
    arg(c, c->keys[0], (size_t)len);
    arg(c, c->keys[1], (size_t)len + RES_SUFFIX);
    arg(c, op, 1);
    arg_num(c, now_us);
    arg_num(c, rlt_retry_after_ms(r->opt.ttl_floor));
    const rpol *p = &l->rp;
    int64_t v[9] = {p->algo, l->cost, p->N, p->W, p->B, p->Q, p->D, p->scale, p->unit};
    for (int f = 0; f < 9; f++)
        arg_num(c, v[f]);
    arg(c, p->cal, strlen(p->cal));
    return RLT_OK;
}

/* Validates (p, key, amount) for a reserve or a settle into *l and *now_us. */
static int settle_args(const rlt_policy *p, unsigned flags, const void *key, size_t klen,
                       rlt_ns now, int64_t amount, limit *l, int64_t *now_us)
{
    rlt_redis_check ck = {p, key, klen, amount};
    int rc = check_limit(&ck, l);
    if (rc) return rc;
    if (!rlt_settle_supported(p)) return RLT_EINVAL;
    if (amount > LIM) return RLT_ERANGE; /* the scripts' numbers stay exact */
    return now_arg(flags, now, now_us);
}

int rlt_redis_reserve(rlt_redis *r, const rlt_policy *p, unsigned flags, const void *key,
                      size_t klen, rlt_ns now, int64_t estimate, rlt_ns timeout, rlt_decision *d,
                      uint64_t *reservation)
{
    if (!d || !reservation) return RLT_EINVAL;
    memset(d, 0, sizeof *d);
    *reservation = 0;
    if (!r || timeout < 0) return RLT_EINVAL;
    limit l;
    int64_t now_us;
    /* An estimate above every limit is denied by the decision itself: clamp as decide does. */
    int rc = settle_args(p, flags, key, klen, now, estimate > LIM ? LIM : estimate, &l, &now_us);
    if (rc) return rc;
    uint64_t id;
    if (!random_id(&id)) return RLT_EBACKEND;
    call *c = call_new(2);
    if (!c) return RLT_ENOMEM;
    rc = build_settle(r, c, &l, key, klen, id, "v", now_us);
    if (rc) {
        free(c);
        return rc;
    }
    rlt_ns to = timeout ? timeout : RLT_REDIS_RESERVE_DEFAULT_TIMEOUT;
    int64_t ms = rlt_retry_after_ms(to);
    arg_num(c, ms < 1 ? 1 : ms);
    redisReply *rep = NULL;
    int64_t retry_at = 0;
    bool mod;
    rc = run(r, c, rlt__mono_ns() + r->opt.timeout, &rep, &retry_at, &mod);
    free(c);
    if (!rc) {
        rc = parse_decision(rep, d); /* -1 (the id exists: 2^-64) is no array: EBACKEND */
        freeReplyObject(rep);
        if (rc) {
            r->st.errors++;
            retry_at = rlt__mono_ns();
        }
    }
    if (rc) {
        fail_decision(r, p, flags, retry_at, d); /* no reservation: nothing to settle */
        jitter_out(p, key, klen, now, d);
        return rc;
    }
    r->st.decisions++;
    if (d->allowed || estimate == 0) *reservation = id; /* 0 charged: recorded (the script) */
    jitter_out(p, key, klen, now, d);
    return RLT_OK;
}

int rlt_redis_settle(rlt_redis *r, const rlt_policy *p, unsigned flags, const void *key,
                     size_t klen, rlt_ns now, uint64_t reservation, int64_t real_cost,
                     rlt_decision *d)
{
    if (!d) return RLT_EINVAL;
    memset(d, 0, sizeof *d);
    if (!r || real_cost < 0) return RLT_EINVAL;
    limit l;
    int64_t now_us;
    int rc = settle_args(p, flags, key, klen, now, real_cost, &l, &now_us);
    if (rc) return rc;
    if (reservation == 0) return RLT_ENOENT;
    call *c = call_new(2);
    if (!c) return RLT_ENOMEM;
    rc = build_settle(r, c, &l, key, klen, reservation, "s", now_us);
    if (rc) {
        free(c);
        return rc;
    }
    redisReply *rep = NULL;
    int64_t retry_at = 0;
    bool mod;
    rc = run(r, c, rlt__mono_ns() + r->opt.timeout, &rep, &retry_at, &mod);
    free(c);
    if (rc) {
        d->limit = rlt_policy_limit(p);
        return rc;
    }
    if (rep->type == REDIS_REPLY_INTEGER)
        rc = rep->integer == 0 ? RLT_ENOENT : rep->integer == -2 ? RLT_ERANGE : RLT_EBACKEND;
    else
        rc = parse_decision(rep, d);
    freeReplyObject(rep);
    if (rc == RLT_EBACKEND) {
        r->st.errors++;
        memset(d, 0, sizeof *d);
        d->limit = rlt_policy_limit(p);
    }
    return rc;
}
