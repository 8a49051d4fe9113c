/* ratelimitd: command line, config loading, signals (SIGTERM/SIGINT stop with a final
 * snapshot, SIGHUP reloads the config), periodic snapshots and idle-key sweeps. */
#include "ratelimit/redis.h"
#include "core/text.h"
#include "server/backend/backend.h"
#include "server/backend/redis_check.h"
#include "server/base/clock.h"
#include "server/config/config.h"
#include "server/config/load.h"
#include "server/envoy/rlqs_srv.h"
#include "server/net/conn.h"
#include "server/request/decide.h"
#include "server/net/listen.h"
#include "server/base/log.h"
#include "server/net/protocol.h"
#include "server/resp/resp.h"
#include "server/request/srv.h"
#include "server/stats/top.h"

#include <event2/event.h>
#include <stddef.h>
#include <errno.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fputs("usage: ratelimitd [--config FILE|DIR ...] [--port N] [--http-port N]\n"
          "                  [--grpc-port N] [--spop-port N] [--bind ADDR]\n"
          "                  [--threads N] [--password PW] [--snapshot FILE | --no-snapshot]\n"
          "                  [--snapshot-interval DURATION] [--max-keys N]\n"
          "                  [--max-connections N] [--top-keys N] [--no-ui] [--check-config]\n"
          "                  [--redis HOST:PORT[,HOST:PORT...]] [--redis-cluster]\n"
          "                  [--redis-fail open|closed|local] [--redis-timeout DURATION]\n"
          "                  [--redis-fleet-size N]\n"
          "                  [--redis-sentinel HOST:PORT[,HOST:PORT...] --redis-master NAME]\n"
          "  --port / --http-port / --grpc-port / --spop-port: 0 picks a free port, -1: off\n"
          "  defaults: 127.0.0.1, RESP 6380, HTTP 8080, gRPC 8081, SPOP off,\n"
          "            snapshot ./ratelimitd.snap every 5s\n"
          "  --no-ui: GET / does not answer the playground and its live page\n"
          "  --redis: decide in this Redis (a fleet of daemons shares one limit)\n"
          "  --redis-sentinel: ask these sentinels for the master NAME (--redis-master)\n",
          f);
}

#define MAX_CONFIGS 64

typedef struct overrides {
    const char *config; /* the first --config (messages) */
    const char *configs[MAX_CONFIGS];
    size_t nconfigs;
    const char *bind, *password, *snapshot, *interval;
    const char *redis, *redis_fail, *redis_timeout, *redis_sentinel, *redis_master;
    long port, http_port, grpc_port, spop_port, threads, max_keys, max_conns, top_keys;
    bool has_port, has_http, has_grpc, has_spop, has_threads, has_keys, has_conns, no_snapshot,
        check_only, no_ui;
    long fleet_size; /* --redis-fleet-size */
    bool has_fleet;
    bool has_top;
    bool redis_cluster;
} overrides;

/* The command line, written once: every option, what it takes and where it goes. */
typedef enum opt_kind { OPT_FLAG, OPT_STR, OPT_LONG } opt_kind;
typedef struct option {
    const char *name;
    opt_kind kind;
    size_t at;   /* offsetof the value in overrides (bool for flags, const char * or long) */
    size_t has;  /* OPT_LONG: offsetof its "given" flag */
    long lo, hi; /* OPT_LONG: the accepted range */
} option;

