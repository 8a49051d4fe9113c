/* The daemon's figures as text: Prometheus (/metrics), Redis INFO, and the top offenders in
 * INFO, /v1/top's JSON and Prometheus; read from the counters (stats/metrics.h), the top
 * offenders' sketches (stats/top.h), the registry's store figures and the backend's own lines. */
#include "server/request/report.h"
#include "proto/pbwire.h"

#include "server/backend/backend.h"
#include "server/base/clock.h"
#include "server/base/escape.h"
#include "server/base/mem.h"
#include "server/base/scratch.h"
#include "server/request/decide.h"
#include "server/request/srv.h"
#include "server/stats/top.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t ld(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

typedef struct totals {
    uint64_t allowed, denied, shadowed, commands, errors, http, lat_sum;
    uint64_t lat[RLT__LAT_BUCKETS];
    uint64_t spop_lat[RLT__LAT_BUCKETS], spop_lat_sum;
} totals;

/* Policy ids that may have counts: those the registry has handed out, and the shared last one
 * ("(other)").  Reading only these keeps INFO and /metrics cheap (they were 1024 ids x 65 slots
 * x 3 counters each, a CPU cost a client could ask for in a loop). */
static bool id_used(size_t id, size_t nids)
{
    return id < nids || id == RLT__METRIC_IDS - 1;
}

/* The name metrics show for policy id (the shared last id: "(other)"). */
static const char *id_name(rlt__srv *s, size_t id, char *buf, size_t cap)
{
    if (id == RLT__METRIC_IDS - 1) {
        snprintf(buf, cap, "(other)");
        return buf;
    }
    return rlt__srv_policy_name(s, (int)id, buf, cap);
}

static void sum(rlt__srv *s, totals *t)
{
    memset(t, 0, sizeof *t);
    size_t nids = rlt__srv_policy_ids(s);
    for (size_t k = 0; k < RLT__METRIC_SLOTS; k++) {
        rlt__mslot *m = &s->metrics.slots[k];
        for (size_t i = 0; i < RLT__METRIC_IDS; i++) {
            if (!id_used(i, nids)) continue;
            t->allowed += ld(&m->allowed[i]);
            t->denied += ld(&m->denied[i]);
            t->shadowed += ld(&m->shadowed[i]);
        }
        for (size_t b = 0; b < RLT__LAT_BUCKETS; b++) {
            t->lat[b] += ld(&m->lat[b]);
            t->spop_lat[b] += ld(&m->spop_lat[b]);
        }
        t->spop_lat_sum += ld(&m->spop_lat_sum_ns);
        t->commands += ld(&m->commands);
        t->errors += ld(&m->errors);
        t->http += ld(&m->http_requests);
        t->lat_sum += ld(&m->lat_sum_ns);
    }
    /* An attached service's (RLQS) would-be denials count with the other shadow decisions. */
    if (s->service != NULL) t->shadowed += s->service->svc_shadow_denied(s);
}

static void per_id(rlt__srv *s, size_t id, uint64_t *a, uint64_t *d, uint64_t *sh)
{
    rlt__metrics_policy(&s->metrics, id, a, d, sh);
}

/* One policy's decisions, summed over the slots, and its name. */
typedef struct policy_row {
    size_t id;
    uint64_t allowed, denied, shadowed;
    char name[RLT__STR_MAX];
} policy_row;

/* The next policy id from r->id on with decisions counted: fills r and returns true; false
 * after the last.  Start at id 0 and step past each row. */
static bool next_row(rlt__srv *s, size_t nids, policy_row *r)
{
    for (; r->id < RLT__METRIC_IDS; r->id++) {
        if (!id_used(r->id, nids)) continue;
        per_id(s, r->id, &r->allowed, &r->denied, &r->shadowed);
        if (r->allowed + r->denied + r->shadowed == 0) continue;
        id_name(s, r->id, r->name, sizeof r->name);
        return true;
    }
    return false;
}

