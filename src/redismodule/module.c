/* ratelimit.so: every algorithm of libratelimit as native Redis commands, on the same keys and
 * values as the Lua scripts of src/redis/lua, so a key can be served by the module and by the
 * scripts alternately (a fleet rolls the module out node by node).
 *
 *   CL.THROTTLE key max_burst count period [quantity]   redis-cell's command and replies
 *   RL.CHECK key POLICY [cost] / RL.PEEK key POLICY     ratelimitd's replies (docs/server.md)
 *   RL.MULTI key POLICY cost [key POLICY cost ...]      all-or-nothing, one hash slot
 *   RL.RESET key POLICY, RL.ACQUIRE key POLICY, RL.RELEASE key POLICY lease
 *   RL.DECIDE now_us floor_ms name POLICY cost [...]    libratelimit_redis's call: full Redis
 *                                                       key names; per limit one string of
 *                                                       its decision in ns
 *   RL.TESTTIME us|-1                                   only with `testing yes`: a set clock
 *
 * Each command reads the clock once (Redis's wall clock in microseconds, as the scripts read it
 * with TIME), reads its keys, decides with the core (state.c), and writes the result.  What is
 * replicated is the effect, never the command: `SET name value PXAT ms` (lists and hashes: the
 * edits and a PEXPIREAT), so a replica and an AOF replay hold the master's state and expiry,
 * not a recomputation at another instant.  Every command is O(1), or O(N) in the policy's own N
 * for the sliding log and concurrency (N bounded by the core: 2^20 and 65536).
 *
 * Module arguments: `prefix P` (the library's key prefix, default "rlt:"), `testing yes|no`
 * (RL.TESTTIME and RL.DECIDE's caller time: tests only; a caller-chosen clock could mint). */
#include "redis/layout.h"
#include "core/text.h"
#include "rmapi.h"
#include "state.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#define RM rlt__rm
#define MULTI_MAX 16  /* RL.MULTI, as ratelimitd */
#define DECIDE_MAX 64 /* RL.DECIDE, as rlt_redis_decide_multi */
#define TTL_FLOOR_MAX_MS (INT64_C(1) << 40) / RLT_NS_PER_MS

static struct {
    char prefix[65];
    size_t plen;
    bool testing;
    int64_t test_now_us;     /* RL.TESTTIME; -1: the real clock */
    bool cluster;            /* cluster mode (fixed for the server's life) */
    RedisModuleString *pxat; /* "PXAT", made once for every replicated SET */
} g = {"rlt:", 4, false, -1, false, NULL};

