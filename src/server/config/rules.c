/* The config's limits: envoy descriptor trees and their rules (rate_limit and our
 * extensions), named policies, tiers and tenants, and their store names. */
#include "server/config/rules.h"

#include "server/config/config.h"

#include "server/config/yaml.h"
#include "server/config/units.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- names ---------------------------------------------------------------------------- */

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
                     (unsigned long long)rlt_hash_fnv1a(text, tl));
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
static const rlt__rule *sort_rules; /* qsort has no context argument; one thread parses */

static int rule_name_cmp(const void *a, const void *b)
{
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    int c = strcmp(sort_rules[i].name, sort_rules[j].name);
    return c != 0 ? c : (i < j ? -1 : 1);
}

int rlt__cy_check_rule_names(rlt__cy *x)
{
    const rlt__config *c = x->c;
    if (c->nrules < 2) return RLT_OK;
    size_t *ix = malloc(c->nrules * sizeof *ix);
    if (ix == NULL) return rlt__cy_fail(x, NULL, "out of memory");
    for (size_t i = 0; i < c->nrules; i++)
        ix[i] = i;
    /* Sorted by store name, equal names are neighbours (n log n for 20,000 rules). */
    sort_rules = c->rules;
    qsort(ix, c->nrules, sizeof *ix, rule_name_cmp);
    int r = RLT_OK;
    for (size_t k = 1; k < c->nrules && r == RLT_OK; k++) {
        const rlt__rule *a = &c->rules[ix[k - 1]], *b = &c->rules[ix[k]];
        if (strcmp(a->name, b->name) != 0) continue;
        snprintf(x->err, x->errlen,
                 "%s:%d: rule %s has the same store name (%s) as the rule on line %d "
                 "(%s): change a key or value",
                 x->file, b->line, b->path, b->name, a->line, a->path);
        r = RLT_EPARSE;
    }
    free(ix);
    return r;
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

static int add_rule(rlt__cy *x, rlt__rule **out)
{
    rlt__config *c = x->c;
    if (c->nrules == x->rules_cap) {
        /* Doubling: one realloc per rule copied every rule again (n^2 bytes for a big file). */
        size_t cap = x->rules_cap ? x->rules_cap * 2 : 16;
        rlt__rule *r = realloc(c->rules, cap * sizeof *r);
        if (r == NULL) return rlt__cy_fail(x, NULL, "out of memory");
        c->rules = r;
        x->rules_cap = cap;
    }
    rlt__rule *r = c->rules;
    memset(&r[c->nrules], 0, sizeof r[0]);
    r[c->nrules].policy_id = -1;
    *out = &r[c->nrules++];
    return RLT_OK;
}

/* The options a named policy or a rule may carry besides its limit. */
typedef struct policy_opts {
    bool shadow;
    int fail;          /* RLT__FAIL_* */
    rlt_change change; /* at a reload */
    bool lease;
} policy_opts;

/* `change: keep|reset|scale`: what a reload that changes the policy does to used allowance. */
static int get_change(rlt__cy *x, const yaml_node_t *n, rlt_change *out)
{
    static const char *const names[] = {"keep", "reset", "scale"};
    static const rlt_change changes[] = {RLT_CHANGE_KEEP, RLT_CHANGE_RESET, RLT_CHANGE_SCALE};
    size_t i;
    if (rlt__cy_get_choice(x, n, names, 3, &i, "change must be keep, reset or scale") != RLT_OK)
        return RLT_EPARSE;
    *out = changes[i];
    return RLT_OK;
}

/* Reads one of the shared options (shadow_mode, fail, change, lease) of key kk; returns
 * RLT_ENOENT when kk is none of them. */
static int get_policy_opt(rlt__cy *x, const char *kk, size_t kl, const yaml_node_t *v,
                          policy_opts *o)
{
    if (rlt__cy_eq(kk, kl, "shadow_mode")) return rlt__cy_get_bool(x, v, &o->shadow, "shadow_mode");
    if (rlt__cy_eq(kk, kl, "fail")) return rlt__cy_get_fail(x, v, &o->fail);
    if (rlt__cy_eq(kk, kl, "change")) return get_change(x, v, &o->change);
    if (rlt__cy_eq(kk, kl, "lease")) return rlt__cy_get_bool(x, v, &o->lease, "lease");
    return RLT_ENOENT;
}

/* drain_over_limit charges through a settle (rlt_settle): the policy must be able to. */
static int drain_ok(rlt__cy *x, const yaml_node_t *where, const rlt__rule *rule)
{
    if (rule->drain && !rlt_settle_supported(&rule->policy))
        return rlt__cy_fail(x, where,
                            "drain_over_limit: %s cannot carry a debt (fixed_window, "
                            "sliding_window, sliding_log, token_bucket or gcra can)",
                            rlt_algo_name(rule->policy.algo));
    return RLT_OK;
}

static int parse_rate_limit(rlt__cy *x, yaml_node_t *n, rlt__rule *rule)
{
    if (rlt__cy_need_map(x, n, "rate_limit") != RLT_OK) return RLT_EPARSE;
    int64_t rpu = -1, burst = 0;
    rlt_ns period = 0;
    rlt_algo algo = RLT_FIXED_WINDOW;
    char text[RLT__STR_MAX] = "";
    yaml_node_t *where = n;
    FOR_PAIRS(x, n, k, v)
    {
        size_t kl, vl;
        const char *key = rlt__cy_key_of(k, &kl);
        const char *s;
        int r = 0;
        if (rlt__cy_eq(key, kl, "unit")) {
            s = rlt__cy_scalar(v, &vl);
            /* envoyproxy/ratelimit's units and dividers (rls.c: WEEK is 7 days, MONTH 30,
             * YEAR 365, windows aligned to the epoch). */
            int u = s ? rlt__unit_from_name(s, vl) : RLT__UNIT_UNKNOWN;
            period = rlt__unit_ns(u);
            if (period != 0) rule->unit = rlt__unit_name(u);
            if (period == 0)
                r = rlt__cy_fail(x, v, "unit must be second, minute, hour, day, week, month or year");
        } else if (rlt__cy_eq(key, kl, "requests_per_unit")) {
            r = rlt__cy_get_int(x, v, 0, INT32_MAX, &rpu, "requests_per_unit");
        } else if (rlt__cy_eq(key, kl, "unlimited")) {
            r = rlt__cy_get_bool(x, v, &rule->unlimited, "unlimited");
        } else if (rlt__cy_eq(key, kl, "name")) {
            r = rlt__cy_get_str(x, v, rule->rl_name, sizeof rule->rl_name, "name");
        } else if (rlt__cy_eq(key, kl, "replaces")) {
            if (rlt__cy_need_seq(x, v, "replaces") != RLT_OK) return RLT_EPARSE;
            for (yaml_node_item_t *it = v->data.sequence.items.start;
                 it < v->data.sequence.items.top; it++) {
                yaml_node_t *e = rlt__cy_node(x, *it);
                if (rlt__cy_need_map(x, e, "a replaces entry") != RLT_OK) return RLT_EPARSE;
                FOR_PAIRS(x, e, k2, v2)
                {
                    size_t k2l;
                    const char *key2 = rlt__cy_key_of(k2, &k2l);
                    if (!rlt__cy_eq(key2, k2l, "name")) return rlt__cy_fail(x, k2, "replaces entries take name");
                    char nm[RLT__STR_MAX];
                    if (rlt__cy_get_str(x, v2, nm, sizeof nm, "name") != RLT_OK) return RLT_EPARSE;
                    char **rp = realloc(rule->replaces, (rule->nreplaces + 1) * sizeof *rp);
                    if (rp == NULL) return rlt__cy_fail(x, v2, "out of memory");
                    rule->replaces = rp;
                    if ((rp[rule->nreplaces] = strdup(nm)) == NULL)
                        return rlt__cy_fail(x, v2, "out of memory");
                    rule->nreplaces++;
                }
            }
        } else if (rlt__cy_eq(key, kl, "algorithm")) {
            s = rlt__cy_scalar(v, &vl);
            algo = s ? rlt_algo_from_name(s, vl) : RLT_ALGO_NONE;
            if (algo == RLT_ALGO_NONE)
                r = rlt__cy_fail(x, v,
                         "unknown algorithm (fixed_window, sliding_log, sliding_window, "
                         "token_bucket, gcra, leaky_bucket, concurrency)");
        } else if (rlt__cy_eq(key, kl, "burst")) {
            r = rlt__cy_get_int(x, v, 1, INT32_MAX, &burst, "burst");
        } else if (rlt__cy_eq(key, kl, "policy")) {
            r = rlt__cy_get_str(x, v, text, sizeof text, "policy");
        } else if (rlt__cy_eq(key, kl, "drain_over_limit")) {
            r = rlt__cy_get_bool(x, v, &rule->drain, "drain_over_limit");
        } else if (rlt__cy_eq(key, kl, "fail") || rlt__cy_eq(key, kl, "change") ||
                   rlt__cy_eq(key, kl, "lease")) {
            policy_opts o = {.fail = rule->fail, .change = rule->change, .lease = rule->lease};
            r = get_policy_opt(x, key, kl, v, &o);
            rule->fail = o.fail;
            rule->change = o.change;
            rule->lease = o.lease;
        } else {
            r = rlt__cy_fail(x, k, "unknown rate_limit field '%.*s'", (int)(kl > 64 ? 64 : kl), key);
        }
        if (r < 0) return RLT_EPARSE;
    }
    rule->line = (int)where->start_mark.line + 1;
    if (rule->drain && (rule->unlimited || rpu == 0))
        return rlt__cy_fail(x, where,
                            "drain_over_limit needs a limit to charge (not unlimited, not "
                            "requests_per_unit: 0)");
    if (rule->unlimited) return RLT_OK;
    if (algo == RLT_CONCURRENCY)
        return rlt__cy_fail(x, where, "concurrency is not a descriptor algorithm (use RL.ACQUIRE)");
    if (text[0] != '\0') {
        char perr[200];
        if (rlt_policy_parse(&rule->policy, text, strlen(text), perr, sizeof perr) != RLT_OK)
            return rlt__cy_fail(x, where, "policy '%s': %s", text, perr);
        if (rule->policy.algo == RLT_CONCURRENCY)
            return rlt__cy_fail(x, where, "concurrency is not a descriptor algorithm (use RL.ACQUIRE)");
        rule->requests_per_unit = rule->policy.limit;
        return drain_ok(x, where, rule);
    }
    if (rpu < 0) return rlt__cy_fail(x, where, "rate_limit needs requests_per_unit (or unlimited: true)");
    if (period == 0) return rlt__cy_fail(x, where, "rate_limit needs a unit");
    rule->requests_per_unit = rpu;
    if (rpu == 0) {
        rule->block_all = true;
        return RLT_OK;
    }
    int st = rlt_policy_init(&rule->policy, algo, rpu, period, burst, 0, 0);
    if (st != RLT_OK) return rlt__cy_fail(x, where, "invalid rate limit: %s", rlt_strerror(st));
    return drain_ok(x, where, rule);
}

static const rlt__desc *sort_descs; /* qsort has no context argument; one thread parses */

static int desc_cmp(const void *a, const void *b)
{
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    const rlt__desc *x = &sort_descs[i], *y = &sort_descs[j];
    int c = strcmp(x->key, y->key);
    if (c == 0 && (x->value == NULL) != (y->value == NULL)) c = x->value == NULL ? -1 : 1;
    if (c == 0 && x->value != NULL) c = strcmp(x->value, y->value);
    return c != 0 ? c : (i < j ? -1 : 1);
}

/* Two siblings with one key and value would shadow each other: refused, found by sorting
 * (n log n for a level of 20,000 descriptors).  The later one is named, by its node. */
static int check_siblings(rlt__cy *x, yaml_node_t *seq, const rlt__desc *ds, size_t n)
{
    if (n < 2) return RLT_OK;
    size_t *ix = malloc(n * sizeof *ix);
    if (ix == NULL) return rlt__cy_fail(x, seq, "out of memory");
    for (size_t i = 0; i < n; i++)
        ix[i] = i;
    sort_descs = ds;
    qsort(ix, n, sizeof *ix, desc_cmp);
    int r = RLT_OK;
    for (size_t k = 1; k < n && r == RLT_OK; k++) {
        const rlt__desc *a = &ds[ix[k - 1]], *b = &ds[ix[k]];
        bool same_value = (a->value == NULL && b->value == NULL) ||
                          (a->value && b->value && strcmp(a->value, b->value) == 0);
        if (strcmp(a->key, b->key) != 0 || !same_value) continue;
        yaml_node_t *e = yaml_document_get_node(x->doc, seq->data.sequence.items.start[ix[k]]);
        r = rlt__cy_fail(x, e, "duplicate descriptor '%s%s%s'", b->key, b->value ? "_" : "",
                         b->value ? b->value : "");
    }
    free(ix);
    return r;
}

static int parse_descs(rlt__cy *x, yaml_node_t *n, const char *path, int depth, rlt__desc **out,
                       size_t *nout)
{
    if (rlt__cy_need_seq(x, n, "descriptors") != RLT_OK) return RLT_EPARSE;
    if (depth > MAX_DEPTH) return rlt__cy_fail(x, n, "descriptors nested deeper than %d", MAX_DEPTH);
    size_t count = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    rlt__desc *ds = calloc(count ? count : 1, sizeof *ds);
    if (ds == NULL) return rlt__cy_fail(x, n, "out of memory");
    *out = ds;
    *nout = 0;
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
         it++) {
        yaml_node_t *e = rlt__cy_node(x, *it);
        if (rlt__cy_need_map(x, e, "a descriptor") != RLT_OK) return RLT_EPARSE;
        rlt__desc *d = &ds[(*nout)++];
        d->rule = -1;
        yaml_node_t *rl = NULL, *sub = NULL;
        bool shadow = false, have_key = false;
        char key[RLT__STR_MAX], value[RLT__STR_MAX];
        bool have_value = false;
        FOR_PAIRS(x, e, k, v)
        {
            size_t kl;
            const char *kk = rlt__cy_key_of(k, &kl);
            int r = 0;
            if (rlt__cy_eq(kk, kl, "key")) {
                r = rlt__cy_get_str(x, v, key, sizeof key, "key");
                have_key = true;
            } else if (rlt__cy_eq(kk, kl, "value")) {
                r = rlt__cy_get_str(x, v, value, sizeof value, "value");
                have_value = true;
            } else if (rlt__cy_eq(kk, kl, "rate_limit")) {
                rl = v;
            } else if (rlt__cy_eq(kk, kl, "descriptors")) {
                sub = v;
            } else if (rlt__cy_eq(kk, kl, "shadow_mode")) {
                r = rlt__cy_get_bool(x, v, &shadow, "shadow_mode");
            } else if (rlt__cy_eq(kk, kl, "detailed_metric")) {
                bool ignored;
                r = rlt__cy_get_bool(x, v, &ignored, "detailed_metric");
            } else {
                r = rlt__cy_fail(x, k, "unknown descriptor field '%.*s'", (int)(kl > 64 ? 64 : kl), kk);
            }
            if (r < 0) return RLT_EPARSE;
        }
        if (!have_key || key[0] == '\0') return rlt__cy_fail(x, e, "a descriptor needs a key");
        if ((d->key = strdup(key)) == NULL) return rlt__cy_fail(x, e, "out of memory");
        if (have_value && (d->value = strdup(value)) == NULL) return rlt__cy_fail(x, e, "out of memory");
        char mypath[RLT__STR_MAX];
        snprintf(mypath, sizeof mypath, "%s.%s%s%s", path, d->key, d->value ? "_" : "",
                 d->value ? d->value : "");
        if (rl != NULL) {
            rlt__rule *rule = NULL;
            if (add_rule(x, &rule) != RLT_OK) return RLT_EPARSE;
            d->rule = (int)(x->c->nrules - 1);
            snprintf(rule->path, sizeof rule->path, "%s", mypath);
            if (parse_rate_limit(x, rl, rule) != RLT_OK) return RLT_EPARSE;
            rule->shadow = shadow;
            store_name(rule->name, "r:", rule->path);
        } else if (shadow) {
            return rlt__cy_fail(x, e, "shadow_mode needs a rate_limit");
        }
        if (sub != NULL && parse_descs(x, sub, mypath, depth + 1, &d->children, &d->nchildren) != RLT_OK)
            return RLT_EPARSE;
    }
    return check_siblings(x, n, ds, *nout);
}