/* Length of the valid UTF-8 sequence at in[0..] (1..4), or 0 if it is not one. */
static size_t utf8_len(const unsigned char *in)
{
    unsigned char c = in[0];
    size_t n = c < 0x80             ? 1
               : (c & 0xe0) == 0xc0 ? 2
               : (c & 0xf0) == 0xe0 ? 3
               : (c & 0xf8) == 0xf0 ? 4
                                    : 0;
    if (n == 0 || (n == 2 && c < 0xc2) || (n == 4 && c > 0xf4)) return 0;
    for (size_t i = 1; i < n; i++)
        if ((in[i] & 0xc0) != 0x80) return 0;
    if (n == 3 && ((c == 0xe0 && in[1] < 0xa0) || (c == 0xed && in[1] >= 0xa0))) return 0;
    if (n == 4 && ((c == 0xf0 && in[1] < 0x90) || (c == 0xf4 && in[1] >= 0x90))) return 0;
    return n;
}

/* Label values (Prometheus text format): UTF-8 with backslash, quote and newline escaped.  A
 * byte that is not part of valid UTF-8 (a path cut at its size limit) becomes '?'.  `info`
 * (INFO) also replaces CR and LF, which would end the line there. */
static void escape_name(char *out, size_t cap, const char *in, bool info)
{
    const unsigned char *p = (const unsigned char *)in;
    size_t o = 0;
    while (*p) {
        size_t n = utf8_len(p);
        if (o + 5 >= cap) break;
        if (n == 0) {
            out[o++] = '?';
            p++;
        } else if (n > 1) {
            memcpy(out + o, p, n);
            o += n;
            p += n;
        } else if (*p == '\n' || *p == '\r') {
            if (info) {
                out[o++] = ' ';
            } else {
                out[o++] = '\\';
                out[o++] = *p == '\n' ? 'n' : 'r';
            }
            p++;
        } else {
            if (!info && (*p == '\\' || *p == '"')) out[o++] = '\\';
            out[o++] = (char)*p++;
        }
    }
    out[o] = '\0';
}

static void label(char *out, size_t cap, const char *in)
{
    escape_name(out, cap, in, false);
}

/* ---- envoy rules and gRPC ------------------------------------------------------------------ */

static uint64_t envoy_sum(rlt__srv *s, size_t off, size_t i)
{
    uint64_t v = 0;
    for (size_t k = 0; k < RLT__METRIC_SLOTS; k++) {
        const char *base = (const char *)&s->metrics.slots[k].envoy;
        v += ld((const uint64_t *)(const void *)(base + off) + i);
    }
    return v;
}

static void grpc_prometheus(rlt__srv *s, rlt__obuf *o)
{
    static const char *const methods[] = {"ShouldRateLimit", "Check", "other"};
    rlt__obuf_printf(o, "# HELP ratelimitd_grpc_calls_total gRPC calls by method.\n"
                        "# TYPE ratelimitd_grpc_calls_total counter\n");
    for (size_t i = 0; i < 3; i++)
        rlt__obuf_printf(o, "ratelimitd_grpc_calls_total{method=\"%s\"} %" PRIu64 "\n", methods[i],
                         envoy_sum(s, offsetof(rlt__envoy_counters, grpc_calls), i));
    rlt__obuf_printf(o, "# HELP ratelimitd_grpc_responses_total gRPC calls answered, by status "
                        "(every status but OK is an error).\n"
                        "# TYPE ratelimitd_grpc_responses_total counter\n");
    for (size_t i = 0; i < RLT__GRPC_STATUSES; i++) {
        uint64_t v = envoy_sum(s, offsetof(rlt__envoy_counters, grpc_status), i);
        if (v > 0 || i == 0)
            rlt__obuf_printf(o, "ratelimitd_grpc_responses_total{code=\"%s\"} %" PRIu64 "\n",
                             pb_grpc_status_name((int)i), v);
    }
    /* envoyproxy/ratelimit's per-rule stats, for /json and gRPC alike, in hits. */
    static const struct {
        const char *name, *help;
        size_t off;
    } fam[] = {
        {"total_hits", "Hits (hits_addend) on the envoy rule.",
         offsetof(rlt__envoy_counters, total_hits)},
        {"over_limit", "Hits refused by the envoy rule.",
         offsetof(rlt__envoy_counters, over_limit)},
        {"near_limit", "Hits allowed past 80% of the envoy rule's limit.",
         offsetof(rlt__envoy_counters, near_limit)},
        {"within_limit", "Hits allowed by the envoy rule.",
         offsetof(rlt__envoy_counters, within_limit)},
        {"shadow_mode", "Hits a shadow-mode envoy rule would have refused.",
         offsetof(rlt__envoy_counters, shadow_mode)},
    };
    for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++) {
        rlt__obuf_printf(o,
                         "# HELP ratelimitd_envoy_%s_total %s\n# TYPE ratelimitd_envoy_%s_total "
                         "counter\n",
                         fam[f].name, fam[f].help, fam[f].name);
        for (size_t id = 0; id < RLT__METRIC_IDS; id++) {
            if (envoy_sum(s, offsetof(rlt__envoy_counters, total_hits), id) == 0) continue;
            char name[RLT__STR_MAX], esc[2 * RLT__STR_MAX + 8];
            label(esc, sizeof esc, id_name(s, id, name, sizeof name));
            rlt__obuf_printf(o, "ratelimitd_envoy_%s_total{rule=\"%s\"} %" PRIu64 "\n", fam[f].name,
                             esc, envoy_sum(s, fam[f].off, id));
        }
    }
}