static int64_t now_us(void)
{
    if (g.testing && g.test_now_us >= 0) return g.test_now_us;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static bool arg_i64(RedisModuleString *s, int64_t *v)
{
    size_t n;
    const char *p = RM.StringPtrLen(s, &n);
    return rlt__parse_i64(p, n, v);
}

static int reply_errf(RedisModuleCtx *ctx, const char *fmt, const char *a)
{
    char msg[320];
    snprintf(msg, sizeof msg, fmt, a);
    return RM.ReplyWithError(ctx, msg);
}

static int64_t ceil_ms(rlt_ns ns)
{
    return rlt_retry_after_ms(ns);
}

static int64_t ceil_s(rlt_ns ns)
{
    if (ns < 0) return -1;
    return ns / RLT_NS_PER_S + (ns % RLT_NS_PER_S != 0);
}

/* ---- one limit: read, decide, write ---------------------------------------------------- */

typedef struct lim {
    RedisModuleString *name; /* the Redis key (owned when own_name) */
    bool own_name;
    RedisModuleKey *key; /* string states: open from decide to the end of the command */
    rlt__mpol m;
    int64_t cost;
    RedisModuleString *ukey; /* the user's key (RL.CHECK, RL.MULTI): jitter= spreads over it */
    rlt_decision d;
    bool write; /* the decision charged: the prepared edit below is applied on commit */
    char val[RLT__MVAL_MAX];
    size_t vlen;
    rlt__mlog_edit e;
    int64_t slot;
    char ccval[48];
    size_t cclen;
    /* block=: the penalty box's companion key (layout.h, rlt__block_tail) and its state */
    RedisModuleString *bname;
    rlt__mblk blk;
    bool bwrite; /* a breach started a block: written whatever the other limits say */
} lim;

static const char *const E_CORRUPT =
    "ERR ratelimit: the key holds no state of this policy (RL.RESET it)";

static const char *status_msg(int rc)
{
    switch (rc) {
    case RLT_ECORRUPT:
        return E_CORRUPT;
    case RLT_ERANGE:
        return "ERR ratelimit: the cost or the time is outside what the policy's integer "
               "arithmetic can represent";
    case RLT_EINVAL:
        return "ERR ratelimit: invalid argument (a concurrency cost is 0 or 1)";
    case RLT_ENOMEM:
        return "ERR ratelimit: out of memory";
    default:
        return "ERR ratelimit: internal error";
    }
}

/* The elements of an array reply as (pointer, length) pairs in scratch arrays. */
static const char *array_items(RedisModuleCallReply *rep, const char ***ptrs, size_t **lens,
                               size_t *n)
{
    *n = RM.CallReplyLength(rep);
    *ptrs = RM.Alloc((*n + 1) * sizeof **ptrs);
    *lens = RM.Alloc((*n + 1) * sizeof **lens);
    for (size_t i = 0; i < *n; i++) {
        RedisModuleCallReply *e = RM.CallReplyArrayElement(rep, i);
        (*ptrs)[i] = RM.CallReplyStringPtr(e, &(*lens)[i]);
        if (!(*ptrs)[i]) return E_CORRUPT;
    }
    return NULL;
}

/* Decides l->cost (or `cost` for a peek) at `now`; prepares the write.  NULL or an error. */
/* The penalty box's companion key of `name` under m (layout.h, rlt__block_tail): the name
 * followed by m's block tail.  RL.DECIDE's names come from the caller: any length. */
static RedisModuleString *block_name(RedisModuleCtx *ctx, RedisModuleString *name,
                                     const rlt__mpol *m)
{
    size_t nl;
    const char *n = RM.StringPtrLen(name, &nl);
    char *buf = RM.Alloc(nl + m->btl);
    memcpy(buf, n, nl);
    memcpy(buf + nl, m->btail, m->btl);
    RedisModuleString *b = RM.CreateString(ctx, buf, nl + m->btl);
    RM.Free(buf);
    return b;
}

/* Reads the penalty box's companion key into l->blk (block= only).  NULL or an error. */
static const char *read_block(RedisModuleCtx *ctx, lim *l)
{
    l->bwrite = false;
    if (l->m.btl == 0) return NULL;
    if (!l->bname) l->bname = block_name(ctx, l->name, &l->m);
    RedisModuleCallReply *rep = RM.Call(ctx, "GET", "s", l->bname);
    if (!rep) return RLT_RM_WRONGTYPE;
    int type = RM.CallReplyType(rep);
    size_t vl = 0;
    const char *v = type == RLT_RM_REPLY_STRING ? RM.CallReplyStringPtr(rep, &vl) : NULL;
    int rc = type == RLT_RM_REPLY_STRING || type == RLT_RM_REPLY_NULL
                 ? rlt__mblk_parse(v, vl, &l->blk)
                 : RLT_ECORRUPT;
    RM.FreeCallReply(rep);
    return rc ? E_CORRUPT : NULL;
}

static const char *decide(RedisModuleCtx *ctx, lim *l, int64_t now, int64_t cost)
{
    l->write = false;
    int rc;
    const char *berr = read_block(ctx, l);
    if (berr) return berr;
    if (rlt__mpol_is_string(&l->m)) {
        /* Read only: a key opened for writing counts as modified when closed (WATCH, client
         * tracking), and a denied request must change nothing.  commit() reopens it. */
        if (!l->key) l->key = RM.OpenKey(ctx, l->name, RLT_RM_READ);
        int type = l->key ? RM.KeyType(l->key) : RLT_RM_KEYTYPE_EMPTY;
        if (type != RLT_RM_KEYTYPE_EMPTY && type != RLT_RM_KEYTYPE_STRING) return RLT_RM_WRONGTYPE;
        const char *v = NULL;
        size_t vl = 0;
        if (type == RLT_RM_KEYTYPE_STRING) v = RM.StringDMA(l->key, &vl, RLT_RM_READ);
        rc = rlt__mstr_decide_blk(&l->m, v, vl, now, cost, &l->d, l->val, &l->vlen, &l->blk,
                                  &l->bwrite);
        if (rc) return status_msg(rc);
        l->write = l->vlen > 0;
        return NULL;
    }
    bool log = l->m.p.algo == RLT_SLIDING_LOG;
    RedisModuleCallReply *rep = log ? RM.Call(ctx, "LRANGE", "sll", l->name, 0LL, -1LL)
                                    : RM.Call(ctx, "HGETALL", "s", l->name);
    if (!rep) return RLT_RM_WRONGTYPE;
    if (RM.CallReplyType(rep) != RLT_RM_REPLY_ARRAY) {
        RM.FreeCallReply(rep);
        return RLT_RM_WRONGTYPE;
    }
    const char **items = NULL;
    size_t *lens = NULL, n = 0;
    const char *err = array_items(rep, &items, &lens, &n);
    void *scratch = err ? NULL : RM.Alloc(rlt__mpol_scratch(&l->m));
    if (!err) {
        rc = log ? rlt__mlog_decide_blk(&l->m, items, lens, n, now, cost, scratch, &l->d, &l->e,
                                        &l->write, &l->blk, &l->bwrite)
                 : rlt__mcc_decide_blk(&l->m, items, lens, n / 2, now, cost, scratch, &l->d,
                                       &l->slot, l->ccval, &l->cclen, &l->blk, &l->bwrite);
        if (rc) err = status_msg(rc);
        if (!log && !rc) l->write = l->slot >= 0;
    }
    if (n % 2 != 0 && !log) err = E_CORRUPT;
    if (scratch) RM.Free(scratch);
    RM.Free(items);
    RM.Free(lens);
    RM.FreeCallReply(rep);
    return err;
}

static void call_free(RedisModuleCallReply *rep)
{
    if (rep) RM.FreeCallReply(rep);
}

/* Expires `name` at `abs_ms` here and on replicas (PEXPIREAT: the same instant everywhere). */
static void expire_at(RedisModuleCtx *ctx, RedisModuleString *name, long long abs_ms)
{
    RedisModuleKey *k = RM.OpenKey(ctx, name, RLT_RM_READ | RLT_RM_WRITE);
    if (k) {
        RM.SetAbsExpire(k, abs_ms);
        RM.CloseKey(k);
    }
    RM.Replicate(ctx, "PEXPIREAT", "sl", name, abs_ms);
}

/* Applies the prepared write of l with its expiry (reset_after rounded up to the ms). */
static void commit(RedisModuleCtx *ctx, lim *l, int64_t floor_ms)
{
    if (!l->write) return;
    long long abs_ms = RM.Milliseconds() + rlt__mttl_ms(&l->d, floor_ms);
    if (rlt__mpol_is_string(&l->m)) {
        /* A new key stores the very string object the replication sends; an existing one is
         * overwritten in place (its expiry entry is updated, not deleted and added again). */
        bool fresh = l->key == NULL;
        if (l->key) RM.CloseKey(l->key);
        l->key = RM.OpenKey(ctx, l->name, RLT_RM_READ | RLT_RM_WRITE);
        size_t len = 0;
        char *dst = NULL;
        if (!fresh && RM.StringTruncate(l->key, l->vlen) == RLT_RM_OK)
            dst = RM.StringDMA(l->key, &len, RLT_RM_WRITE);
        if (dst && len == l->vlen) {
            memcpy(dst, l->val, l->vlen);
            RM.SetAbsExpire(l->key, abs_ms);
            RM.Replicate(ctx, "SET", "sbsl", l->name, l->val, l->vlen, g.pxat, abs_ms);
        } else {
            RedisModuleString *v = RM.CreateString(ctx, l->val, l->vlen);
            RM.StringSet(l->key, v);
            RM.SetAbsExpire(l->key, abs_ms);
            RM.Replicate(ctx, "SET", "sssl", l->name, v, g.pxat, abs_ms);
            RM.FreeString(ctx, v);
        }
        return;
    }
    if (l->m.p.algo == RLT_SLIDING_LOG) {
        const rlt__mlog_edit *e = &l->e;
        if (e->del) {
            call_free(RM.Call(ctx, "DEL", "!s", l->name));
        } else if (e->trim > 0) {
            call_free(RM.Call(ctx, "LTRIM", "!sll", l->name, (long long)e->trim, -1LL));
        }
        if (e->lset)
            call_free(RM.Call(ctx, "LSET", "!slb", l->name, -1LL, e->item, e->ilen));
        else
            call_free(RM.Call(ctx, "RPUSH", "!sb", l->name, e->item, e->ilen));
    } else {
        char field[24];
        int fl = snprintf(field, sizeof field, "s%lld", (long long)l->slot);
        call_free(RM.Call(ctx, "HSET", "!sclbb", l->name, "n", (long long)l->d.lease, field,
                          (size_t)fl, l->ccval, l->cclen));
    }
    expire_at(ctx, l->name, abs_ms);
}

/* Writes the block a breach of l started (SET with its expiry, replicated as such). */
static void commit_block(RedisModuleCtx *ctx, lim *l, int64_t now, int64_t floor_ms)
{
    if (!l->bwrite) return;
    char v[48];
    size_t vl = rlt__mblk_format(&l->blk, v);
    long long abs_ms = RM.Milliseconds() + rlt__mblk_ttl_ms(&l->m, &l->blk, now, floor_ms);
    call_free(RM.Call(ctx, "SET", "!sbcl", l->bname, v, vl, "PXAT", abs_ms));
    l->bwrite = false;
}

static void lims_close(RedisModuleCtx *ctx, lim *L, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (L[i].bname) RM.FreeString(ctx, L[i].bname);
        L[i].bname = NULL;
        if (L[i].key) RM.CloseKey(L[i].key);
        if (L[i].own_name && L[i].name) RM.FreeString(ctx, L[i].name);
        L[i].key = NULL;
        L[i].name = NULL;
    }
}

