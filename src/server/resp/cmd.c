/* RESP commands: the RL.* family, redis-cell's CL.THROTTLE, and the connection commands every
 * Redis client or tool sends (PING, AUTH, HELLO, CLIENT, COMMAND, INFO, QUIT, ...).  Pure
 * functions of (server, session, arguments, now) that append a reply: no sockets here.  The
 * three deciding commands are parsed by one function each and answered by one reply function
 * each, whether they are decided at once or staged in a pipe. */
#include "server/resp/cmd.h"
#include "server/resp/cmd_limits.h"
#include "server/resp/cmd_release.h"
#include "core/text.h"

#include "server/resp/cmd_conn.h"

#include "server/request/decide.h"
#include "server/stats/metrics.h"
#include "server/request/srv.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether a command name is `name` (upper case), ignoring case.  Inline: the length test
 * rejects most names at once, and the rest is a short loop with no library call. */
static inline bool is(const rlt__resp_arg *a, const char *name)
{
    size_t n = strlen(name);
    if (a->len != n) return false;
    for (size_t i = 0; i < n; i++) {
        char c = a->ptr[i];
        if (c >= 'a' && c <= 'z') c = (char)(c - 'a' + 'A');
        if (c != name[i]) return false;
    }
    return true;
}

static void err_arity(rlt__obuf *o, const rlt__resp_arg *cmd)
{
    rlt__resp_errorf(o, "ERR wrong number of arguments for '%.*s' command",
                     (int)(cmd->len > 64 ? 64 : cmd->len), cmd->ptr);
}

static bool get_i64(const rlt__resp_arg *a, int64_t *v)
{
    return rlt__parse_i64(a->ptr, a->len, v);
}

/* The error reply for status `st` of a decision on policy `id` (-1: none yet) at `now`. */
static void decide_error(rlt__srv *s, int id, rlt_ns now, rlt__obuf *o, int st)
{
    char buf[160];
    rlt__resp_errorf(o, "ERR %s", rlt__decide_strerror(s, id, now, st, buf, sizeof buf));
}

static void store_error(rlt__srv *s, rlt__obuf *o, int st)
{
    decide_error(s, -1, 0, o, st);
}

static void count_error(rlt__srv *s)
{
    rlt__mslot *ms = rlt__mslot_get(&s->metrics);
    rlt__mcount(&ms->errors, 1);
}

/* Resolves (key, policy) arguments with the session's prefix (request.h), writing the error
 * reply on failure.  A tier ("@name", when allowed) is resolved to the key's tier policy. */
static int target(rlt__srv *s, const rlt__session *ss, const rlt__resp_arg *key,
                  const rlt__resp_arg *pol, bool allow_tier, rlt_ns now, char *kbuf, rlt__target *t,
                  rlt__obuf *o)
{
    char err[256];
    int st = rlt__target_resolve(s, ss, key->ptr, key->len, pol->ptr, pol->len, allow_tier, now,
                                 kbuf, t, err, sizeof err);
    if (st == RLT_OK && t->is_tier) {
        st = rlt__srv_tier_policy(s, t->tier, t->key, t->klen, &t->policy_id);
        if (st == RLT_ENOENT || st == RLT_EINVAL)
            snprintf(err, sizeof err, "unknown tier");
        else if (st != RLT_OK)
            snprintf(err, sizeof err, "%s", rlt_strerror(st));
    }
    if (st != RLT_OK) rlt__resp_errorf(o, "ERR %s", err);
    return st;
}

/* ---- the deciding commands: one parser and one reply each ---------------------------- */

/* RL.CHECK key policy [cost] / RL.PEEK key policy: [allowed, limit, remaining,
 * retry_after_ms, reset_after_ms, delay_ms]. */
static void reply_check(rlt__srv *s, const rlt__pipe_reply *r, int id, int64_t cost, rlt_ns now,
                        int st, const rlt_decision *d)
{
    (void)cost;
    if (st != RLT_OK) {
        decide_error(s, id, now, r->out, st);
        count_error(s);
        return;
    }
    int64_t v[6] = {d->allowed ? 1 : 0,
                    d->limit,
                    d->remaining,
                    d->allowed ? 0 : rlt_retry_after_ms(d->retry_after),
                    rlt_retry_after_ms(d->reset_after),
                    rlt_retry_after_ms(d->delay)};
    rlt__resp_ints(r->out, v, 6);
}