#define O(f) offsetof(overrides, f)
static const option options[] = {
    {"--config", OPT_STR, O(config), 0, 0, 0},
    {"--bind", OPT_STR, O(bind), 0, 0, 0},
    {"--password", OPT_STR, O(password), 0, 0, 0},
    {"--snapshot", OPT_STR, O(snapshot), 0, 0, 0},
    {"--snapshot-interval", OPT_STR, O(interval), 0, 0, 0},
    {"--redis", OPT_STR, O(redis), 0, 0, 0},
    {"--redis-fail", OPT_STR, O(redis_fail), 0, 0, 0},
    {"--redis-timeout", OPT_STR, O(redis_timeout), 0, 0, 0},
    {"--redis-sentinel", OPT_STR, O(redis_sentinel), 0, 0, 0},
    {"--redis-master", OPT_STR, O(redis_master), 0, 0, 0},
    {"--port", OPT_LONG, O(port), O(has_port), -1, 65535},
    {"--http-port", OPT_LONG, O(http_port), O(has_http), -1, 65535},
    {"--grpc-port", OPT_LONG, O(grpc_port), O(has_grpc), -1, 65535},
    {"--spop-port", OPT_LONG, O(spop_port), O(has_spop), -1, 65535},
    {"--threads", OPT_LONG, O(threads), O(has_threads), 0, 64},
    {"--max-keys", OPT_LONG, O(max_keys), O(has_keys), 0, 1L << 40},
    {"--max-connections", OPT_LONG, O(max_conns), O(has_conns), 1, 1L << 24},
    {"--top-keys", OPT_LONG, O(top_keys), O(has_top), 0, RLT__TOP_KEYS_MAX},
    {"--no-snapshot", OPT_FLAG, O(no_snapshot), 0, 0, 0},
    {"--no-ui", OPT_FLAG, O(no_ui), 0, 0, 0},
    {"--check-config", OPT_FLAG, O(check_only), 0, 0, 0},
    {"--redis-cluster", OPT_FLAG, O(redis_cluster), 0, 0, 0},
    {"--redis-fleet-size", OPT_LONG, O(fleet_size), O(has_fleet), 1, 65536},
};
#undef O

static int parse_long(const char *s, long lo, long hi, long *out)
{
    int64_t v;
    if (!rlt__parse_i64(s, strlen(s), &v) || v < lo || v > hi) return RLT_EINVAL;
    *out = (long)v;
    return RLT_OK;
}

/* --redis-sentinel and --redis-master: the sentinels go in `address` (config.h). */
static int apply_sentinel(rlt__redis_settings *rs, const overrides *o, char *err, size_t errlen)
{
    if (o->redis_sentinel != NULL && o->redis != NULL) {
        snprintf(err, errlen, "--redis and --redis-sentinel: one or the other");
        return RLT_EINVAL;
    }
    if (o->redis_sentinel != NULL) {
        if (strlen(o->redis_sentinel) >= sizeof rs->address || o->redis_sentinel[0] == '\0') {
            snprintf(err, errlen,
                     "--redis-sentinel: needs HOST:PORT[,HOST:PORT...] (at most %zu bytes)",
                     sizeof rs->address - 1);
            return RLT_EINVAL;
        }
        snprintf(rs->address, sizeof rs->address, "%s", o->redis_sentinel);
        rs->cluster = false;
    }
    bool had_master = rs->master_name[0] != '\0';
    if (o->redis_master != NULL) {
        if (strlen(o->redis_master) >= sizeof rs->master_name || o->redis_master[0] == '\0' ||
            strpbrk(o->redis_master, " \t\r\n") != NULL) {
            snprintf(err, errlen, "--redis-master: a name of 1 to %zu bytes without spaces",
                     sizeof rs->master_name - 1);
            return RLT_EINVAL;
        }
        snprintf(rs->master_name, sizeof rs->master_name, "%s", o->redis_master);
    }
    if (o->redis_sentinel != NULL && rs->master_name[0] == '\0') {
        snprintf(err, errlen,
                 "--redis-sentinel needs --redis-master NAME (the sentinels' name "
                 "of the master)");
        return RLT_EINVAL;
    }
    if (o->redis_master != NULL && o->redis_sentinel == NULL && !had_master) {
        snprintf(err, errlen, "--redis-master needs --redis-sentinel HOST:PORT[,...]");
        return RLT_EINVAL;
    }
    if (rs->master_name[0] != '\0' && o->redis_cluster) {
        snprintf(err, errlen, "--redis-cluster and Sentinel: one or the other");
        return RLT_EINVAL;
    }
    return RLT_OK;
}

/* What the command line asks for once parsed: run the daemon, or nothing more (--help). */
typedef enum args_next { ARGS_RUN, ARGS_DONE } args_next;

/* Parses argv into o.  Returns RLT_OK with *next, or RLT_EINVAL after saying why on stderr
 * (a usage error: exit status 2). */