/* Decides L[0..n) all-or-nothing, as the multi-limit script: charges every limit only when
 * every one allows; otherwise the limits that allowed report as they stand (a peek).  NULL or an
 * error message. */
/* jitter= on the commands that take user keys, as libratelimit_redis and the keyed store do
 * it: rlt_jitter of the user key's FNV-1a at this command's instant (in ns).  RL.DECIDE, the
 * library's call, returns the exact wait: the library applies the jitter itself. */
static void jitter_lims(lim *L, size_t n, int64_t now_us)
{
    for (size_t i = 0; i < n; i++) {
        if (!L[i].ukey || L[i].m.p.jitter <= 0 || L[i].d.retry_after <= 0) continue;
        size_t kl;
        const char *k = RM.StringPtrLen(L[i].ukey, &kl);
        L[i].d.retry_after = rlt_jitter(&L[i].m.p, rlt_hash_fnv1a(k, kl), now_us * RLT_NS_PER_US,
                                        L[i].d.retry_after);
    }
}

static const char *run(RedisModuleCtx *ctx, lim *L, size_t n, int64_t now, int64_t floor_ms)
{
    bool all = true;
    for (size_t i = 0; i < n; i++) {
        const char *err = decide(ctx, &L[i], now, L[i].cost);
        if (err) return err;
        all = all && L[i].d.allowed;
    }
    /* block=: the limits that denied start their blocks; the others are charged nothing (the
     * keyed store's rule).  Only a denial breaches, so with `all` there is none. */
    for (size_t i = 0; i < n; i++)
        commit_block(ctx, &L[i], now, floor_ms);
    if (all) {
        for (size_t i = 0; i < n; i++)
            commit(ctx, &L[i], floor_ms);
        jitter_lims(L, n, now);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (!L[i].d.allowed) continue;
        rlt_decision keep = L[i].d;
        const char *err = decide(ctx, &L[i], now, 0);
        if (err) return err;
        keep.remaining = L[i].d.remaining;
        keep.reset_after = L[i].d.reset_after;
        keep.retry_after = 0;
        L[i].d = keep;
        L[i].write = false;
    }
    jitter_lims(L, n, now);
    return NULL;
}

