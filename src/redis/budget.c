/* libratelimit_redis's reservations over several limits (include/ratelimit/redis.h): one
 * script call per reserve and per settle (lua/budget.lua, ops 'mv' and 'ms' of the settle
 * script), the weightings kept in the reservation so that the settle needs only the usage. */
#include "call.h"
#include "reply.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIM RLT__LIM
#define KEYNAME_MAX RLT__KEYNAME_MAX
#define NMAX RLT_BUDGET_LIMITS_REDIS
#define RLT_BUDGET_LIMITS_REDIS 16
#define RES_SUFFIX 19 /* ":m:" + 16 hex digits */
/* A weighting or a usage as the script reads it: "name count" pairs (and room for the NULs). */
#define TEXT_MAX (RLT_USAGE_NAMES * (RLT_USAGE_NAME_MAX + 22) + 1)

/* A call and the texts it points to (they live until it has run). */
typedef struct bcall {
    rlt__call *c;
    char text[NMAX + 1][TEXT_MAX];
} bcall;

/* Writes "name count ..." of names[i]/counts[i] (i < n) into buf; skips zero weights when
 * `terms` (they never charge). */
static size_t pairs(char *buf, const char (*names)[RLT_USAGE_NAME_MAX], size_t stride,
                    const int64_t *counts, size_t cstride, uint32_t n)
{
    size_t len = 0;
    for (uint32_t j = 0; j < n; j++) {
        const char *name = (const char *)names + j * stride;
        int64_t v = *(const int64_t *)(const void *)((const char *)counts + j * cstride);
        len += (size_t)snprintf(buf + len, TEXT_MAX - len, "%s%s %lld", len ? " " : "", name,
                                (long long)v);
    }
    return len;
}

static size_t weights_text(char *buf, const rlt_weights *w)
{
    return pairs(buf, (const char(*)[RLT_USAGE_NAME_MAX])w->term[0].name, sizeof w->term[0],
                 &w->term[0].weight, sizeof w->term[0], w->n);
}

static size_t usage_text(char *buf, const rlt_usage *u)
{
    return pairs(buf, (const char(*)[RLT_USAGE_NAME_MAX])u->item[0].name, sizeof u->item[0],
                 &u->item[0].count, sizeof u->item[0], u->n);
}

/* The head of both calls: "EVALSHA settle n+1 keys... op now floor n", the limits' key names
 * checked (one slot, no limit twice) and the reservation's after them. */
static int build_head(rlt_redis *r, rlt__call *c, const rlt__limit *l, const rlt_redis_check *ck,
                      size_t n, uint64_t id, const char *op, int64_t now_us)
{
    c->argc = 0;
    c->nnums = 0;
    c->script = RLT__S_SETTLE;
    rlt__arg(c, "EVALSHA", 7);
    rlt__arg(c, rlt__redis_scripts[RLT__S_SETTLE].sha, 40);
    rlt__arg_num(c, (int64_t)n + 1);
    size_t len[NMAX];
    for (size_t i = 0; i < n; i++) {
        const struct rlt__ptext *t = rlt__policy_texts(r, l[i].p);
        int k = rlt__key_name_tail(r->prefix, r->prefix_len, t->tail, (size_t)t->tl, ck[i].key,
                                   ck[i].klen, c->keys[i], KEYNAME_MAX);
        if (k < 0) return k == RLT_ENOSPC ? RLT_EKEYLEN : k;
        len[i] = (size_t)k;
        unsigned slot = r->opt.cluster ? rlt__key_slot(c->keys[i], len[i]) : 0;
        if (i == 0) c->slot = slot;
        if (r->opt.cluster && slot != c->slot) return RLT_EINVAL; /* would be CROSSSLOT */
        for (size_t j = 0; j < i; j++)
            if (len[j] == len[i] && memcmp(c->keys[j], c->keys[i], len[i]) == 0)
                return RLT_EINVAL; /* the same limit twice */
        rlt__arg(c, c->keys[i], len[i]);
    }
    if (len[0] + RES_SUFFIX > KEYNAME_MAX) return RLT_EKEYLEN;
    memcpy(c->keys[n], c->keys[0], len[0]);
    snprintf(c->keys[n] + len[0], RES_SUFFIX + 1, ":m:%016llx", (unsigned long long)id);
    rlt__arg(c, c->keys[n], len[0] + RES_SUFFIX);
    rlt__arg(c, op, 2);
    rlt__arg_num(c, now_us);
    rlt__arg_num(c, rlt_retry_after_ms(r->opt.ttl_floor));
    rlt__arg_num(c, (int64_t)n);
    return RLT_OK;
}