static int parse_check(rlt__srv *s, const rlt__session *ss, const rlt__resp_arg *a, size_t n,
                       bool peek, rlt_ns now, char *kbuf, rlt__target *t, int64_t *cost,
                       rlt__obuf *o)
{
    if (n < 3 || n > (peek ? 3u : 4u)) {
        err_arity(o, &a[0]);
        return RLT_EINVAL;
    }
    *cost = peek ? 0 : 1;
    if (n == 4 && (!get_i64(&a[3], cost) || *cost < 0)) {
        rlt__resp_error(o, "ERR cost must be an integer >= 0");
        return RLT_EINVAL;
    }
    return target(s, ss, &a[1], &a[2], true, now, kbuf, t, o);
}

/* CL.THROTTLE's reply, as redis-cell's: [limited, max_burst + 1, remaining, retry_after_s,
 * reset_after_s]. */
static void reply_throttle(rlt__srv *s, const rlt__pipe_reply *r, int id, int64_t qty, rlt_ns now,
                           int st, const rlt_decision *d)
{
    if (st != RLT_OK) {
        decide_error(s, id, now, r->out, st);
        count_error(s);
        return;
    }
    /* redis-cell: a quantity of 0 only peeks and is never limited. */
    bool limited = qty > 0 && !d->allowed;
    int64_t v[5] = {limited ? 1 : 0, r->arg, d->remaining,
                    limited ? rlt_retry_after_seconds(d->retry_after) : -1,
                    rlt_retry_after_seconds(d->reset_after)};
    rlt__resp_ints(r->out, v, 5);
}

/* CL.THROTTLE key max_burst count period [quantity]: validated as redis-cell does; the
 * policy is GCRA with burst max_burst + 1, interned behind the per-thread cache keyed by the
 * raw numeric arguments (they determine the policy). */
static int parse_throttle(rlt__srv *s, const rlt__session *ss, const rlt__resp_arg *a, size_t n,
                          rlt_ns now, char *kbuf, rlt__target *t, int64_t *qty, int64_t *burst1,
                          rlt__obuf *o)
{
    if (n != 5 && n != 6) {
        err_arity(o, &a[0]);
        return RLT_EINVAL;
    }
    int64_t burst, count, period;
    *qty = 1;
    const char *msg = NULL;
    if (!get_i64(&a[2], &burst) || !get_i64(&a[3], &count) || !get_i64(&a[4], &period) ||
        (n == 6 && !get_i64(&a[5], qty)))
        msg = "ERR value is not an integer or out of range";
    else if (burst < 0 || burst >= INT32_MAX)
        msg = "ERR max_burst must be >= 0 and < 2147483647";
    else if (count <= 0)
        msg = "ERR count must be > 0";
    else if (period <= 0 || period > INT64_MAX / RLT_NS_PER_S)
        msg = "ERR period must be > 0 seconds and fit in int64 ns";
    else if (*qty < 0)
        msg = "ERR quantity must be >= 0";
    if (msg != NULL) {
        rlt__resp_error(o, msg);
        return RLT_EINVAL;
    }
    memset(t, 0, sizeof *t);
    if (ss->prefix_len == 0 && a[1].len > 0 && a[1].len <= RLT_KEY_MAX) {
        t->key = a[1].ptr;
        t->klen = a[1].len;
    } else if (rlt__session_key(ss, a[1].ptr, a[1].len, kbuf, &t->klen) == RLT_OK) {
        t->key = kbuf;
    } else {
        store_error(s, o, RLT_EKEYLEN);
        return RLT_EKEYLEN;
    }
    char ck[64]; /* each argument <= 20 bytes: get_i64 checked */
    size_t cl = 0;
    for (int i = 2; i <= 4; i++) {
        memcpy(ck + cl, a[i].ptr, a[i].len);
        cl += a[i].len;
        ck[cl++] = ' ';
    }
    rlt__asker who;
    rlt__session_asker(ss, now, &who);
    t->policy_id = rlt__srv_cached_id(s, ck, cl, &who);
    if (t->policy_id < 0) {
        rlt_policy p;
        int st = rlt_policy_init(&p, RLT_GCRA, count, period * RLT_NS_PER_S, burst + 1, 0, 0);
        if (st != RLT_OK) {
            rlt__resp_errorf(o, "ERR invalid rate: %s", rlt_strerror(st));
            return st;
        }
        char err[256];
        st = rlt__srv_intern_cached(s, ck, cl, &p, &who, &t->policy_id, err, sizeof err);
        if (st != RLT_OK) {
            rlt__resp_errorf(o, "ERR %s", err);
            return st;
        }
    }
    *burst1 = burst + 1;
    return RLT_OK;
}