/* ---- arguments -------------------------------------------------------------------------- */

/* Parsed policies by their text (commands run on Redis's main thread only): parsing and the
 * gcd work cost about a fifth of a decision, and a fleet uses few policies.  Direct-mapped;
 * a collision only costs a parse. */
#define PCACHE 256
#define PTEXT_MAX 160
static struct pentry {
    size_t len;
    char text[PTEXT_MAX];
    rlt__mpol m;
} pcache[PCACHE];

static struct pentry *pcache_slot(const char *t, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)t[i]) * 16777619u;
    return &pcache[h % PCACHE];
}

static const rlt__mpol *pcache_get(const char *t, size_t n)
{
    struct pentry *e = pcache_slot(t, n);
    return n > 0 && e->len == n && memcmp(e->text, t, n) == 0 ? &e->m : NULL;
}

static void pcache_put(const char *t, size_t n, const rlt__mpol *m)
{
    if (n == 0 || n > PTEXT_MAX) return;
    struct pentry *e = pcache_slot(t, n);
    memcpy(e->text, t, n);
    e->len = n;
    e->m = *m;
}

/* Fills l->m from a policy; false after replying an error. */
static bool mpol_arg(RedisModuleCtx *ctx, const rlt_policy *p, lim *l)
{
    int rc = rlt__mpol_init(&l->m, p);
    if (rc == RLT_EINVAL && p->months != 0)
        RM.ReplyWithError(ctx, "ERR calendar windows (mo, y) are not module commands: "
                               "libratelimit_redis runs them as its scripts");
    else if (rc == RLT_EINVAL)
        RM.ReplyWithError(ctx, "ERR policy cannot run inside Redis: its period and block= "
                               "durations must be whole numbers of microseconds");
    else if (rc)
        RM.ReplyWithError(ctx, "ERR policy cannot run inside Redis: a number passes 2^50 "
                               "(burst x period, limit x period or the rate)");
    return rc == RLT_OK;
}

