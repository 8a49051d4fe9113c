/* The handle of libratelimit_redis: options, the server list (or the sentinels), its open and
 * close, stats and key names.  The decisions are decide.c (through call.c's calls and reply.c's
 * decoding), the leases lease.c, reserve and settle settle.c, the connections conn.c. */
#include "call.h"
#include "lease.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TTL_FLOOR_MAX (INT64_C(1) << 40) /* ns: 12 days */

int rlt_redis_policy_check(const rlt_policy *p)
{
    rlt__rpol rp;
    return rlt__rpol_from(p, &rp);
}

/* ---- open / close ---------------------------------------------------------------------- */

static char *dup_str(const char *s)
{
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* The next "host:port" of the comma-separated list at *s (split at the last colon: an IPv6
 * host keeps its own): *host and *hlen, *port, and *s moved past the entry and its comma.
 * RLT_OK, or RLT_EINVAL for an entry without a host, or a port outside 1..65535. */
static int next_hostport(const char **s, const char **host, size_t *hlen, int *port)
{
    const char *p = *s, *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    const char *colon = NULL;
    for (size_t i = len; i > 0; i--)
        if (p[i - 1] == ':') {
            colon = p + i - 1;
            break;
        }
    if (!colon || colon == p) return RLT_EINVAL;
    char *e;
    long v = strtol(colon + 1, &e, 10);
    if (e != p + len || v <= 0 || v > 65535) return RLT_EINVAL;
    *host = p;
    *hlen = (size_t)(colon - p);
    *port = (int)v;
    *s = p + len + (p[len] == ',');
    return RLT_OK;
}

static int parse_servers(rlt_redis *r)
{
    const char *s = r->servers, *host;
    size_t hlen;
    int port;
    while (*s) {
        if (next_hostport(&s, &host, &hlen, &port) != RLT_OK ||
            rlt__node_find_or_add(r, host, hlen, port) == RLT__NO_NODE)
            return RLT_EINVAL;
    }
    if (r->nnodes == 0 || (!r->opt.cluster && r->nnodes != 1)) return RLT_EINVAL;
    return RLT_OK;
}

/* Sentinel: the sentinels of r->sentinel_list; node 0, the master, unknown until asked. */
static int parse_sentinels(rlt_redis *r)
{
    size_t ml = strlen(r->master_name);
    if (r->opt.cluster || ml == 0 || ml > RLT__MASTER_NAME_MAX ||
        strpbrk(r->master_name, " \t\r\n"))
        return RLT_EINVAL;
    const char *s = r->sentinel_list, *host;
    size_t hlen;
    int port;
    while (*s) {
        if (next_hostport(&s, &host, &hlen, &port) != RLT_OK || r->nsents == RLT__MAX_SENTINELS ||
            hlen >= sizeof r->sents[0].host)
            return RLT_EINVAL;
        rlt__node *n = &r->sents[r->nsents++];
        memcpy(n->host, host, hlen);
        n->host[hlen] = '\0';
        n->port = port;
        n->sentinel = true;
    }
    if (r->nsents == 0) return RLT_EINVAL;
    memset(&r->nodes[0], 0, sizeof r->nodes[0]); /* the master: port 0 = not known yet */
    r->nodes[0].backoff = r->opt.backoff_min;
    r->nnodes = 1;
    return RLT_OK;
}

int rlt_redis_open(rlt_redis **out, const rlt_redis_options *opt)
{
    if (!out) return RLT_EINVAL;
    *out = NULL;
    rlt_redis_options o = {0};
    if (opt) o = *opt;
    if (o.timeout < 0 || o.backoff_min < 0 || o.backoff_max < 0 || o.lease_units < 0 ||
        o.lease_ttl < 0 || o.ttl_floor < 0 || o.ttl_floor > TTL_FLOOR_MAX)
        return RLT_EINVAL;
    if (o.prefix && (strlen(o.prefix) > 64 || strpbrk(o.prefix, "{}"))) return RLT_EINVAL;
    if (!o.timeout) o.timeout = RLT_REDIS_DEFAULT_TIMEOUT;
    if (!o.breaker_failures) o.breaker_failures = 3;
    if (!o.backoff_min) o.backoff_min = 100 * RLT_NS_PER_MS;
    if (!o.backoff_max) o.backoff_max = 5 * RLT_NS_PER_S;
    if (o.backoff_max < o.backoff_min) o.backoff_max = o.backoff_min;
    if (!o.lease_ttl) o.lease_ttl = 100 * RLT_NS_PER_MS;
    if (!o.lease_keys) o.lease_keys = 1024;
    if (o.refresh_interval < 0) return RLT_EINVAL;
    if (!o.refresh_interval) o.refresh_interval = RLT_NS_PER_S;
    if (o.sentinels && !o.master_name) return RLT_EINVAL;
    rlt_redis *r = calloc(1, sizeof *r);
    if (!r) return RLT_ENOMEM;
    r->opt = o;
    r->servers = dup_str(o.servers ? o.servers : "127.0.0.1:6379");
    r->prefix = dup_str(o.prefix ? o.prefix : "rlt:");
    r->password = o.password ? dup_str(o.password) : NULL;
    r->sentinel_list = o.sentinels ? dup_str(o.sentinels) : NULL;
    r->master_name = o.sentinels ? dup_str(o.master_name) : NULL;
    r->slots = malloc(RLT__SLOTS * sizeof *r->slots);
    if (o.lease_units > 0) {
        r->nleases = o.lease_keys;
        r->leases = calloc(r->nleases, sizeof *r->leases);
    }
    if (!r->servers || !r->prefix || (o.password && !r->password) || !r->slots ||
        (o.sentinels && (!r->sentinel_list || !r->master_name)) ||
        (o.lease_units > 0 && !r->leases)) {
        rlt_redis_close(r);
        return RLT_ENOMEM;
    }
    r->opt.servers = r->servers;
    r->opt.prefix = r->prefix;
    r->opt.password = r->password;
    r->prefix_len = strlen(r->prefix);
    for (size_t s = 0; s < RLT__SLOTS; s++)
        r->slots[s] = RLT__NO_NODE;
    r->opt.sentinels = r->sentinel_list;
    r->opt.master_name = r->master_name;
    r->refresh = o.cluster;
    int rc = r->master_name ? parse_sentinels(r) : parse_servers(r);
    if (rc) {
        rlt_redis_close(r);
        return rc;
    }
    *out = r;
    return RLT_OK;
}

void rlt_redis_close(rlt_redis *r)
{
    if (!r) return;
    for (unsigned i = 0; i < r->nnodes; i++)
        rlt__node_drop(&r->nodes[i]);
    for (unsigned i = 0; i < r->nsents; i++)
        rlt__node_drop(&r->sents[i]);
    rlt__node_drop(&r->sub);
    free(r->sentinel_list);
    free(r->master_name);
    if (r->leases) rlt__leases_free(r);
    free(r->leases);
    free(r->slots);
    free(r->servers);
    free(r->prefix);
    free(r->password);
    free(r);
}

void rlt_redis_stats_get(const rlt_redis *r, rlt_redis_stats *out)
{
    if (!r || !out) return;
    *out = r->st;
    out->nodes = r->nnodes;
    out->nodes_open = 0;
    for (unsigned i = 0; i < r->nnodes; i++)
        if (r->nodes[i].open) out->nodes_open++;
}

int rlt_redis_node_info_get(const rlt_redis *r, unsigned i, rlt_redis_node_info *out)
{
    if (!r || !out) return RLT_EINVAL;
    if (i >= r->nnodes) return RLT_ENOENT;
    const rlt__node *n = &r->nodes[i];
    memset(out, 0, sizeof *out);
    snprintf(out->addr, sizeof out->addr, "%s:%d", n->host, n->port);
    out->engine = n->engine;
    out->caller_time = n->engine == RLT_REDIS_ENGINE_MODULE && n->module_time;
    out->connected = n->c != NULL;
    out->breaker_open = n->open;
    return RLT_OK;
}

/* ---- key names --------------------------------------------------------------------------- */

int rlt_redis_key_name(const rlt_redis *r, const rlt_policy *p, const void *key, size_t klen,
                       char *buf, size_t cap)
{
    rlt__rpol rp;
    if (!r || !buf) return RLT_EINVAL;
    int rc = rlt__rpol_from(p, &rp);
    if (rc) return rc;
    return rlt__redis_name(r, p, key, klen, buf, cap);
}