/* CL.THROTTLE, RL.CHECK and RL.PEEK: parsed once, then staged or decided at once. */
static void cmd_decide(rlt__srv *s, rlt__session *ss, rlt__pipe *p, const rlt__resp_arg *a,
                       size_t n, rlt_ns now, rlt__obuf *o, bool throttle, bool peek)
{
    char kbuf[RLT_KEY_MAX];
    rlt__target t;
    int64_t cost, burst1 = 0;
    rlt__obuf eo = {0}; /* an error reply waits for the staged replies before it */
    int st = throttle ? parse_throttle(s, ss, a, n, now, kbuf, &t, &cost, &burst1, &eo)
                      : parse_check(s, ss, a, n, peek, now, kbuf, &t, &cost, &eo);
    if (st != RLT_OK) {
        if (p != NULL) rlt__pipe_flush(p, s);
        rlt__obuf_put(o, eo.data, eo.len);
        rlt__obuf_free(&eo);
        count_error(s);
        return;
    }
    rlt__pipe_reply r = {.out = o, .fn = throttle ? reply_throttle : reply_check, .arg = burst1};
    if (p != NULL) return rlt__pipe_add(p, s, now, &t, cost, &r);
    rlt_decision d;
    st = rlt__decide(s, t.policy_id, t.shadow, t.key, t.klen, now, cost, &d);
    r.fn(s, &r, t.policy_id, cost, now, st, &d);
}

/* ---- the other commands -------------------------------------------------------------- */

/* RL.MULTI key policy cost [key policy cost ...]: all-or-nothing. */
static void cmd_multi(rlt__srv *s, rlt__session *ss, rlt__scratch *sc, const rlt__resp_arg *a,
                      size_t n, rlt_ns now, rlt__obuf *o)
{
    enum { MAX_CHECKS = 16 };
    if (n < 4 || (n - 1) % 3 != 0) return err_arity(o, &a[0]);
    size_t m = (n - 1) / 3;
    if (m > MAX_CHECKS) return rlt__resp_error(o, "ERR at most 16 limits per RL.MULTI");
    char(*keys)[RLT_KEY_MAX] = rlt__scratch_alloc(sc, m * RLT_KEY_MAX);
    if (keys == NULL) return rlt__resp_error(o, "ERR out of scratch space for the keys");
    rlt_check checks[MAX_CHECKS];
    for (size_t i = 0; i < m; i++) {
        const rlt__resp_arg *t = &a[1 + 3 * i];
        int64_t cost;
        if (!get_i64(&t[2], &cost) || cost < 0)
            return rlt__resp_error(o, "ERR cost must be an integer >= 0");
        rlt__target tg;
        if (target(s, ss, &t[0], &t[1], false, now, keys[i], &tg, o) != RLT_OK) return;
        checks[i] =
            (rlt_check){.policy = tg.policy_id, .key = tg.key, .klen = tg.klen, .cost = cost};
    }
    rlt_decision d;
    int refused = -1;
    int st = rlt__decide_multi(s, checks, m, now, &d, &refused);
    if (st == RLT_EINVAL) return rlt__resp_error(o, "ERR RL.MULTI takes no concurrency policy");
    if (st == RLT_ERANGE) {
        /* Name the limit whose rate cannot work at all; else a cost is too large. */
        char buf[160];
        for (size_t i = 0; i < m; i++) {
            const char *msg = rlt__decide_strerror(s, checks[i].policy, now, st, buf, sizeof buf);
            if (strncmp(msg, "rate", 4) == 0)
                return rlt__resp_errorf(o, "ERR limit %zu: %s", i + 1, msg);
        }
        return rlt__resp_error(o, "ERR cost out of range for the policy of one of the limits");
    }
    if (st != RLT_OK) return store_error(s, o, st);
    int64_t v[7] = {d.allowed ? 1 : 0,
                    d.limit,
                    d.remaining,
                    d.allowed ? 0 : rlt_retry_after_ms(d.retry_after),
                    rlt_retry_after_ms(d.reset_after),
                    rlt_retry_after_ms(d.delay),
                    refused};
    rlt__resp_ints(o, v, 7);
}