static int parse_args(int argc, char **argv, overrides *o, args_next *next)
{
    *next = ARGS_RUN;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            *next = ARGS_DONE;
            return RLT_OK;
        }
        const option *opt = NULL;
        for (size_t k = 0; k < sizeof options / sizeof options[0]; k++)
            if (strcmp(a, options[k].name) == 0) opt = &options[k];
        if (opt == NULL) {
            rlt__log(RLT__LOG_ERR, "unknown option '%s'", a);
            usage(stderr);
            return RLT_EINVAL;
        }
        char *base = (char *)o;
        if (opt->kind == OPT_FLAG) {
            *(bool *)(base + opt->at) = true;
            continue;
        }
        const char *v = i + 1 < argc ? argv[++i] : NULL;
        if (v == NULL) {
            rlt__log(RLT__LOG_ERR, "%s needs a value", a);
            return RLT_EINVAL;
        }
        if (opt->kind == OPT_STR && opt->at == offsetof(overrides, config)) {
            /* --config may be given several times (files or directories of *.yaml). */
            if (o->nconfigs == MAX_CONFIGS) {
                fprintf(stderr, "ratelimitd: at most %d --config\n", MAX_CONFIGS);
                return RLT_EINVAL;
            }
            if (o->config == NULL) o->config = v;
            o->configs[o->nconfigs++] = v;
        } else if (opt->kind == OPT_STR) {
            *(const char **)(base + opt->at) = v;
        } else if (parse_long(v, opt->lo, opt->hi, (long *)(base + opt->at)) == RLT_OK) {
            *(bool *)(base + opt->has) = true;
        } else {
            rlt__log(RLT__LOG_ERR, "%s needs a valid value, got %s", a, v);
            return RLT_EINVAL;
        }
    }
    return RLT_OK;
}

static int apply_overrides(rlt__settings *set, const overrides *o, char *err, size_t errlen)
{
    if (o->bind) snprintf(set->bind, sizeof set->bind, "%s", o->bind);
    if (o->password) snprintf(set->password, sizeof set->password, "%s", o->password);
    if (o->snapshot) snprintf(set->snapshot, sizeof set->snapshot, "%s", o->snapshot);
    if (o->no_snapshot) set->snapshot[0] = '\0';
    if (o->no_ui) set->ui = false;
    if (o->has_port) set->port = (int)o->port;
    if (o->has_http) set->http_port = (int)o->http_port;
    if (o->has_grpc) set->grpc_port = (int)o->grpc_port;
    if (o->has_spop) set->spop_port = (int)o->spop_port;
    if (o->has_threads) set->threads = (int)o->threads;
    if (o->has_keys) set->max_keys = (size_t)o->max_keys;
    if (o->has_conns) set->max_connections = (size_t)o->max_conns;
    if (o->has_top) set->top_keys = (size_t)o->top_keys;
    if (o->interval && (rlt_duration_parse(o->interval, strlen(o->interval), RLT_NS_PER_S,
                                           &set->snapshot_interval) != RLT_OK ||
                        set->snapshot_interval < 0)) {
        snprintf(err, errlen, "--snapshot-interval: not a duration: %s", o->interval);
        return RLT_EINVAL;
    }
    rlt__redis_settings *rs = &set->redis;
    if (o->redis != NULL) {
        if (strlen(o->redis) >= sizeof rs->address || o->redis[0] == '\0') {
            snprintf(err, errlen, "--redis: needs HOST:PORT[,HOST:PORT...] (at most %zu bytes)",
                     sizeof rs->address - 1);
            return RLT_EINVAL;
        }
        snprintf(rs->address, sizeof rs->address, "%s", o->redis);
        rs->master_name[0] = '\0'; /* a Redis named here, not the file's sentinels */
    }
    if (apply_sentinel(rs, o, err, errlen) != RLT_OK) return RLT_EINVAL;
    if (o->redis_cluster) rs->cluster = true;
    if (o->redis_fail != NULL) {
        if (strcmp(o->redis_fail, "open") != 0 && strcmp(o->redis_fail, "closed") != 0 &&
            strcmp(o->redis_fail, "local") != 0) {
            snprintf(err, errlen, "--redis-fail: open, closed or local, not %s", o->redis_fail);
            return RLT_EINVAL;
        }
        rs->fail_open = strcmp(o->redis_fail, "open") == 0;
        rs->fail_local = strcmp(o->redis_fail, "local") == 0;
    }
    if (o->has_fleet) rs->fleet_size = (unsigned)o->fleet_size;
    if (o->redis_timeout != NULL &&
        (rlt_duration_parse(o->redis_timeout, strlen(o->redis_timeout), 0, &rs->timeout) !=
             RLT_OK ||
         rs->timeout < RLT_NS_PER_MS || rs->timeout > 60 * RLT_NS_PER_S)) {
        snprintf(err, errlen, "--redis-timeout: a duration with a unit in [1ms, 60s], not %s",
                 o->redis_timeout);
        return RLT_EINVAL;
    }
    return RLT_OK;
}