static bool policy_arg(RedisModuleCtx *ctx, RedisModuleString *s, lim *l)
{
    size_t n;
    const char *t = RM.StringPtrLen(s, &n);
    const rlt__mpol *hit = pcache_get(t, n);
    if (hit) {
        l->m = *hit;
        return true;
    }
    rlt_policy p;
    char err[200];
    if (rlt_policy_parse(&p, t, n, err, sizeof err) != RLT_OK) {
        reply_errf(ctx, "ERR %s", err);
        return false;
    }
    if (!mpol_arg(ctx, &p, l)) return false;
    pcache_put(t, n, &l->m);
    return true;
}

/* l->name = the library's key name of user key `key` under l->m; false after an error. */
static bool name_arg(RedisModuleCtx *ctx, RedisModuleString *key, lim *l)
{
    size_t kl;
    const char *k = RM.StringPtrLen(key, &kl);
    l->ukey = key;
    char buf[RLT__KEYNAME_MAX];
    int len = rlt__key_name_tail(g.prefix, g.plen, l->m.tail, l->m.tl, k, kl, buf, sizeof buf);
    if (len < 0) {
        RM.ReplyWithError(ctx, "ERR key is empty or longer than 512 bytes");
        return false;
    }
    /* Cluster clients route by the key argument: the state must live in that key's slot. */
    if (g.cluster && rlt__key_slot(buf, (size_t)len) != rlt__key_slot(k, kl)) {
        RM.ReplyWithError(ctx, "ERR in a cluster a key must not hold an empty or unbalanced "
                               "'{' '}' hash tag (its state would live in another slot)");
        return false;
    }
    l->name = RM.CreateString(ctx, buf, (size_t)len);
    l->own_name = true;
    return true;
}

static bool cost_arg(RedisModuleCtx *ctx, RedisModuleString *s, int64_t *cost)
{
    if (arg_i64(s, cost) && *cost >= 0) return true;
    RM.ReplyWithError(ctx, "ERR cost must be an integer >= 0");
    return false;
}

static int reply_ints(RedisModuleCtx *ctx, const int64_t *v, int n)
{
    RM.ReplyWithArray(ctx, n);
    for (int i = 0; i < n; i++)
        RM.ReplyWithLongLong(ctx, v[i]);
    return RLT_RM_OK;
}

/* ---- commands --------------------------------------------------------------------------- */

/* One limit from (key, lim) already filled: decide, reply with `reply`, clean up. */
static int one(RedisModuleCtx *ctx, lim *l)
{
    const char *err = run(ctx, l, 1, now_us(), 0);
    if (err) {
        lims_close(ctx, l, 1);
        RM.ReplyWithError(ctx, err);
        return -1;
    }
    return 0;
}

static int cmd_throttle(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 5 && argc != 6) return RM.WrongArity(ctx);
    int64_t burst, count, period, qty = 1;
    if (!arg_i64(argv[2], &burst) || !arg_i64(argv[3], &count) || !arg_i64(argv[4], &period) ||
        (argc == 6 && !arg_i64(argv[5], &qty)))
        return RM.ReplyWithError(ctx, "ERR value is not an integer or out of range");
    if (burst < 0 || burst >= INT32_MAX)
        return RM.ReplyWithError(ctx, "ERR max_burst must be >= 0 and < 2147483647");
    if (count <= 0) return RM.ReplyWithError(ctx, "ERR count must be > 0");
    if (period <= 0 || period > INT64_MAX / RLT_NS_PER_S)
        return RM.ReplyWithError(ctx, "ERR period must be > 0 seconds and fit in int64 ns");
    if (qty < 0) return RM.ReplyWithError(ctx, "ERR quantity must be >= 0");
    lim l = {0};
    l.cost = qty;
    char ck[72]; /* the cache key: "\1burst count period" (no policy text starts with \1) */
    int cl = snprintf(ck, sizeof ck, "\1%lld %lld %lld", (long long)burst, (long long)count,
                      (long long)period);
    const rlt__mpol *hit = pcache_get(ck, (size_t)cl);
    if (hit) {
        l.m = *hit;
    } else {
        rlt_policy p;
        int st = rlt_policy_init(&p, RLT_GCRA, count, period * RLT_NS_PER_S, burst + 1, 0, 0);
        if (st) return reply_errf(ctx, "ERR invalid rate: %s", rlt_strerror(st));
        if (!mpol_arg(ctx, &p, &l)) return RLT_RM_OK;
        pcache_put(ck, (size_t)cl, &l.m);
    }
    if (!name_arg(ctx, argv[1], &l)) return RLT_RM_OK;
    if (one(ctx, &l)) return RLT_RM_OK;
    /* redis-cell: a quantity of 0 only peeks and is never limited. */
    bool limited = qty > 0 && !l.d.allowed;
    int64_t v[5] = {limited, burst + 1, l.d.remaining, limited ? ceil_s(l.d.retry_after) : -1,
                    ceil_s(l.d.reset_after)};
    lims_close(ctx, &l, 1);
    return reply_ints(ctx, v, 5);
}