typedef enum keyop { KEYOP_RESET, KEYOP_ACQUIRE, KEYOP_RELEASE } keyop;

/* RL.ACQUIRE's options after key and policy, in any order: CLASS critical|default|sheddable
 * (default: default) and RESERVE 0..100 (percent of the limit kept from each lower class;
 * without it, a CLASS takes the policy's reserve= (-1), and no CLASS none).  false after an
 * error reply. */
static bool class_options(const rlt__resp_arg *a, size_t n, rlt_class *c, int *reserve,
                          rlt__obuf *o)
{
    *c = RLT_CLASS_DEFAULT;
    *reserve = 0;
    bool has_class = false, has_reserve = false;
    for (size_t i = 3; i < n; i += 2) {
        int64_t v;
        if (i + 1 >= n) {
            rlt__resp_error(o, "ERR syntax error: CLASS and RESERVE take a value");
            return false;
        }
        if (is(&a[i], "CLASS")) {
            has_class = true;
            if (rlt_class_parse(a[i + 1].ptr, a[i + 1].len, c) != RLT_OK) {
                rlt__resp_error(o, "ERR unknown class (critical, default or sheddable)");
                return false;
            }
        } else if (is(&a[i], "RESERVE")) {
            if (!get_i64(&a[i + 1], &v) || v < 0 || v > 100) {
                rlt__resp_error(o, "ERR RESERVE must be a percentage 0..100");
                return false;
            }
            *reserve = (int)v;
            has_reserve = true;
        } else {
            rlt__resp_error(o, "ERR syntax error: RL.ACQUIRE takes CLASS and RESERVE");
            return false;
        }
    }
    if (has_class && !has_reserve) *reserve = -1;
    return true;
}

/* RL.RESET key policy / RL.RELEASE key policy lease [LATENCY d] [OUTCOME o] /
 * RL.ACQUIRE key policy [CLASS c] [RESERVE pct] */
static void cmd_keyop(rlt__srv *s, rlt__session *ss, const rlt__resp_arg *a, size_t n, rlt_ns now,
                      rlt__obuf *o, keyop op)
{
    size_t want = op == KEYOP_RELEASE ? 4 : 3;
    if (n != want && !(op != KEYOP_RESET && n > want && n <= want + 4))
        return err_arity(o, &a[0]);
    rlt_class klass = RLT_CLASS_DEFAULT;
    int reserve = 0, outcome = 0;
    rlt_ns latency = -1;
    if (op == KEYOP_ACQUIRE && !class_options(a, n, &klass, &reserve, o)) return;
    if (op == KEYOP_RELEASE && !rlt__resp_release_options(a, n, &latency, &outcome, o)) return;
    char kbuf[RLT_KEY_MAX];
    rlt__target t;
    if (target(s, ss, &a[1], &a[2], false, now, kbuf, &t, o) != RLT_OK) return;
    int id = t.policy_id;
    const char *key = t.key;
    size_t klen = t.klen;
    if (op == KEYOP_RESET) {
        int st = rlt__decide_reset(s, id, key, klen);
        if (st != RLT_OK) return decide_error(s, id, now, o, st);
        return rlt__resp_int(o, 1);
    }
    if (op == KEYOP_ACQUIRE) {
        rlt_policy p;
        if (rlt__registry_policy(&s->reg, id, &p) != RLT_OK || p.algo != RLT_CONCURRENCY)
            return rlt__resp_error(o, "ERR RL.ACQUIRE needs a concurrency policy "
                                      "(e.g. concurrency:10/30s)");
        rlt_decision d;
        int st = rlt__decide_class(s, id, false, key, klen, now, 1, klass, reserve, &d);
        if (st == RLT_EBACKEND) /* a backend failure is a decision: this is no class support */
            return rlt__resp_error(o, "ERR CLASS with RESERVE needs the local store "
                                      "(not Redis mode)");
        if (st != RLT_OK) return decide_error(s, id, now, o, st);
        rlt__resp_array(o, 5);
        rlt__resp_int(o, d.allowed ? 1 : 0);
        rlt__resp_int(o, d.limit);
        rlt__resp_int(o, d.remaining);
        rlt__resp_int(o, d.allowed ? 0 : rlt_retry_after_ms(d.retry_after));
        rlt__resp_int(o, d.allowed ? d.lease : 0);
        return;
    }
    int64_t lease;
    if (!get_i64(&a[3], &lease) || lease <= 0)
        return rlt__resp_error(o, "ERR lease must be an integer > 0");
    int st = rlt__decide_release(s, id, key, klen, now, lease, latency, outcome);
    if (st == RLT_ENOENT) return rlt__resp_int(o, 0);
    rlt_policy p;
    if (st == RLT_EINVAL && rlt__registry_policy(&s->reg, id, &p) == RLT_OK &&
        p.algo != RLT_CONCURRENCY)
        return rlt__resp_error(o, "ERR RL.RELEASE needs a concurrency policy "
                                  "(e.g. concurrency:10/30s)");
    if (st != RLT_OK) return decide_error(s, id, now, o, st);
    rlt__resp_int(o, 1);
}