int rlt__cy_add_domain(rlt__cy *x, yaml_node_t *name_node, yaml_node_t *descs)
{
    rlt__config *c = x->c;
    char name[RLT__STR_MAX];
    if (rlt__cy_get_str(x, name_node, name, sizeof name, "domain") != RLT_OK) return RLT_EPARSE;
    if (name[0] == '\0') return rlt__cy_fail(x, name_node, "domain must not be empty");
    for (size_t i = 0; i < c->ndomains; i++)
        if (strcmp(c->domains[i].name, name) == 0)
            return rlt__cy_fail(x, name_node, "duplicate domain '%s'", name);
    rlt__domain *d = realloc(c->domains, (c->ndomains + 1) * sizeof *d);
    if (d == NULL) return rlt__cy_fail(x, name_node, "out of memory");
    c->domains = d;
    rlt__domain *dom = &d[c->ndomains++];
    memset(dom, 0, sizeof *dom);
    if ((dom->name = strdup(name)) == NULL) return rlt__cy_fail(x, name_node, "out of memory");
    if (descs == NULL) return RLT_OK;
    return parse_descs(x, descs, name, 1, &dom->descs, &dom->ndescs);
}

/* ---- policies, tiers, tenants --------------------------------------------------------- */

static int add_named(rlt__cy *x, const yaml_node_t *at, const char *name, const char *text,
                     const policy_opts *opts)
{
    rlt__config *c = x->c;
    if (!valid_name(name) || strlen(name) > RLT_NAME_MAX - 2)
        return rlt__cy_fail(x, at, "policy name '%s' must be 1..%d of [A-Za-z0-9_.-]", name,
                    RLT_NAME_MAX - 2);
    rlt__named *slot = NULL;
    for (size_t i = 0; i < c->nnamed; i++)
        if (strcmp(c->named[i].name, name) == 0) slot = &c->named[i];
    if (slot == NULL) {
        rlt__named *nn = realloc(c->named, (c->nnamed + 1) * sizeof *nn);
        if (nn == NULL) return rlt__cy_fail(x, at, "out of memory");
        c->named = nn;
        slot = &nn[c->nnamed++];
    } else if (strcmp(name, "default") != 0) {
        return rlt__cy_fail(x, at, "duplicate policy '%s'", name);
    }
    memset(slot, 0, sizeof *slot);
    strcpy(slot->name, name);
    slot->shadow = opts->shadow;
    slot->fail = opts->fail;
    slot->change = opts->change;
    slot->lease = opts->lease;
    slot->policy_id = -1;
    char perr[200];
    if (rlt_policy_parse(&slot->policy, text, strlen(text), perr, sizeof perr) != RLT_OK)
        return rlt__cy_fail(x, at, "policy '%s': %s", name, perr);
    return RLT_OK;
}

