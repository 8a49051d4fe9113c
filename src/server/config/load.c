/* Reading ratelimitd's YAML configuration: envoyproxy/ratelimit's descriptor format plus our
 * extensions (algorithm, burst, policy text per rule; named policies; tiers; tenants; daemon
 * settings), parsed with libyaml into an immutable rlt__config.  This file reads the document,
 * the `server:` and `redis:` settings and files or directories of them; the limits' sections
 * are rules.c's, the typed node readers yaml.c's. */
#include "server/config/load.h"

#include "server/config/rlqs_cfg.h"
#include "server/config/rules.h"
#include "server/config/yaml.h"

#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

/* ---- settings ------------------------------------------------------------------------- */

/* A header name for gRPC metadata: 1..63 bytes of lower-case token characters (HTTP/2
 * forbids upper case), stored lower-cased. */
static int header_name(rlt__cy *x, yaml_node_t *v, char out[64])
{
    if (rlt__cy_get_str(x, v, out, 64, "a header name") != RLT_OK) return RLT_EPARSE;
    if (out[0] == '\0') return rlt__cy_fail(x, v, "a header name must not be empty");
    for (char *p = out; *p; p++) {
        char c = *p;
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
            return rlt__cy_fail(x, v, "a header name takes letters, digits, '-' and '_'");
        *p = c;
    }
    return RLT_OK;
}

/* Every `server:` setting, its type, where it goes and the values that make sense: 0 is refused
 * where it cannot work (no connections, no output buffer, no deadline), and a maximum is
 * refused when the daemon could never honour it (a bulk string larger than a connection's
 * input buffer). */
typedef enum setting_kind {
    SET_STR,
    SET_INT,
    SET_SIZE,
    SET_BYTES,
    SET_DUR,
    SET_BOOL,
    SET_HEADER /* a header name (header_name) */
} setting_kind;
typedef struct setting {
    const char *name;
    setting_kind kind;
    size_t at;      /* offsetof in rlt__settings */
    int64_t lo, hi; /* SET_INT, SET_SIZE; SET_DUR in ns */
    const char *what;
} setting;