/* RL.TIER key tier: assigns a tier to a key. */
static void cmd_tier(rlt__srv *s, rlt__session *ss, const rlt__resp_arg *a, size_t n, rlt__obuf *o)
{
    if (n != 3) return err_arity(o, &a[0]);
    char key[RLT_KEY_MAX], tier[RLT_NAME_MAX + 1];
    size_t klen;
    if (rlt__session_key(ss, a[1].ptr, a[1].len, key, &klen) != RLT_OK)
        return store_error(s, o, RLT_EKEYLEN);
    if (a[2].len == 0 || a[2].len > RLT_NAME_MAX) return rlt__resp_error(o, "ERR unknown tier");
    memcpy(tier, a[2].ptr, a[2].len);
    tier[a[2].len] = '\0';
    int st = rlt__registry_assign_tier(&s->reg, key, klen, tier);
    if (st == RLT_ENOENT || st == RLT_EINVAL) return rlt__resp_error(o, "ERR unknown tier");
    if (st == RLT_EFULL)
        return rlt__resp_error(o, "ERR too many tier assignments: they are bounded like keys "
                                  "(max_keys, max_memory); a key's assignment leaves with it");
    if (st != RLT_OK) return store_error(s, o, st);
    rlt__resp_simple(o, "OK");
}

/* ---- charge after the response: RL.RESERVE and RL.SETTLE ------------------------------ */

/* Longest settle timeout a client may ask for: a day (the table is bounded either way). */
#define RESERVE_TIMEOUT_MAX_MS INT64_C(86400000)

/* The reply for a failed RL.RESERVE / RL.SETTLE. */
static void reserve_error(rlt__srv *s, int id, rlt_ns now, rlt__obuf *o, int st, bool settle)
{
    char buf[160];
    rlt__resp_errorf(o, "ERR %s",
                     rlt__decide_reserve_strerror(s, id, now, st, settle, buf, sizeof buf));
}

/* RL.RESERVE key policy estimate [TIMEOUT ms]: [allowed, limit, remaining, retry_after_ms,
 * reset_after_ms, reservation] with the reservation's id as 16 hex digits, nil when denied
 * (an estimate of 0 charges nothing and always gets one). */