int rlt__cy_parse_policies(rlt__cy *x, yaml_node_t *n)
{
    if (rlt__cy_need_map(x, n, "policies") != RLT_OK) return RLT_EPARSE;
    FOR_PAIRS(x, n, k, v)
    {
        char name[RLT__STR_MAX], text[RLT__STR_MAX] = "";
        policy_opts opts = {.fail = RLT__FAIL_DEFAULT, .change = RLT_CHANGE_KEEP};
        if (rlt__cy_get_str(x, k, name, sizeof name, "a policy name") != RLT_OK) return RLT_EPARSE;
        if (v->type == YAML_SCALAR_NODE) {
            if (rlt__cy_get_str(x, v, text, sizeof text, "a policy") != RLT_OK) return RLT_EPARSE;
        } else {
            if (rlt__cy_need_map(x, v, "a policy") != RLT_OK) return RLT_EPARSE;
            FOR_PAIRS(x, v, k2, v2)
            {
                size_t kl;
                const char *kk = rlt__cy_key_of(k2, &kl);
                int r = rlt__cy_eq(kk, kl, "policy")
                            ? rlt__cy_get_str(x, v2, text, sizeof text, "policy")
                            : get_policy_opt(x, kk, kl, v2, &opts);
                if (r == RLT_ENOENT)
                    r = rlt__cy_fail(x, k2, "unknown policy field '%.*s'", (int)(kl > 64 ? 64 : kl),
                                     kk);
                if (r != RLT_OK) return RLT_EPARSE;
            }
            if (text[0] == '\0') return rlt__cy_fail(x, v, "policy '%s' needs policy: TEXT", name);
        }
        if (add_named(x, k, name, text, &opts) != RLT_OK) return RLT_EPARSE;
    }
    return RLT_OK;
}

