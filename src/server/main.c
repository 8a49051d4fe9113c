/* ratelimitd: command line, config loading, signals (SIGTERM/SIGINT stop with a final
 * snapshot, SIGHUP reloads the config), periodic snapshots and idle-key sweeps. */
#include "server/srv.h"

#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fputs("usage: ratelimitd [--config FILE] [--port N] [--http-port N] [--bind ADDR]\n"
          "                  [--threads N] [--password PW] [--snapshot FILE | --no-snapshot]\n"
          "                  [--snapshot-interval DURATION] [--max-keys N]\n"
          "                  [--max-connections N] [--check-config]\n"
          "                  [--redis HOST:PORT[,HOST:PORT...]] [--redis-cluster]\n"
          "                  [--redis-fail open|closed] [--redis-timeout DURATION]\n"
          "  --port / --http-port: 0 picks a free port, -1 turns the listener off\n"
          "  defaults: 127.0.0.1, RESP 6380, HTTP 8080, snapshot ./ratelimitd.snap every 5s\n"
          "  --redis: decide in this Redis (a fleet of daemons shares one limit)\n",
          f);
}

typedef struct overrides {
    const char *config;
    const char *bind, *password, *snapshot, *interval;
    const char *redis, *redis_fail, *redis_timeout;
    long port, http_port, threads, max_keys, max_conns;
    bool has_port, has_http, has_threads, has_keys, has_conns, no_snapshot, check_only;
    bool redis_cluster;
} overrides;

/* Whether `a` is an option that takes a value (the others are flags or unknown). */
static bool takes_value(const char *a)
{
    static const char *const names[] = {
        "--config",  "--bind",       "--password",       "--snapshot", "--snapshot-interval",
        "--redis",   "--redis-fail", "--redis-timeout",  "--port",     "--http-port",
        "--threads", "--max-keys",   "--max-connections"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(a, names[i]) == 0) return true;
    return false;
}

static int parse_long(const char *s, long lo, long hi, long *out)
{
    int64_t v;
    if (!rlt__resp_parse_i64(s, strlen(s), &v) || v < lo || v > hi) return -1;
    *out = (long)v;
    return 0;
}

static int apply_overrides(rlt__settings *set, const overrides *o, char *err, size_t errlen)
{
    if (o->bind) snprintf(set->bind, sizeof set->bind, "%s", o->bind);
    if (o->password) snprintf(set->password, sizeof set->password, "%s", o->password);
    if (o->snapshot) snprintf(set->snapshot, sizeof set->snapshot, "%s", o->snapshot);
    if (o->no_snapshot) set->snapshot[0] = '\0';
    if (o->has_port) set->port = (int)o->port;
    if (o->has_http) set->http_port = (int)o->http_port;
    if (o->has_threads) set->threads = (int)o->threads;
    if (o->has_keys) set->max_keys = (size_t)o->max_keys;
    if (o->has_conns) set->max_connections = (size_t)o->max_conns;
    if (o->interval && (rlt_duration_parse(o->interval, strlen(o->interval), RLT_NS_PER_S,
                                           &set->snapshot_interval) != RLT_OK ||
                        set->snapshot_interval < 0)) {
        snprintf(err, errlen, "--snapshot-interval: not a duration: %s", o->interval);
        return -1;
    }
    rlt__redis_settings *rs = &set->redis;
    if (o->redis != NULL) {
        if (strlen(o->redis) >= sizeof rs->address || o->redis[0] == '\0') {
            snprintf(err, errlen, "--redis: needs HOST:PORT[,HOST:PORT...] (at most %zu bytes)",
                     sizeof rs->address - 1);
            return -1;
        }
        snprintf(rs->address, sizeof rs->address, "%s", o->redis);
    }
    if (o->redis_cluster) rs->cluster = true;
    if (o->redis_fail != NULL) {
        if (strcmp(o->redis_fail, "open") != 0 && strcmp(o->redis_fail, "closed") != 0) {
            snprintf(err, errlen, "--redis-fail: open or closed, not %s", o->redis_fail);
            return -1;
        }
        rs->fail_open = strcmp(o->redis_fail, "open") == 0;
    }
    if (o->redis_timeout != NULL &&
        (rlt_duration_parse(o->redis_timeout, strlen(o->redis_timeout), 0, &rs->timeout) !=
             RLT_OK ||
         rs->timeout < RLT_NS_PER_MS || rs->timeout > 60 * RLT_NS_PER_S)) {
        snprintf(err, errlen, "--redis-timeout: a duration with a unit in [1ms, 60s], not %s",
                 o->redis_timeout);
        return -1;
    }
    return 0;
}