static void cmd_reserve(rlt__srv *s, rlt__session *ss, const rlt__resp_arg *a, size_t n, rlt_ns now,
                        rlt__obuf *o)
{
    if (n != 4 && n != 6) return err_arity(o, &a[0]);
    int64_t estimate, timeout_ms = 0;
    if (!get_i64(&a[3], &estimate) || estimate < 0)
        return rlt__resp_error(o, "ERR estimate must be an integer >= 0");
    if (n == 6 && (!is(&a[4], "TIMEOUT") || !get_i64(&a[5], &timeout_ms) || timeout_ms < 1 ||
                   timeout_ms > RESERVE_TIMEOUT_MAX_MS))
        return rlt__resp_error(o, "ERR syntax: RL.RESERVE key policy estimate [TIMEOUT ms] "
                                  "with 1 <= ms <= 86400000");
    char terr[120];
    rlt_ns timeout = rlt__decide_reserve_timeout(s, timeout_ms, terr, sizeof terr);
    if (timeout < 0) return rlt__resp_errorf(o, "ERR %s", terr);
    char kbuf[RLT_KEY_MAX];
    rlt__target t;
    if (target(s, ss, &a[1], &a[2], true, now, kbuf, &t, o) != RLT_OK) return;
    rlt_decision d;
    uint64_t rid;
    int st = rlt__decide_reserve(s, rlt__session_holder(ss), t.policy_id, t.shadow, t.key, t.klen,
                                 now, estimate, timeout, &d, &rid);
    if (st != RLT_OK) return reserve_error(s, t.policy_id, now, o, st, false);
    int64_t v[5] = {d.allowed ? 1 : 0, d.limit, d.remaining,
                    d.allowed ? 0 : rlt_retry_after_ms(d.retry_after),
                    rlt_retry_after_ms(d.reset_after)};
    rlt__resp_array(o, 6);
    for (int i = 0; i < 5; i++)
        rlt__resp_int(o, v[i]);
    if (rid == 0) return rlt__resp_null(o);
    char hex[RLT__RESERVATION_HEX + 1];
    rlt__reservation_format(rid, hex);
    rlt__resp_bulk(o, hex, RLT__RESERVATION_HEX);
}

/* RL.SETTLE key policy reservation real_cost: [allowed, limit, remaining, retry_after_ms,
 * reset_after_ms] of a cost-1 request after the settle (a peek). */
static void cmd_settle(rlt__srv *s, rlt__session *ss, const rlt__resp_arg *a, size_t n, rlt_ns now,
                       rlt__obuf *o)
{
    if (n != 5) return err_arity(o, &a[0]);
    uint64_t rid;
    int64_t real;
    if (!rlt__reservation_parse(a[3].ptr, a[3].len, &rid))
        return rlt__resp_error(o, "ERR reservation must be the id RL.RESERVE returned "
                                  "(1 to 16 hex digits)");
    if (!get_i64(&a[4], &real) || real < 0)
        return rlt__resp_error(o, "ERR real_cost must be an integer >= 0");
    char kbuf[RLT_KEY_MAX];
    rlt__target t;
    if (target(s, ss, &a[1], &a[2], true, now, kbuf, &t, o) != RLT_OK) return;
    rlt_decision d;
    int st = rlt__decide_settle(s, t.policy_id, t.key, t.klen, now, rid, real, &d);
    if (st != RLT_OK) return reserve_error(s, t.policy_id, now, o, st, true);
    int64_t v[5] = {d.allowed ? 1 : 0, d.limit, d.remaining,
                    d.allowed ? 0 : rlt_retry_after_ms(d.retry_after),
                    rlt_retry_after_ms(d.reset_after)};
    rlt__resp_ints(o, v, 5);
}

/* Every command but the three deciding ones. */
static void exec_other(rlt__srv *s, rlt__session *ss, rlt__scratch *sc, const rlt__resp_arg *a,
                       size_t n, rlt_ns now, rlt__obuf *o)
{
    const rlt__resp_arg *c = &a[0];
    if (is(c, "RL.MULTI")) return cmd_multi(s, ss, sc, a, n, now, o);
    if (is(c, "RL.RESET")) return cmd_keyop(s, ss, a, n, now, o, KEYOP_RESET);
    if (is(c, "RL.ACQUIRE")) return cmd_keyop(s, ss, a, n, now, o, KEYOP_ACQUIRE);
    if (is(c, "RL.RELEASE")) return cmd_keyop(s, ss, a, n, now, o, KEYOP_RELEASE);
    if (is(c, "RL.TIER")) return cmd_tier(s, ss, a, n, o);
    if (is(c, "RL.RESERVE")) return cmd_reserve(s, ss, a, n, now, o);
    if (is(c, "RL.SETTLE")) return cmd_settle(s, ss, a, n, now, o);
    if (rlt__cmd_limits(s, ss, sc, a, n, now, o)) return;
    if (is(c, "RL.POLICY")) {
        if (n != 2) return err_arity(o, c);
        bool shadow;
        int id;
        char err[256], text[256];
        rlt__asker who;
        rlt__session_asker(ss, now, &who);
        if (rlt__srv_resolve(s, a[1].ptr, a[1].len, &who, &id, &shadow, err, sizeof err) != RLT_OK)
            return rlt__resp_errorf(o, "ERR %s", err);
        rlt_policy p;
        if (rlt__registry_policy(&s->reg, id, &p) != RLT_OK ||
            rlt_policy_format(&p, text, sizeof text) < 0)
            return rlt__resp_error(o, "ERR unknown policy");
        return rlt__resp_bulk(o, text, strlen(text));
    }
    if (rlt__cmd_connection(s, ss, a, n, o)) return;
    /* Redis quotes at most 128 bytes of the name and lists the arguments' beginnings. */
    char shown[130];
    size_t sl = 0;
    for (size_t i = 0; i < c->len && sl < 128; i++) {
        char ch = c->ptr[i];
        shown[sl++] = (ch >= 32 && ch < 127 && ch != '\'') ? ch : '?';
    }
    shown[sl] = '\0';
    rlt__resp_errorf(o, "ERR unknown command '%s', with args beginning with: ", shown);
}

