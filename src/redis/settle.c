/* libratelimit_redis's charge after the response: reserve an estimate, then settle the real
 * cost (lua/settle.lua), with reservations named by 64 random bits. */
#include "call.h"
#include "reply.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define LIM RLT__LIM
#define KEYNAME_MAX RLT__KEYNAME_MAX

/* The longest reservation suffix, ":r:" + 16 hex digits. */
#define RES_SUFFIX 19

/* The largest real cost sent to the script (exact in Lua): beyond 2^52 + 2^50 every debt the
 * script holds is saturated already (settle.lua's header), so a larger one, up to INT64_MAX
 * (Envoy's hits_addend saturates there), is charged as this one. */
#define REAL_MAX (RLT_REDIS_NUM_MAX - 1)

/* 64 random bits, never 0: getrandom(2), else /dev/urandom.  Returns false if neither answers
 * (then no reservation is made: a guessable id would let a client settle another's). */
bool rlt__random_id(uint64_t *id)
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
static int build_settle(rlt_redis *r, rlt__call *c, const rlt__limit *l, const void *key,
                        size_t klen, uint64_t id, const char *op, int64_t now_us)
{
    c->argc = 0;
    c->nnums = 0;
    const struct rlt__ptext *t = rlt__policy_texts(r, l->p);
    int len = rlt__key_name_tail(r->prefix, r->prefix_len, t->tail, (size_t)t->tl, key, klen,
                                 c->keys[0], KEYNAME_MAX);
    if (len < 0) return len == RLT_ENOSPC ? RLT_EKEYLEN : len;
    if ((size_t)len + RES_SUFFIX > KEYNAME_MAX) return RLT_EKEYLEN;
    memcpy(c->keys[1], c->keys[0], (size_t)len);
    snprintf(c->keys[1] + len, RES_SUFFIX + 1, ":r:%016llx", (unsigned long long)id);
    c->slot = r->opt.cluster ? rlt__key_slot(c->keys[0], (size_t)len) : 0;
    c->script = RLT__S_SETTLE;
    rlt__arg(c, "EVALSHA", 7);
    rlt__arg(c, rlt__redis_scripts[RLT__S_SETTLE].sha, 40);
    rlt__arg(c, "2", 1);
    rlt__arg(c, c->keys[0], (size_t)len);
    rlt__arg(c, c->keys[1], (size_t)len + RES_SUFFIX);
    rlt__arg(c, op, 1);
    rlt__arg_num(c, now_us);
    rlt__arg_num(c, rlt_retry_after_ms(r->opt.ttl_floor));
    const rlt__rpol *p = &l->rp;
    int64_t v[9] = {p->algo, l->cost, p->N, p->W, p->B, p->Q, p->D, p->scale, p->unit};
    for (int f = 0; f < 9; f++)
        rlt__arg_num(c, v[f]);
    rlt__arg(c, p->cal, strlen(p->cal));
    return RLT_OK;
}

/* Validates (p, key, amount) for a reserve or a settle into *l and *now_us. */
static int settle_args(const rlt_policy *p, unsigned flags, const void *key, size_t klen,
                       rlt_ns now, int64_t amount, rlt__limit *l, int64_t *now_us)
{
    rlt_redis_check ck = {p, key, klen, amount};
    int rc = rlt__check_limit(&ck, l);
    if (rc) return rc;
    if (!rlt_settle_supported(p)) return RLT_EINVAL;
    l->cost = amount > REAL_MAX ? REAL_MAX : amount; /* 0..2^53 - 1: exact in the script */
    return rlt__now_arg(flags, now, now_us);
}

int rlt_redis_reserve(rlt_redis *r, const rlt_policy *p, unsigned flags, const void *key,
                      size_t klen, rlt_ns now, int64_t estimate, rlt_ns timeout, rlt_decision *d,
                      uint64_t *reservation)
{
    if (!d || !reservation) return RLT_EINVAL;
    memset(d, 0, sizeof *d);
    *reservation = 0;
    if (!r || timeout < 0) return RLT_EINVAL;
    rlt__limit l;
    int64_t now_us;
    /* An estimate above every limit is denied by the decision itself: clamp as decide does. */
    int rc = settle_args(p, flags, key, klen, now, estimate > LIM ? LIM : estimate, &l, &now_us);
    if (rc) return rc;
    uint64_t id;
    if (!rlt__random_id(&id)) return RLT_EBACKEND;
    rlt__call *c = rlt__call_new(2);
    if (!c) return RLT_ENOMEM;
    rc = build_settle(r, c, &l, key, klen, id, "v", now_us);
    if (rc) {
        free(c);
        return rc;
    }
    rlt_ns to = timeout ? timeout : RLT_REDIS_RESERVE_DEFAULT_TIMEOUT;
    int64_t ms = rlt_retry_after_ms(to);
    rlt__arg_num(c, ms < 1 ? 1 : ms);
    redisReply *rep = NULL;
    int64_t retry_at = 0;
    rc = rlt__run_free(r, c, &rep, &retry_at);
    if (!rc) {
        rc = rlt__parse_decision(rep, d); /* -1 (the id exists: 2^-64) is no array: EBACKEND */
        freeReplyObject(rep);
        if (rc) {
            r->st.errors++;
            retry_at = rlt__mono_ns();
        }
    }
    if (rc) {
        rlt__fail_decision(r, p, flags, retry_at, d); /* no reservation: nothing to settle */
        rlt__jitter_out(p, key, klen, now, d);
        return rc;
    }
    r->st.decisions++;
    if (d->allowed || estimate == 0) *reservation = id; /* 0 charged: recorded (the script) */
    rlt__jitter_out(p, key, klen, now, d);
    return RLT_OK;
}

int rlt_redis_settle(rlt_redis *r, const rlt_policy *p, unsigned flags, const void *key,
                     size_t klen, rlt_ns now, uint64_t reservation, int64_t real_cost,
                     rlt_decision *d)
{
    if (!d) return RLT_EINVAL;
    memset(d, 0, sizeof *d);
    if (!r || real_cost < 0) return RLT_EINVAL;
    rlt__limit l;
    int64_t now_us;
    int rc = settle_args(p, flags, key, klen, now, real_cost, &l, &now_us);
    if (rc) return rc;
    if (reservation == 0) return RLT_ENOENT;
    rlt__call *c = rlt__call_new(2);
    if (!c) return RLT_ENOMEM;
    rc = build_settle(r, c, &l, key, klen, reservation, "s", now_us);
    if (rc) {
        free(c);
        return rc;
    }
    redisReply *rep = NULL;
    int64_t retry_at = 0;
    rc = rlt__run_free(r, c, &rep, &retry_at);
    if (rc) {
        d->limit = rlt_policy_limit(p);
        return rc;
    }
    if (rep->type == REDIS_REPLY_INTEGER)
        rc = rep->integer == 0 ? RLT_ENOENT : RLT_EBACKEND; /* a debt saturates: never ERANGE */
    else
        rc = rlt__parse_decision(rep, d);
    freeReplyObject(rep);
    if (rc == RLT_EBACKEND) {
        r->st.errors++;
        memset(d, 0, sizeof *d);
        d->limit = rlt_policy_limit(p);
    }
    return rc;
}
