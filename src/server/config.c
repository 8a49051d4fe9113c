/* ratelimitd's YAML configuration: envoyproxy/ratelimit's descriptor format plus our
 * extensions (algorithm, burst, policy text per rule; named policies; tiers; tenants; daemon
 * settings), parsed with libyaml into an immutable rlt__config, and descriptor matching. */
#include "server/srv.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define MAX_DEPTH 16     /* nested descriptor levels */
#define MAX_NODES 200000 /* node visits: bounds alias bombs ("billion laughs") */
#define MAX_FILE (16 << 20)

typedef struct ctx {
    yaml_document_t *doc;
    const char *file;
    char *err;
    size_t errlen;
    size_t visits;
    rlt__config *c;
} ctx;

static int fail(ctx *x, const yaml_node_t *n, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(x->err, x->errlen, "%s:%lu: %s", x->file,
             n ? (unsigned long)n->start_mark.line + 1 : 1UL, msg);
    return -1;
}

static yaml_node_t *node(ctx *x, int id)
{
    x->visits++;
    return yaml_document_get_node(x->doc, id);
}

static const char *scalar(const yaml_node_t *n, size_t *len)
{
    if (n == NULL || n->type != YAML_SCALAR_NODE) return NULL;
    *len = n->data.scalar.length;
    return (const char *)n->data.scalar.value;
}

static bool eq(const char *s, size_t len, const char *lit)
{
    return len == strlen(lit) && memcmp(s, lit, len) == 0;
}

static int get_str(ctx *x, const yaml_node_t *n, char *out, size_t cap, const char *what)
{
    size_t len;
    const char *s = scalar(n, &len);
    if (s == NULL) return fail(x, n, "%s must be a string", what);
    if (len >= cap) return fail(x, n, "%s is longer than %zu bytes", what, cap - 1);
    if (memchr(s, '\0', len) != NULL) return fail(x, n, "%s contains a NUL byte", what);
    memcpy(out, s, len);
    out[len] = '\0';
    return 0;
}

static int get_int(ctx *x, const yaml_node_t *n, int64_t lo, int64_t hi, int64_t *out,
                   const char *what)
{
    size_t len;
    const char *s = scalar(n, &len);
    int64_t v;
    if (s == NULL || !rlt__resp_parse_i64(s, len, &v) || v < lo || v > hi)
        return fail(x, n, "%s must be an integer in [%lld, %lld]", what, (long long)lo,
                    (long long)hi);
    *out = v;
    return 0;
}

static int get_bool(ctx *x, const yaml_node_t *n, bool *out, const char *what)
{
    size_t len;
    const char *s = scalar(n, &len);
    if (s != NULL && (eq(s, len, "true") || eq(s, len, "yes") || eq(s, len, "on"))) {
        *out = true;
        return 0;
    }
    if (s != NULL && (eq(s, len, "false") || eq(s, len, "no") || eq(s, len, "off"))) {
        *out = false;
        return 0;
    }
    return fail(x, n, "%s must be true or false", what);
}

/* A duration: "250ms", "5s", or a bare integer of seconds. */
static int get_duration(ctx *x, const yaml_node_t *n, rlt_ns *out, const char *what)
{
    size_t len;
    const char *s = scalar(n, &len);
    if (s == NULL || rlt_duration_parse(s, len, RLT_NS_PER_S, out) != RLT_OK || *out < 0)
        return fail(x, n, "%s must be a duration such as 5s or 250ms", what);
    return 0;
}

static int get_size(ctx *x, const yaml_node_t *n, size_t *out, const char *what)
{
    int64_t v = 0;
    if (get_int(x, n, 0, INT64_MAX / 2, &v, what) < 0) return -1;
    *out = (size_t)v;
    return 0;
}

