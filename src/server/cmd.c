/* RESP commands: the RL.* family, redis-cell's CL.THROTTLE, and the connection commands every
 * Redis client or tool sends (PING, AUTH, HELLO, CLIENT, COMMAND, INFO, QUIT, ...).  Pure
 * functions of (server, session, arguments, now) that append a reply: no sockets here. */
#include "server/cmd.h"

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
    return rlt__resp_parse_i64(a->ptr, a->len, v);
}

/* Milliseconds, rounded up (a client that waits this long is then allowed); -1 stays -1. */
static int64_t ceil_ms(rlt_ns ns)
{
    if (ns < 0) return -1;
    return ns / RLT_NS_PER_MS + (ns % RLT_NS_PER_MS != 0);
}

static int64_t ceil_s(rlt_ns ns)
{
    if (ns < 0) return -1;
    return ns / RLT_NS_PER_S + (ns % RLT_NS_PER_S != 0);
}

int rlt__make_key(const char *prefix, size_t plen, const char *key, size_t klen, char *buf)
{
    if (klen == 0 || plen + klen > RLT_KEY_MAX) return -1;
    memcpy(buf, prefix, plen);
    memcpy(buf + plen, key, klen);
    return (int)(plen + klen);
}

/* The error reply for status `st` of a decision on policy `id` (-1: none yet) at `now`. */
static void decide_error(rlt__srv *s, int id, rlt_ns now, rlt__obuf *o, int st)
{
    char buf[128];
    rlt__resp_errorf(o, "ERR %s", rlt__decide_strerror(s, id, now, st, buf, sizeof buf));
}

static void store_error(rlt__srv *s, rlt__obuf *o, int st)
{
    decide_error(s, -1, 0, o, st);
}

int rlt__auth_check(rlt__srv *s, const char *user, size_t ulen, const char *pw, size_t plen,
                    char *prefix, size_t *prefix_len)
{
    rlt__config *c = rlt__srv_config(s);
    bool default_user = user == NULL || (ulen == 7 && memcmp(user, "default", 7) == 0);
    /* Compare without an early exit on the first differing byte. */
    const char *admin = c->set.password;
    size_t al = strlen(admin);
    if (default_user && al > 0 && al == plen) {
        unsigned char diff = 0;
        for (size_t i = 0; i < al; i++)
            diff |= (unsigned char)(admin[i] ^ pw[i]);
        if (diff == 0) {
            *prefix_len = 0;
            return 1;
        }
    }
    for (size_t t = 0; t < c->ntenants; t++) {
        const rlt__tenant *tn = &c->tenants[t];
        if (!default_user && !(strlen(tn->name) == ulen && memcmp(tn->name, user, ulen) == 0))
            continue;
        size_t tl = strlen(tn->password);
        if (tl != plen) continue;
        unsigned char diff = 0;
        for (size_t i = 0; i < tl; i++)
            diff |= (unsigned char)(tn->password[i] ^ pw[i]);
        if (diff == 0) {
            size_t pl = strlen(tn->prefix);
            memcpy(prefix, tn->prefix, pl);
            *prefix_len = pl;
            return 2;
        }
    }
    return 0;
}

void rlt__session_init(rlt__srv *s, rlt__session *ss)
{
    rlt__config *c = rlt__srv_config(s);
    memset(ss, 0, sizeof *ss);
    ss->authed = c->set.password[0] == '\0' && c->ntenants == 0;
}

static void reply_decision(rlt__obuf *o, const rlt_decision *d)
{
    int64_t v[6] = {d->allowed ? 1 : 0,
                    d->limit,
                    d->remaining,
                    d->allowed ? 0 : ceil_ms(d->retry_after),
                    ceil_ms(d->reset_after),
                    ceil_ms(d->delay)};
    rlt__resp_ints(o, v, 6);
}

/* CL.THROTTLE's reply; `burst1` is max_burst + 1. */
static void reply_throttle(rlt__obuf *o, int64_t burst1, int64_t qty, const rlt_decision *d)
{
    /* redis-cell: a quantity of 0 only peeks and is never limited. */
    bool limited = qty > 0 && !d->allowed;
    int64_t v[5] = {limited ? 1 : 0, burst1, d->remaining, limited ? ceil_s(d->retry_after) : -1,
                    ceil_s(d->reset_after)};
    rlt__resp_ints(o, v, 5);
}