static int load_config(const overrides *o, rlt__config **out, char *err, size_t errlen)
{
    if (o->config != NULL) {
        int st = rlt__config_load_many(o->configs, o->nconfigs, out, err, errlen);
        if (st != RLT_OK) return st;
    } else if ((*out = rlt__config_default()) == NULL) {
        snprintf(err, errlen, "out of memory");
        return RLT_ENOMEM;
    }
    if (apply_overrides(&(*out)->set, o, err, errlen) != RLT_OK ||
        rlt__backend_redis_check_config(*out, err, errlen) != RLT_OK ||
        rlt__srv_check_config(*out, err, errlen) != RLT_OK) {
        rlt__config_free(*out);
        *out = NULL;
        return RLT_EINVAL;
    }
    return RLT_OK;
}

typedef struct mainctx {
    rlt__srv *s;
    overrides *o;
    struct event_base *base;
} mainctx;

/* Why a snapshot could not be written, as the operator needs it: the store says only
 * "input/output error", so look at the path: a missing or unwritable directory, a full disk,
 * else the errno the failing call left. */
static const char *snapshot_cause(const char *path, int saved_errno, int st, char *buf, size_t cap)
{
    char dir[RLT__STR_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    struct stat sb;
    struct statvfs vfs;
    if (stat(dir, &sb) != 0)
        snprintf(buf, cap, "%s (directory %.*s)", strerror(errno), (int)(cap / 2), dir);
    else if (!S_ISDIR(sb.st_mode))
        snprintf(buf, cap, "%s (%.*s)", strerror(ENOTDIR), (int)(cap / 2), dir);
    else if (access(dir, W_OK) != 0)
        snprintf(buf, cap, "%s (directory %.*s)", strerror(errno), (int)(cap / 2), dir);
    else if (statvfs(dir, &vfs) == 0 && vfs.f_bavail == 0)
        snprintf(buf, cap, "%s (%.*s)", strerror(ENOSPC), (int)(cap / 2), dir);
    else if (saved_errno != 0)
        snprintf(buf, cap, "%s", strerror(saved_errno));
    else
        snprintf(buf, cap, "%s", rlt_strerror(st));
    return buf;
}

static void snapshot(mainctx *m, const char *why)
{
    rlt__config *c = rlt__srv_config(m->s);
    if (c->set.snapshot[0] == '\0') return;
    /* The wall time derived from the daemon's clock, not CLOCK_REALTIME: then a restart
     * shifts saved instants by whole days (see rlt__clock_start). */
    rlt_ns now = rlt__now();
    int st = rlt__registry_save(&m->s->reg, c->set.snapshot, now, now + rlt__clock_origin());
    if (st == RLT_OK) {
        __atomic_fetch_add(&m->s->metrics.snapshots_ok, 1, __ATOMIC_RELAXED);
    } else {
        __atomic_fetch_add(&m->s->metrics.snapshots_failed, 1, __ATOMIC_RELAXED);
        char cause[RLT__STR_MAX + 128];
        rlt__log(RLT__LOG_ERR, "%s snapshot to %s failed: %s", why, c->set.snapshot,
                 snapshot_cause(c->set.snapshot, errno, st, cause, sizeof cause));
    }
}

static void on_reload(evutil_socket_t sig, short what, void *arg);

static void on_stop(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    mainctx *m = arg;
    rlt__log(RLT__LOG_INFO, "signal %d, stopping", (int)sig);
    event_base_loopbreak(m->base);
}

/* SIGTERM, SIGINT and SIGHUP are blocked in every thread from main's first line (threads
 * inherit the mask) and read by the loop from a signalfd.  A signal sent at any instant of the
 * start then waits, pending in the kernel, until the loop reads it: no handler has to be in
 * place in time, and none runs in a signal context that a sanitizer's runtime may defer (a
 * SIGTERM sent the moment READY=1 came was once lost so under TSan). */
static void stop_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGHUP);
}

static void on_signalfd(evutil_socket_t fd, short what, void *arg)
{
    struct signalfd_siginfo si;
    while (read(fd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGHUP)
            on_reload((evutil_socket_t)si.ssi_signo, what, arg);
        else
            on_stop((evutil_socket_t)si.ssi_signo, what, arg);
    }
}