/* A limit's policy fields, the cost after algo when `cost` >= 0. */
static void policy_args(rlt__call *c, const rlt__limit *l, int64_t cost)
{
    const rlt__rpol *p = &l->rp;
    rlt__arg_num(c, p->algo);
    if (cost >= 0) rlt__arg_num(c, cost);
    int64_t v[7] = {p->N, p->W, p->B, p->Q, p->D, p->scale, p->unit};
    for (int f = 0; f < 7; f++)
        rlt__arg_num(c, v[f]);
    rlt__arg(c, p->cal, strlen(p->cal));
}

/* Validates the limits' policies and keys into l[0..n). */
static int limits_of(const rlt_redis_check *ck, size_t n, rlt__limit *l)
{
    for (size_t i = 0; i < n; i++) {
        int rc = rlt__check_limit(&ck[i], &l[i]);
        if (rc) return rc;
        if (!rlt_settle_supported(ck[i].policy)) return RLT_EINVAL;
    }
    return RLT_OK;
}

/* The per-limit rows of a reply: n decisions (10 integers each); the last into x[i]. */
static int parse_rows(const redisReply *rep, size_t n, rlt_decision *d, int64_t *x)
{
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != n) return RLT_EBACKEND;
    for (size_t i = 0; i < n; i++) {
        int rc = rlt__parse_decision(rep->element[i], &d[i]);
        if (rc) return rc;
        if (x) x[i] = d[i].lease;
        d[i].lease = 0;
    }
    return RLT_OK;
}

int rlt_redis_reserve_limits(rlt_redis *r, const rlt_redis_limit *limits, size_t n, unsigned flags,
                             const rlt_usage *estimate, rlt_ns now, rlt_ns timeout,
                             rlt_decision *combined, rlt_decision *each, int *refused,
                             uint64_t *reservation)
{
    if (refused) *refused = -1;
    if (reservation) *reservation = 0;
    if (!combined) return RLT_EINVAL;
    memset(combined, 0, sizeof *combined);
    if (!r || !limits || !estimate || !reservation || n == 0 || n > NMAX || timeout < 0 ||
        estimate->n > RLT_USAGE_NAMES)
        return RLT_EINVAL;
    for (uint32_t j = 0; j < estimate->n; j++) { /* every name weighed by some limit */
        bool named = false;
        for (size_t i = 0; i < n && !named; i++)
            named = rlt_weights_names(&limits[i].weights, estimate->item[j].name);
        if (!named || estimate->item[j].count < 0) return RLT_EINVAL;
    }
    rlt_redis_check ck[NMAX];
    rlt__limit l[NMAX];
    int64_t held[NMAX];
    for (size_t i = 0; i < n; i++) {
        int64_t cost;
        int rc = rlt_weights_cost(&limits[i].weights, estimate, &cost);
        if (rc) return rc;
        held[i] = cost - limits[i].weights.base;
        /* Past every limit: denied by the decision itself (clamped as decide does). */
        if (held[i] > LIM) held[i] = LIM;
        ck[i] = (rlt_redis_check){limits[i].policy, limits[i].key, limits[i].klen, cost};
    }
    int64_t now_us;
    int rc = limits_of(ck, n, l);
    if (!rc) rc = rlt__now_arg(flags, now, &now_us);
    if (rc) return rc;
    uint64_t id;
    if (!rlt__random_id(&id)) return RLT_EBACKEND;
    bcall *b = malloc(sizeof *b);
    rlt__call *c = b ? rlt__call_new(n + 1) : NULL;
    if (!c) {
        free(b);
        return RLT_ENOMEM;
    }
    rc = build_head(r, c, l, ck, n, id, "mv", now_us);
    if (rc) {
        free(c);
        free(b);
        return rc;
    }
    int64_t ms = rlt_retry_after_ms(timeout ? timeout : RLT_REDIS_RESERVE_DEFAULT_TIMEOUT);
    rlt__arg_num(c, ms < 1 ? 1 : ms);
    for (size_t i = 0; i < n; i++) {
        policy_args(c, &l[i], l[i].cost);
        rlt__arg_num(c, held[i]);
        rlt__arg(c, b->text[i], weights_text(b->text[i], &limits[i].weights));
    }
    redisReply *rep = NULL;
    int64_t retry_at = 0;
    rlt_decision mine[NMAX], *d = each ? each : mine;
    rc = rlt__run_free(r, c, &rep, &retry_at);
    free(b);
    if (!rc) {
        rc = parse_rows(rep, n, d, NULL); /* -1 (the id exists: 2^-64) is no array: EBACKEND */
        freeReplyObject(rep);
        if (rc) {
            r->st.errors++;
            retry_at = rlt__mono_ns();
        }
    }
    if (rc) {
        rlt__fail_decision(r, limits[0].policy, flags, retry_at, combined);
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        if (!d[i].allowed && refused && *refused < 0) *refused = (int)i;
        rlt_decision_combine(combined, &d[i], i == 0);
    }
    r->st.decisions++;
    if (combined->allowed) *reservation = id;
    return RLT_OK;
}

