/* RESP connection commands: the ones every Redis client library and tool sends at connect time
 * or now and then (AUTH, HELLO, CLIENT SETNAME/SETINFO, SELECT 0, COMMAND DOCS, CONFIG GET,
 * INFO), answered the way Redis 7 answers them, so that redis-py, hiredis, node-redis and
 * ioredis work unchanged.  RESP3 (HELLO 3) changes only what RESP3 changes: maps and nulls. */
#define _GNU_SOURCE /* FNM_CASEFOLD */
#include "server/resp/cmd_conn.h"
#include "core/text.h"

#include "server/stats/metrics.h"
#include "server/request/srv.h"
#include "server/request/report.h"
#include "server/stats/top.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static bool is(const rlt__resp_arg *a, const char *name)
{
    size_t n = strlen(name);
    return a->len == n && strncasecmp(a->ptr, name, n) == 0;
}

static void err_arity(rlt__obuf *o, const rlt__resp_arg *cmd)
{
    rlt__resp_errorf(o, "ERR wrong number of arguments for '%.*s' command",
                     (int)(cmd->len > 64 ? 64 : cmd->len), cmd->ptr);
}

static void put_null(const rlt__session *ss, rlt__obuf *o)
{
    if (ss->resp == 3)
        rlt__obuf_put(o, "_\r\n", 3);
    else
        rlt__resp_null(o);
}

/* A map of n pairs: RESP3 "%n", RESP2 a flat array of 2n. */
static void put_map(const rlt__session *ss, rlt__obuf *o, size_t n)
{
    if (ss->resp == 3)
        rlt__obuf_printf(o, "%%%zu\r\n", n);
    else
        rlt__resp_array(o, 2 * n);
}

static void put_str(rlt__obuf *o, const char *z)
{
    rlt__resp_bulk(o, z, strlen(z));
}

/* ---- AUTH and HELLO ------------------------------------------------------------------------ */

/* Returns true when the session is authenticated afterwards (an error reply was written
 * otherwise). */
static bool cmd_auth(rlt__srv *s, rlt__session *ss, const rlt__resp_arg *user,
                     const rlt__resp_arg *pw, rlt__obuf *o, bool reply_ok)
{
    if (!rlt__auth_required(s)) {
        rlt__resp_error(o, "ERR AUTH <password> called without any password configured for "
                           "the default user. Are you sure your configuration is correct?");
        return false;
    }
    if (rlt__session_auth(s, ss, user ? user->ptr : NULL, user ? user->len : 0, pw->ptr,
                          pw->len) == RLT__AUTH_NONE) {
        rlt__resp_error(o, "WRONGPASS invalid username-password pair or user is disabled.");
        return false;
    }
    if (reply_ok) rlt__resp_simple(o, "OK");
    return true;
}

static void set_name(rlt__session *ss, const rlt__resp_arg *name)
{
    size_t n = name->len < sizeof ss->name - 1 ? name->len : sizeof ss->name - 1;
    memcpy(ss->name, name->ptr, n);
    ss->name[n] = '\0';
}

static bool name_ok(const rlt__resp_arg *name)
{
    for (size_t i = 0; i < name->len; i++)
        if (name->ptr[i] <= ' ' || name->ptr[i] >= 127) return false;
    return true;
}

