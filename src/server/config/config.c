/* ratelimitd's config as plain data: the settings' defaults, a new config holding only the
 * "default" policy, the lookups every reader of a parsed config makes (named policies, the
 * descriptor match) and freeing.  Reading YAML into it is load.c's (with rules.c, yaml.c). */
#include "server/config/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- settings ------------------------------------------------------------------------- */

void rlt__settings_default(rlt__settings *s)
{
    memset(s, 0, sizeof *s);
    strcpy(s->bind, "127.0.0.1");
    s->port = 6380;
    s->http_port = 8080;
    s->grpc_port = 8081;
    s->spop_port = -1;
    s->envoy_headers.ietf = true;
    s->envoy_headers.retry_after = true;
    strcpy(s->envoy_headers.x_limit, "x-ratelimit-limit");
    strcpy(s->envoy_headers.x_remaining, "x-ratelimit-remaining");
    strcpy(s->envoy_headers.x_reset, "x-ratelimit-reset");
    strcpy(s->snapshot, "ratelimitd.snap");
    s->snapshot_interval = 5 * RLT_NS_PER_S;
    s->max_keys = 1000000;
    s->max_connections = 10000;
    s->max_output = 1 << 20;
    s->max_memory = RLT__DEFAULT_MAX_MEMORY;
    s->client_timeout = 10 * RLT_NS_PER_S;
    s->max_inline_policies = 1024;
    s->max_args = RLT__RESP_DEFAULT_MAX_ARGS;
    s->max_bulk = RLT__RESP_DEFAULT_MAX_BULK;
    s->max_reservations = 65536;
    s->max_reservations_per_client = 4096;
    s->rlqs_max_buckets_per_client = 4096;
    s->rlqs_max_streams_per_client = 256;
    s->max_reservation_timeout = 3600 * RLT_NS_PER_S;
    s->top_keys = 100;
    s->ui = true;
}

/* ---- a new config ------------------------------------------------------------------------ */

rlt__config *rlt__config_new(void)
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
    return rlt__config_new();
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

static void free_qrules(rlt__qrule *q, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < q[i].nmatch; j++) {
            free(q[i].keys[j]);
            free(q[i].values[j]);
        }
        free(q[i].keys);
        free(q[i].values);
    }
    free(q);
}

void rlt__config_free(rlt__config *c)
{
    if (c == NULL) return;
    for (size_t i = 0; i < c->ndomains; i++) {
        free(c->domains[i].name);
        free_descs(c->domains[i].descs, c->domains[i].ndescs);
        free_qrules(c->domains[i].qrules, c->domains[i].nqrules);
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

/* ---- lookups ---------------------------------------------------------------------------- */

const rlt__domain *rlt__config_domain(const rlt__config *c, const char *name, size_t len)
{
    for (size_t i = 0; i < c->ndomains; i++)
        if (strlen(c->domains[i].name) == len && memcmp(c->domains[i].name, name, len) == 0)
            return &c->domains[i];
    return NULL;
}

int rlt__config_quota_match(const rlt__domain *d, const rlt__entry *p, size_t n)
{
    for (size_t i = 0; i < d->nqrules; i++) {
        const rlt__qrule *q = &d->qrules[i];
        size_t j = 0;
        for (; j < q->nmatch; j++) {
            size_t kl = strlen(q->keys[j]), k = 0;
            while (k < n && !(p[k].klen == kl && memcmp(p[k].key, q->keys[j], kl) == 0))
                k++;
            if (k == n) break;
            if (strcmp(q->values[j], "*") == 0) continue;
            if (p[k].vlen != strlen(q->values[j]) || memcmp(p[k].value, q->values[j], p[k].vlen))
                break;
        }
        if (j == q->nmatch) return (int)i;
    }
    return -1;
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