static void reply_decision(RedisModuleCtx *ctx, const rlt_decision *d)
{
    int64_t v[6] = {d->allowed,
                    d->limit,
                    d->remaining,
                    d->allowed ? 0 : ceil_ms(d->retry_after),
                    ceil_ms(d->reset_after),
                    ceil_ms(d->delay)};
    reply_ints(ctx, v, 6);
}

static int check_or_peek(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, bool peek)
{
    if (argc < 3 || argc > (peek ? 3 : 4)) return RM.WrongArity(ctx);
    lim l = {0};
    l.cost = peek ? 0 : 1;
    if (argc == 4 && !cost_arg(ctx, argv[3], &l.cost)) return RLT_RM_OK;
    if (!policy_arg(ctx, argv[2], &l) || !name_arg(ctx, argv[1], &l)) return RLT_RM_OK;
    if (one(ctx, &l)) return RLT_RM_OK;
    reply_decision(ctx, &l.d);
    lims_close(ctx, &l, 1);
    return RLT_RM_OK;
}

static int cmd_check(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    return check_or_peek(ctx, argv, argc, false);
}

static int cmd_peek(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    return check_or_peek(ctx, argv, argc, true);
}

/* The combined decision of a multi-limit check, as rlt_redis_decide_multi combines. */
static void combine(const lim *L, size_t n, rlt_decision *c, int64_t *refused)
{
    memset(c, 0, sizeof *c);
    *refused = -1;
    for (size_t i = 0; i < n; i++) {
        if (!L[i].d.allowed && *refused < 0) *refused = (int64_t)i;
        rlt_decision_combine(c, &L[i].d, i == 0);
    }
}

static bool same_name(const lim *a, const lim *b)
{
    size_t la, lb;
    const char *pa = RM.StringPtrLen(a->name, &la), *pb = RM.StringPtrLen(b->name, &lb);
    return la == lb && memcmp(pa, pb, la) == 0;
}

/* Fills L[i] from (key, policy, cost) triples at argv[first..]; false after an error reply.
 * `names`: the keys are full Redis key names (RL.DECIDE), else user keys. */
static bool triples(RedisModuleCtx *ctx, RedisModuleString **argv, int first, size_t n, lim *L,
                    bool names)
{
    for (size_t i = 0; i < n; i++) {
        RedisModuleString **t = argv + first + 3 * i;
        if (!cost_arg(ctx, t[2], &L[i].cost) || !policy_arg(ctx, t[1], &L[i])) return false;
        if (n > 1 && L[i].m.p.algo == RLT_CONCURRENCY) {
            RM.ReplyWithError(ctx, "ERR RL.MULTI takes no concurrency policy");
            return false;
        }
        if (names) {
            L[i].name = t[0];
        } else if (!name_arg(ctx, t[0], &L[i])) {
            return false;
        }
        for (size_t j = 0; j < i; j++)
            if (same_name(&L[j], &L[i])) {
                RM.ReplyWithError(ctx, "ERR the same key and policy twice in one check");
                return false;
            }
    }
    return true;
}

static int cmd_multi(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc < 4 || (argc - 1) % 3 != 0) return RM.WrongArity(ctx);
    size_t n = (size_t)(argc - 1) / 3;
    if (n > MULTI_MAX) return RM.ReplyWithError(ctx, "ERR at most 16 limits per RL.MULTI");
    lim L[MULTI_MAX];
    memset(L, 0, sizeof L);
    const char *err = NULL;
    if (triples(ctx, argv, 1, n, L, false)) {
        err = run(ctx, L, n, now_us(), 0);
        if (err) {
            RM.ReplyWithError(ctx, err);
        } else {
            rlt_decision c;
            int64_t refused;
            combine(L, n, &c, &refused);
            int64_t v[7] = {c.allowed,
                            c.limit,
                            c.remaining,
                            c.allowed ? 0 : ceil_ms(c.retry_after),
                            ceil_ms(c.reset_after),
                            ceil_ms(c.delay),
                            refused};
            reply_ints(ctx, v, 7);
        }
    }
    lims_close(ctx, L, n);
    return RLT_RM_OK;
}

static int cmd_reset(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 3) return RM.WrongArity(ctx);
    lim l = {0};
    if (!policy_arg(ctx, argv[2], &l) || !name_arg(ctx, argv[1], &l)) return RLT_RM_OK;
    call_free(RM.Call(ctx, "DEL", "!s", l.name));
    if (l.m.btl > 0) { /* and the penalty box's companion key */
        l.bname = block_name(ctx, l.name, &l.m);
        call_free(RM.Call(ctx, "DEL", "!s", l.bname));
    }
    lims_close(ctx, &l, 1);
    return RM.ReplyWithLongLong(ctx, 1);
}