static void cmd_hello(rlt__srv *s, rlt__session *ss, const rlt__resp_arg *a, size_t n,
                      rlt__obuf *o)
{
    size_t i = 1;
    int proto = ss->resp;
    if (n >= 2) {
        int64_t v;
        if (!rlt__parse_i64(a[1].ptr, a[1].len, &v))
            return rlt__resp_error(o, "ERR Protocol version is not an integer or out of range");
        if (v != 2 && v != 3) return rlt__resp_error(o, "NOPROTO unsupported protocol version");
        proto = (int)v;
        i = 2;
    }
    for (; i < n; i++) {
        if (is(&a[i], "AUTH") && i + 2 < n) {
            if (!cmd_auth(s, ss, &a[i + 1], &a[i + 2], o, false)) return;
            i += 2;
        } else if (is(&a[i], "SETNAME") && i + 1 < n) {
            if (!name_ok(&a[i + 1]))
                return rlt__resp_error(o, "ERR Client names cannot contain spaces, newlines or "
                                          "special characters.");
            set_name(ss, &a[++i]);
        } else {
            return rlt__resp_errorf(o, "ERR Syntax error in HELLO option '%.*s'",
                                    (int)(a[i].len > 32 ? 32 : a[i].len), a[i].ptr);
        }
    }
    if (ss->auth == RLT__AUTH_NONE)
        return rlt__resp_error(o, "NOAUTH HELLO must be called with the client already "
                                  "authenticated, otherwise the HELLO <proto> AUTH <user> <pass> "
                                  "option can be used to authenticate the client and select the "
                                  "RESP protocol version at the same time");
    ss->resp = proto;
    put_map(ss, o, 7);
    put_str(o, "server");
    put_str(o, "ratelimitd");
    put_str(o, "version");
    put_str(o, "7.0.0");
    put_str(o, "proto");
    rlt__resp_int(o, proto);
    put_str(o, "id");
    rlt__resp_int(o, (int64_t)ss->id);
    put_str(o, "mode");
    put_str(o, "standalone");
    put_str(o, "role");
    put_str(o, "master");
    put_str(o, "modules");
    rlt__resp_array(o, 0);
}

/* ---- CLIENT ------------------------------------------------------------------------------- */

static void client_line(const rlt__session *ss, rlt__obuf *o)
{
    char line[256];
    int len = snprintf(line, sizeof line,
                       "id=%llu addr=? laddr=? fd=? name=%s age=0 idle=0 flags=N db=0 sub=0 "
                       "psub=0 ssub=0 multi=%d watch=0 user=default resp=%d\n",
                       (unsigned long long)ss->id, ss->name,
                       ss->in_multi ? (int)ss->mq_count : -1, ss->resp);
    rlt__resp_bulk(o, line, (size_t)len);
}

static void cmd_client(rlt__session *ss, const rlt__resp_arg *a, size_t n, rlt__obuf *o)
{
    if (n < 2) return err_arity(o, &a[0]);
    const rlt__resp_arg *sub = &a[1];
    if (is(sub, "ID")) return rlt__resp_int(o, (int64_t)ss->id);
    if (is(sub, "GETNAME")) {
        if (ss->name[0] == '\0') return put_null(ss, o);
        return put_str(o, ss->name);
    }
    if (is(sub, "SETNAME")) {
        if (n != 3) return err_arity(o, &a[0]);
        if (!name_ok(&a[2]))
            return rlt__resp_error(o, "ERR Client names cannot contain spaces, newlines or "
                                      "special characters.");
        set_name(ss, &a[2]);
        return rlt__resp_simple(o, "OK");
    }
    if (is(sub, "INFO") || is(sub, "LIST")) return client_line(ss, o);
    /* Accepted and without effect here: library names, eviction and tracking hints. */
    if (is(sub, "SETINFO") || is(sub, "NO-EVICT") || is(sub, "NO-TOUCH"))
        return rlt__resp_simple(o, "OK");
    /* Not pretended: a client that asked for no replies would misread every later one. */
    if (is(sub, "REPLY")) return rlt__resp_error(o, "ERR CLIENT REPLY is not supported");
    rlt__resp_errorf(o, "ERR unknown subcommand '%.*s'. Try CLIENT HELP.",
                     (int)(sub->len > 32 ? 32 : sub->len), sub->ptr);
}

/* ---- COMMAND ------------------------------------------------------------------------------ */