static const rlt__tenant *tenant_named(const rlt__config *c, const char *name)
{
    for (size_t i = 0; i < c->ntenants; i++)
        if (strcmp(c->tenants[i].name, name) == 0) return &c->tenants[i];
    return NULL;
}

/* What a reload changed in who may connect: the sessions it affects lose their identity at
 * their next command (rlt__session_refresh). */
static void log_identity_changes(const rlt__config *old, const rlt__config *now)
{
    if (strcmp(old->set.password, now->set.password) != 0)
        rlt__log(RLT__LOG_INFO, "reload: the server password %s: admin sessions must AUTH again",
                 old->set.password[0] == '\0'   ? "was set"
                 : now->set.password[0] == '\0' ? "was removed"
                                                : "changed");
    for (size_t i = 0; i < old->ntenants; i++) {
        const rlt__tenant *t = &old->tenants[i], *n = tenant_named(now, t->name);
        if (n == NULL)
            rlt__log(RLT__LOG_INFO, "reload: tenant '%s' removed: its sessions are logged out",
                     t->name);
        else if (strcmp(t->password, n->password) != 0 || strcmp(t->prefix, n->prefix) != 0)
            rlt__log(RLT__LOG_INFO, "reload: tenant '%s' changed: its sessions are checked again",
                     t->name);
    }
    for (size_t i = 0; i < now->ntenants; i++)
        if (tenant_named(old, now->tenants[i].name) == NULL)
            rlt__log(RLT__LOG_INFO, "reload: tenant '%s' added", now->tenants[i].name);
}

static void on_reload(evutil_socket_t sig, short what, void *arg)
{
    (void)sig;
    (void)what;
    mainctx *m = arg;
    char err[600];
    rlt__config *cfg;
    rlt__config *cur = rlt__srv_config(m->s);
    if (m->o->config == NULL) {
        rlt__log(RLT__LOG_WARN, "SIGHUP: no --config file to reload");
        return;
    }
    if (load_config(m->o, &cfg, err, sizeof err) != RLT_OK) {
        __atomic_fetch_add(&m->s->metrics.reloads_failed, 1, __ATOMIC_RELAXED);
        rlt__log(RLT__LOG_ERR, "reload failed, keeping the old config: %s", err);
        return;
    }
    if (cfg->empty) {
        /* An empty file at start is the embedded default; at a reload it is far more likely a
         * truncated write, and it would drop every password, tenant and policy (nginx refuses
         * an empty configuration too). */
        __atomic_fetch_add(&m->s->metrics.reloads_failed, 1, __ATOMIC_RELAXED);
        rlt__log(RLT__LOG_ERR, "reload failed, keeping the old config: %s is empty", m->o->config);
        rlt__config_free(cfg);
        return;
    }
    /* Listeners, threads, the store's limits and the snapshot path stay as started. */
    rlt__settings keep = cur->set;
    cfg->set.port = keep.port;
    cfg->set.http_port = keep.http_port;
    cfg->set.grpc_port = keep.grpc_port;
    cfg->set.spop_port = keep.spop_port;
    snprintf(cfg->set.bind, sizeof cfg->set.bind, "%s", keep.bind);
    cfg->set.threads = keep.threads;
    cfg->set.max_keys = keep.max_keys;
    cfg->set.fail_closed = keep.fail_closed;
    cfg->set.max_reservations = keep.max_reservations;
    cfg->set.max_reservations_per_client = keep.max_reservations_per_client;
    cfg->set.max_args = keep.max_args;
    cfg->set.max_inline_policies = keep.max_inline_policies;
    cfg->set.max_memory = keep.max_memory; /* the store's cap and the connections' are set */
    cfg->set.top_keys = keep.top_keys;     /* the sketches are sized at start */
    snprintf(cfg->set.snapshot, sizeof cfg->set.snapshot, "%s", keep.snapshot);
    /* The Redis connection stays as started too; only the fail modes follow the file (and
     * the fleet size that fail: local divides by). */
    bool fail_open = cfg->set.redis.fail_open;
    bool fail_local = cfg->set.redis.fail_local;
    unsigned fleet_size = cfg->set.redis.fleet_size;
    cfg->set.redis = keep.redis;
    cfg->set.redis.fail_open = fail_open;
    cfg->set.redis.fail_local = fail_local;
    cfg->set.redis.fleet_size = fleet_size;
    if (rlt__backend_redis_check_config(cfg, err, sizeof err) != RLT_OK) {
        __atomic_fetch_add(&m->s->metrics.reloads_failed, 1, __ATOMIC_RELAXED);
        rlt__log(RLT__LOG_ERR, "reload failed, keeping the old config: %s", err);
        rlt__config_free(cfg);
        return;
    }
    if (!rlt__is_loopback(cfg->set.bind) && cfg->set.password[0] == '\0' && cfg->ntenants == 0) {
        __atomic_fetch_add(&m->s->metrics.reloads_failed, 1, __ATOMIC_RELAXED);
        rlt__log(RLT__LOG_ERR,
                 "reload failed, keeping the old config: %s would leave a "
                 "non-loopback bind without a password",
                 m->o->config);
        rlt__config_free(cfg);
        return;
    }
    if (rlt__srv_apply_config(m->s, cfg, err, sizeof err) != RLT_OK) {
        __atomic_fetch_add(&m->s->metrics.reloads_failed, 1, __ATOMIC_RELAXED);
        rlt__log(RLT__LOG_ERR, "reload failed, keeping the old config: %s", err);
        rlt__config_free(cfg);
        return;
    }
    __atomic_fetch_add(&m->s->metrics.reloads_ok, 1, __ATOMIC_RELAXED);
    rlt__log(RLT__LOG_INFO, "reloaded %s", m->o->config);
    log_identity_changes(cur, rlt__srv_config(m->s));
}