#define S(f) offsetof(rlt__settings, f)
static const setting settings[] = {
    {"bind", SET_STR, S(bind), 0, 0, "bind"},
    {"port", SET_INT, S(port), -1, 65535, "a port (-1 = off, 0 = any free port)"},
    {"http_port", SET_INT, S(http_port), -1, 65535, "a port (-1 = off, 0 = any free port)"},
    {"grpc_port", SET_INT, S(grpc_port), -1, 65535, "a port (-1 = off, 0 = any free port)"},
    {"spop_port", SET_INT, S(spop_port), -1, 65535, "a port (-1 = off, 0 = any free port)"},
    {"ietf_headers", SET_BOOL, S(envoy_headers.ietf), 0, 0, "ietf_headers"},
    {"retry_after_header", SET_BOOL, S(envoy_headers.retry_after), 0, 0, "retry_after_header"},
    {"x_ratelimit_headers", SET_BOOL, S(envoy_headers.x), 0, 0, "x_ratelimit_headers"},
    {"x_ratelimit_limit_header", SET_HEADER, S(envoy_headers.x_limit), 0, 0, "a header name"},
    {"x_ratelimit_remaining_header", SET_HEADER, S(envoy_headers.x_remaining), 0, 0,
     "a header name"},
    {"x_ratelimit_reset_header", SET_HEADER, S(envoy_headers.x_reset), 0, 0, "a header name"},
    {"threads", SET_INT, S(threads), 0, 64, "threads"},
    {"password", SET_STR, S(password), 0, 0, "password"},
    {"snapshot", SET_STR, S(snapshot), 0, 0, "snapshot"},
    {"snapshot_interval", SET_DUR, S(snapshot_interval), 0, 86400 * RLT_NS_PER_S,
     "snapshot_interval"},
    {"max_keys", SET_SIZE, S(max_keys), 0, INT64_C(1) << 40, "max_keys"},
    {"fail_closed", SET_BOOL, S(fail_closed), 0, 0, "fail_closed"},
    {"max_connections", SET_SIZE, S(max_connections), 1, 1 << 24, "max_connections"},
    {"max_memory", SET_BYTES, S(max_memory), 16 << 20, INT64_C(1) << 40, "max_memory"},
    {"max_output_buffer", SET_BYTES, S(max_output), 4096, INT64_C(1) << 32, "max_output_buffer"},
    {"client_timeout", SET_DUR, S(client_timeout), 10 * RLT_NS_PER_MS, 3600 * RLT_NS_PER_S,
     "client_timeout"},
    {"idle_timeout", SET_DUR, S(idle_timeout), 0, 30 * 86400 * RLT_NS_PER_S, "idle_timeout"},
    {"max_inline_policies", SET_SIZE, S(max_inline_policies), 1, 1 << 20, "max_inline_policies"},
    {"max_args", SET_SIZE, S(max_args), 8, 1 << 20, "max_args"},
    {"max_bulk", SET_SIZE, S(max_bulk), 1024, RLT__MAX_INPUT / 2, "max_bulk"},
    {"shadow_mode", SET_BOOL, S(shadow_mode), 0, 0, "shadow_mode"},
    {"max_reservations", SET_SIZE, S(max_reservations), 1, 1 << 24, "max_reservations"},
    {"max_reservations_per_client", SET_SIZE, S(max_reservations_per_client), 1, 1 << 24,
     "max_reservations_per_client"},
    {"rlqs_max_buckets_per_client", SET_SIZE, S(rlqs_max_buckets_per_client), 1, 65536,
     "rlqs_max_buckets_per_client"},
    {"rlqs_max_streams_per_client", SET_SIZE, S(rlqs_max_streams_per_client), 1, 65536,
     "rlqs_max_streams_per_client"},
    {"max_reservation_timeout", SET_DUR, S(max_reservation_timeout), RLT_NS_PER_MS,
     86400 * RLT_NS_PER_S, "max_reservation_timeout"},
    {"top_keys", SET_SIZE, S(top_keys), 0, RLT__TOP_KEYS_MAX, "top_keys"},
    {"ui", SET_BOOL, S(ui), 0, 0, "ui"},
};
#undef S

static int read_setting(rlt__cy *x, const setting *st, yaml_node_t *v)
{
    char *at = (char *)&x->c->set + st->at;
    int64_t i = 0;
    int r;
    switch (st->kind) {
    case SET_STR:
        return rlt__cy_get_str(x, v, at, RLT__STR_MAX, st->what);
    case SET_BOOL:
        return rlt__cy_get_bool(x, v, (bool *)at, st->what);
    case SET_HEADER:
        return header_name(x, v, at);
    case SET_DUR: {
        rlt_ns d;
        if ((r = rlt__cy_get_duration(x, v, &d, st->what)) != RLT_OK) return r;
        if (d < st->lo || d > st->hi)
            return rlt__cy_fail(x, v, "%s must be a duration in [%lld ms, %lld s]", st->what,
                                (long long)(st->lo / RLT_NS_PER_MS),
                                (long long)(st->hi / RLT_NS_PER_S));
        *(rlt_ns *)at = d;
        return RLT_OK;
    }
    case SET_BYTES:
        if ((r = rlt__cy_get_bytes(x, v, st->lo, st->hi, &i, st->what)) != RLT_OK) return r;
        *(size_t *)at = (size_t)i;
        return RLT_OK;
    case SET_INT:
    case SET_SIZE:
        if ((r = rlt__cy_get_int(x, v, st->lo, st->hi, &i, st->what)) != RLT_OK) return r;
        if (st->kind == SET_INT)
            *(int *)at = (int)i;
        else
            *(size_t *)at = (size_t)i;
        return RLT_OK;
    }
    return RLT_EPARSE;
}

static int parse_settings(rlt__cy *x, yaml_node_t *n)
{
    if (rlt__cy_need_map(x, n, "server") != RLT_OK) return RLT_EPARSE;
    FOR_PAIRS(x, n, k, v)
    {
        size_t kl;
        const char *key = rlt__cy_key_of(k, &kl);
        const setting *st = NULL;
        for (size_t i = 0; i < sizeof settings / sizeof settings[0] && st == NULL; i++)
            if (rlt__cy_eq(key, kl, settings[i].name)) st = &settings[i];
        int r =
            st ? read_setting(x, st, v)
               : rlt__cy_fail(x, k, "unknown server setting '%.*s'", (int)(kl > 64 ? 64 : kl), key);
        if (r != RLT_OK) return RLT_EPARSE;
    }
    return RLT_OK;
}