/* ---- /metrics and INFO ---------------------------------------------------------------- */

/* Leases held now: concurrency slots in the store, and the backend's local lease units
 * (Redis mode's `lease: true`; 0 without). */
static void leases(rlt__srv *s, rlt_ns now, uint64_t *concurrency, uint64_t *units)
{
    *concurrency = rlt__registry_leases(&s->reg, now);
    *units = s->be != NULL && s->be->ops->lease_units ? s->be->ops->lease_units(s->be) : 0;
}

void rlt__report_prometheus(rlt__srv *s, rlt__obuf *o)
{
    totals t;
    sum(s, &t);
    rlt_store_stats st;
    rlt__registry_stats(&s->reg, &st);
    rlt__metrics *m = &s->metrics;
    rlt__obuf_printf(o,
                     "# HELP ratelimitd_decisions_total Decisions by outcome.\n"
                     "# TYPE ratelimitd_decisions_total counter\n"
                     "ratelimitd_decisions_total{outcome=\"allowed\"} %" PRIu64 "\n"
                     "ratelimitd_decisions_total{outcome=\"denied\"} %" PRIu64 "\n"
                     "ratelimitd_decisions_total{outcome=\"shadow_denied\"} %" PRIu64 "\n",
                     t.allowed, t.denied, t.shadowed);
    rlt__obuf_printf(o, "# HELP ratelimitd_policy_decisions_total Decisions per policy (rule).\n"
                        "# TYPE ratelimitd_policy_decisions_total counter\n");
    size_t nids = rlt__srv_policy_ids(s);
    for (policy_row r = {0}; next_row(s, nids, &r); r.id++) {
        char esc[2 * RLT__STR_MAX + 8];
        label(esc, sizeof esc, r.name);
        rlt__obuf_printf(
            o,
            "ratelimitd_policy_decisions_total{policy=\"%s\",outcome=\"allowed\"} %" PRIu64 "\n"
            "ratelimitd_policy_decisions_total{policy=\"%s\",outcome=\"denied\"} %" PRIu64 "\n"
            "ratelimitd_policy_decisions_total{policy=\"%s\",outcome=\"shadow_denied\"} "
            "%" PRIu64 "\n",
            esc, r.allowed, esc, r.denied, esc, r.shadowed);
    }
    rlt__prom_value(o, "ratelimitd_keys", "gauge", "Live keys in the store.", st.keys);
    if (s->service != NULL) s->service->svc_prometheus(s, o, false);
    rlt__prom_value(o, "ratelimitd_store_bytes", "gauge",
                    "Bytes held by the store for keys, states and its index.", st.bytes);
    const rlt__config *mc = rlt__srv_config(s);
    rlt__prom_family(o, "ratelimitd_memory_bytes", "gauge",
                     "Memory the daemon's budget counts, by part (max_memory).");
    rlt__obuf_printf(o,
                     "ratelimitd_memory_bytes{part=\"store\"} %" PRIu64 "\n"
                     "ratelimitd_memory_bytes{part=\"connections\"} %zu\n",
                     st.bytes, rlt__mem_conn_used());
    rlt__prom_family(o, "ratelimitd_memory_limit_bytes", "gauge",
                     "The memory budget (max_memory), by part.");
    rlt__obuf_printf(o,
                     "ratelimitd_memory_limit_bytes{part=\"store\"} %zu\n"
                     "ratelimitd_memory_limit_bytes{part=\"connections\"} %zu\n",
                     rlt__mem_store_share(mc->set.max_memory),
                     rlt__mem_conn_share(mc->set.max_memory));
    rlt__prom_family(o, "ratelimitd_evictions_total", "counter",
                     "Keys dropped: idle (fresh again) or forced (the store was full).");
    rlt__obuf_printf(o,
                     "ratelimitd_evictions_total{reason=\"idle\"} %" PRIu64 "\n"
                     "ratelimitd_evictions_total{reason=\"forced\"} %" PRIu64 "\n",
                     st.evicted_idle, st.evicted_forced);
    rlt__prom_value(o, "ratelimitd_refused_full_total", "counter",
                    "New keys refused because the store was full (fail_closed).", st.refused_full);
    rlt__prom_value(o, "ratelimitd_reservations", "gauge",
                    "Outstanding reservations (RL.RESERVE, reserve=1) waiting for their settle.",
                    rlt__registry_reservations(&s->reg, rlt__now()));
    uint64_t held, units;
    leases(s, rlt__now(), &held, &units);
    rlt__prom_family(o, "ratelimitd_leases", "gauge",
                     "Leases held now: concurrency slots acquired and neither released nor "
                     "expired (RL.ACQUIRE), and local lease units from Redis not yet spent "
                     "(lease: true).");
    rlt__obuf_printf(o,
                     "ratelimitd_leases{kind=\"concurrency\"} %" PRIu64 "\n"
                     "ratelimitd_leases{kind=\"redis_units\"} %" PRIu64 "\n",
                     held, units);
    rlt__prom_family(o, "ratelimitd_connections", "gauge", "Open client connections.");
    rlt__obuf_printf(o, "ratelimitd_connections %" PRId64 "\n",
                     __atomic_load_n(&m->connections_current, __ATOMIC_RELAXED));
    rlt__prom_value(o, "ratelimitd_connections_total", "counter", "Connections accepted.",
                    ld(&m->connections_total));
    rlt__prom_value(o, "ratelimitd_connections_rejected_total", "counter",
                    "Connections refused because max_connections was reached.",
                    ld(&m->connections_rejected));
    rlt__prom_value(o, "ratelimitd_commands_total", "counter",
                    "Requests executed (RESP commands and HTTP requests).", t.commands);
    rlt__prom_value(o, "ratelimitd_command_errors_total", "counter",
                    "Requests answered with an error.", t.errors);
    rlt__prom_value(o, "ratelimitd_http_requests_total", "counter", "HTTP requests.", t.http);
    rlt__prom_family(o, "ratelimitd_snapshots_total", "counter", "Snapshots written, by result.");
    rlt__obuf_printf(o,
                     "ratelimitd_snapshots_total{result=\"ok\"} %" PRIu64 "\n"
                     "ratelimitd_snapshots_total{result=\"failed\"} %" PRIu64 "\n",
                     ld(&m->snapshots_ok), ld(&m->snapshots_failed));
    rlt__prom_family(o, "ratelimitd_reloads_total", "counter", "Config reloads, by result.");
    rlt__obuf_printf(o,
                     "ratelimitd_reloads_total{result=\"ok\"} %" PRIu64 "\n"
                     "ratelimitd_reloads_total{result=\"failed\"} %" PRIu64 "\n",
                     ld(&m->reloads_ok), ld(&m->reloads_failed));
    rlt__prom_histogram(o, "ratelimitd_command_seconds",
                        "Time to execute a command or HTTP request (excluding network).", t.lat,
                        t.lat_sum);
    rlt__prom_histogram(o, "ratelimitd_spop_notify_seconds",
                        "SPOE agent: a NOTIFY from its frame read to its ACK queued to send.",
                        t.spop_lat, t.spop_lat_sum);
    rlt__prom_family(o, "ratelimitd_backend", "gauge",
                     "Where decisions are made (local store or Redis).");
    rlt__obuf_printf(o, "ratelimitd_backend{backend=\"%s\"} 1\n", rlt__decide_backend_name(s));
    grpc_prometheus(s, o);
    if (s->service != NULL) s->service->svc_prometheus(s, o, true);
    if (s->be != NULL) s->be->ops->prometheus(s->be, o);
}