static int load_config(const overrides *o, rlt__config **out, char *err, size_t errlen)
{
    if (o->config != NULL) {
        if (rlt__config_load(o->config, out, err, errlen) < 0) return -1;
    } else if ((*out = rlt__config_default()) == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (apply_overrides(&(*out)->set, o, err, errlen) < 0 ||
        rlt__backend_check_config(*out, err, errlen) < 0 ||
        rlt__srv_check_config(*out, err, errlen) < 0) {
        rlt__config_free(*out);
        *out = NULL;
        return -1;
    }
    return 0;
}

typedef struct mainctx {
    rlt__srv *s;
    overrides *o;
    struct event_base *base;
} mainctx;

static void snapshot(mainctx *m, const char *why)
{
    rlt__config *c = rlt__srv_config(m->s);
    if (c->set.snapshot[0] == '\0') return;
    /* The wall time derived from the daemon's clock, not CLOCK_REALTIME: then a restart
     * shifts saved instants by whole days (see rlt__clock_start). */
    rlt_ns now = rlt__now();
    int st = rlt_store_save(m->s->store, c->set.snapshot, now, now + rlt__clock_origin());
    if (st == RLT_OK) {
        __atomic_fetch_add(&m->s->metrics.snapshots_ok, 1, __ATOMIC_RELAXED);
    } else {
        __atomic_fetch_add(&m->s->metrics.snapshots_failed, 1, __ATOMIC_RELAXED);
        fprintf(stderr, "ratelimitd: %s snapshot to %s failed: %s\n", why, c->set.snapshot,
                rlt_strerror(st));
    }
}

static void on_stop(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    mainctx *m = arg;
    fprintf(stderr, "ratelimitd: signal %d, stopping\n", (int)sig);
    event_base_loopbreak(m->base);
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
        fprintf(stderr, "ratelimitd: SIGHUP: no --config file to reload\n");
        return;
    }
    if (load_config(m->o, &cfg, err, sizeof err) < 0) {
        __atomic_fetch_add(&m->s->metrics.reloads_failed, 1, __ATOMIC_RELAXED);
        fprintf(stderr, "ratelimitd: reload failed, keeping the old config: %s\n", err);
        return;
    }
    /* Listeners, threads, the store's limits and the snapshot path stay as started. */
    rlt__settings keep = cur->set;
    cfg->set.port = keep.port;
    cfg->set.http_port = keep.http_port;
    snprintf(cfg->set.bind, sizeof cfg->set.bind, "%s", keep.bind);
    cfg->set.threads = keep.threads;
    cfg->set.max_keys = keep.max_keys;
    cfg->set.fail_closed = keep.fail_closed;
    cfg->set.max_args = keep.max_args;
    cfg->set.max_inline_policies = keep.max_inline_policies;
    snprintf(cfg->set.snapshot, sizeof cfg->set.snapshot, "%s", keep.snapshot);
    /* The Redis connection stays as started too; only the fail modes follow the file. */
    bool fail_open = cfg->set.redis.fail_open;
    cfg->set.redis = keep.redis;
    cfg->set.redis.fail_open = fail_open;
    if (rlt__backend_check_config(cfg, err, sizeof err) < 0) {
        __atomic_fetch_add(&m->s->metrics.reloads_failed, 1, __ATOMIC_RELAXED);
        fprintf(stderr, "ratelimitd: reload failed, keeping the old config: %s\n", err);
        rlt__config_free(cfg);
        return;
    }
    if (!rlt__is_loopback(cfg->set.bind) && cfg->set.password[0] == '\0' && cfg->ntenants == 0) {
        __atomic_fetch_add(&m->s->metrics.reloads_failed, 1, __ATOMIC_RELAXED);
        fprintf(stderr,
                "ratelimitd: reload failed, keeping the old config: %s would leave a "
                "non-loopback bind without a password\n",
                m->o->config);
        rlt__config_free(cfg);
        return;
    }
    if (rlt__srv_apply_config(m->s, cfg, err, sizeof err) < 0) {
        __atomic_fetch_add(&m->s->metrics.reloads_failed, 1, __ATOMIC_RELAXED);
        fprintf(stderr, "ratelimitd: reload failed, keeping the old config: %s\n", err);
        rlt__config_free(cfg);
        return;
    }
    __atomic_fetch_add(&m->s->metrics.reloads_ok, 1, __ATOMIC_RELAXED);
    fprintf(stderr, "ratelimitd: reloaded %s\n", m->o->config);
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
    rlt_store_sweep(m->s->store, rlt__now(), 20000);
}