/* Iterates a mapping's pairs as (k, v) node pointers ("continue" works, "break" does not). */
#define FOR_PAIRS(x, n, k, v)                                                                      \
    for (yaml_node_pair_t *p_##k = (n)->data.mapping.pairs.start;                                  \
         p_##k < (n)->data.mapping.pairs.top; p_##k++)                                             \
        for (yaml_node_t *k = node(x, p_##k->key), *v = node(x, p_##k->value); k != NULL; k = NULL)

static int need_map(ctx *x, const yaml_node_t *n, const char *what)
{
    if (n == NULL || n->type != YAML_MAPPING_NODE) return fail(x, n, "%s must be a mapping", what);
    if (x->visits > MAX_NODES) return fail(x, n, "document too large (aliases?)");
    return 0;
}

static int need_seq(ctx *x, const yaml_node_t *n, const char *what)
{
    if (n == NULL || n->type != YAML_SEQUENCE_NODE) return fail(x, n, "%s must be a list", what);
    if (x->visits > MAX_NODES) return fail(x, n, "document too large (aliases?)");
    return 0;
}

static const char *key_of(const yaml_node_t *k, size_t *len)
{
    const char *s = scalar(k, len);
    if (s == NULL) {
        *len = 0;
        return "";
    }
    return s;
}

/* ---- settings ------------------------------------------------------------------------- */

void rlt__settings_default(rlt__settings *s)
{
    memset(s, 0, sizeof *s);
    strcpy(s->bind, "127.0.0.1");
    s->port = 6380;
    s->http_port = 8080;
    strcpy(s->snapshot, "ratelimitd.snap");
    s->snapshot_interval = 5 * RLT_NS_PER_S;
    s->max_keys = 1000000;
    s->max_connections = 10000;
    s->max_output = 1 << 20;
    s->client_timeout = 10 * RLT_NS_PER_S;
    s->max_inline_policies = 1024;
    s->max_args = RLT__RESP_DEFAULT_MAX_ARGS;
    s->max_bulk = RLT__RESP_DEFAULT_MAX_BULK;
}

static int parse_settings(ctx *x, yaml_node_t *n)
{
    rlt__settings *s = &x->c->set;
    if (need_map(x, n, "server") < 0) return -1;
    FOR_PAIRS(x, n, k, v)
    {
        size_t kl;
        const char *key = key_of(k, &kl);
        int64_t i = 0;
        int r;
        if (eq(key, kl, "bind"))
            r = get_str(x, v, s->bind, sizeof s->bind, "bind");
        else if (eq(key, kl, "port") || eq(key, kl, "http_port")) {
            r = get_int(x, v, -1, 65535, &i, "a port (-1 = off, 0 = any free port)");
            if (r == 0 && eq(key, kl, "port"))
                s->port = (int)i;
            else if (r == 0)
                s->http_port = (int)i;
        } else if (eq(key, kl, "threads")) {
            r = get_int(x, v, 0, 64, &i, "threads");
            s->threads = (int)i;
        } else if (eq(key, kl, "password"))
            r = get_str(x, v, s->password, sizeof s->password, "password");
        else if (eq(key, kl, "snapshot"))
            r = get_str(x, v, s->snapshot, sizeof s->snapshot, "snapshot");
        else if (eq(key, kl, "snapshot_interval"))
            r = get_duration(x, v, &s->snapshot_interval, "snapshot_interval");
        else if (eq(key, kl, "max_keys"))
            r = get_size(x, v, &s->max_keys, "max_keys");
        else if (eq(key, kl, "fail_closed"))
            r = get_bool(x, v, &s->fail_closed, "fail_closed");
        else if (eq(key, kl, "max_connections"))
            r = get_size(x, v, &s->max_connections, "max_connections");
        else if (eq(key, kl, "max_output_buffer"))
            r = get_size(x, v, &s->max_output, "max_output_buffer");
        else if (eq(key, kl, "client_timeout"))
            r = get_duration(x, v, &s->client_timeout, "client_timeout");
        else if (eq(key, kl, "idle_timeout"))
            r = get_duration(x, v, &s->idle_timeout, "idle_timeout");
        else if (eq(key, kl, "max_inline_policies"))
            r = get_size(x, v, &s->max_inline_policies, "max_inline_policies");
        else if (eq(key, kl, "max_args")) {
            r = get_int(x, v, 8, 1 << 20, &i, "max_args");
            s->max_args = (size_t)i;
        } else if (eq(key, kl, "max_bulk")) {
            r = get_int(x, v, 1024, 512 << 20, &i, "max_bulk");
            s->max_bulk = (size_t)i;
        } else if (eq(key, kl, "shadow_mode"))
            r = get_bool(x, v, &s->shadow_mode, "shadow_mode");
        else
            r = fail(x, k, "unknown server setting '%.*s'", (int)(kl > 64 ? 64 : kl), key);
        if (r < 0) return -1;
    }
    return 0;
}

/* ---- the shared store: `redis:` ------------------------------------------------------ */

/* `fail: open|closed` (RLT__FAIL_OPEN / RLT__FAIL_CLOSED). */
static int get_fail(ctx *x, const yaml_node_t *n, int *out)
{
    size_t len;
    const char *s = scalar(n, &len);
    if (s != NULL && eq(s, len, "open"))
        *out = RLT__FAIL_OPEN;
    else if (s != NULL && eq(s, len, "closed"))
        *out = RLT__FAIL_CLOSED;
    else
        return fail(x, n, "fail must be open or closed");
    return 0;
}

/* A Redis duration needs its unit ("50ms"): a bare number would be ambiguous here. */
static int get_redis_duration(ctx *x, const yaml_node_t *n, rlt_ns lo, rlt_ns hi, rlt_ns *out,
                              const char *what)
{
    size_t len;
    const char *s = scalar(n, &len);
    if (s == NULL || rlt_duration_parse(s, len, 0, out) != RLT_OK || *out < lo || *out > hi)
        return fail(x, n, "%s must be a duration with a unit between %lldms and %llds, e.g. 50ms",
                    what, (long long)(lo / RLT_NS_PER_MS), (long long)(hi / RLT_NS_PER_S));
    return 0;
}

static int parse_redis(ctx *x, yaml_node_t *n)
{
    rlt__redis_settings *rs = &x->c->set.redis;
    if (n != NULL && n->type == YAML_SCALAR_NODE) /* redis: "host:port" */
        return get_str(x, n, rs->address, sizeof rs->address, "redis");
    if (need_map(x, n, "redis") < 0) return -1;
    FOR_PAIRS(x, n, k, v)
    {
        size_t kl;
        const char *key = key_of(k, &kl);
        int64_t i = 0;
        int r;
        if (eq(key, kl, "address") || eq(key, kl, "addresses")) {
            if (v->type == YAML_SEQUENCE_NODE) { /* a list of seed nodes */
                rs->address[0] = '\0';
                r = 0;
                for (yaml_node_item_t *it = v->data.sequence.items.start;
                     r == 0 && it < v->data.sequence.items.top; it++) {
                    char one[RLT__STR_MAX];
                    size_t used = strlen(rs->address);
                    r = get_str(x, node(x, *it), one, sizeof one, "a Redis address");
                    if (r == 0 && used + strlen(one) + 2 > sizeof rs->address)
                        r = fail(x, v, "redis addresses are longer than %zu bytes",
                                 sizeof rs->address - 1);
                    if (r == 0)
                        snprintf(rs->address + used, sizeof rs->address - used, "%s%s",
                                 used ? "," : "", one);
                }
            } else {
                r = get_str(x, v, rs->address, sizeof rs->address, "redis address");
            }
        } else if (eq(key, kl, "cluster"))
            r = get_bool(x, v, &rs->cluster, "redis cluster");
        else if (eq(key, kl, "password"))
            r = get_str(x, v, rs->password, sizeof rs->password, "redis password");
        else if (eq(key, kl, "prefix"))
            r = get_str(x, v, rs->prefix, sizeof rs->prefix, "redis prefix");
        else if (eq(key, kl, "timeout"))
            r = get_redis_duration(x, v, RLT_NS_PER_MS, 60 * RLT_NS_PER_S, &rs->timeout,
                                   "redis timeout");
        else if (eq(key, kl, "timeout_ms")) {
            r = get_int(x, v, 1, 60000, &i, "redis timeout_ms");
            rs->timeout = i * RLT_NS_PER_MS;
        } else if (eq(key, kl, "fail")) {
            int f = 0;
            r = get_fail(x, v, &f);
            rs->fail_open = f == RLT__FAIL_OPEN;
        } else if (eq(key, kl, "breaker_failures")) {
            r = get_int(x, v, 1, 1000, &i, "redis breaker_failures");
            rs->breaker_failures = (unsigned)i;
        } else if (eq(key, kl, "backoff_min"))
            r = get_redis_duration(x, v, RLT_NS_PER_MS, 3600 * RLT_NS_PER_S, &rs->backoff_min,
                                   "redis backoff_min");
        else if (eq(key, kl, "backoff_max"))
            r = get_redis_duration(x, v, RLT_NS_PER_MS, 3600 * RLT_NS_PER_S, &rs->backoff_max,
                                   "redis backoff_max");
        else
            r = fail(x, k,
                     "unknown redis setting '%.*s' (address, cluster, password, prefix, "
                     "timeout, fail, breaker_failures, backoff_min, backoff_max)",
                     (int)(kl > 64 ? 64 : kl), key);
        if (r < 0) return -1;
    }
    if (rs->address[0] == '\0') return fail(x, n, "redis needs an address (host:port)");
    if (rs->backoff_min != 0 && rs->backoff_max != 0 && rs->backoff_max < rs->backoff_min)
        return fail(x, n, "redis backoff_max is shorter than backoff_min");
    return 0;
}

/* ---- names ---------------------------------------------------------------------------- */

static uint64_t fnv1a(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* A store policy name for `text` under `prefix`.  The store takes 1..RLT_NAME_MAX bytes of
 * 0x21..0x7e, while envoy descriptor values are any strings ("/api v1", "Zürich"): bytes
 * outside 0x21..0x7e and '%' itself become %XX (an injective escaping, so distinct texts keep
 * distinct names; names without such bytes are unchanged across versions).  When that does
 * not fit, prefix + "#" and a 64-bit hash of the text: a collision there (or between two rules
 * whose paths are equal) is detected by check_rule_names. */
static void store_name(char *out, const char *prefix, const char *text)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t pl = strlen(prefix), o = pl, tl = strlen(text);
    memcpy(out, prefix, pl);
    for (size_t i = 0; i < tl; i++) {
        unsigned char c = (unsigned char)text[i];
        bool plain = c >= 0x21 && c <= 0x7e && c != '%';
        if (o + (plain ? 1 : 3) > RLT_NAME_MAX) {
            snprintf(out, RLT_NAME_MAX + 1, "%s#%016llx", prefix,
                     (unsigned long long)fnv1a(text, tl));
            return;
        }
        if (plain) {
            out[o++] = (char)c;
        } else {
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    out[o] = '\0';
}

/* Two rules with one store name would share their counters: refuse the file instead.  Paths
 * are "domain.key_value..." and can coincide (key "a_b" value "c" vs key "a" value "b_c"), and
 * long paths are hashed. */
static int check_rule_names(ctx *x)
{
    const rlt__config *c = x->c;
    for (size_t i = 0; i < c->nrules; i++)
        for (size_t j = 0; j < i; j++)
            if (strcmp(c->rules[i].name, c->rules[j].name) == 0) {
                snprintf(x->err, x->errlen,
                         "%s:%d: rule %s has the same store name (%s) as the rule on line %d "
                         "(%s): change a key or value",
                         x->file, c->rules[i].line, c->rules[i].path, c->rules[i].name,
                         c->rules[j].line, c->rules[j].path);
                return -1;
            }
    return 0;
}

static bool valid_name(const char *s)
{
    if (*s == '\0') return false;
    for (; *s; s++) {
        char c = *s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.'))
            return false;
    }
    return true;
}

/* ---- descriptors ---------------------------------------------------------------------- */

static int add_rule(ctx *x, rlt__rule **out)
{
    rlt__config *c = x->c;
    rlt__rule *r = realloc(c->rules, (c->nrules + 1) * sizeof *r);
    if (r == NULL) return fail(x, NULL, "out of memory");
    c->rules = r;
    memset(&r[c->nrules], 0, sizeof r[0]);
    r[c->nrules].policy_id = -1;
    *out = &r[c->nrules++];
    return 0;
}

static int parse_rate_limit(ctx *x, yaml_node_t *n, rlt__rule *rule)
{
    if (need_map(x, n, "rate_limit") < 0) return -1;
    int64_t rpu = -1, burst = 0;
    rlt_ns period = 0;
    rlt_algo algo = RLT_FIXED_WINDOW;
    char text[RLT__STR_MAX] = "";
    yaml_node_t *where = n;
    FOR_PAIRS(x, n, k, v)
    {
        size_t kl, vl;
        const char *key = key_of(k, &kl);
        const char *s;
        int r = 0;
        if (eq(key, kl, "unit")) {
            s = scalar(v, &vl);
            static const struct {
                const char *name, *upper;
                rlt_ns ns;
            } units[] = {{"second", "SECOND", RLT_NS_PER_S},
                         {"minute", "MINUTE", 60 * RLT_NS_PER_S},
                         {"hour", "HOUR", 3600 * RLT_NS_PER_S},
                         {"day", "DAY", 86400 * RLT_NS_PER_S}};
            period = 0;
            for (size_t i = 0; s != NULL && i < 4; i++) {
                if ((vl == strlen(units[i].name) && strncasecmp(s, units[i].name, vl) == 0)) {
                    period = units[i].ns;
                    rule->unit = units[i].upper;
                }
            }
            if (period == 0) r = fail(x, v, "unit must be second, minute, hour or day");
        } else if (eq(key, kl, "requests_per_unit")) {
            r = get_int(x, v, 0, INT32_MAX, &rpu, "requests_per_unit");
        } else if (eq(key, kl, "unlimited")) {
            r = get_bool(x, v, &rule->unlimited, "unlimited");
        } else if (eq(key, kl, "name")) {
            r = get_str(x, v, rule->rl_name, sizeof rule->rl_name, "name");
        } else if (eq(key, kl, "replaces")) {
            if (need_seq(x, v, "replaces") < 0) return -1;
            for (yaml_node_item_t *it = v->data.sequence.items.start;
                 it < v->data.sequence.items.top; it++) {
                yaml_node_t *e = node(x, *it);
                if (need_map(x, e, "a replaces entry") < 0) return -1;
                FOR_PAIRS(x, e, k2, v2)
                {
                    size_t k2l;
                    const char *key2 = key_of(k2, &k2l);
                    if (!eq(key2, k2l, "name")) return fail(x, k2, "replaces entries take name");
                    char nm[RLT__STR_MAX];
                    if (get_str(x, v2, nm, sizeof nm, "name") < 0) return -1;
                    char **rp = realloc(rule->replaces, (rule->nreplaces + 1) * sizeof *rp);
                    if (rp == NULL) return fail(x, v2, "out of memory");
                    rule->replaces = rp;
                    if ((rp[rule->nreplaces] = strdup(nm)) == NULL)
                        return fail(x, v2, "out of memory");
                    rule->nreplaces++;
                }
            }
        } else if (eq(key, kl, "algorithm")) {
            s = scalar(v, &vl);
            algo = s ? rlt_algo_from_name(s, vl) : RLT_ALGO_NONE;
            if (algo == RLT_ALGO_NONE)
                r = fail(x, v,
                         "unknown algorithm (fixed_window, sliding_log, sliding_window, "
                         "token_bucket, gcra, leaky_bucket, concurrency)");
        } else if (eq(key, kl, "burst")) {
            r = get_int(x, v, 1, INT32_MAX, &burst, "burst");
        } else if (eq(key, kl, "policy")) {
            r = get_str(x, v, text, sizeof text, "policy");
        } else if (eq(key, kl, "fail")) {
            r = get_fail(x, v, &rule->fail);
        } else {
            r = fail(x, k, "unknown rate_limit field '%.*s'", (int)(kl > 64 ? 64 : kl), key);
        }
        if (r < 0) return -1;
    }
    rule->line = (int)where->start_mark.line + 1;
    if (rule->unlimited) return 0;
    if (algo == RLT_CONCURRENCY)
        return fail(x, where, "concurrency is not a descriptor algorithm (use RL.ACQUIRE)");
    if (text[0] != '\0') {
        char perr[200];
        if (rlt_policy_parse(&rule->policy, text, strlen(text), perr, sizeof perr) != RLT_OK)
            return fail(x, where, "policy '%s': %s", text, perr);
        if (rule->policy.algo == RLT_CONCURRENCY)
            return fail(x, where, "concurrency is not a descriptor algorithm (use RL.ACQUIRE)");
        rule->requests_per_unit = rule->policy.limit;
        return 0;
    }
    if (rpu < 0) return fail(x, where, "rate_limit needs requests_per_unit (or unlimited: true)");
    if (period == 0) return fail(x, where, "rate_limit needs a unit");
    rule->requests_per_unit = rpu;
    if (rpu == 0) {
        rule->block_all = true;
        return 0;
    }
    int st = rlt_policy_init(&rule->policy, algo, rpu, period, burst, 0, 0);
    if (st != RLT_OK) return fail(x, where, "invalid rate limit: %s", rlt_strerror(st));
    return 0;
}

static void free_descs(rlt__desc *d, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(d[i].key);
        free(d[i].value);
        free_descs(d[i].children, d[i].nchildren);
    }
    free(d);
}

static int parse_descs(ctx *x, yaml_node_t *n, const char *path, int depth, rlt__desc **out,
                       size_t *nout)
{
    if (need_seq(x, n, "descriptors") < 0) return -1;
    if (depth > MAX_DEPTH) return fail(x, n, "descriptors nested deeper than %d", MAX_DEPTH);
    size_t count = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    rlt__desc *ds = calloc(count ? count : 1, sizeof *ds);
    if (ds == NULL) return fail(x, n, "out of memory");
    *out = ds;
    *nout = 0;
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
         it++) {
        yaml_node_t *e = node(x, *it);
        if (need_map(x, e, "a descriptor") < 0) return -1;
        rlt__desc *d = &ds[(*nout)++];
        d->rule = -1;
        yaml_node_t *rl = NULL, *sub = NULL;
        bool shadow = false, have_key = false;
        char key[RLT__STR_MAX], value[RLT__STR_MAX];
        bool have_value = false;
        FOR_PAIRS(x, e, k, v)
        {
            size_t kl;
            const char *kk = key_of(k, &kl);
            int r = 0;
            if (eq(kk, kl, "key")) {
                r = get_str(x, v, key, sizeof key, "key");
                have_key = true;
            } else if (eq(kk, kl, "value")) {
                r = get_str(x, v, value, sizeof value, "value");
                have_value = true;
            } else if (eq(kk, kl, "rate_limit")) {
                rl = v;
            } else if (eq(kk, kl, "descriptors")) {
                sub = v;
            } else if (eq(kk, kl, "shadow_mode")) {
                r = get_bool(x, v, &shadow, "shadow_mode");
            } else if (eq(kk, kl, "detailed_metric")) {
                bool ignored;
                r = get_bool(x, v, &ignored, "detailed_metric");
            } else {
                r = fail(x, k, "unknown descriptor field '%.*s'", (int)(kl > 64 ? 64 : kl), kk);
            }
            if (r < 0) return -1;
        }
        if (!have_key || key[0] == '\0') return fail(x, e, "a descriptor needs a key");
        if ((d->key = strdup(key)) == NULL) return fail(x, e, "out of memory");
        if (have_value && (d->value = strdup(value)) == NULL) return fail(x, e, "out of memory");
        for (size_t j = 0; j + 1 < *nout; j++) {
            bool same_value = (ds[j].value == NULL && d->value == NULL) ||
                              (ds[j].value && d->value && strcmp(ds[j].value, d->value) == 0);
            if (strcmp(ds[j].key, d->key) == 0 && same_value)
                return fail(x, e, "duplicate descriptor '%s%s%s'", d->key, d->value ? "_" : "",
                            d->value ? d->value : "");
        }
        char mypath[RLT__STR_MAX];
        snprintf(mypath, sizeof mypath, "%s.%s%s%s", path, d->key, d->value ? "_" : "",
                 d->value ? d->value : "");
        if (rl != NULL) {
            rlt__rule *rule = NULL;
            if (add_rule(x, &rule) < 0) return -1;
            d->rule = (int)(x->c->nrules - 1);
            snprintf(rule->path, sizeof rule->path, "%s", mypath);
            if (parse_rate_limit(x, rl, rule) < 0) return -1;
            rule->shadow = shadow;
            store_name(rule->name, "r:", rule->path);
        } else if (shadow) {
            return fail(x, e, "shadow_mode needs a rate_limit");
        }
        if (sub != NULL && parse_descs(x, sub, mypath, depth + 1, &d->children, &d->nchildren) < 0)
            return -1;
    }
    return 0;
}

static int add_domain(ctx *x, yaml_node_t *name_node, yaml_node_t *descs)
{
    rlt__config *c = x->c;
    char name[RLT__STR_MAX];
    if (get_str(x, name_node, name, sizeof name, "domain") < 0) return -1;
    if (name[0] == '\0') return fail(x, name_node, "domain must not be empty");
    for (size_t i = 0; i < c->ndomains; i++)
        if (strcmp(c->domains[i].name, name) == 0)
            return fail(x, name_node, "duplicate domain '%s'", name);
    rlt__domain *d = realloc(c->domains, (c->ndomains + 1) * sizeof *d);
    if (d == NULL) return fail(x, name_node, "out of memory");
    c->domains = d;
    rlt__domain *dom = &d[c->ndomains++];
    memset(dom, 0, sizeof *dom);
    if ((dom->name = strdup(name)) == NULL) return fail(x, name_node, "out of memory");
    if (descs == NULL) return 0;
    return parse_descs(x, descs, name, 1, &dom->descs, &dom->ndescs);
}

/* ---- policies, tiers, tenants --------------------------------------------------------- */

static int add_named(ctx *x, const yaml_node_t *at, const char *name, const char *text, bool shadow,
                     int failmode)
{
    rlt__config *c = x->c;
    if (!valid_name(name) || strlen(name) > RLT_NAME_MAX - 2)
        return fail(x, at, "policy name '%s' must be 1..%d of [A-Za-z0-9_.-]", name,
                    RLT_NAME_MAX - 2);
    rlt__named *slot = NULL;
    for (size_t i = 0; i < c->nnamed; i++)
        if (strcmp(c->named[i].name, name) == 0) slot = &c->named[i];
    if (slot == NULL) {
        rlt__named *nn = realloc(c->named, (c->nnamed + 1) * sizeof *nn);
        if (nn == NULL) return fail(x, at, "out of memory");
        c->named = nn;
        slot = &nn[c->nnamed++];
    } else if (strcmp(name, "default") != 0) {
        return fail(x, at, "duplicate policy '%s'", name);
    }
    memset(slot, 0, sizeof *slot);
    strcpy(slot->name, name);
    slot->shadow = shadow;
    slot->fail = failmode;
    slot->policy_id = -1;
    char perr[200];
    if (rlt_policy_parse(&slot->policy, text, strlen(text), perr, sizeof perr) != RLT_OK)
        return fail(x, at, "policy '%s': %s", name, perr);
    return 0;
}

static int parse_policies(ctx *x, yaml_node_t *n)
{
    if (need_map(x, n, "policies") < 0) return -1;
    FOR_PAIRS(x, n, k, v)
    {
        char name[RLT__STR_MAX], text[RLT__STR_MAX] = "";
        bool shadow = false;
        int failmode = RLT__FAIL_DEFAULT;
        if (get_str(x, k, name, sizeof name, "a policy name") < 0) return -1;
        if (v->type == YAML_SCALAR_NODE) {
            if (get_str(x, v, text, sizeof text, "a policy") < 0) return -1;
        } else {
            if (need_map(x, v, "a policy") < 0) return -1;
            FOR_PAIRS(x, v, k2, v2)
            {
                size_t kl;
                const char *kk = key_of(k2, &kl);
                int r;
                if (eq(kk, kl, "policy"))
                    r = get_str(x, v2, text, sizeof text, "policy");
                else if (eq(kk, kl, "shadow_mode"))
                    r = get_bool(x, v2, &shadow, "shadow_mode");
                else if (eq(kk, kl, "fail"))
                    r = get_fail(x, v2, &failmode);
                else
                    r = fail(x, k2, "unknown policy field '%.*s'", (int)(kl > 64 ? 64 : kl), kk);
                if (r < 0) return -1;
            }
            if (text[0] == '\0') return fail(x, v, "policy '%s' needs policy: TEXT", name);
        }
        if (add_named(x, k, name, text, shadow, failmode) < 0) return -1;
    }
    return 0;
}

static int parse_tiers(ctx *x, yaml_node_t *n)
{
    rlt__config *c = x->c;
    if (need_map(x, n, "tiers") < 0) return -1;
    FOR_PAIRS(x, n, k, v)
    {
        rlt__tier t;
        if (get_str(x, k, t.name, sizeof t.name, "a tier name") < 0) return -1;
        if (!valid_name(t.name)) return fail(x, k, "tier name must be [A-Za-z0-9_.-]+");
        if (get_str(x, v, t.policy, sizeof t.policy, "a tier's policy name") < 0) return -1;
        if (rlt__config_named(c, t.policy, strlen(t.policy)) == NULL)
            return fail(x, v, "tier '%s': no policy named '%s' (define it under policies:)", t.name,
                        t.policy);
        for (size_t i = 0; i < c->ntiers; i++)
            if (strcmp(c->tiers[i].name, t.name) == 0)
                return fail(x, k, "duplicate tier '%s'", t.name);
        rlt__tier *ts = realloc(c->tiers, (c->ntiers + 1) * sizeof *ts);
        if (ts == NULL) return fail(x, k, "out of memory");
        c->tiers = ts;
        ts[c->ntiers++] = t;
    }
    return 0;
}

static int parse_tenants(ctx *x, yaml_node_t *n)
{
    rlt__config *c = x->c;
    if (need_seq(x, n, "tenants") < 0) return -1;
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
         it++) {
        yaml_node_t *e = node(x, *it);
        if (need_map(x, e, "a tenant") < 0) return -1;
        rlt__tenant t;
        memset(&t, 0, sizeof t);
        bool have_prefix = false;
        FOR_PAIRS(x, e, k, v)
        {
            size_t kl;
            const char *kk = key_of(k, &kl);
            int r;
            if (eq(kk, kl, "name"))
                r = get_str(x, v, t.name, sizeof t.name, "name");
            else if (eq(kk, kl, "password"))
                r = get_str(x, v, t.password, sizeof t.password, "password");
            else if (eq(kk, kl, "prefix")) {
                r = get_str(x, v, t.prefix, sizeof t.prefix, "prefix");
                have_prefix = true;
            } else
                r = fail(x, k, "unknown tenant field '%.*s'", (int)(kl > 64 ? 64 : kl), kk);
            if (r < 0) return -1;
        }
        if (t.name[0] == '\0' || t.password[0] == '\0')
            return fail(x, e, "a tenant needs a name and a password");
        if (!have_prefix) snprintf(t.prefix, sizeof t.prefix, "%.200s:", t.name);
        if (t.prefix[0] == '\0') return fail(x, e, "a tenant's prefix must not be empty");
        for (size_t i = 0; i < c->ntenants; i++) {
            if (strcmp(c->tenants[i].password, t.password) == 0)
                return fail(x, e, "two tenants share a password");
            if (strncmp(c->tenants[i].prefix, t.prefix, strlen(c->tenants[i].prefix)) == 0 ||
                strncmp(t.prefix, c->tenants[i].prefix, strlen(t.prefix)) == 0)
                return fail(x, e, "tenant prefixes '%s' and '%s' overlap", t.prefix,
                            c->tenants[i].prefix);
        }
        rlt__tenant *ts = realloc(c->tenants, (c->ntenants + 1) * sizeof *ts);
        if (ts == NULL) return fail(x, e, "out of memory");
        c->tenants = ts;
        ts[c->ntenants++] = t;
    }
    return 0;
}

/* ---- top level ------------------------------------------------------------------------ */

static rlt__config *config_new(void)
{
    rlt__config *c = calloc(1, sizeof *c);
    if (c == NULL) return NULL;
    rlt__settings_default(&c->set);
    c->named = calloc(1, sizeof *c->named);
    if (c->named == NULL) {
        free(c);
        return NULL;
    }
    c->nnamed = 1;
    strcpy(c->named[0].name, "default");
    c->named[0].policy_id = -1;
    if (rlt_policy_parse(&c->named[0].policy, RLT__DEFAULT_POLICY, strlen(RLT__DEFAULT_POLICY),
                         NULL, 0) != RLT_OK) {
        rlt__config_free(c);
        return NULL;
    }
    return c;
}

rlt__config *rlt__config_default(void)
{
    return config_new();
}

static int parse_root(ctx *x, yaml_node_t *root)
{
    if (root == NULL) return 0; /* an empty file: the defaults */
    if (need_map(x, root, "the top level") < 0) return -1;
    yaml_node_t *domain = NULL, *descs = NULL, *tiers = NULL, *policies = NULL;
    /* policies first: tiers refer to them wherever they appear in the file. */
    FOR_PAIRS(x, root, k, v)
    {
        size_t kl;
        const char *kk = key_of(k, &kl);
        if (eq(kk, kl, "policies")) policies = v;
    }
    if (policies != NULL && parse_policies(x, policies) < 0) return -1;
    FOR_PAIRS(x, root, k, v)
    {
        size_t kl;
        const char *kk = key_of(k, &kl);
        int r = 0;
        if (eq(kk, kl, "domain"))
            domain = v;
        else if (eq(kk, kl, "descriptors"))
            descs = v;
        else if (eq(kk, kl, "policies"))
            continue;
        else if (eq(kk, kl, "tiers"))
            tiers = v;
        else if (eq(kk, kl, "server"))
            r = parse_settings(x, v);
        else if (eq(kk, kl, "redis"))
            r = parse_redis(x, v);
        else if (eq(kk, kl, "tenants"))
            r = parse_tenants(x, v);
        else if (eq(kk, kl, "default_tier"))
            r = get_str(x, v, x->c->default_tier, sizeof x->c->default_tier, "default_tier");
        else if (eq(kk, kl, "domains")) {
            if (need_seq(x, v, "domains") < 0) return -1;
            for (yaml_node_item_t *it = v->data.sequence.items.start;
                 it < v->data.sequence.items.top; it++) {
                yaml_node_t *e = node(x, *it);
                if (need_map(x, e, "a domain") < 0) return -1;
                yaml_node_t *dn = NULL, *dd = NULL;
                FOR_PAIRS(x, e, k2, v2)
                {
                    size_t k2l;
                    const char *key2 = key_of(k2, &k2l);
                    if (eq(key2, k2l, "domain"))
                        dn = v2;
                    else if (eq(key2, k2l, "descriptors"))
                        dd = v2;
                    else
                        return fail(x, k2, "a domain takes domain and descriptors");
                }
                if (dn == NULL) return fail(x, e, "a domain entry needs domain:");
                if (add_domain(x, dn, dd) < 0) return -1;
            }
        } else
            r = fail(x, k, "unknown top-level key '%.*s'", (int)(kl > 64 ? 64 : kl), kk);
        if (r < 0) return -1;
    }
    if (descs != NULL && domain == NULL) return fail(x, descs, "descriptors need a domain");
    if (domain != NULL && add_domain(x, domain, descs) < 0) return -1;
    if (check_rule_names(x) < 0) return -1;
    if (tiers != NULL && parse_tiers(x, tiers) < 0) return -1;
    if (x->c->default_tier[0] != '\0') {
        bool found = false;
        for (size_t i = 0; i < x->c->ntiers; i++)
            found |= strcmp(x->c->tiers[i].name, x->c->default_tier) == 0;
        if (!found) return fail(x, root, "default_tier '%s' is not a tier", x->c->default_tier);
    }
    return 0;
}

int rlt__config_parse(const char *text, size_t len, const char *file, rlt__config **out, char *err,
                      size_t errlen)
{
    *out = NULL;
    rlt__config *c = config_new();
    if (c == NULL) {
        snprintf(err, errlen, "%s: out of memory", file);
        return -1;
    }
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser)) {
        snprintf(err, errlen, "%s: out of memory", file);
        rlt__config_free(c);
        return -1;
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
        rlt__config_free(c);
        return -1;
    }
    ctx x = {.doc = &doc, .file = file, .err = err, .errlen = errlen, .c = c};
    int r = parse_root(&x, yaml_document_get_root_node(&doc));
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    if (r < 0) {
        rlt__config_free(c);
        return -1;
    }
    *out = c;
    return 0;
}