int rlt_redis_settle_limits(rlt_redis *r, uint64_t reservation, const rlt_redis_check *keys,
                            size_t n, unsigned flags, const rlt_usage *usage, bool final,
                            rlt_ns now, rlt_decision *combined, rlt_decision *each,
                            int64_t *charged)
{
    if (!combined) return RLT_EINVAL;
    memset(combined, 0, sizeof *combined);
    if (!r || !keys || !usage || n == 0 || n > NMAX || usage->n > RLT_USAGE_NAMES)
        return RLT_EINVAL;
    for (uint32_t j = 0; j < usage->n; j++)
        if (usage->item[j].count < 0) return RLT_EINVAL;
    rlt__limit l[NMAX];
    int64_t now_us;
    int rc = limits_of(keys, n, l);
    if (!rc) rc = rlt__now_arg(flags, now, &now_us);
    if (rc) return rc;
    if (reservation == 0) return RLT_ENOENT;
    bcall *b = malloc(sizeof *b);
    rlt__call *c = b ? rlt__call_new(n + 1) : NULL;
    if (!c) {
        free(b);
        return RLT_ENOMEM;
    }
    rc = build_head(r, c, l, keys, n, reservation, "ms", now_us);
    if (rc) {
        free(c);
        free(b);
        return rc;
    }
    rlt__arg(c, final ? "1" : "0", 1);
    rlt__arg(c, b->text[0], usage_text(b->text[0], usage));
    for (size_t i = 0; i < n; i++)
        policy_args(c, &l[i], -1);
    redisReply *rep = NULL;
    int64_t retry_at = 0;
    rc = rlt__run_free(r, c, &rep, &retry_at);
    free(b);
    if (rc) {
        combined->limit = rlt_policy_limit(keys[0].policy);
        return rc;
    }
    rlt_decision mine[NMAX], *d = each ? each : mine;
    int64_t x[NMAX];
    if (rep->type == REDIS_REPLY_INTEGER)
        rc = rep->integer == 0    ? RLT_ENOENT
             : rep->integer == -2 ? RLT_EINVAL
             : rep->integer == -3 ? RLT_ERANGE
                                  : RLT_EBACKEND;
    else
        rc = parse_rows(rep, n, d, x);
    freeReplyObject(rep);
    if (rc == RLT_EBACKEND) {
        r->st.errors++;
        combined->limit = rlt_policy_limit(keys[0].policy);
    }
    if (rc) return rc;
    for (size_t i = 0; i < n; i++) {
        if (charged) charged[i] = x[i];
        rlt_decision_combine(combined, &d[i], i == 0);
    }
    return RLT_OK;
}