int rlt__cy_parse_tiers(rlt__cy *x, yaml_node_t *n)
{
    rlt__config *c = x->c;
    if (rlt__cy_need_map(x, n, "tiers") != RLT_OK) return RLT_EPARSE;
    FOR_PAIRS(x, n, k, v)
    {
        rlt__tier t;
        if (rlt__cy_get_str(x, k, t.name, sizeof t.name, "a tier name") != RLT_OK) return RLT_EPARSE;
        if (!valid_name(t.name)) return rlt__cy_fail(x, k, "tier name must be [A-Za-z0-9_.-]+");
        if (rlt__cy_get_str(x, v, t.policy, sizeof t.policy, "a tier's policy name") != RLT_OK) return RLT_EPARSE;
        if (rlt__config_named(c, t.policy, strlen(t.policy)) == NULL)
            return rlt__cy_fail(x, v, "tier '%s': no policy named '%s' (define it under policies:)", t.name,
                        t.policy);
        for (size_t i = 0; i < c->ntiers; i++)
            if (strcmp(c->tiers[i].name, t.name) == 0)
                return rlt__cy_fail(x, k, "duplicate tier '%s'", t.name);
        rlt__tier *ts = realloc(c->tiers, (c->ntiers + 1) * sizeof *ts);
        if (ts == NULL) return rlt__cy_fail(x, k, "out of memory");
        c->tiers = ts;
        ts[c->ntiers++] = t;
    }
    return RLT_OK;
}