/* A name for an INFO value: bytes other than [A-Za-z0-9_./@#()-] as %XX (rlt__info_plain). */
static void info_escape(char *out, size_t cap, const char *in)
{
    rlt__pct_encode(in, out, cap, rlt__info_plain);
}

void rlt__report_info(rlt__srv *s, rlt__obuf *o)
{
    totals t;
    sum(s, &t);
    rlt_store_stats st;
    rlt__registry_stats(&s->reg, &st);
    rlt__metrics *m = &s->metrics;
    rlt__config *c = rlt__srv_config(s);
    /* p99 from the histogram: the upper bound of the bucket holding the 99th percentile. */
    uint64_t total = 0, cum = 0;
    for (unsigned b = 0; b < RLT__LAT_BUCKETS; b++)
        total += t.lat[b];
    long long p99 = -1;
    for (unsigned b = 0; b < RLT__LAT_BUCKETS && total > 0; b++) {
        cum += t.lat[b];
        if (cum * 100 >= total * 99) {
            p99 = b == RLT__LAT_BUCKETS - 1 ? -1 : (long long)(UINT64_C(1) << b);
            break;
        }
    }
    rlt__obuf_printf(
        o,
        "# Server\r\nratelimitd_version:0.1.0\r\nredis_version:7.0.0\r\nredis_mode:standalone\r\n"
        "process_id:%ld\r\ntcp_port:%d\r\nuptime_in_seconds:%lld\r\n"
        "\r\n# Clients\r\nconnected_clients:%" PRId64 "\r\nmaxclients:%zu\r\n"
        "total_connections_received:%" PRIu64 "\r\nrejected_connections:%" PRIu64 "\r\n",
        (long)getpid(), c->set.port, (long long)((rlt__now() - s->started) / RLT_NS_PER_S),
        __atomic_load_n(&m->connections_current, __ATOMIC_RELAXED), c->set.max_connections,
        ld(&m->connections_total), ld(&m->connections_rejected));
    rlt__obuf_printf(o,
                     "\r\n# Stats\r\ntotal_commands_processed:%" PRIu64
                     "\r\ncommand_errors:%" PRIu64 "\r\nhttp_requests:%" PRIu64
                     "\r\ndecisions_allowed:%" PRIu64 "\r\ndecisions_denied:%" PRIu64
                     "\r\ndecisions_shadow_denied:%" PRIu64
                     "\r\nlatency_p99_le_us:%lld\r\nlatency_avg_ns:%" PRIu64 "\r\n",
                     t.commands, t.errors, t.http, t.allowed, t.denied, t.shadowed, p99,
                     t.commands ? t.lat_sum / t.commands : 0);
    size_t conn_used = rlt__mem_conn_used();
    rlt__obuf_printf(o,
                     "\r\n# Memory\r\nused_memory:%" PRIu64 "\r\nused_memory_store:%" PRIu64
                     "\r\nused_memory_connections:%zu\r\nused_memory_scratch:%zu\r\n"
                     "maxmemory:%zu\r\nmaxmemory_store:%zu\r\nmaxmemory_connections:%zu\r\n"
                     "maxmemory_policy:%s\r\n",
                     st.bytes + conn_used, st.bytes, conn_used, rlt__scratch_total(),
                     c->set.max_memory,
                     rlt__mem_store_share(c->set.max_memory),
                     rlt__mem_conn_share(c->set.max_memory),
                     c->set.fail_closed ? "noeviction" : "volatile-lru");
    rlt__obuf_printf(
        o,
        "\r\n# Keyspace\r\nkeys:%" PRIu64 "\r\nstore_bytes:%" PRIu64 "\r\nevicted_idle:%" PRIu64
        "\r\nevicted_forced:%" PRIu64 "\r\nrefused_full:%" PRIu64 "\r\nreservations:%zu"
        "\r\n\r\n# Persistence\r\nsnapshot_path:%s\r\nsnapshots_ok:%" PRIu64
        "\r\nsnapshots_failed:%" PRIu64 "\r\nreloads_ok:%" PRIu64 "\r\nreloads_failed:%" PRIu64
        "\r\n",
        st.keys, st.bytes, st.evicted_idle, st.evicted_forced, st.refused_full,
        rlt__registry_reservations(&s->reg, rlt__now()), c->set.snapshot, ld(&m->snapshots_ok),
        ld(&m->snapshots_failed), ld(&m->reloads_ok), ld(&m->reloads_failed));
    /* One line per policy, as Redis's "db0:keys=1,expires=0": the field is policy<id>, the
     * value k=v pairs (redis-py parses them into a dict), the name escaped so that it holds no
     * ',', '=', ':' or space (info_escape). */
    rlt__obuf_printf(o, "\r\n# Policies\r\n");
    size_t nids = rlt__srv_policy_ids(s);
    for (policy_row r = {0}; next_row(s, nids, &r); r.id++) {
        char esc[3 * RLT__STR_MAX + 8];
        info_escape(esc, sizeof esc, r.name);
        rlt__obuf_printf(o,
                         "policy%zu:name=%s,allowed=%" PRIu64 ",denied=%" PRIu64
                         ",shadow_denied=%" PRIu64 "\r\n",
                         r.id, esc, r.allowed, r.denied, r.shadowed);
    }
    if (s->service != NULL) s->service->svc_info(s, o, false);
    rlt__obuf_printf(o, "\r\n# Backend\r\nbackend:%s\r\n", rlt__decide_backend_name(s));
    if (s->be != NULL) s->be->ops->info(s->be, o);
    if (s->service != NULL) s->service->svc_info(s, o, true);
}

