/* The Redis module's limits: one limit of a command read from its keys (string, list or hash
 * by algorithm, and block='s companion key), decided by the state layer (state.c), and written
 * back with an expiry, replicated as the effect (`SET name value PXAT ms`; lists and hashes: the
 * edits and a PEXPIREAT), so that replicas and an AOF replay hold the master's state and expiry,
 * not a recomputation at another instant.  A command's limits are decided all-or-nothing. */
#include "limit.h"

#include <stdio.h>
#include <string.h>

#define RM rlt__rm

/* "PXAT", made once for every replicated SET. */
static RedisModuleString *pxat;

int rlt__mlim_init(void)
{
    pxat = RM.CreateString(NULL, "PXAT", 4); /* no context: lives as long as the module */
    return pxat ? RLT_OK : RLT_ENOMEM;
}

static const char *const E_CORRUPT =
    "ERR ratelimit: the key holds no state of this policy (RL.RESET it)";

int rlt__mcmd_fail(rlt__mcmd *c, int rc, const char *msg)
{
    c->err = msg;
    return rc;
}

int rlt__mcmd_failf(rlt__mcmd *c, int rc, const char *fmt, const char *a)
{
    snprintf(c->buf, sizeof c->buf, fmt, a);
    c->err = c->buf;
    return rc;
}

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

int rlt__mcmd_fail_status(rlt__mcmd *c, int rc)
{
    return rlt__mcmd_fail(c, rc, status_msg(rc));
}

int rlt__mreply_items(rlt__mcmd *c, RedisModuleCallReply *rep, const char ***ptrs, size_t **lens,
                      size_t *n)
{
    *n = RM.CallReplyLength(rep);
    *ptrs = RM.Alloc((*n + 1) * sizeof **ptrs);
    *lens = RM.Alloc((*n + 1) * sizeof **lens);
    for (size_t i = 0; i < *n; i++) {
        RedisModuleCallReply *e = RM.CallReplyArrayElement(rep, i);
        (*ptrs)[i] = RM.CallReplyStringPtr(e, &(*lens)[i]);
        if (!(*ptrs)[i]) return rlt__mcmd_fail(c, RLT_ECORRUPT, E_CORRUPT);
    }
    return RLT_OK;
}

/* RL.DECIDE's names come from the caller: any length, hence the allocation. */
RedisModuleString *rlt__mlim_block_name(RedisModuleCtx *ctx, RedisModuleString *name,
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

/* Reads the penalty box's companion key into l->blk (block= only). */
static int read_block(rlt__mcmd *c, rlt__mlim *l)
{
    l->bwrite = false;
    if (l->m.btl == 0) return RLT_OK;
    if (!l->bname) l->bname = rlt__mlim_block_name(c->ctx, l->name, &l->m);
    RedisModuleCallReply *rep = RM.Call(c->ctx, "GET", "s", l->bname);
    if (!rep) return rlt__mcmd_fail(c, RLT_ECORRUPT, RLT_RM_WRONGTYPE);
    int type = RM.CallReplyType(rep);
    size_t vl = 0;
    const char *v = type == RLT_RM_REPLY_STRING ? RM.CallReplyStringPtr(rep, &vl) : NULL;
    int rc = type == RLT_RM_REPLY_STRING || type == RLT_RM_REPLY_NULL
                 ? rlt__mblk_parse(v, vl, &l->blk)
                 : RLT_ECORRUPT;
    RM.FreeCallReply(rep);
    return rc ? rlt__mcmd_fail(c, RLT_ECORRUPT, E_CORRUPT) : RLT_OK;
}

/* Decides l->cost (or `cost` for a peek) at `now`; prepares the write. */
static int decide(rlt__mcmd *c, rlt__mlim *l, int64_t now, int64_t cost)
{
    l->write = false;
    int rc = read_block(c, l);
    if (rc) return rc;
    if (rlt__mpol_is_string(&l->m)) {
        /* Read only: a key opened for writing counts as modified when closed (WATCH, client
         * tracking), and a denied request must change nothing.  commit() reopens it. */
        if (!l->key) l->key = RM.OpenKey(c->ctx, l->name, RLT_RM_READ);
        int type = l->key ? RM.KeyType(l->key) : RLT_RM_KEYTYPE_EMPTY;
        if (type != RLT_RM_KEYTYPE_EMPTY && type != RLT_RM_KEYTYPE_STRING)
            return rlt__mcmd_fail(c, RLT_ECORRUPT, RLT_RM_WRONGTYPE);
        const char *v = NULL;
        size_t vl = 0;
        if (type == RLT_RM_KEYTYPE_STRING) v = RM.StringDMA(l->key, &vl, RLT_RM_READ);
        rc = rlt__mstr_decide_blk(&l->m, v, vl, now, cost, &l->d, l->val, &l->vlen, &l->blk,
                                  &l->bwrite);
        if (rc) return rlt__mcmd_fail_status(c, rc);
        l->write = l->vlen > 0;
        return RLT_OK;
    }
    bool log = l->m.p.algo == RLT_SLIDING_LOG;
    RedisModuleCallReply *rep = log ? RM.Call(c->ctx, "LRANGE", "sll", l->name, 0LL, -1LL)
                                    : RM.Call(c->ctx, "HGETALL", "s", l->name);
    if (!rep || RM.CallReplyType(rep) != RLT_RM_REPLY_ARRAY) {
        rlt__mreply_free(rep);
        return rlt__mcmd_fail(c, RLT_ECORRUPT, RLT_RM_WRONGTYPE);
    }
    const char **items = NULL;
    size_t *lens = NULL, n = 0;
    rc = rlt__mreply_items(c, rep, &items, &lens, &n);
    void *scratch = rc ? NULL : RM.Alloc(rlt__mpol_scratch(&l->m));
    if (!rc) {
        rc = log ? rlt__mlog_decide_blk(&l->m, items, lens, n, now, cost, scratch, &l->d, &l->e,
                                        &l->write, &l->blk, &l->bwrite)
                 : rlt__mcc_decide_blk(&l->m, items, lens, n / 2, now, cost, scratch, &l->d,
                                       &l->slot, l->ccval, &l->cclen, &l->blk, &l->bwrite);
        if (rc) rlt__mcmd_fail_status(c, rc);
        if (!log && !rc) l->write = l->slot >= 0;
    }
    if (n % 2 != 0 && !log) rc = rlt__mcmd_fail(c, RLT_ECORRUPT, E_CORRUPT);
    if (scratch) RM.Free(scratch);
    RM.Free(items);
    RM.Free(lens);
    RM.FreeCallReply(rep);
    return rc;
}

void rlt__mreply_free(RedisModuleCallReply *rep)
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
static void commit(RedisModuleCtx *ctx, rlt__mlim *l, int64_t floor_ms)
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
            RM.Replicate(ctx, "SET", "sbsl", l->name, l->val, l->vlen, pxat, abs_ms);
        } else {
            RedisModuleString *v = RM.CreateString(ctx, l->val, l->vlen);
            RM.StringSet(l->key, v);
            RM.SetAbsExpire(l->key, abs_ms);
            RM.Replicate(ctx, "SET", "sssl", l->name, v, pxat, abs_ms);
            RM.FreeString(ctx, v);
        }
        return;
    }
    if (l->m.p.algo == RLT_SLIDING_LOG) {
        const rlt__mlog_edit *e = &l->e;
        if (e->del) {
            rlt__mreply_free(RM.Call(ctx, "DEL", "!s", l->name));
        } else if (e->trim > 0) {
            rlt__mreply_free(RM.Call(ctx, "LTRIM", "!sll", l->name, (long long)e->trim, -1LL));
        }
        if (e->lset)
            rlt__mreply_free(RM.Call(ctx, "LSET", "!slb", l->name, -1LL, e->item, e->ilen));
        else
            rlt__mreply_free(RM.Call(ctx, "RPUSH", "!sb", l->name, e->item, e->ilen));
    } else {
        char field[24];
        int fl = snprintf(field, sizeof field, "s%lld", (long long)l->slot);
        rlt__mreply_free(RM.Call(ctx, "HSET", "!sclbb", l->name, "n", (long long)l->d.lease, field,
                                 (size_t)fl, l->ccval, l->cclen));
    }
    expire_at(ctx, l->name, abs_ms);
}