int rlt__cy_parse_tenants(rlt__cy *x, yaml_node_t *n)
{
    rlt__config *c = x->c;
    if (rlt__cy_need_seq(x, n, "tenants") != RLT_OK) return RLT_EPARSE;
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
         it++) {
        yaml_node_t *e = rlt__cy_node(x, *it);
        if (rlt__cy_need_map(x, e, "a tenant") != RLT_OK) return RLT_EPARSE;
        rlt__tenant t;
        memset(&t, 0, sizeof t);
        bool have_prefix = false;
        FOR_PAIRS(x, e, k, v)
        {
            size_t kl;
            const char *kk = rlt__cy_key_of(k, &kl);
            int r;
            if (rlt__cy_eq(kk, kl, "name"))
                r = rlt__cy_get_str(x, v, t.name, sizeof t.name, "name");
            else if (rlt__cy_eq(kk, kl, "password"))
                r = rlt__cy_get_str(x, v, t.password, sizeof t.password, "password");
            else if (rlt__cy_eq(kk, kl, "prefix")) {
                r = rlt__cy_get_str(x, v, t.prefix, sizeof t.prefix, "prefix");
                have_prefix = true;
            } else
                r = rlt__cy_fail(x, k, "unknown tenant field '%.*s'", (int)(kl > 64 ? 64 : kl), kk);
            if (r < 0) return RLT_EPARSE;
        }
        if (t.name[0] == '\0' || t.password[0] == '\0')
            return rlt__cy_fail(x, e, "a tenant needs a name and a password");
        if (!have_prefix) snprintf(t.prefix, sizeof t.prefix, "%.200s:", t.name);
        if (t.prefix[0] == '\0') return rlt__cy_fail(x, e, "a tenant's prefix must not be empty");
        for (size_t i = 0; i < c->ntenants; i++) {
            if (strcmp(c->tenants[i].password, t.password) == 0)
                return rlt__cy_fail(x, e, "two tenants share a password");
            if (strncmp(c->tenants[i].prefix, t.prefix, strlen(c->tenants[i].prefix)) == 0 ||
                strncmp(t.prefix, c->tenants[i].prefix, strlen(t.prefix)) == 0)
                return rlt__cy_fail(x, e, "tenant prefixes '%s' and '%s' overlap", t.prefix,
                            c->tenants[i].prefix);
        }
        rlt__tenant *ts = realloc(c->tenants, (c->ntenants + 1) * sizeof *ts);
        if (ts == NULL) return rlt__cy_fail(x, e, "out of memory");
        c->tenants = ts;
        ts[c->ntenants++] = t;
    }
    return RLT_OK;
}
