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
 * with TIME), reads its arguments (args.c), then its keys, decides with the core (state.c) and
 * writes the result, replicated as its effect (limit.c).  Every command is O(1), or O(N) in the
 * policy's own N for the sliding log and concurrency (N bounded by the core: 2^20 and 65536).
 * This file is the commands: Redis's side of the module API, where a status becomes a reply.
 *
 * Module arguments: `prefix P` (the library's key prefix, default "rlt:"), `testing yes|no`
 * (RL.TESTTIME and RL.DECIDE's caller time: tests only; a caller-chosen clock could mint). */
#include "args.h"
#include "redis/layout.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#define RM rlt__rm
#define MULTI_MAX 16  /* RL.MULTI, as ratelimitd */
#define DECIDE_MAX 64 /* RL.DECIDE, as rlt_redis_decide_multi */
#define TTL_FLOOR_MAX_MS (INT64_C(1) << 40) / RLT_NS_PER_MS

static int64_t test_now_us = -1; /* RL.TESTTIME; -1: the real clock */

static int64_t now_us(void)
{
    if (rlt__mset.testing && test_now_us >= 0) return test_now_us;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Where a command's status becomes Redis's answer: the error reply its failing step left, or
 * nothing more (the command replied already).  Returns REDISMODULE_OK, as Redis wants. */
static int reply_status(const rlt__mcmd *c, int rc)
{
    if (rc != RLT_OK) RM.ReplyWithError(c->ctx, c->err ? c->err : "ERR ratelimit: internal error");
    return RLT_RM_OK;
}

static void reply_ints(RedisModuleCtx *ctx, const int64_t *v, int n)
{
    RM.ReplyWithArray(ctx, n);
    for (int i = 0; i < n; i++)
        RM.ReplyWithLongLong(ctx, v[i]);
}

/* A decision as ratelimitd's replies give it (ms rounded up; a refusal's wait), followed by
 * RL.MULTI's refused index when `refused` is not NULL. */
static void reply_decision(RedisModuleCtx *ctx, const rlt_decision *d, const int64_t *refused)
{
    RM.ReplyWithArray(ctx, refused ? 7 : 6);
    RM.ReplyWithLongLong(ctx, d->allowed);
    RM.ReplyWithLongLong(ctx, d->limit);
    RM.ReplyWithLongLong(ctx, d->remaining);
    RM.ReplyWithLongLong(ctx, d->allowed ? 0 : rlt_retry_after_ms(d->retry_after));
    RM.ReplyWithLongLong(ctx, rlt_retry_after_ms(d->reset_after));
    RM.ReplyWithLongLong(ctx, rlt_retry_after_ms(d->delay));
    if (refused) RM.ReplyWithLongLong(ctx, *refused);
}

/* ---- commands --------------------------------------------------------------------------- */

static int cmd_throttle(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 5 && argc != 6) return RM.WrongArity(ctx);
    int64_t burst, count, period, qty = 1;
    if (!rlt__marg_i64(argv[2], &burst) || !rlt__marg_i64(argv[3], &count) ||
        !rlt__marg_i64(argv[4], &period) || (argc == 6 && !rlt__marg_i64(argv[5], &qty)))
        return RM.ReplyWithError(ctx, "ERR value is not an integer or out of range");
    if (burst < 0 || burst >= INT32_MAX)
        return RM.ReplyWithError(ctx, "ERR max_burst must be >= 0 and < 2147483647");
    if (count <= 0) return RM.ReplyWithError(ctx, "ERR count must be > 0");
    if (period <= 0 || period > INT64_MAX / RLT_NS_PER_S)
        return RM.ReplyWithError(ctx, "ERR period must be > 0 seconds and fit in int64 ns");
    if (qty < 0) return RM.ReplyWithError(ctx, "ERR quantity must be >= 0");
    rlt__mcmd c;
    rlt__mcmd_init(&c, ctx);
    rlt__mlim l = {0};
    l.cost = qty;
    char ck[72]; /* the cache key: "\1burst count period" (no policy text starts with \1) */
    int cl = snprintf(ck, sizeof ck, "\1%lld %lld %lld", (long long)burst, (long long)count,
                      (long long)period);
    int rc = RLT_OK;
    const rlt__mpol *hit = rlt__mpcache_get(ck, (size_t)cl);
    if (hit) {
        l.m = *hit;
    } else {
        rlt_policy p;
        rc = rlt_policy_init(&p, RLT_GCRA, count, period * RLT_NS_PER_S, burst + 1, 0, 0);
        if (rc)
            rlt__mcmd_failf(&c, rc, "ERR invalid rate: %s", rlt_strerror(rc));
        else if ((rc = rlt__marg_mpol(&c, &p, &l)) == RLT_OK)
            rlt__mpcache_put(ck, (size_t)cl, &l.m);
    }
    if (!rc) rc = rlt__marg_name(&c, argv[1], &l);
    if (!rc) rc = rlt__mlims_run(&c, &l, 1, now_us(), 0);
    if (!rc) {
        /* redis-cell: a quantity of 0 only peeks and is never limited. */
        bool limited = qty > 0 && !l.d.allowed;
        int64_t v[5] = {limited, burst + 1, l.d.remaining,
                        limited ? rlt_retry_after_seconds(l.d.retry_after) : -1,
                        rlt_retry_after_seconds(l.d.reset_after)};
        reply_ints(ctx, v, 5);
    }
    rlt__mlims_close(ctx, &l, 1);
    return reply_status(&c, rc);
}

static int check_or_peek(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, bool peek)
{
    if (argc < 3 || argc > (peek ? 3 : 4)) return RM.WrongArity(ctx);
    rlt__mcmd c;
    rlt__mcmd_init(&c, ctx);
    rlt__mlim l = {0};
    l.cost = peek ? 0 : 1;
    int rc = argc == 4 ? rlt__marg_cost(&c, argv[3], &l.cost) : RLT_OK;
    if (!rc) rc = rlt__marg_policy(&c, argv[2], &l);
    if (!rc) rc = rlt__marg_name(&c, argv[1], &l);
    if (!rc) rc = rlt__mlims_run(&c, &l, 1, now_us(), 0);
    if (!rc) reply_decision(ctx, &l.d, NULL);
    rlt__mlims_close(ctx, &l, 1);
    return reply_status(&c, rc);
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
static void combine(const rlt__mlim *L, size_t n, rlt_decision *c, int64_t *refused)
{
    memset(c, 0, sizeof *c);
    *refused = -1;
    for (size_t i = 0; i < n; i++) {
        if (!L[i].d.allowed && *refused < 0) *refused = (int64_t)i;
        rlt_decision_combine(c, &L[i].d, i == 0);
    }
}

static int cmd_multi(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc < 4 || (argc - 1) % 3 != 0) return RM.WrongArity(ctx);
    size_t n = (size_t)(argc - 1) / 3;
    if (n > MULTI_MAX) return RM.ReplyWithError(ctx, "ERR at most 16 limits per RL.MULTI");
    rlt__mcmd c;
    rlt__mcmd_init(&c, ctx);
    rlt__mlim L[MULTI_MAX];
    memset(L, 0, sizeof L);
    int rc = rlt__margs_triples(&c, argv, 1, n, L, false);
    if (!rc) rc = rlt__mlims_run(&c, L, n, now_us(), 0);
    if (!rc) {
        rlt_decision d;
        int64_t refused;
        combine(L, n, &d, &refused);
        reply_decision(ctx, &d, &refused);
    }
    rlt__mlims_close(ctx, L, n);
    return reply_status(&c, rc);
}

static int cmd_reset(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 3) return RM.WrongArity(ctx);
    rlt__mcmd c;
    rlt__mcmd_init(&c, ctx);
    rlt__mlim l = {0};
    int rc = rlt__marg_policy(&c, argv[2], &l);
    if (!rc) rc = rlt__marg_name(&c, argv[1], &l);
    if (!rc) {
        rlt__mreply_free(RM.Call(ctx, "DEL", "!s", l.name));
        if (l.m.btl > 0) { /* and the penalty box's companion key */
            l.bname = rlt__mlim_block_name(ctx, l.name, &l.m);
            rlt__mreply_free(RM.Call(ctx, "DEL", "!s", l.bname));
        }
        RM.ReplyWithLongLong(ctx, 1);
    }
    rlt__mlims_close(ctx, &l, 1);
    return reply_status(&c, rc);
}

/* RL.ACQUIRE's and RL.RELEASE's policy: RLT_OK, or RLT_EINVAL for any other algorithm. */
static int concurrency_only(rlt__mcmd *c, const rlt__mlim *l, const char *cmd)
{
    if (l->m.p.algo == RLT_CONCURRENCY) return RLT_OK;
    return rlt__mcmd_failf(c, RLT_EINVAL,
                           "ERR %s needs a concurrency policy (e.g. concurrency:10/30s)", cmd);
}

static int cmd_acquire(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 3) return RM.WrongArity(ctx);
    rlt__mcmd c;
    rlt__mcmd_init(&c, ctx);
    rlt__mlim l = {0};
    l.cost = 1;
    int rc = rlt__marg_policy(&c, argv[2], &l);
    if (!rc) rc = concurrency_only(&c, &l, "RL.ACQUIRE");
    if (!rc) rc = rlt__marg_name(&c, argv[1], &l);
    if (!rc) rc = rlt__mlims_run(&c, &l, 1, now_us(), 0);
    if (!rc) {
        int64_t v[5] = {l.d.allowed, l.d.limit, l.d.remaining,
                        l.d.allowed ? 0 : rlt_retry_after_ms(l.d.retry_after),
                        l.d.allowed ? l.d.lease : 0};
        reply_ints(ctx, v, 5);
    }
    rlt__mlims_close(ctx, &l, 1);
    return reply_status(&c, rc);
}