static void on_snapshot(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    snapshot(arg, "periodic");
}

static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    mainctx *m = arg;
    rlt__registry_sweep(&m->s->reg, rlt__now(), 20000);
}

/* /v1/stats' one-second samples: the timer runs four times a second so that each sample lands
 * within a quarter second of its second's end; a second already sampled is skipped. */
static void on_sample(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    mainctx *m = arg;
    rlt__series_sample(&m->s->series, &m->s->metrics, rlt__srv_policy_ids(m->s),
                       rlt__now() / RLT_NS_PER_S);
}

int main(int argc, char **argv)
{
    sigset_t sigs;
    stop_signals(&sigs);
    sigprocmask(SIG_BLOCK, &sigs, NULL);
    overrides o = {0};
    args_next next;
    if (parse_args(argc, argv, &o, &next) != RLT_OK) return 2;
    if (next == ARGS_DONE) return 0;
    char err[600];
    rlt__config *cfg;
    if (load_config(&o, &cfg, err, sizeof err) != RLT_OK) {
        rlt__log(RLT__LOG_ERR, "%s", err);
        return 2;
    }
    if (!rlt__bind_valid(cfg->set.bind)) {
        rlt__log(RLT__LOG_ERR,
                 "invalid address '%s' to bind (an IPv4/IPv6 address or a "
                 "host name)",
                 cfg->set.bind);
        rlt__config_free(cfg);
        return 2;
    }
    if (!rlt__is_loopback(cfg->set.bind) && cfg->set.password[0] == '\0' && cfg->ntenants == 0) {
        rlt__log(RLT__LOG_ERR,
                 "refusing to listen on %s without a password: set "
                 "--password or server.password (or tenants), or bind 127.0.0.1",
                 cfg->set.bind);
        rlt__config_free(cfg);
        return 2;
    }
    /* --check-config stops here: everything start checks before opening the store and
     * binding sockets has run (load_config includes rlt__srv_check_config). */
    if (o.check_only) {
        printf("ratelimitd: %s is valid\n", o.config ? o.config : "(embedded default)");
        rlt__config_free(cfg);
        return 0;
    }
    signal(SIGPIPE, SIG_IGN);
    rlt__srv *s;
    int64_t wall_start = rlt__now_wall();
    rlt__clock_start(wall_start);
    if (rlt__srv_open(&s, cfg, wall_start - rlt__clock_origin(), wall_start, err, sizeof err) !=
        RLT_OK) {
        rlt__log(RLT__LOG_ERR, "%s", err);
        return 1;
    }
    /* Envoy's quota service, attached to the context (envoy/rlqs_srv.h). */
    if (rlt__rlqs_attach(s, err, sizeof err) != RLT_OK) {
        rlt__log(RLT__LOG_ERR, "%s", err);
        rlt__srv_close(s);
        return 1;
    }
    mainctx m = {.s = s, .o = &o, .base = event_base_new()};
    const rlt__settings *set = &rlt__srv_config(s)->set;
    rlt__listener ls[] = {{&rlt__proto_resp, set->port},
                          {&rlt__proto_http, set->http_port},
                          {&rlt__proto_grpc, set->grpc_port},
                          {&rlt__proto_spop, set->spop_port}};
    size_t nls = sizeof ls / sizeof ls[0];
    rlt__daemon *d;
    if (m.base == NULL || rlt__daemon_start(&d, s, ls, nls, err, sizeof err) != RLT_OK) {
        rlt__log(RLT__LOG_ERR, "%s", m.base ? err : "out of memory");
        if (m.base) event_base_free(m.base);
        rlt__srv_close(s);
        return 1;
    }
    /* The signals are read before the start line and READY=1: whoever reads either may stop
     * or reload the daemon at once (stop_signals: one sent earlier is pending until then). */
    int sfd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);
    struct event *ev_sig =
        sfd < 0 ? NULL : event_new(m.base, sfd, EV_READ | EV_PERSIST, on_signalfd, &m);
    struct event *ev_snap = event_new(m.base, -1, EV_PERSIST, on_snapshot, &m);
    struct event *ev_sweep = event_new(m.base, -1, EV_PERSIST, on_sweep, &m);
    struct event *ev_sample = event_new(m.base, -1, EV_PERSIST, on_sample, &m);
    if (ev_sig == NULL || event_add(ev_sig, NULL) != 0) {
        rlt__log(RLT__LOG_ERR, "cannot read signals: %s", strerror(errno));
        rlt__daemon_stop(d);
        if (ev_sig) event_free(ev_sig);
        if (sfd >= 0) close(sfd);
        event_free(ev_snap);
        event_free(ev_sweep);
        event_free(ev_sample);
        event_base_free(m.base);
        rlt__srv_close(s);
        return 1;
    }
    /* The start line: "ratelimitd: resp 127.0.0.1:6380 http 127.0.0.1:8080 grpc
     * 127.0.0.1:8081" (tests and
     * scripts read the ports from it). */
    printf("ratelimitd:");
    for (size_t i = 0; i < nls; i++) {
        if (ls[i].port >= 0)
            printf(" %s %s:%d", ls[i].proto->name, set->bind, ls[i].port);
        else
            printf(" %s %s:off", ls[i].proto->name, set->bind);
    }
    printf("\n");
    rlt__log_notify("READY=1");
    if (!s->be->ops->daemon_clock)
        rlt__log(RLT__LOG_ERR, "deciding in Redis%s%s%s %s (timeout %lld us, fail %s, fleet of %u)",
                 set->redis.cluster ? " Cluster" : "", set->redis.master_name[0] ? " master " : "",
                 set->redis.master_name, set->redis.address,
                 (long long)((set->redis.timeout ? set->redis.timeout : RLT_REDIS_DEFAULT_TIMEOUT) /
                             RLT_NS_PER_US),
                 set->redis.fail_local  ? "local"
                 : set->redis.fail_open ? "open"
                                        : "closed",
                 set->redis.fleet_size ? set->redis.fleet_size : 1);
    fflush(stdout);

    if (set->snapshot[0] != '\0' && set->snapshot_interval > 0) {
        struct timeval tv = {.tv_sec = set->snapshot_interval / RLT_NS_PER_S,
                             .tv_usec = (set->snapshot_interval % RLT_NS_PER_S) / 1000};
        event_add(ev_snap, &tv);
    }
    struct timeval sweep_tv = {.tv_sec = 0, .tv_usec = 100000};
    event_add(ev_sweep, &sweep_tv);
    struct timeval sample_tv = {.tv_sec = 0, .tv_usec = 250000};
    event_add(ev_sample, &sample_tv);
    event_base_dispatch(m.base);

    rlt__log_notify("STOPPING=1");
    rlt__daemon_stop(d);
    snapshot(&m, "final");
    event_free(ev_sig);
    close(sfd);
    event_free(ev_snap);
    event_free(ev_sweep);
    event_free(ev_sample);
    event_base_free(m.base);
    rlt__srv_close(s);
    rlt__log(RLT__LOG_INFO, "stopped");
    return 0;
}