/* ---- the shared store: `redis:` ------------------------------------------------------ */

/* `fail: open|closed` (RLT__FAIL_OPEN / RLT__FAIL_CLOSED). */
static int get_redis_duration(rlt__cy *x, const yaml_node_t *n, rlt_ns lo, rlt_ns hi, rlt_ns *out,
                              const char *what)
{
    size_t len;
    const char *s = rlt__cy_scalar(n, &len);
    if (s == NULL || rlt_duration_parse(s, len, 0, out) != RLT_OK || *out < lo || *out > hi)
        return rlt__cy_fail(x, n,
                            "%s must be a duration with a unit between %lldms and %llds, e.g. 50ms",
                            what, (long long)(lo / RLT_NS_PER_MS), (long long)(hi / RLT_NS_PER_S));
    return RLT_OK;
}

/* redis.sentinel: "host:port[,...]" or a list of them, into rs->address (config.h). */
static int get_sentinels(rlt__cy *x, yaml_node_t *v, rlt__redis_settings *rs)
{
    if (v->type != YAML_SEQUENCE_NODE)
        return rlt__cy_get_str(x, v, rs->address, sizeof rs->address, "redis sentinel");
    rs->address[0] = '\0';
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
         it++) {
        char one[RLT__STR_MAX];
        size_t used = strlen(rs->address);
        if (rlt__cy_get_str(x, rlt__cy_node(x, *it), one, sizeof one, "a sentinel address") != RLT_OK)
            return RLT_EPARSE;
        size_t n = strlen(one);
        if (used + n + 2 > sizeof rs->address)
            return rlt__cy_fail(x, v, "redis sentinels are longer than %zu bytes",
                                sizeof rs->address - 1);
        if (used) rs->address[used++] = ',';
        memcpy(rs->address + used, one, n + 1); /* fits: checked above */
    }
    return RLT_OK;
}