int rlt__config_load(const char *path, rlt__config **out, char *err, size_t errlen)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
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
        return -1;
    }
    int r = rlt__config_parse(buf, len, path, out, err, errlen);
    free(buf);
    return r;
}

void rlt__config_free(rlt__config *c)
{
    if (c == NULL) return;
    for (size_t i = 0; i < c->ndomains; i++) {
        free(c->domains[i].name);
        free_descs(c->domains[i].descs, c->domains[i].ndescs);
    }
    free(c->domains);
    for (size_t i = 0; i < c->nrules; i++) {
        for (size_t j = 0; j < c->rules[i].nreplaces; j++)
            free(c->rules[i].replaces[j]);
        free(c->rules[i].replaces);
    }
    free(c->rules);
    free(c->named);
    free(c->tiers);
    free(c->tenants);
    free(c);
}

const rlt__named *rlt__config_named(const rlt__config *c, const char *name, size_t len)
{
    for (size_t i = 0; i < c->nnamed; i++)
        if (strlen(c->named[i].name) == len && memcmp(c->named[i].name, name, len) == 0)
            return &c->named[i];
    return NULL;
}

static bool str_eq(const char *z, const char *s, size_t n)
{
    return strlen(z) == n && memcmp(z, s, n) == 0;
}

int rlt__config_match(const rlt__config *c, const char *domain, size_t dlen, const rlt__entry *e,
                      size_t n)
{
    const rlt__desc *list = NULL;
    size_t count = 0;
    for (size_t i = 0; i < c->ndomains; i++) {
        if (str_eq(c->domains[i].name, domain, dlen)) {
            list = c->domains[i].descs;
            count = c->domains[i].ndescs;
        }
    }
    if (list == NULL || n == 0) return -1;
    for (size_t level = 0; level < n; level++) {
        const rlt__desc *exact = NULL, *wild = NULL, *any = NULL;
        size_t wild_len = 0;
        for (size_t i = 0; i < count; i++) {
            const rlt__desc *d = &list[i];
            if (!str_eq(d->key, e[level].key, e[level].klen)) continue;
            if (d->value == NULL) {
                any = d;
                continue;
            }
            size_t vl = strlen(d->value);
            if (vl > 0 && d->value[vl - 1] == '*') {
                if (vl - 1 <= e[level].vlen && memcmp(d->value, e[level].value, vl - 1) == 0 &&
                    (wild == NULL || vl - 1 > wild_len)) {
                    wild = d;
                    wild_len = vl - 1;
                }
            } else if (str_eq(d->value, e[level].value, e[level].vlen)) {
                exact = d;
            }
        }
        const rlt__desc *m = exact ? exact : wild ? wild : any;
        if (m == NULL) return -1;
        if (level + 1 == n) return m->rule;
        list = m->children;
        count = m->nchildren;
    }
    return -1;
}