/* Resolves (key, policy) arguments with the tenant prefix.  Returns the policy id, or -1
 * after writing an error.  A policy "@tier" sets *tier instead (id -2). */
static int target(rlt__srv *s, rlt__session *ss, const rlt__resp_arg *key, const rlt__resp_arg *pol,
                  char *kbuf, int *klen, bool *shadow, char *tier, rlt__obuf *o)
{
    *klen = rlt__make_key(ss->prefix, ss->prefix_len, key->ptr, key->len, kbuf);
    if (*klen < 0) {
        store_error(s, o, RLT_EKEYLEN);
        return -1;
    }
    if (tier != NULL && pol->len > 1 && pol->ptr[0] == '@') {
        if (pol->len - 1 > RLT_NAME_MAX) {
            rlt__resp_error(o, "ERR tier name too long");
            return -1;
        }
        memcpy(tier, pol->ptr + 1, pol->len - 1);
        tier[pol->len - 1] = '\0';
        return -2;
    }
    char err[256];
    int id = rlt__srv_resolve(s, pol->ptr, pol->len, shadow, err, sizeof err);
    if (id < 0) rlt__resp_errorf(o, "ERR %s", err);
    return id;
}

/* RL.CHECK key policy [cost] / RL.PEEK key policy */
static void cmd_check(rlt__srv *s, rlt__session *ss, const rlt__resp_arg *a, size_t n, rlt_ns now,
                      rlt__obuf *o, bool peek)
{
    if (n < 3 || n > (peek ? 3u : 4u)) return err_arity(o, &a[0]);
    int64_t cost = peek ? 0 : 1;
    if (n == 4 && (!get_i64(&a[3], &cost) || cost < 0))
        return rlt__resp_error(o, "ERR cost must be an integer >= 0");
    char key[RLT_KEY_MAX], tier[RLT_NAME_MAX + 1];
    int klen;
    bool shadow = false;
    int id = target(s, ss, &a[1], &a[2], key, &klen, &shadow, tier, o);
    if (id == -1) return;
    rlt_decision d;
    int st = id == -2 ? rlt__decide_tier(s, tier, key, (size_t)klen, now, cost, &d)
                      : rlt__decide(s, id, shadow, key, (size_t)klen, now, cost, &d);
    if (st == RLT_ENOENT && id == -2) return rlt__resp_error(o, "ERR unknown tier");
    if (st != RLT_OK) return decide_error(s, id, now, o, st);
    reply_decision(o, &d);
}

/* RL.MULTI key policy cost [key policy cost ...]: all-or-nothing. */
static void cmd_multi(rlt__srv *s, rlt__session *ss, const rlt__resp_arg *a, size_t n, rlt_ns now,
                      rlt__obuf *o)
{
    enum { MAX_CHECKS = 16 };
    if (n < 4 || (n - 1) % 3 != 0) return err_arity(o, &a[0]);
    size_t m = (n - 1) / 3;
    if (m > MAX_CHECKS) return rlt__resp_error(o, "ERR at most 16 limits per RL.MULTI");
    static __thread char keys[MAX_CHECKS][RLT_KEY_MAX];
    rlt_check checks[MAX_CHECKS];
    for (size_t i = 0; i < m; i++) {
        const rlt__resp_arg *t = &a[1 + 3 * i];
        int64_t cost;
        if (!get_i64(&t[2], &cost) || cost < 0)
            return rlt__resp_error(o, "ERR cost must be an integer >= 0");
        int klen;
        bool shadow;
        int id = target(s, ss, &t[0], &t[1], keys[i], &klen, &shadow, NULL, o);
        if (id < 0) return;
        checks[i] = (rlt_check){.policy = id, .key = keys[i], .klen = (size_t)klen, .cost = cost};
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
                    d.allowed ? 0 : ceil_ms(d.retry_after),
                    ceil_ms(d.reset_after),
                    ceil_ms(d.delay),
                    refused};
    rlt__resp_ints(o, v, 7);
}