static int parse_redis(rlt__cy *x, yaml_node_t *n)
{
    rlt__redis_settings *rs = &x->c->set.redis;
    bool has_address = false, has_sentinel = false;
    if (n != NULL && n->type == YAML_SCALAR_NODE) /* redis: "host:port" */
        return rlt__cy_get_str(x, n, rs->address, sizeof rs->address, "redis");
    if (rlt__cy_need_map(x, n, "redis") != RLT_OK) return RLT_EPARSE;
    FOR_PAIRS(x, n, k, v)
    {
        size_t kl;
        const char *key = rlt__cy_key_of(k, &kl);
        int64_t i = 0;
        int r;
        if (rlt__cy_eq(key, kl, "address") || rlt__cy_eq(key, kl, "addresses")) {
            has_address = true;
            if (v->type == YAML_SEQUENCE_NODE) { /* a list of seed nodes */
                rs->address[0] = '\0';
                r = 0;
                for (yaml_node_item_t *it = v->data.sequence.items.start;
                     r == 0 && it < v->data.sequence.items.top; it++) {
                    char one[RLT__STR_MAX];
                    size_t used = strlen(rs->address);
                    r = rlt__cy_get_str(x, rlt__cy_node(x, *it), one, sizeof one,
                                        "a Redis address");
                    if (r == 0 && used + strlen(one) + 2 > sizeof rs->address)
                        r = rlt__cy_fail(x, v, "redis addresses are longer than %zu bytes",
                                         sizeof rs->address - 1);
                    if (r == 0)
                        snprintf(rs->address + used, sizeof rs->address - used, "%s%s",
                                 used ? "," : "", one);
                }
            } else {
                r = rlt__cy_get_str(x, v, rs->address, sizeof rs->address, "redis address");
            }
        } else if (rlt__cy_eq(key, kl, "sentinel") || rlt__cy_eq(key, kl, "sentinels")) {
            has_sentinel = true;
            r = get_sentinels(x, v, rs);
        } else if (rlt__cy_eq(key, kl, "master_name")) {
            r = rlt__cy_get_str(x, v, rs->master_name, sizeof rs->master_name, "redis master_name");
            if (r == 0 && (rs->master_name[0] == '\0' || strpbrk(rs->master_name, " \t\r\n")))
                r = rlt__cy_fail(x, v, "redis master_name must be a name without spaces");
        } else if (rlt__cy_eq(key, kl, "cluster"))
            r = rlt__cy_get_bool(x, v, &rs->cluster, "redis cluster");
        else if (rlt__cy_eq(key, kl, "password"))
            r = rlt__cy_get_str(x, v, rs->password, sizeof rs->password, "redis password");
        else if (rlt__cy_eq(key, kl, "prefix"))
            r = rlt__cy_get_str(x, v, rs->prefix, sizeof rs->prefix, "redis prefix");
        else if (rlt__cy_eq(key, kl, "timeout"))
            r = get_redis_duration(x, v, RLT_NS_PER_MS, 60 * RLT_NS_PER_S, &rs->timeout,
                                   "redis timeout");
        else if (rlt__cy_eq(key, kl, "timeout_ms")) {
            r = rlt__cy_get_int(x, v, 1, 60000, &i, "redis timeout_ms");
            rs->timeout = i * RLT_NS_PER_MS;
        } else if (rlt__cy_eq(key, kl, "fail")) {
            int f = 0;
            r = rlt__cy_get_fail(x, v, &f);
            rs->fail_open = f == RLT__FAIL_OPEN;
            rs->fail_local = f == RLT__FAIL_LOCAL;
        } else if (rlt__cy_eq(key, kl, "fleet_size")) {
            r = rlt__cy_get_int(x, v, 1, 65536, &i, "redis fleet_size");
            rs->fleet_size = (unsigned)i;
        } else if (rlt__cy_eq(key, kl, "breaker_failures")) {
            r = rlt__cy_get_int(x, v, 1, 1000, &i, "redis breaker_failures");
            rs->breaker_failures = (unsigned)i;
        } else if (rlt__cy_eq(key, kl, "backoff_min"))
            r = get_redis_duration(x, v, RLT_NS_PER_MS, 3600 * RLT_NS_PER_S, &rs->backoff_min,
                                   "redis backoff_min");
        else if (rlt__cy_eq(key, kl, "backoff_max"))
            r = get_redis_duration(x, v, RLT_NS_PER_MS, 3600 * RLT_NS_PER_S, &rs->backoff_max,
                                   "redis backoff_max");
        else if (rlt__cy_eq(key, kl, "lease_units")) {
            r = rlt__cy_get_int(x, v, 1, INT64_C(1) << 40, &i, "redis lease_units");
            rs->lease_units = i;
        } else if (rlt__cy_eq(key, kl, "engine")) {
            size_t el;
            const char *e = rlt__cy_scalar(v, &el);
            rs->engine = e && rlt__cy_eq(e, el, "scripts")  ? 1
                         : e && rlt__cy_eq(e, el, "module") ? 2
                         : e && rlt__cy_eq(e, el, "auto")   ? 0
                                                            : -1;
            r = rs->engine < 0 ? rlt__cy_fail(x, v, "redis engine must be auto, scripts or module")
                               : RLT_OK;
        } else if (rlt__cy_eq(key, kl, "lease_ttl"))
            r = get_redis_duration(x, v, RLT_NS_PER_MS, 3600 * RLT_NS_PER_S, &rs->lease_ttl,
                                   "redis lease_ttl");
        else
            r = rlt__cy_fail(
                x, k,
                "unknown redis setting '%.*s' (address, cluster, sentinel, master_name, "
                "password, prefix, timeout, fail, breaker_failures, backoff_min, "
                "backoff_max, lease_units, lease_ttl, engine, fleet_size)",
                (int)(kl > 64 ? 64 : kl), key);
        if (r < 0) return RLT_EPARSE;
    }
    if (has_address && has_sentinel)
        return rlt__cy_fail(x, n, "redis: address or sentinel, not both");
    if (has_sentinel != (rs->master_name[0] != '\0'))
        return rlt__cy_fail(x, n,
                            has_sentinel ? "redis sentinel needs master_name (the "
                                           "sentinels' name of the master)"
                                         : "redis master_name needs sentinel");
    if (has_sentinel && rs->cluster)
        return rlt__cy_fail(x, n, "redis: cluster or sentinel, not both");
    if (rs->address[0] == '\0') return rlt__cy_fail(x, n, "redis needs an address (host:port)");
    if (rs->backoff_min != 0 && rs->backoff_max != 0 && rs->backoff_max < rs->backoff_min)
        return rlt__cy_fail(x, n, "redis backoff_max is shorter than backoff_min");
    return RLT_OK;
}