static bool concurrency_only(RedisModuleCtx *ctx, const lim *l, const char *cmd)
{
    if (l->m.p.algo == RLT_CONCURRENCY) return true;
    reply_errf(ctx, "ERR %s needs a concurrency policy (e.g. concurrency:10/30s)", cmd);
    return false;
}

static int cmd_acquire(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 3) return RM.WrongArity(ctx);
    lim l = {0};
    l.cost = 1;
    if (!policy_arg(ctx, argv[2], &l) || !concurrency_only(ctx, &l, "RL.ACQUIRE") ||
        !name_arg(ctx, argv[1], &l))
        return RLT_RM_OK;
    if (one(ctx, &l)) return RLT_RM_OK;
    int64_t v[5] = {l.d.allowed, l.d.limit, l.d.remaining,
                    l.d.allowed ? 0 : ceil_ms(l.d.retry_after), l.d.allowed ? l.d.lease : 0};
    lims_close(ctx, &l, 1);
    return reply_ints(ctx, v, 5);
}

static int cmd_release(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 4) return RM.WrongArity(ctx);
    int64_t lease;
    if (!arg_i64(argv[3], &lease) || lease <= 0)
        return RM.ReplyWithError(ctx, "ERR lease must be an integer > 0");
    lim l = {0};
    if (!policy_arg(ctx, argv[2], &l) || !concurrency_only(ctx, &l, "RL.RELEASE") ||
        !name_arg(ctx, argv[1], &l))
        return RLT_RM_OK;
    RedisModuleCallReply *rep = RM.Call(ctx, "HGETALL", "s", l.name);
    const char *err = NULL;
    int rc = RLT_ENOENT;
    if (!rep || RM.CallReplyType(rep) != RLT_RM_REPLY_ARRAY) {
        err = RLT_RM_WRONGTYPE;
    } else {
        const char **items = NULL;
        size_t *lens = NULL, n = 0;
        err = array_items(rep, &items, &lens, &n);
        if (!err && n % 2) err = E_CORRUPT;
        if (!err) {
            void *scratch = RM.Alloc(rlt__mpol_scratch(&l.m));
            int64_t slot;
            rc = rlt__mcc_release(&l.m, items, lens, n / 2, now_us(), lease, scratch, &slot);
            RM.Free(scratch);
            if (rc == RLT_ECORRUPT) err = E_CORRUPT;
            if (!err && slot >= 0) {
                char field[24];
                int fl = snprintf(field, sizeof field, "s%lld", (long long)slot);
                call_free(RM.Call(ctx, "HDEL", "!sb", l.name, field, (size_t)fl));
            }
        }
        RM.Free(items);
        RM.Free(lens);
    }
    call_free(rep);
    lims_close(ctx, &l, 1);
    if (err) return RM.ReplyWithError(ctx, err);
    return RM.ReplyWithLongLong(ctx, rc == RLT_OK);
}

/* RL.DECIDE now_us floor_ms name POLICY cost [name POLICY cost ...]: libratelimit_redis's
 * call.  Reply: an array of one string per limit, "allowed limit remaining retry_after
 * reset_after delay lease" (durations in ns). */
static int cmd_decide(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc < 6 || (argc - 3) % 3 != 0) return RM.WrongArity(ctx);
    size_t n = (size_t)(argc - 3) / 3;
    if (n > DECIDE_MAX) return RM.ReplyWithError(ctx, "ERR at most 64 limits per RL.DECIDE");
    int64_t now, floor_ms;
    if (!arg_i64(argv[1], &now) || now < -1 || now > RLT__NOW_MAX)
        return RM.ReplyWithError(ctx, "ERR now must be -1 or microseconds in [0, 2^52]");
    if (now >= 0 && !g.testing)
        return RM.ReplyWithError(ctx, "ERR caller time needs the module loaded with 'testing yes'");
    if (!arg_i64(argv[2], &floor_ms) || floor_ms < 0 || floor_ms > TTL_FLOOR_MAX_MS)
        return RM.ReplyWithError(ctx, "ERR floor_ms must be in [0, 2^40 ns]");
    lim L[DECIDE_MAX];
    memset(L, 0, n * sizeof L[0]);
    if (triples(ctx, argv, 3, n, L, true)) {
        const char *err = run(ctx, L, n, now < 0 ? now_us() : now, floor_ms);
        if (err) {
            RM.ReplyWithError(ctx, err);
        } else {
            /* One string per limit: a client parses it with one allocation, not eight. */
            RM.ReplyWithArray(ctx, (long)n);
            for (size_t i = 0; i < n; i++) {
                const rlt_decision *d = &L[i].d;
                char b[160];
                int len = snprintf(b, sizeof b, "%d %lld %lld %lld %lld %lld %lld", d->allowed,
                                   (long long)d->limit, (long long)d->remaining,
                                   (long long)d->retry_after, (long long)d->reset_after,
                                   (long long)d->delay, (long long)d->lease);
                RM.ReplyWithStringBuffer(ctx, b, (size_t)len);
            }
        }
    }
    lims_close(ctx, L, n);
    return RLT_RM_OK;
}