/* ---- top offenders ------------------------------------------------------------------------- */

/* Printable ASCII but the three bytes that would need escaping in JSON or in a Prometheus
 * label value, or would make percent-decoding ambiguous. */
static bool text_plain(unsigned char c)
{
    return c >= 0x20 && c < 0x7f && c != '%' && c != '"' && c != '\\';
}

/* The merged entries a session may see, in `e` (entries' keys moved past a tenant's prefix):
 * returns how many, at most max; *view gets the sketch to close. */
static size_t visible(rlt__srv *s, const rlt__session *ss, size_t max, rlt_topk **view,
                      rlt_topk_entry **e)
{
    *view = rlt__top_merged(s->top);
    *e = NULL;
    if (*view == NULL) return 0;
    size_t all = rlt_topk_size(*view);
    *e = calloc(all ? all : 1, sizeof **e);
    if (*e == NULL) return 0;
    all = rlt_topk_list(*view, *e, all);
    bool tenant = ss != NULL && ss->auth == RLT__AUTH_TENANT;
    size_t m = 0;
    for (size_t i = 0; i < all && m < max; i++) {
        rlt_topk_entry x = (*e)[i];
        if (tenant) {
            if (x.klen <= ss->prefix_len || memcmp(x.key, ss->prefix, ss->prefix_len) != 0)
                continue;
            x.key += ss->prefix_len;
            x.klen -= ss->prefix_len;
        }
        (*e)[m++] = x;
    }
    return m;
}