/* Releases `lease` on l's concurrency hash; *live: whether it was a live lease. */
static int release(rlt__mcmd *c, rlt__mlim *l, int64_t lease, bool *live)
{
    RedisModuleCallReply *rep = RM.Call(c->ctx, "HGETALL", "s", l->name);
    if (!rep || RM.CallReplyType(rep) != RLT_RM_REPLY_ARRAY) {
        rlt__mreply_free(rep);
        return rlt__mcmd_fail(c, RLT_ECORRUPT, RLT_RM_WRONGTYPE);
    }
    const char **items = NULL;
    size_t *lens = NULL, n = 0;
    int rc = rlt__mreply_items(c, rep, &items, &lens, &n);
    if (!rc && n % 2) rc = rlt__mcmd_fail_status(c, RLT_ECORRUPT);
    if (!rc) {
        void *scratch = RM.Alloc(rlt__mpol_scratch(&l->m));
        int64_t slot;
        rc = rlt__mcc_release(&l->m, items, lens, n / 2, now_us(), lease, scratch, &slot);
        RM.Free(scratch);
        *live = rc == RLT_OK;
        if (rc == RLT_ECORRUPT) {
            rlt__mcmd_fail_status(c, rc);
        } else {
            rc = RLT_OK; /* RLT_ENOENT: unknown or expired, answered 0 */
            if (slot >= 0) {
                char field[24];
                int fl = snprintf(field, sizeof field, "s%lld", (long long)slot);
                rlt__mreply_free(RM.Call(c->ctx, "HDEL", "!sb", l->name, field, (size_t)fl));
            }
        }
    }
    RM.Free(items);
    RM.Free(lens);
    RM.FreeCallReply(rep);
    return rc;
}