/* ---- MULTI / EXEC ------------------------------------------------------------------------- */

/* Most commands and bytes one transaction may queue. */
#define MULTI_MAX_COMMANDS 1024
#define MULTI_MAX_BYTES (1u << 20)

/* Appends a command to the session's queue as [argc][len bytes]... (sizes as size_t). */
static bool queue_put(rlt__session *ss, const rlt__resp_arg *a, size_t n)
{
    if (n > RLT__RESP_DEFAULT_MAX_ARGS) return false; /* EXEC's argument vector holds that many */
    size_t need = sizeof n;
    for (size_t i = 0; i < n; i++)
        need += sizeof a[i].len + a[i].len;
    if (ss->mq_count >= MULTI_MAX_COMMANDS || ss->mq_len + need > MULTI_MAX_BYTES) return false;
    if (ss->mq_len + need > ss->mq_cap) {
        size_t cap = ss->mq_cap ? ss->mq_cap : 1024;
        while (cap < ss->mq_len + need)
            cap *= 2;
        char *q = realloc(ss->mq, cap);
        if (q == NULL) return false;
        ss->mq = q;
        ss->mq_cap = cap;
    }
    char *w = ss->mq + ss->mq_len;
    memcpy(w, &n, sizeof n);
    w += sizeof n;
    for (size_t i = 0; i < n; i++) {
        memcpy(w, &a[i].len, sizeof a[i].len);
        w += sizeof a[i].len;
        memcpy(w, a[i].ptr, a[i].len);
        w += a[i].len;
    }
    ss->mq_len += need;
    ss->mq_count++;
    return true;
}

static void multi_end(rlt__session *ss)
{
    ss->in_multi = ss->multi_abort = false;
    ss->mq_len = ss->mq_count = 0;
}

static void exec_one(rlt__srv *s, rlt__session *ss, rlt__pipe *p, rlt__scratch *sc,
                     const rlt__resp_arg *a, size_t n, rlt_ns now, rlt__obuf *o);

/* EXEC: every queued command in order, each decided at once, with no other command of this
 * worker between them (docs/server.md says what that isolation covers). */
static void cmd_exec_queue(rlt__srv *s, rlt__session *ss, rlt__scratch *sc, rlt_ns now,
                           rlt__obuf *o)
{
    if (ss->multi_abort) {
        multi_end(ss);
        return rlt__resp_error(o, "EXECABORT Transaction discarded because of previous errors.");
    }
    rlt__resp_arg *argv = rlt__scratch_alloc(sc, RLT__RESP_DEFAULT_MAX_ARGS * sizeof *argv);
    if (argv == NULL) {
        multi_end(ss);
        return rlt__resp_error(o, "EXECABORT out of scratch space for the transaction");
    }
    rlt__resp_array(o, ss->mq_count);
    const char *r = ss->mq;
    char *queue = ss->mq; /* kept apart: a queued command cannot reach the queue */
    size_t count = ss->mq_count;
    ss->mq = NULL;
    ss->mq_cap = 0;
    multi_end(ss);
    for (size_t k = 0; k < count; k++) {
        size_t n;
        memcpy(&n, r, sizeof n);
        r += sizeof n;
        for (size_t i = 0; i < n; i++) {
            size_t len;
            memcpy(&len, r, sizeof len);
            r += sizeof len;
            if (i < RLT__RESP_DEFAULT_MAX_ARGS) argv[i] = (rlt__resp_arg){.ptr = r, .len = len};
            r += len;
        }
        exec_one(s, ss, NULL, sc, argv, n, now, o); /* n <= RLT__RESP_DEFAULT_MAX_ARGS (queue_put) */
    }
    free(queue);
}