/* The commands ratelimitd answers: name, arity (negative: at least), first/last key, step. */
static const struct cmdinfo {
    const char *name;
    int arity, first, last, step;
} commands[] = {
    {"cl.throttle", -5, 1, 1, 1}, {"rl.check", -3, 1, 1, 1},  {"rl.peek", 3, 1, 1, 1},
    {"rl.multi", -4, 1, -1, 3},   {"rl.reset", 3, 1, 1, 1},   {"rl.acquire", 3, 1, 1, 1},
    {"rl.release", 4, 1, 1, 1},   {"rl.tier", 3, 1, 1, 1},    {"rl.policy", 2, 0, 0, 0},
    {"auth", -2, 0, 0, 0},        {"hello", -1, 0, 0, 0},     {"ping", -1, 0, 0, 0},
    {"echo", 2, 0, 0, 0},         {"client", -2, 0, 0, 0},    {"select", 2, 0, 0, 0},
    {"command", -1, 0, 0, 0},     {"config", -2, 0, 0, 0},    {"info", -1, 0, 0, 0},
    {"dbsize", 1, 0, 0, 0},       {"quit", -1, 0, 0, 0},      {"multi", 1, 0, 0, 0},
    {"exec", 1, 0, 0, 0},         {"discard", 1, 0, 0, 0},    {"watch", -2, 1, -1, 1},
    {"unwatch", 1, 0, 0, 0},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void command_entry(const struct cmdinfo *c, rlt__obuf *o)
{
    rlt__resp_array(o, 6);
    put_str(o, c->name);
    rlt__resp_int(o, c->arity);
    rlt__resp_array(o, 1);
    rlt__resp_simple(o, c->first ? "write" : "fast");
    rlt__resp_int(o, c->first);
    rlt__resp_int(o, c->last);
    rlt__resp_int(o, c->step);
}

static void cmd_command(const rlt__session *ss, const rlt__resp_arg *a, size_t n, rlt__obuf *o)
{
    if (n == 1) {
        rlt__resp_array(o, NCOMMANDS);
        for (size_t i = 0; i < NCOMMANDS; i++)
            command_entry(&commands[i], o);
        return;
    }
    if (is(&a[1], "COUNT")) return rlt__resp_int(o, (int64_t)NCOMMANDS);
    if (is(&a[1], "DOCS")) return put_map(ss, o, 0); /* no hints: redis-cli works without */
    if (is(&a[1], "INFO")) {
        rlt__resp_array(o, n - 2);
        for (size_t k = 2; k < n; k++) {
            const struct cmdinfo *c = NULL;
            for (size_t i = 0; i < NCOMMANDS && c == NULL; i++)
                if (is(&a[k], commands[i].name)) c = &commands[i];
            if (c)
                command_entry(c, o);
            else
                put_null(ss, o);
        }
        return;
    }
    rlt__resp_errorf(o, "ERR unknown subcommand '%.*s'. Try COMMAND HELP.",
                     (int)(a[1].len > 32 ? 32 : a[1].len), a[1].ptr);
}

/* ---- CONFIG GET ----------------------------------------------------------------------------- */

static void cmd_config(rlt__srv *s, const rlt__session *ss, const rlt__resp_arg *a, size_t n,
                       rlt__obuf *o)
{
    if (n < 2) return err_arity(o, &a[0]);
    if (!is(&a[1], "GET"))
        return rlt__resp_error(o, "ERR ratelimitd takes no CONFIG SET/REWRITE/RESETSTAT: its "
                                  "settings come from the config file (SIGHUP reloads it)");
    if (n < 3) return err_arity(o, &a[0]);
    const rlt__settings *set = &rlt__srv_config(s)->set;
    char maxclients[24], timeout[24], port[24];
    snprintf(maxclients, sizeof maxclients, "%zu", set->max_connections);
    snprintf(timeout, sizeof timeout, "%lld", (long long)(set->idle_timeout / RLT_NS_PER_S));
    snprintf(port, sizeof port, "%d", set->port);
    /* What clients and tools probe (redis-benchmark: save, appendonly), like a Redis without
     * persistence of its own keyspace. */
    const char *params[][2] = {{"save", ""},          {"appendonly", "no"},
                               {"databases", "1"},    {"maxclients", maxclients},
                               {"timeout", timeout},  {"port", port},
                               {"cluster-enabled", "no"}};
    size_t np = sizeof params / sizeof params[0];
    bool hit[sizeof params / sizeof params[0]] = {false};
    size_t count = 0;
    for (size_t k = 2; k < n; k++) {
        char pat[128];
        size_t pl = a[k].len < sizeof pat - 1 ? a[k].len : sizeof pat - 1;
        memcpy(pat, a[k].ptr, pl);
        pat[pl] = '\0';
        for (size_t i = 0; i < np; i++)
            if (!hit[i] && fnmatch(pat, params[i][0], FNM_CASEFOLD) == 0) {
                hit[i] = true;
                count++;
            }
    }
    put_map(ss, o, count);
    for (size_t i = 0; i < np; i++)
        if (hit[i]) {
            put_str(o, params[i][0]);
            put_str(o, params[i][1]);
        }
}

/* ---- INFO ----------------------------------------------------------------------------------- */

/* INFO [section ...]: every section (no argument, "all", "everything", "default"), or the named
 * ones ("# Stats" is section "stats"). */
static void cmd_info(rlt__srv *s, const rlt__session *ss, const rlt__resp_arg *a, size_t n,
                     rlt__obuf *o)
{
    rlt__obuf text = {0};
    rlt__report_info(s, &text);
    if (s->top != NULL) rlt__report_top_info(s, ss, &text);
    bool all = n == 1;
    for (size_t k = 1; k < n; k++)
        all |= is(&a[k], "all") || is(&a[k], "everything") || is(&a[k], "default");
    if (all) {
        rlt__resp_bulk(o, text.data ? text.data : "", text.len);
        return rlt__obuf_free(&text);
    }
    rlt__obuf pick = {0};
    bool keep = false;
    for (size_t i = 0; i < text.len;) {
        const char *line = text.data + i, *end = memchr(line, '\n', text.len - i);
        size_t len = end ? (size_t)(end - line) + 1 : text.len - i;
        if (len > 2 && line[0] == '#' && line[1] == ' ') {
            keep = false;
            const char *name = line + 2;
            size_t nl = len - 2;
            while (nl > 0 && (name[nl - 1] == '\r' || name[nl - 1] == '\n'))
                nl--;
            for (size_t k = 1; k < n; k++)
                keep |= a[k].len == nl && strncasecmp(a[k].ptr, name, nl) == 0;
            if (keep && pick.len > 0) rlt__obuf_put(&pick, "\r\n", 2);
        }
        if (keep && !(len <= 2 && (line[0] == '\r' || line[0] == '\n')))
            rlt__obuf_put(&pick, line, len);
        i += len;
    }
    rlt__resp_bulk(o, pick.data ? pick.data : "", pick.len);
    rlt__obuf_free(&pick);
    rlt__obuf_free(&text);
}

bool rlt__cmd_connection(rlt__srv *s, rlt__session *ss, const rlt__resp_arg *a, size_t n,
                         rlt__obuf *o)
{
    const rlt__resp_arg *c = &a[0];
    if (is(c, "AUTH")) {
        if (n == 2)
            cmd_auth(s, ss, NULL, &a[1], o, true);
        else if (n == 3)
            cmd_auth(s, ss, &a[1], &a[2], o, true);
        else
            err_arity(o, c);
    } else if (is(c, "HELLO")) {
        cmd_hello(s, ss, a, n, o);
    } else if (is(c, "PING")) {
        if (n == 1)
            rlt__resp_simple(o, "PONG");
        else if (n == 2)
            rlt__resp_bulk(o, a[1].ptr, a[1].len);
        else
            err_arity(o, c);
    } else if (is(c, "ECHO")) {
        if (n != 2) return err_arity(o, c), true;
        rlt__resp_bulk(o, a[1].ptr, a[1].len);
    } else if (is(c, "CLIENT")) {
        cmd_client(ss, a, n, o);
    } else if (is(c, "SELECT")) {
        if (n == 2 && a[1].len == 1 && a[1].ptr[0] == '0')
            rlt__resp_simple(o, "OK");
        else
            rlt__resp_error(o, "ERR DB index is out of range");
    } else if (is(c, "COMMAND")) {
        cmd_command(ss, a, n, o);
    } else if (is(c, "CONFIG")) {
        cmd_config(s, ss, a, n, o);
    } else if (is(c, "DBSIZE")) {
        rlt_store_stats st;
        rlt__registry_stats(&s->reg, &st);
        rlt__resp_int(o, (int64_t)st.keys);
    } else if (is(c, "INFO")) {
        cmd_info(s, ss, a, n, o);
    } else {
        return false;
    }
    return true;
}