static int cmd_release(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 4) return RM.WrongArity(ctx);
    int64_t lease;
    if (!rlt__marg_i64(argv[3], &lease) || lease <= 0)
        return RM.ReplyWithError(ctx, "ERR lease must be an integer > 0");
    rlt__mcmd c;
    rlt__mcmd_init(&c, ctx);
    rlt__mlim l = {0};
    bool live = false;
    int rc = rlt__marg_policy(&c, argv[2], &l);
    if (!rc) rc = concurrency_only(&c, &l, "RL.RELEASE");
    if (!rc) rc = rlt__marg_name(&c, argv[1], &l);
    if (!rc) rc = release(&c, &l, lease, &live);
    if (!rc) RM.ReplyWithLongLong(ctx, live);
    rlt__mlims_close(ctx, &l, 1);
    return reply_status(&c, rc);
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
    if (!rlt__marg_i64(argv[1], &now) || now < -1 || now > RLT__NOW_MAX)
        return RM.ReplyWithError(ctx, "ERR now must be -1 or microseconds in [0, 2^52]");
    if (now >= 0 && !rlt__mset.testing)
        return RM.ReplyWithError(ctx, "ERR caller time needs the module loaded with 'testing yes'");
    if (!rlt__marg_i64(argv[2], &floor_ms) || floor_ms < 0 || floor_ms > TTL_FLOOR_MAX_MS)
        return RM.ReplyWithError(ctx, "ERR floor_ms must be in [0, 2^40 ns]");
    rlt__mcmd c;
    rlt__mcmd_init(&c, ctx);
    rlt__mlim L[DECIDE_MAX];
    memset(L, 0, n * sizeof L[0]);
    int rc = rlt__margs_triples(&c, argv, 3, n, L, true);
    if (!rc) rc = rlt__mlims_run(&c, L, n, now < 0 ? now_us() : now, floor_ms);
    if (!rc) {
        /* One string per limit: a client parses it with one allocation, not eight. */
        RM.ReplyWithArray(ctx, (long)n);
        for (size_t i = 0; i < n; i++) {
            const rlt_decision *d = &L[i].d;
            char b[160];
            int len =
                snprintf(b, sizeof b, "%d %lld %lld %lld %lld %lld %lld", d->allowed,
                         (long long)d->limit, (long long)d->remaining, (long long)d->retry_after,
                         (long long)d->reset_after, (long long)d->delay, (long long)d->lease);
            RM.ReplyWithStringBuffer(ctx, b, (size_t)len);
        }
    }
    rlt__mlims_close(ctx, L, n);
    return reply_status(&c, rc);
}