static int parse_root(rlt__cy *x, yaml_node_t *root)
{
    if (root == NULL) {
        x->c->empty = true; /* an empty file: the defaults (refused by a reload) */
        return RLT_OK;
    }
    if (rlt__cy_need_map(x, root, "the top level") != RLT_OK) return RLT_EPARSE;
    yaml_node_t *domain = NULL, *descs = NULL, *tiers = NULL, *policies = NULL;
    yaml_node_t *qb = NULL, *qdefault = NULL, *qttl = NULL; /* Envoy's RLQS (rlqs_cfg.h) */
    /* policies first: tiers refer to them wherever they appear in the file. */
    FOR_PAIRS(x, root, k, v)
    {
        size_t kl;
        const char *kk = rlt__cy_key_of(k, &kl);
        if (rlt__cy_eq(kk, kl, "policies")) policies = v;
    }
    if (policies != NULL && rlt__cy_parse_policies(x, policies) != RLT_OK) return RLT_EPARSE;
    FOR_PAIRS(x, root, k, v)
    {
        size_t kl;
        const char *kk = rlt__cy_key_of(k, &kl);
        int r = 0;
        if (rlt__cy_eq(kk, kl, "domain"))
            domain = v;
        else if (rlt__cy_eq(kk, kl, "descriptors"))
            descs = v;
        else if (rlt__cy_eq(kk, kl, "policies"))
            continue;
        else if (rlt__cy_eq(kk, kl, "quota_buckets"))
            qb = v;
        else if (rlt__cy_eq(kk, kl, "quota_default"))
            qdefault = v;
        else if (rlt__cy_eq(kk, kl, "assignment_ttl"))
            qttl = v;
        else if (rlt__cy_eq(kk, kl, "tiers"))
            tiers = v;
        else if (rlt__cy_eq(kk, kl, "server"))
            r = parse_settings(x, v);
        else if (rlt__cy_eq(kk, kl, "redis"))
            r = parse_redis(x, v);
        else if (rlt__cy_eq(kk, kl, "tenants"))
            r = rlt__cy_parse_tenants(x, v);
        else if (rlt__cy_eq(kk, kl, "default_tier"))
            r = rlt__cy_get_str(x, v, x->c->default_tier, sizeof x->c->default_tier,
                                "default_tier");
        else if (rlt__cy_eq(kk, kl, "domains")) {
            if (rlt__cy_need_seq(x, v, "domains") != RLT_OK) return RLT_EPARSE;
            for (yaml_node_item_t *it = v->data.sequence.items.start;
                 it < v->data.sequence.items.top; it++) {
                yaml_node_t *e = rlt__cy_node(x, *it);
                if (rlt__cy_need_map(x, e, "a domain") != RLT_OK) return RLT_EPARSE;
                yaml_node_t *dn = NULL, *dd = NULL;
                FOR_PAIRS(x, e, k2, v2)
                {
                    size_t k2l;
                    const char *key2 = rlt__cy_key_of(k2, &k2l);
                    if (rlt__cy_eq(key2, k2l, "domain"))
                        dn = v2;
                    else if (rlt__cy_eq(key2, k2l, "descriptors"))
                        dd = v2;
                    else
                        return rlt__cy_fail(x, k2, "a domain takes domain and descriptors");
                }
                if (dn == NULL) return rlt__cy_fail(x, e, "a domain entry needs domain:");
                if (rlt__cy_add_domain(x, dn, dd) != RLT_OK) return RLT_EPARSE;
            }
        } else
            r = rlt__cy_fail(x, k, "unknown top-level key '%.*s'", (int)(kl > 64 ? 64 : kl), kk);
        if (r < 0) return RLT_EPARSE;
    }
    if (descs != NULL && domain == NULL) return rlt__cy_fail(x, descs, "descriptors need a domain");
    if (domain != NULL && rlt__cy_add_domain(x, domain, descs) != RLT_OK) return RLT_EPARSE;
    yaml_node_t *q = qb ? qb : qdefault ? qdefault : qttl;
    if (q != NULL && domain == NULL) return rlt__cy_fail(x, q, "quota buckets need a domain");
    if (domain != NULL &&
        rlt__rlqs_cfg_parse(x, &x->c->domains[x->c->ndomains - 1], qb, qdefault, qttl) != RLT_OK)
        return RLT_EPARSE;
    if (rlt__cy_check_rule_names(x) != RLT_OK) return RLT_EPARSE;
    if (tiers != NULL && rlt__cy_parse_tiers(x, tiers) != RLT_OK) return RLT_EPARSE;
    if (x->c->default_tier[0] != '\0') {
        bool found = false;
        for (size_t i = 0; i < x->c->ntiers; i++)
            found |= strcmp(x->c->tiers[i].name, x->c->default_tier) == 0;
        if (!found)
            return rlt__cy_fail(x, root, "default_tier '%s' is not a tier", x->c->default_tier);
    }
    return RLT_OK;
}