/* A key's encoding (3 bytes per key byte at most, and the NUL). */
typedef char enc_key[3 * RLT_KEY_MAX + 1];

static void enc(const uint8_t *p, size_t n, char *out, bool (*plain)(unsigned char))
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (plain(p[i])) {
            out[o++] = (char)p[i];
        } else {
            out[o++] = '%';
            out[o++] = hex[p[i] >> 4];
            out[o++] = hex[p[i] & 15];
        }
    }
    out[o] = '\0';
}

static void enc_policy(rlt__srv *s, int id, char *out, size_t cap, bool (*plain)(unsigned char))
{
    char name[RLT__STR_MAX];
    rlt__srv_policy_name(s, id, name, sizeof name);
    rlt__pct_encode(name, out, cap, plain);
}

void rlt__report_top_info(rlt__srv *s, const rlt__session *ss, rlt__obuf *o)
{
    rlt__top *t = s->top;
    rlt_topk *view;
    rlt_topk_entry *e;
    size_t n = visible(s, ss, SIZE_MAX, &view, &e);
    rlt__obuf_printf(o,
                     "\r\n# Top\r\ntop_keys:%zu\r\ntop_denied_total:%" PRIu64
                     "\r\ntop_floor:%" PRIu64 "\r\ntop_dropped:%" PRIu64 "\r\n",
                     rlt__top_k(t), rlt_topk_total(view), rlt_topk_floor(view),
                     rlt__top_dropped(t));
    enc_key key; /* 1.5 KB: on the stack */
    char pol[3 * RLT__STR_MAX + 1];
    for (size_t i = 0; i < n; i++) {
        enc(e[i].key, e[i].klen, key, rlt__info_plain);
        enc_policy(s, e[i].policy, pol, sizeof pol, rlt__info_plain);
        rlt__obuf_printf(o, "top%zu:key=%s,policy=%s,denied=%" PRIu64 ",error=%" PRIu64 "\r\n",
                         i + 1, key, pol, e[i].count, e[i].error);
    }
    free(e);
    rlt_topk_close(view);
}