static int cmd_testtime(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    int64_t t;
    if (argc != 2) return RM.WrongArity(ctx);
    if (!arg_i64(argv[1], &t) || t < -1 || t > RLT__NOW_MAX)
        return RM.ReplyWithError(ctx, "ERR time must be -1 or microseconds in [0, 2^52]");
    g.test_now_us = t;
    return RM.ReplyWithSimpleString(ctx, "OK");
}

/* ---- loading ---------------------------------------------------------------------------- */

static int load_args(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc % 2 != 0) {
        RM.Log(ctx, "warning", "ratelimit: arguments come in pairs: prefix P, testing yes|no");
        return RLT_RM_ERR;
    }
    for (int i = 0; i < argc; i += 2) {
        size_t nl, vl;
        const char *name = RM.StringPtrLen(argv[i], &nl), *v = RM.StringPtrLen(argv[i + 1], &vl);
        if (nl == 6 && strncasecmp(name, "prefix", 6) == 0) {
            if (vl > 64 || memchr(v, '{', vl) || memchr(v, '}', vl)) {
                RM.Log(ctx, "warning", "ratelimit: prefix: at most 64 bytes, no '{' or '}'");
                return RLT_RM_ERR;
            }
            memcpy(g.prefix, v, vl);
            g.prefix[vl] = '\0';
            g.plen = vl;
        } else if (nl == 7 && strncasecmp(name, "testing", 7) == 0) {
            if (vl == 3 && strncasecmp(v, "yes", 3) == 0)
                g.testing = true;
            else if (vl == 2 && strncasecmp(v, "no", 2) == 0)
                g.testing = false;
            else {
                RM.Log(ctx, "warning", "ratelimit: testing: yes or no");
                return RLT_RM_ERR;
            }
        } else {
            RM.Log(ctx, "warning", "ratelimit: unknown argument '%.*s' (prefix, testing)",
                   (int)(nl > 40 ? 40 : nl), name);
            return RLT_RM_ERR;
        }
    }
    return RLT_RM_OK;
}

__attribute__((visibility("default"))) int RedisModule_OnLoad(RedisModuleCtx *ctx,
                                                              RedisModuleString **argv, int argc);

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (rlt__rm_init(ctx, "ratelimit", 1) != RLT_RM_OK) return RLT_RM_ERR;
    if (load_args(ctx, argv, argc) != RLT_RM_OK) return RLT_RM_ERR;
    g.cluster = (RM.GetContextFlags(ctx) & RLT_RM_CTX_FLAGS_CLUSTER) != 0;
    g.pxat = RM.CreateString(NULL, "PXAT", 4); /* no context: lives as long as the module */
    static const struct {
        const char *name;
        rlt__rm_cmd_fn fn;
        const char *flags;
        int first, last, step;
    } cmds[] = {
        {"cl.throttle", cmd_throttle, "write deny-oom fast", 1, 1, 1},
        {"rl.check", cmd_check, "write deny-oom fast", 1, 1, 1},
        {"rl.peek", cmd_peek, "readonly fast", 1, 1, 1},
        {"rl.multi", cmd_multi, "write deny-oom", 1, -1, 3},
        {"rl.reset", cmd_reset, "write", 1, 1, 1},
        {"rl.acquire", cmd_acquire, "write deny-oom", 1, 1, 1},
        {"rl.release", cmd_release, "write", 1, 1, 1},
        {"rl.decide", cmd_decide, "write deny-oom", 3, -1, 3},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (RM.CreateCommand(ctx, cmds[i].name, cmds[i].fn, cmds[i].flags, cmds[i].first,
                             cmds[i].last, cmds[i].step) != RLT_RM_OK)
            return RLT_RM_ERR;
    if (g.testing &&
        RM.CreateCommand(ctx, "rl.testtime", cmd_testtime, "fast", 0, 0, 0) != RLT_RM_OK)
        return RLT_RM_ERR;
    RM.Log(ctx, "notice", "ratelimit: loaded (prefix '%s'%s)", g.prefix,
           g.testing ? ", testing: caller time accepted" : "");
    return RLT_RM_OK;
}