/* MULTI, EXEC, DISCARD and WATCH, and queueing inside a transaction.  Returns true when it
 * answered the command. */
static bool transaction(rlt__srv *s, rlt__session *ss, rlt__scratch *sc, const rlt__resp_arg *a,
                        size_t n, rlt_ns now, rlt__obuf *o)
{
    const rlt__resp_arg *c = &a[0];
    if (is(c, "WATCH") || is(c, "UNWATCH")) {
        if (is(c, "UNWATCH"))
            rlt__resp_simple(o, "OK");
        else
            rlt__resp_error(o, "ERR WATCH is not supported: ratelimitd has no keys to watch (for "
                               "all-or-nothing checks use RL.MULTI)");
        return true;
    }
    if (is(c, "MULTI")) {
        if (ss->in_multi)
            rlt__resp_error(o, "ERR MULTI calls can not be nested");
        else {
            ss->in_multi = true;
            rlt__resp_simple(o, "OK");
        }
        return true;
    }
    if (is(c, "EXEC") || is(c, "DISCARD")) {
        if (!ss->in_multi)
            rlt__resp_errorf(o, "ERR %s without MULTI", is(c, "EXEC") ? "EXEC" : "DISCARD");
        else if (is(c, "EXEC"))
            cmd_exec_queue(s, ss, sc, now, o);
        else {
            multi_end(ss);
            rlt__resp_simple(o, "OK");
        }
        return true;
    }
    if (!ss->in_multi || is(c, "QUIT")) return false;
    if (!queue_put(ss, a, n)) {
        ss->multi_abort = true;
        rlt__resp_error(o, "ERR MULTI queue too long (at most 1024 commands, 1 MiB, 1024 "
                           "arguments a command)");
    } else {
        rlt__resp_simple(o, "QUEUED");
    }
    return true;
}

static void exec_body(rlt__srv *s, rlt__session *ss, rlt__pipe *p, rlt__scratch *sc,
                      const rlt__resp_arg *a, size_t n, rlt_ns now, rlt__obuf *o)
{
    const rlt__resp_arg *c = &a[0];
    if (rlt__session_refresh(s, ss) != RLT__AUTH_NONE && !ss->in_multi) {
        if (is(c, "CL.THROTTLE")) return cmd_decide(s, ss, p, a, n, now, o, true, false);
        if (is(c, "RL.CHECK")) return cmd_decide(s, ss, p, a, n, now, o, false, false);
        if (is(c, "RL.PEEK")) return cmd_decide(s, ss, p, a, n, now, o, false, true);
    }
    /* Replies in order: what is staged is answered before this command. */
    if (p != NULL) rlt__pipe_flush(p, s);
    size_t before = o->len;
    if (is(c, "AUTH") || is(c, "HELLO")) {
        rlt__cmd_connection(s, ss, a, n, o);
    } else if (is(c, "QUIT")) {
        ss->close = true;
        rlt__resp_simple(o, "OK");
    } else if (ss->auth == RLT__AUTH_NONE) {
        rlt__resp_error(o, "NOAUTH Authentication required.");
    } else if (!transaction(s, ss, sc, a, n, now, o)) {
        exec_other(s, ss, sc, a, n, now, o);
    }
    if (o->len > before && o->data[before] == '-') count_error(s);
}

/* One command with the scratch it took released after it (EXEC's commands nest inside). */
static void exec_one(rlt__srv *s, rlt__session *ss, rlt__pipe *p, rlt__scratch *sc,
                     const rlt__resp_arg *a, size_t n, rlt_ns now, rlt__obuf *o)
{
    size_t mark = rlt__scratch_mark(sc);
    exec_body(s, ss, p, sc, a, n, now, o);
    rlt__scratch_release(sc, mark);
}

void rlt__cmd_exec(rlt__srv *s, rlt__session *ss, rlt__pipe *p, rlt__scratch *sc,
                   const rlt__resp_arg *a, size_t n, rlt_ns now, rlt__obuf *o)
{
    assert(n >= 1);
    exec_one(s, ss, p, sc, a, n, now, o);
}