/* One document per file: a second one ("---") would be silently ignored, so it is refused. */
static int no_second_document(rlt__cy *x, yaml_parser_t *parser, const char *file)
{
    yaml_document_t next;
    if (!yaml_parser_load(parser, &next)) {
        snprintf(x->err, x->errlen, "%s:%lu: %s", file,
                 (unsigned long)parser->problem_mark.line + 1,
                 parser->problem ? parser->problem : "YAML syntax error");
        return RLT_EPARSE;
    }
    yaml_node_t *root = yaml_document_get_root_node(&next);
    int r = RLT_OK;
    if (root != NULL)
        r = rlt__cy_fail(x, root, "a second YAML document: one config file holds one document");
    yaml_document_delete(&next);
    return r;
}

/* Refuses a document nested deeper than MAX_NESTING before it is loaded.  libyaml's scanner
 * checks every open flow level at every token (its simple keys), so flow collections nested
 * 10k deep take 0.4 s, 30k 4 s, and a 16 MiB file hours, and block nesting grows the same
 * way; go-yaml (envoyproxy/ratelimit's) refuses deep nesting likewise.  Events are read only
 * until the bound is passed, so the pass is linear in the text.  A syntax error ends the pass:
 * the load that follows reports it. */
static int check_nesting(const char *text, size_t len, const char *file, char *err, size_t errlen)
{
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) {
        snprintf(err, errlen, "%s: out of memory", file);
        return RLT_EPARSE;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    int depth = 0, r = RLT_OK;
    for (bool done = false; !done;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev)) break;
        switch (ev.type) {
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
            if (++depth > MAX_NESTING) {
                snprintf(err, errlen, "%s:%lu: nested deeper than %d levels", file,
                         (unsigned long)ev.start_mark.line + 1, MAX_NESTING);
                r = RLT_EPARSE;
                done = true;
            }
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT: depth--; break;
        case YAML_STREAM_END_EVENT: done = true; break;
        default: break;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&parser);
    return r;
}

/* Parses YAML text into c (a second file adds its domains to those already in c). */
static int parse_into(rlt__config *c, const char *text, size_t len, const char *file, char *err,
                      size_t errlen)
{
    if (check_nesting(text, len, file, err, errlen) != RLT_OK) return RLT_EPARSE;
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser)) {
        snprintf(err, errlen, "%s: out of memory", file);
        return RLT_EPARSE;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        /* An error at the end of the input (a truncated flow node) has its mark past the last
         * line: name the last line instead. */
        unsigned long lines = 0, line = (unsigned long)parser.problem_mark.line + 1;
        for (size_t i = 0; i < len; i++)
            lines += text[i] == '\n';
        if (len > 0 && text[len - 1] != '\n') lines++;
        if (lines == 0) lines = 1;
        if (line > lines) line = lines;
        snprintf(err, errlen, "%s:%lu: %s%s%s", file, line,
                 parser.problem ? parser.problem : "YAML syntax error", parser.context ? " " : "",
                 parser.context ? parser.context : "");
        yaml_parser_delete(&parser);
        return RLT_EPARSE;
    }
    rlt__cy x = {.doc = &doc, .file = file, .err = err, .errlen = errlen, .c = c};
    int r = rlt__cy_check_document(&x);
    if (r == RLT_OK) r = parse_root(&x, yaml_document_get_root_node(&doc));
    if (r == RLT_OK) r = no_second_document(&x, &parser, file);
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return r < 0 ? RLT_EPARSE : RLT_OK;
}