void rlt__report_top_json(rlt__srv *s, const rlt__session *ss, size_t max, rlt__obuf *o)
{
    rlt_topk *view;
    rlt_topk_entry *e;
    size_t n = visible(s, ss, max, &view, &e);
    rlt__obuf_printf(o, "{\"k\":%zu,\"total\":%" PRIu64 ",\"floor\":%" PRIu64 ",\"keys\":[",
                     rlt__top_k(s->top), rlt_topk_total(view), rlt_topk_floor(view));
    enc_key key; /* 1.5 KB: on the stack */
    char pol[3 * RLT__STR_MAX + 1];
    for (size_t i = 0; i < n; i++) {
        enc(e[i].key, e[i].klen, key, text_plain);
        enc_policy(s, e[i].policy, pol, sizeof pol, text_plain);
        rlt__obuf_printf(
            o, "%s{\"key\":\"%s\",\"policy\":\"%s\",\"denied\":%" PRIu64 ",\"error\":%" PRIu64 "}",
            i ? "," : "", key, pol, e[i].count, e[i].error);
    }
    rlt__obuf_printf(o, "]}\n");
    free(e);
    rlt_topk_close(view);
}

void rlt__report_top_prometheus(rlt__srv *s, const rlt__session *ss, rlt__obuf *o)
{
    if (s->top == NULL) return;
    rlt_topk *view;
    rlt_topk_entry *e;
    size_t n = visible(s, ss, RLT__TOP_METRICS, &view, &e);
    enc_key key; /* 1.5 KB: on the stack */
    char pol[3 * RLT__STR_MAX + 1];
    static const char *const fam[2] = {"ratelimitd_top_denied", "ratelimitd_top_denied_error"};
    static const char *const help[2] = {
        "Denials of the keys denied most (top offenders, estimated: at most this many).",
        "How much of ratelimitd_top_denied may be over-estimated (true >= denied - error)."};
    for (int f = 0; f < 2; f++) {
        rlt__prom_family(o, fam[f], "gauge", help[f]);
        for (size_t i = 0; i < n; i++) {
            enc(e[i].key, e[i].klen, key, text_plain);
            enc_policy(s, e[i].policy, pol, sizeof pol, text_plain);
            rlt__obuf_printf(o, "%s{rank=\"%zu\",key=\"%s\",policy=\"%s\"} %" PRIu64 "\n", fam[f],
                             i + 1, key, pol, f == 0 ? e[i].count : e[i].error);
        }
    }
    rlt__prom_value(o, "ratelimitd_top_floor", "gauge",
                    "Most denials any key not in ratelimitd_top_denied can have had.",
                    rlt_topk_floor(view));
    free(e);
    rlt_topk_close(view);
}