int main(int argc, char **argv)
{
    overrides o = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool takes = true;
        int bad = 0;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--no-snapshot") == 0) {
            o.no_snapshot = true;
            takes = false;
        } else if (strcmp(a, "--check-config") == 0) {
            o.check_only = true;
            takes = false;
        } else if (strcmp(a, "--redis-cluster") == 0) {
            o.redis_cluster = true;
            takes = false;
        } else if (!takes_value(a)) {
            fprintf(stderr, "ratelimitd: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        } else if (v == NULL) {
            fprintf(stderr, "ratelimitd: %s needs a value\n", a);
            return 2;
        } else if (strcmp(a, "--config") == 0) {
            o.config = v;
        } else if (strcmp(a, "--bind") == 0) {
            o.bind = v;
        } else if (strcmp(a, "--password") == 0) {
            o.password = v;
        } else if (strcmp(a, "--snapshot") == 0) {
            o.snapshot = v;
        } else if (strcmp(a, "--snapshot-interval") == 0) {
            o.interval = v;
        } else if (strcmp(a, "--redis") == 0) {
            o.redis = v;
        } else if (strcmp(a, "--redis-fail") == 0) {
            o.redis_fail = v;
        } else if (strcmp(a, "--redis-timeout") == 0) {
            o.redis_timeout = v;
        } else if (strcmp(a, "--port") == 0) {
            bad = parse_long(v, -1, 65535, &o.port);
            o.has_port = true;
        } else if (strcmp(a, "--http-port") == 0) {
            bad = parse_long(v, -1, 65535, &o.http_port);
            o.has_http = true;
        } else if (strcmp(a, "--threads") == 0) {
            bad = parse_long(v, 0, 64, &o.threads);
            o.has_threads = true;
        } else if (strcmp(a, "--max-keys") == 0) {
            bad = parse_long(v, 0, 1L << 40, &o.max_keys);
            o.has_keys = true;
        } else if (strcmp(a, "--max-connections") == 0) {
            bad = parse_long(v, 1, 1L << 24, &o.max_conns);
            o.has_conns = true;
        } else {
            fprintf(stderr, "ratelimitd: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "ratelimitd: %s needs a valid value%s%s\n", a, v ? ", got " : "",
                    v ? v : "");
            return 2;
        }
        if (takes) i++;
    }
    char err[600];
    rlt__config *cfg;
    if (load_config(&o, &cfg, err, sizeof err) < 0) {
        fprintf(stderr, "ratelimitd: %s\n", err);
        return 2;
    }
    if (!rlt__bind_valid(cfg->set.bind)) {
        fprintf(stderr,
                "ratelimitd: invalid address '%s' to bind (an IPv4/IPv6 address or a "
                "host name)\n",
                cfg->set.bind);
        rlt__config_free(cfg);
        return 2;
    }
    if (!rlt__is_loopback(cfg->set.bind) && cfg->set.password[0] == '\0' && cfg->ntenants == 0) {
        fprintf(stderr,
                "ratelimitd: refusing to listen on %s without a password: set "
                "--password or server.password (or tenants), or bind 127.0.0.1\n",
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
    if (rlt__srv_open(&s, cfg, wall_start - rlt__clock_origin(), wall_start, err, sizeof err) < 0) {
        fprintf(stderr, "ratelimitd: %s\n", err);
        return 1;
    }
    if (rlt__backend_open(s, err, sizeof err) < 0) {
        fprintf(stderr, "ratelimitd: %s\n", err);
        rlt__srv_close(s);
        return 1;
    }
    mainctx m = {.s = s, .o = &o, .base = event_base_new()};
    int rport, hport;
    rlt__daemon *d;
    if (m.base == NULL || rlt__daemon_start(&d, s, &rport, &hport, err, sizeof err) < 0) {
        fprintf(stderr, "ratelimitd: %s\n", m.base ? err : "out of memory");
        if (m.base) event_base_free(m.base);
        rlt__backend_close(s);
        rlt__srv_close(s);
        return 1;
    }
    const rlt__settings *set = &rlt__srv_config(s)->set;
    char rs[32] = "off", hs[32] = "off";
    if (rport >= 0) snprintf(rs, sizeof rs, "%d", rport);
    if (hport >= 0) snprintf(hs, sizeof hs, "%d", hport);
    printf("ratelimitd: resp %s:%s http %s:%s\n", set->bind, rs, set->bind, hs);
    if (s->backend != NULL)
        fprintf(stderr, "ratelimitd: deciding in Redis%s %s (timeout %lld us, fail %s)\n",
                set->redis.cluster ? " Cluster" : "", set->redis.address,
                (long long)((set->redis.timeout ? set->redis.timeout : 50 * RLT_NS_PER_MS) /
                            RLT_NS_PER_US),
                set->redis.fail_open ? "open" : "closed");
    fflush(stdout);

    struct event *ev_term = evsignal_new(m.base, SIGTERM, on_stop, &m);
    struct event *ev_int = evsignal_new(m.base, SIGINT, on_stop, &m);
    struct event *ev_hup = evsignal_new(m.base, SIGHUP, on_reload, &m);
    struct event *ev_snap = event_new(m.base, -1, EV_PERSIST, on_snapshot, &m);
    struct event *ev_sweep = event_new(m.base, -1, EV_PERSIST, on_sweep, &m);
    evsignal_add(ev_term, NULL);
    evsignal_add(ev_int, NULL);
    evsignal_add(ev_hup, NULL);
    if (set->snapshot[0] != '\0' && set->snapshot_interval > 0) {
        struct timeval tv = {.tv_sec = set->snapshot_interval / RLT_NS_PER_S,
                             .tv_usec = (set->snapshot_interval % RLT_NS_PER_S) / 1000};
        event_add(ev_snap, &tv);
    }
    struct timeval sweep_tv = {.tv_sec = 0, .tv_usec = 100000};
    event_add(ev_sweep, &sweep_tv);
    event_base_dispatch(m.base);

    rlt__daemon_stop(d);
    rlt__backend_close(s);
    snapshot(&m, "final");
    event_free(ev_term);
    event_free(ev_int);
    event_free(ev_hup);
    event_free(ev_snap);
    event_free(ev_sweep);
    event_base_free(m.base);
    rlt__srv_close(s);
    fprintf(stderr, "ratelimitd: stopped\n");
    return 0;
}
