/* The Redis module's limits (limit.c): one limit of a command read from its keys, decided by the
 * state layer (state.h) and written back with its expiry, replicated as its effect; and a
 * command's limits decided all-or-nothing.  Not installed.
 *
 * Status.  Every function of the module's layers (limit.c, args.c) that can fail returns RLT_OK
 * or a negative RLT_* status, and leaves the error reply's text in its command's rlt__mcmd;
 * module.c's commands turn that into Redis's reply and REDISMODULE_OK, once. */
#ifndef RLT_REDISMODULE_LIMIT_H
#define RLT_REDISMODULE_LIMIT_H

#include "rmapi.h"
#include "state.h"

/* One command's run: Redis's context and, once a step failed, the error reply's text. */
typedef struct rlt__mcmd {
    RedisModuleCtx *ctx;
    const char *err; /* "ERR ..." or "WRONGTYPE ..." after a failure (static or in buf) */
    char buf[320];
} rlt__mcmd;

/* Starts a command's run (buf is left unset: only a formatted error writes it). */
static inline void rlt__mcmd_init(rlt__mcmd *c, RedisModuleCtx *ctx)
{
    c->ctx = ctx;
    c->err = NULL;
}

/* Records the error reply `msg` (a static string) for status rc; returns rc. */
int rlt__mcmd_fail(rlt__mcmd *c, int rc, const char *msg);

/* Records the error reply fmt with its one %s replaced by a; returns rc. */
int rlt__mcmd_failf(rlt__mcmd *c, int rc, const char *fmt, const char *a);

/* Records the error reply that says what the state layer's status rc means (a corrupt value,
 * a number out of range...); returns rc. */
int rlt__mcmd_fail_status(rlt__mcmd *c, int rc);

/* One limit of a command: the key, the policy and cost, the decision, and the write it
 * prepared.  Zero-initialised before the arguments fill it (args.h). */
typedef struct rlt__mlim {
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
} rlt__mlim;

/* Makes the module's own strings (once, at load).  RLT_OK or RLT_ENOMEM. */
int rlt__mlim_init(void);

/* Decides L[0..n) at `now` (us) all-or-nothing, as the multi-limit script: charges every limit
 * only when every one allows; otherwise the limits that allowed report as they stand (a peek),
 * and a limit with block= that denied starts its block.  Writes expire at reset_after rounded
 * up to the ms, at least floor_ms.  jitter= is applied to the limits with a user key (ukey).
 * RLT_OK; else RLT_ECORRUPT (a key holds another type or no state of its policy), RLT_ERANGE,
 * RLT_EINVAL, RLT_ENOMEM, with c->err set, and nothing written. */
int rlt__mlims_run(rlt__mcmd *c, rlt__mlim *L, size_t n, int64_t now, int64_t floor_ms);

/* Frees what L[0..n) holds (names, open keys); a second call is a no-op. */
void rlt__mlims_close(RedisModuleCtx *ctx, rlt__mlim *L, size_t n);

/* The penalty box's companion key of `name` under m (layout.h, rlt__block_tail): the name
 * followed by m's block tail.  The caller frees it (or Redis does, with the context). */
RedisModuleString *rlt__mlim_block_name(RedisModuleCtx *ctx, RedisModuleString *name,
                                        const rlt__mpol *m);

/* The elements of an array reply as (pointer, length) pairs in arrays the caller frees with
 * RM.Free (also on failure).  RLT_OK, or RLT_ECORRUPT (c->err set) when one is no string. */
int rlt__mreply_items(rlt__mcmd *c, RedisModuleCallReply *rep, const char ***ptrs, size_t **lens,
                      size_t *n);

/* Frees a call reply; NULL is a no-op. */
void rlt__mreply_free(RedisModuleCallReply *rep);

#endif