/* RL.RESET key policy / RL.RELEASE key policy lease / RL.ACQUIRE key policy */
static void cmd_keyop(rlt__srv *s, rlt__session *ss, const rlt__resp_arg *a, size_t n, rlt_ns now,
                      rlt__obuf *o, int op)
{
    size_t want = op == 2 ? 4 : 3;
    if (n != want) return err_arity(o, &a[0]);
    char key[RLT_KEY_MAX];
    int klen;
    bool shadow;
    int id = target(s, ss, &a[1], &a[2], key, &klen, &shadow, NULL, o);
    if (id < 0) return;
    if (op == 0) {
        int st = rlt__decide_reset(s, id, key, (size_t)klen);
        if (st != RLT_OK) return decide_error(s, id, now, o, st);
        return rlt__resp_int(o, 1);
    }
    if (op == 1) { /* acquire */
        rlt_policy p;
        if (rlt_store_get_policy(s->store, id, &p) != RLT_OK || p.algo != RLT_CONCURRENCY)
            return rlt__resp_error(o, "ERR RL.ACQUIRE needs a concurrency policy "
                                      "(e.g. concurrency:10/30s)");
        rlt_decision d;
        int st = rlt__decide(s, id, false, key, (size_t)klen, now, 1, &d);
        if (st != RLT_OK) return decide_error(s, id, now, o, st);
        rlt__resp_array(o, 5);
        rlt__resp_int(o, d.allowed ? 1 : 0);
        rlt__resp_int(o, d.limit);
        rlt__resp_int(o, d.remaining);
        rlt__resp_int(o, d.allowed ? 0 : ceil_ms(d.retry_after));
        rlt__resp_int(o, d.allowed ? d.lease : 0);
        return;
    }
    int64_t lease;
    if (!get_i64(&a[3], &lease) || lease <= 0)
        return rlt__resp_error(o, "ERR lease must be an integer > 0");
    int st = rlt__decide_release(s, id, key, (size_t)klen, now, lease);
    if (st == RLT_ENOENT) return rlt__resp_int(o, 0);
    rlt_policy p;
    if (st == RLT_EINVAL && rlt_store_get_policy(s->store, id, &p) == RLT_OK &&
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
    int klen = rlt__make_key(ss->prefix, ss->prefix_len, a[1].ptr, a[1].len, key);
    if (klen < 0) return store_error(s, o, RLT_EKEYLEN);
    if (a[2].len == 0 || a[2].len > RLT_NAME_MAX) return rlt__resp_error(o, "ERR unknown tier");
    memcpy(tier, a[2].ptr, a[2].len);
    tier[a[2].len] = '\0';
    int st = rlt_store_assign_tier(s->store, key, (size_t)klen, tier);
    if (st == RLT_ENOENT || st == RLT_EINVAL) return rlt__resp_error(o, "ERR unknown tier");
    if (st != RLT_OK) return store_error(s, o, st);
    rlt__resp_simple(o, "OK");
}

/* CL.THROTTLE key max_burst count period [quantity], as redis-cell. */
static void cmd_throttle(rlt__srv *s, rlt__session *ss, const rlt__resp_arg *a, size_t n,
                         rlt_ns now, rlt__obuf *o)
{
    if (n != 5 && n != 6) return err_arity(o, &a[0]);
    int64_t burst, count, period, qty = 1;
    if (!get_i64(&a[2], &burst) || !get_i64(&a[3], &count) || !get_i64(&a[4], &period) ||
        (n == 6 && !get_i64(&a[5], &qty)))
        return rlt__resp_error(o, "ERR value is not an integer or out of range");
    if (burst < 0 || burst >= INT32_MAX)
        return rlt__resp_error(o, "ERR max_burst must be >= 0 and < 2147483647");
    if (count <= 0) return rlt__resp_error(o, "ERR count must be > 0");
    if (period <= 0 || period > INT64_MAX / RLT_NS_PER_S)
        return rlt__resp_error(o, "ERR period must be > 0 seconds and fit in int64 ns");
    if (qty < 0) return rlt__resp_error(o, "ERR quantity must be >= 0");
    char key[RLT_KEY_MAX];
    int klen = rlt__make_key(ss->prefix, ss->prefix_len, a[1].ptr, a[1].len, key);
    if (klen < 0) return store_error(s, o, RLT_EKEYLEN);

    /* The policy cache key: the raw numeric arguments (they determine the policy). */
    char ck[80];
    size_t cl = 0;
    for (int i = 2; i <= 4; i++) {
        memcpy(ck + cl, a[i].ptr, a[i].len); /* each <= 20 bytes: parse_i64 checked */
        cl += a[i].len;
        ck[cl++] = ' ';
    }
    int id = rlt__srv_cached_id(s, ck, cl);
    if (id < 0) {
        rlt_policy p;
        int st = rlt_policy_init(&p, RLT_GCRA, count, period * RLT_NS_PER_S, burst + 1, 0, 0);
        if (st != RLT_OK) return rlt__resp_errorf(o, "ERR invalid rate: %s", rlt_strerror(st));
        char err[256];
        id = rlt__srv_intern_cached(s, ck, cl, &p, err, sizeof err);
        if (id < 0) return rlt__resp_errorf(o, "ERR %s", err);
    }
    rlt_decision d;
    int st = rlt__decide(s, id, false, key, (size_t)klen, now, qty, &d);
    if (st != RLT_OK) return decide_error(s, id, now, o, st);
    reply_throttle(o, burst + 1, qty, &d);
}

static void cmd_auth(rlt__srv *s, rlt__session *ss, const rlt__resp_arg *user,
                     const rlt__resp_arg *pw, rlt__obuf *o, bool reply_ok)
{
    rlt__config *c = rlt__srv_config(s);
    if (c->set.password[0] == '\0' && c->ntenants == 0) {
        rlt__resp_error(o, "ERR AUTH <password> called without any password configured for "
                           "the default user. Are you sure your configuration is correct?");
        return;
    }
    char prefix[RLT__STR_MAX];
    size_t pl = 0;
    int r = rlt__auth_check(s, user ? user->ptr : NULL, user ? user->len : 0, pw->ptr, pw->len,
                            prefix, &pl);
    if (r == 0) {
        ss->authed = false;
        rlt__resp_error(o, "WRONGPASS invalid username-password pair or user is disabled.");
        return;
    }
    ss->authed = true;
    memcpy(ss->prefix, prefix, pl);
    ss->prefix_len = pl;
    if (reply_ok) rlt__resp_simple(o, "OK");
}

static void cmd_hello(rlt__srv *s, rlt__session *ss, const rlt__resp_arg *a, size_t n, rlt__obuf *o)
{
    size_t i = 1;
    if (n >= 2) {
        int64_t v;
        if (!get_i64(&a[1], &v))
            return rlt__resp_error(o, "ERR Protocol version is not an integer or out of range");
        if (v != 2) return rlt__resp_error(o, "NOPROTO unsupported protocol version");
        i = 2;
    }
    while (i < n) {
        if (is(&a[i], "AUTH") && i + 2 < n) {
            size_t before = o->len;
            cmd_auth(s, ss, &a[i + 1], &a[i + 2], o, false);
            if (o->len != before) return; /* an error was written */
            i += 3;
        } else if (is(&a[i], "SETNAME") && i + 1 < n) {
            i += 2;
        } else {
            return rlt__resp_errorf(o, "ERR Syntax error in HELLO option '%.*s'",
                                    (int)(a[i].len > 32 ? 32 : a[i].len), a[i].ptr);
        }
    }
    if (!ss->authed) return rlt__resp_error(o, "NOAUTH HELLO must be called with AUTH");
    rlt__resp_array(o, 14);
    rlt__resp_bulk(o, "server", 6);
    rlt__resp_bulk(o, "ratelimitd", 10);
    rlt__resp_bulk(o, "version", 7);
    rlt__resp_bulk(o, "7.0.0", 5);
    rlt__resp_bulk(o, "proto", 5);
    rlt__resp_int(o, 2);
    rlt__resp_bulk(o, "id", 2);
    rlt__resp_int(o, 1);
    rlt__resp_bulk(o, "mode", 4);
    rlt__resp_bulk(o, "standalone", 10);
    rlt__resp_bulk(o, "role", 4);
    rlt__resp_bulk(o, "master", 6);
    rlt__resp_bulk(o, "modules", 7);
    rlt__resp_array(o, 0);
}

void rlt__cmd_exec(rlt__srv *s, rlt__session *ss, const rlt__resp_arg *a, size_t n, rlt_ns now,
                   rlt__obuf *o)
{
    if (n == 0) return;
    const rlt__resp_arg *c = &a[0];
    if (is(c, "AUTH")) {
        if (n == 2) return cmd_auth(s, ss, NULL, &a[1], o, true);
        if (n == 3) return cmd_auth(s, ss, &a[1], &a[2], o, true);
        return err_arity(o, c);
    }
    if (is(c, "HELLO")) return cmd_hello(s, ss, a, n, o);
    if (is(c, "QUIT")) {
        ss->close = true;
        return rlt__resp_simple(o, "OK");
    }
    if (!ss->authed) return rlt__resp_error(o, "NOAUTH Authentication required.");

    if (is(c, "CL.THROTTLE")) return cmd_throttle(s, ss, a, n, now, o);
    if (is(c, "RL.CHECK")) return cmd_check(s, ss, a, n, now, o, false);
    if (is(c, "RL.PEEK")) return cmd_check(s, ss, a, n, now, o, true);
    if (is(c, "RL.MULTI")) return cmd_multi(s, ss, a, n, now, o);
    if (is(c, "RL.RESET")) return cmd_keyop(s, ss, a, n, now, o, 0);
    if (is(c, "RL.ACQUIRE")) return cmd_keyop(s, ss, a, n, now, o, 1);
    if (is(c, "RL.RELEASE")) return cmd_keyop(s, ss, a, n, now, o, 2);
    if (is(c, "RL.TIER")) return cmd_tier(s, ss, a, n, o);
    if (is(c, "RL.POLICY")) {
        if (n != 2) return err_arity(o, c);
        bool shadow;
        char err[256], text[256];
        int id = rlt__srv_resolve(s, a[1].ptr, a[1].len, &shadow, err, sizeof err);
        if (id < 0) return rlt__resp_errorf(o, "ERR %s", err);
        rlt_policy p;
        if (rlt_store_get_policy(s->store, id, &p) != RLT_OK ||
            rlt_policy_format(&p, text, sizeof text) < 0)
            return rlt__resp_error(o, "ERR unknown policy");
        return rlt__resp_bulk(o, text, strlen(text));
    }
    if (is(c, "PING")) {
        if (n == 1) return rlt__resp_simple(o, "PONG");
        if (n == 2) return rlt__resp_bulk(o, a[1].ptr, a[1].len);
        return err_arity(o, c);
    }
    if (is(c, "ECHO")) {
        if (n != 2) return err_arity(o, c);
        return rlt__resp_bulk(o, a[1].ptr, a[1].len);
    }
    if (is(c, "COMMAND")) {
        if (n >= 2 && is(&a[1], "COUNT")) return rlt__resp_int(o, 0);
        return rlt__resp_array(o, 0);
    }
    if (is(c, "CLIENT")) {
        if (n >= 2 && is(&a[1], "ID")) return rlt__resp_int(o, 1);
        if (n >= 2 && is(&a[1], "GETNAME")) return rlt__resp_null(o);
        return rlt__resp_simple(o, "OK");
    }
    if (is(c, "SELECT")) {
        if (n == 2 && a[1].len == 1 && a[1].ptr[0] == '0') return rlt__resp_simple(o, "OK");
        return rlt__resp_error(o, "ERR DB index is out of range");
    }
    if (is(c, "CONFIG")) {
        /* redis-benchmark asks for "save" and "appendonly" at start: answer like a Redis
         * without persistence; everything else is an empty result. */
        if (n == 3 && is(&a[1], "GET") && (is(&a[2], "SAVE") || is(&a[2], "APPENDONLY"))) {
            rlt__resp_array(o, 2);
            rlt__resp_bulk(o, a[2].ptr, a[2].len);
            return is(&a[2], "SAVE") ? rlt__resp_bulk(o, "", 0) : rlt__resp_bulk(o, "no", 2);
        }
        return rlt__resp_array(o, 0);
    }
    if (is(c, "DBSIZE")) {
        rlt_store_stats st;
        rlt_store_stats_get(s->store, &st);
        return rlt__resp_int(o, (int64_t)st.keys);
    }
    if (is(c, "INFO")) {
        rlt__obuf text = {0};
        rlt__metrics_info(s, &text);
        rlt__resp_bulk(o, text.data ? text.data : "", text.len);
        rlt__obuf_free(&text);
        return;
    }
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

/* ---- pipelines ----------------------------------------------------------------------- */

/* What a deferred command needs to be decided and answered. */
typedef struct pitem {
    rlt__obuf *out; /* where its reply goes */
    bool throttle;  /* CL.THROTTLE (else RL.CHECK / RL.PEEK) */
    int64_t burst1; /* CL.THROTTLE: max_burst + 1, for the reply */
} pitem;

/* The last policy argument resolved, by its raw bytes: a pipeline of one client, or of one
 * benchmark, names the same policy again and again, and the bytes decide the policy.  `gen`
 * ties it to a server context, `cfg` (RL.CHECK: named policies change on reload) to a
 * config; CL.THROTTLE's interned ids live as long as the context. */
#define MEMO_BYTES 96
typedef struct memo {
    uint64_t gen; /* 0 = empty (contexts count from 1) */
    const rlt__config *cfg;
    size_t len;
    char bytes[MEMO_BYTES];
    int id;
    bool shadow;
    int64_t burst1;
} memo;

struct rlt__pipe {
    size_t n;
    rlt_ns now;
    pitem it[RLT__PIPE_MAX];
    int ids[RLT__PIPE_MAX];      /* store policy ids */
    bool shadows[RLT__PIPE_MAX]; /* the named policy's shadow flag (RL.CHECK) */
    rlt_key keys[RLT__PIPE_MAX];
    int64_t costs[RLT__PIPE_MAX];
    rlt_decision out[RLT__PIPE_MAX];
    int status[RLT__PIPE_MAX];
    memo throttle_memo, check_memo;
    char kbuf[RLT__PIPE_MAX][RLT_KEY_MAX]; /* prefixed (tenant) keys */
};

rlt__pipe *rlt__pipe_new(void)
{
    return calloc(1, sizeof(rlt__pipe));
}

void rlt__pipe_free(rlt__pipe *p)
{
    free(p);
}

static bool memo_hit(const memo *m, const rlt__srv *s, const rlt__config *cfg, const char *b,
                     size_t len)
{
    return m->gen == s->gen && m->cfg == cfg && m->len == len && memcmp(m->bytes, b, len) == 0;
}

static void memo_set(memo *m, const rlt__srv *s, const rlt__config *cfg, const char *b, size_t len,
                     int id, bool shadow, int64_t burst1)
{
    if (len > MEMO_BYTES) return;
    m->gen = s->gen;
    m->cfg = cfg;
    m->len = len;
    memcpy(m->bytes, b, len);
    m->id = id;
    m->shadow = shadow;
    m->burst1 = burst1;
}

/* The key of item i: the argument's own bytes, or the tenant prefix + key in kbuf.  False
 * when it is empty or too long (the serial path answers the error). */
static bool stage_key(rlt__pipe *p, const rlt__session *ss, const rlt__resp_arg *k, size_t i)
{
    if (ss->prefix_len == 0) {
        if (k->len == 0 || k->len > RLT_KEY_MAX) return false;
        p->keys[i] = (rlt_key){.key = k->ptr, .klen = k->len};
        return true;
    }
    int kl = rlt__make_key(ss->prefix, ss->prefix_len, k->ptr, k->len, p->kbuf[i]);
    if (kl < 0) return false;
    p->keys[i] = (rlt_key){.key = p->kbuf[i], .klen = (size_t)kl};
    return true;
}

/* Stages CL.THROTTLE as item p->n; false (nothing staged) when any argument is one that
 * cmd_throttle answers with an error.  Mirrors cmd_throttle's success path. */
static bool stage_throttle(rlt__pipe *p, rlt__srv *s, const rlt__session *ss,
                           const rlt__resp_arg *a, size_t n)
{
    if (n != 5 && n != 6) return false;
    int64_t qty = 1;
    if (n == 6 && (!get_i64(&a[5], &qty) || qty < 0)) return false;
    /* The key before the policy, as cmd_throttle: a bad key interns nothing. */
    if (!stage_key(p, ss, &a[1], p->n)) return false;
    /* The memo key: the raw numeric arguments, as cmd_throttle's cache key. */
    char ck[80];
    size_t cl = 0;
    for (int i = 2; i <= 4; i++) {
        if (a[i].len > 20) return false;
        memcpy(ck + cl, a[i].ptr, a[i].len);
        cl += a[i].len;
        ck[cl++] = ' ';
    }
    memo *m = &p->throttle_memo;
    int id;
    int64_t burst1;
    if (memo_hit(m, s, NULL, ck, cl)) {
        id = m->id;
        burst1 = m->burst1;
    } else {
        int64_t burst, count, period;
        if (!get_i64(&a[2], &burst) || !get_i64(&a[3], &count) || !get_i64(&a[4], &period) ||
            burst < 0 || burst >= INT32_MAX || count <= 0 || period <= 0 ||
            period > INT64_MAX / RLT_NS_PER_S)
            return false;
        id = rlt__srv_cached_id(s, ck, cl);
        if (id < 0) {
            rlt_policy pol;
            char err[256];
            if (rlt_policy_init(&pol, RLT_GCRA, count, period * RLT_NS_PER_S, burst + 1, 0, 0) !=
                RLT_OK)
                return false;
            id = rlt__srv_intern_cached(s, ck, cl, &pol, err, sizeof err);
            if (id < 0) return false;
        }
        burst1 = burst + 1;
        memo_set(m, s, NULL, ck, cl, id, false, burst1);
    }
    p->it[p->n] = (pitem){.throttle = true, .burst1 = burst1};
    p->ids[p->n] = id;
    p->shadows[p->n] = false;
    p->costs[p->n] = qty;
    return true;
}

/* Stages RL.CHECK / RL.PEEK as item p->n; mirrors cmd_check's success path without tiers. */
static bool stage_check(rlt__pipe *p, rlt__srv *s, const rlt__session *ss, const rlt__resp_arg *a,
                        size_t n, bool peek)
{
    if (n < 3 || n > (peek ? 3u : 4u)) return false;
    int64_t cost = peek ? 0 : 1;
    if (n == 4 && (!get_i64(&a[3], &cost) || cost < 0)) return false;
    const rlt__resp_arg *pol = &a[2];
    if (pol->len > 1 && pol->ptr[0] == '@') return false; /* a tier: decided one by one */
    if (!stage_key(p, ss, &a[1], p->n)) return false;     /* before the policy, as target() */
    const rlt__config *cfg = rlt__srv_config(s);
    memo *m = &p->check_memo;
    int id;
    bool shadow;
    if (memo_hit(m, s, cfg, pol->ptr, pol->len)) {
        id = m->id;
        shadow = m->shadow;
    } else {
        char err[256];
        id = rlt__srv_resolve(s, pol->ptr, pol->len, &shadow, err, sizeof err);
        if (id < 0) return false;
        memo_set(m, s, cfg, pol->ptr, pol->len, id, shadow, 0);
    }
    p->it[p->n] = (pitem){.throttle = false, .burst1 = 0};
    p->ids[p->n] = id;
    p->shadows[p->n] = shadow;
    p->costs[p->n] = cost;
    return true;
}

void rlt__pipe_flush(rlt__pipe *p, rlt__srv *s)
{
    size_t n = p->n;
    if (n == 0) return;
    p->n = 0;
    /* The seam decides the batch (local store or Redis), counts and applies shadow mode. */
    rlt__decide_batch(s, p->ids, p->shadows, p->keys, n, p->now, p->costs, p->out, p->status);
    rlt__mslot *ms = rlt__mslot_get(&s->metrics);
    for (size_t i = 0; i < n; i++) {
        const pitem *it = &p->it[i];
        rlt__obuf *out = it->out;
        if (p->status[i] != RLT_OK) {
            decide_error(s, p->ids[i], p->now, out, p->status[i]);
            rlt__mcount(&ms->errors, 1);
            continue;
        }
        if (it->throttle)
            reply_throttle(out, it->burst1, p->costs[i], &p->out[i]);
        else
            reply_decision(out, &p->out[i]);
    }
}

void rlt__pipe_exec(rlt__pipe *p, rlt__srv *s, rlt__session *ss, const rlt__resp_arg *a, size_t n,
                    rlt_ns now, rlt__obuf *out)
{
    assert(n >= 1 && p->n < RLT__PIPE_MAX);
    if (ss->authed && (p->n == 0 || now == p->now)) {
        bool staged = false;
        if (is(&a[0], "CL.THROTTLE"))
            staged = stage_throttle(p, s, ss, a, n);
        else if (is(&a[0], "RL.CHECK"))
            staged = stage_check(p, s, ss, a, n, false);
        else if (is(&a[0], "RL.PEEK"))
            staged = stage_check(p, s, ss, a, n, true);
        if (staged) {
            p->it[p->n].out = out;
            p->now = now;
            if (++p->n == RLT__PIPE_MAX) rlt__pipe_flush(p, s);
            return;
        }
    }
    rlt__pipe_flush(p, s);
    size_t before = out->len;
    rlt__cmd_exec(s, ss, a, n, now, out);
    if (out->len > before && out->data[before] == '-') {
        rlt__mslot *ms = rlt__mslot_get(&s->metrics);
        rlt__mcount(&ms->errors, 1);
    }
}