int rlt__config_parse(const char *text, size_t len, const char *file, rlt__config **out, char *err,
                      size_t errlen)
{
    *out = NULL;
    rlt__config *c = rlt__config_new();
    if (c == NULL) {
        snprintf(err, errlen, "%s: out of memory", file);
        return RLT_EPARSE;
    }
    if (parse_into(c, text, len, file, err, errlen) != RLT_OK) {
        rlt__config_free(c);
        return RLT_EPARSE;
    }
    *out = c;
    return RLT_OK;
}

/* Reads and parses one file into c. */
static int load_into(rlt__config *c, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return RLT_EPARSE;
    }
    size_t cap = 1 << 16, len = 0, n;
    char *buf = malloc(cap);
    while (buf != NULL && (n = fread(buf + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap) {
            char *b = cap < MAX_FILE ? realloc(buf, cap * 2) : NULL;
            if (b == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = b;
            cap *= 2;
        }
    }
    bool bad = ferror(f) != 0;
    fclose(f);
    if (buf == NULL || bad) {
        free(buf);
        snprintf(err, errlen, "%s: cannot read (or larger than %d bytes)", path, MAX_FILE);
        return RLT_EPARSE;
    }
    int r = parse_into(c, buf, len, path, err, errlen);
    free(buf);
    return r;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every *.yaml file of directory `dir`, in name order (envoyproxy/ratelimit's runtime
 * directory: one domain per file). */
static int load_dir(rlt__config *c, const char *dir, char *err, size_t errlen)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        snprintf(err, errlen, "%s: %s", dir, strerror(errno));
        return RLT_EPARSE;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int r = RLT_OK;
    struct dirent *e;
    while (r == RLT_OK && (e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".yaml") != 0 || e->d_name[0] == '.') continue;
        if (n == cap) {
            char **nn = realloc(names, (cap = cap ? cap * 2 : 16) * sizeof *nn);
            if (nn == NULL) {
                r = RLT_EPARSE;
                break;
            }
            names = nn;
        }
        size_t pl = strlen(dir) + 1 + l + 1;
        if ((names[n] = malloc(pl)) == NULL) {
            r = RLT_EPARSE;
            break;
        }
        snprintf(names[n++], pl, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (r != RLT_OK) snprintf(err, errlen, "%s: out of memory", dir);
    if (n > 1) qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n; i++) {
        if (r == RLT_OK) r = load_into(c, names[i], err, errlen);
        free(names[i]);
    }
    free(names);
    return r;
}

int rlt__config_load_many(const char *const *paths, size_t n, rlt__config **out, char *err,
                          size_t errlen)
{
    *out = NULL;
    rlt__config *c = rlt__config_new();
    if (c == NULL) {
        snprintf(err, errlen, "out of memory");
        return RLT_EPARSE;
    }
    for (size_t i = 0; i < n; i++) {
        struct stat sb;
        bool is_dir = stat(paths[i], &sb) == 0 && S_ISDIR(sb.st_mode);
        int r = is_dir ? load_dir(c, paths[i], err, errlen) : load_into(c, paths[i], err, errlen);
        if (r != RLT_OK) {
            rlt__config_free(c);
            return RLT_EPARSE;
        }
    }
    *out = c;
    return RLT_OK;
}

int rlt__config_load(const char *path, rlt__config **out, char *err, size_t errlen)
{
    return rlt__config_load_many(&path, 1, out, err, errlen);
}