static int cmd_testtime(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    int64_t t;
    if (argc != 2) return RM.WrongArity(ctx);
    if (!rlt__marg_i64(argv[1], &t) || t < -1 || t > RLT__NOW_MAX)
        return RM.ReplyWithError(ctx, "ERR time must be -1 or microseconds in [0, 2^52]");
    test_now_us = t;
    return RM.ReplyWithSimpleString(ctx, "OK");
}

/* ---- loading ---------------------------------------------------------------------------- */

/* Registers the commands.  RLT_OK, or RLT_EINVAL when Redis refuses one. */
static int create_commands(RedisModuleCtx *ctx)
{
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
            return RLT_EINVAL;
    if (rlt__mset.testing &&
        RM.CreateCommand(ctx, "rl.testtime", cmd_testtime, "fast", 0, 0, 0) != RLT_RM_OK)
        return RLT_EINVAL;
    return RLT_OK;
}

__attribute__((visibility("default"))) int RedisModule_OnLoad(RedisModuleCtx *ctx,
                                                              RedisModuleString **argv, int argc);

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    int rc = rlt__rm_init(ctx, "ratelimit", 1);
    if (!rc) rc = rlt__margs_load(ctx, argv, argc);
    if (!rc) rc = rlt__mlim_init();
    if (!rc) rc = create_commands(ctx);
    if (rc) return RLT_RM_ERR;
    RM.Log(ctx, "notice", "ratelimit: loaded (prefix '%s'%s)", rlt__mset.prefix,
           rlt__mset.testing ? ", testing: caller time accepted" : "");
    return RLT_RM_OK;
}