/* Writes the block a breach of l started (SET with its expiry, replicated as such). */
static void commit_block(RedisModuleCtx *ctx, rlt__mlim *l, int64_t now, int64_t floor_ms)
{
    if (!l->bwrite) return;
    char v[48];
    size_t vl = rlt__mblk_format(&l->blk, v);
    long long abs_ms = RM.Milliseconds() + rlt__mblk_ttl_ms(&l->m, &l->blk, now, floor_ms);
    rlt__mreply_free(RM.Call(ctx, "SET", "!sbcl", l->bname, v, vl, "PXAT", abs_ms));
    l->bwrite = false;
}

void rlt__mlims_close(RedisModuleCtx *ctx, rlt__mlim *L, size_t n)
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

/* jitter= on the commands that take user keys, as libratelimit_redis and the keyed store do
 * it: rlt_jitter of the user key's FNV-1a at this command's instant (in ns).  RL.DECIDE, the
 * library's call, returns the exact wait: the library applies the jitter itself. */
static void jitter_lims(rlt__mlim *L, size_t n, int64_t now_us)
{
    for (size_t i = 0; i < n; i++) {
        if (!L[i].ukey || L[i].m.p.jitter <= 0 || L[i].d.retry_after <= 0) continue;
        size_t kl;
        const char *k = RM.StringPtrLen(L[i].ukey, &kl);
        L[i].d.retry_after = rlt_jitter(&L[i].m.p, rlt_hash_fnv1a(k, kl), now_us * RLT_NS_PER_US,
                                        L[i].d.retry_after);
    }
}

int rlt__mlims_run(rlt__mcmd *c, rlt__mlim *L, size_t n, int64_t now, int64_t floor_ms)
{
    bool all = true;
    for (size_t i = 0; i < n; i++) {
        int rc = decide(c, &L[i], now, L[i].cost);
        if (rc) return rc;
        all = all && L[i].d.allowed;
    }
    /* block=: the limits that denied start their blocks; the others are charged nothing (the
     * keyed store's rule).  Only a denial breaches, so with `all` there is none. */
    for (size_t i = 0; i < n; i++)
        commit_block(c->ctx, &L[i], now, floor_ms);
    if (all) {
        for (size_t i = 0; i < n; i++)
            commit(c->ctx, &L[i], floor_ms);
        jitter_lims(L, n, now);
        return RLT_OK;
    }
    for (size_t i = 0; i < n; i++) {
        if (!L[i].d.allowed) continue;
        rlt_decision keep = L[i].d;
        int rc = decide(c, &L[i], now, 0);
        if (rc) return rc;
        keep.remaining = L[i].d.remaining;
        keep.reset_after = L[i].d.reset_after;
        keep.retry_after = 0;
        L[i].d = keep;
        L[i].write = false;
    }
    jitter_lims(L, n, now);
    return RLT_OK;
}