/* /v1/stats: the series' rows (names percent-encoded as /v1/top's), the outstanding
 * reservations and the backend's INFO lines.  The series is copied out under its lock, then
 * rendered without it. */
void rlt__report_stats_json(rlt__srv *s, rlt_ns now, rlt__obuf *o)
{
    rlt__series_view *v = malloc(RLT__SERIES_POLICIES * sizeof *v);
    int64_t last;
    uint64_t untracked;
    size_t n = v ? rlt__series_read(&s->series, v, RLT__SERIES_POLICIES, &last, &untracked) : 0;
    if (v == NULL) last = -1, untracked = 0;
    uint64_t held, units;
    leases(s, now, &held, &units);
    rlt__obuf_printf(o,
                     "{\"now_s\":%" PRId64 ",\"len\":%d,\"untracked\":%" PRIu64
                     ",\"reservations\":%zu,\"leases\":{\"concurrency\":%" PRIu64
                     ",\"redis_units\":%" PRIu64 "},\"backend\":\"%s\",\"backend_info\":[",
                     last, RLT__SERIES_LEN, untracked, rlt__registry_reservations(&s->reg, now),
                     held, units, rlt__decide_backend_name(s));
    rlt__obuf info = {0};
    if (s->be->ops->info) s->be->ops->info(s->be, &info);
    char line[512], esc[3 * sizeof line];
    size_t k = 0;
    for (size_t i = 0; i < info.len;) {
        size_t j = i;
        while (j < info.len && info.data[j] != '\r' && info.data[j] != '\n')
            j++;
        size_t ln = j - i < sizeof line - 1 ? j - i : sizeof line - 1;
        memcpy(line, info.data + i, ln);
        line[ln] = '\0';
        if (ln > 0) {
            rlt__pct_encode(line, esc, sizeof esc, text_plain);
            rlt__obuf_printf(o, "%s\"%s\"", k++ ? "," : "", esc);
        }
        i = j + 1;
    }
    rlt__obuf_free(&info);
    rlt__obuf_printf(o, "],\"policies\":[");
    char pol[3 * RLT__STR_MAX + 1];
    for (size_t i = 0; i < n; i++) {
        if (v[i].id == RLT__METRIC_IDS - 1)
            snprintf(pol, sizeof pol, "(other)");
        else
            enc_policy(s, (int)v[i].id, pol, sizeof pol, text_plain);
        rlt__obuf_printf(
            o, "%s{\"policy\":\"%s\",\"allowed_total\":%" PRIu64 ",\"denied_total\":%" PRIu64 ",",
            i ? "," : "", pol, v[i].allowed, v[i].denied);
        for (int w = 0; w < 2; w++) {
            const uint32_t *x = w == 0 ? v[i].a : v[i].d;
            rlt__obuf_printf(o, "%s\":[", w == 0 ? "\"allowed" : ",\"denied");
            for (size_t t = 0; t < RLT__SERIES_LEN; t++)
                rlt__obuf_printf(o, t ? ",%u" : "%u", (unsigned)x[t]);
            rlt__obuf_printf(o, "]");
        }
        rlt__obuf_printf(o, "}");
    }
    rlt__obuf_printf(o, "]");
    if (s->service != NULL) s->service->svc_stats_json(s, now, o);
    rlt__obuf_printf(o, "}\n");
    free(v);
}
