/* Typed readers of libyaml document nodes for the config: scalars, integers in a range,
 * booleans, durations, sizes, fail modes, with "file:line: reason" errors. */
#include "server/config/yaml.h"
#include "core/text.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int rlt__cy_fail(rlt__cy *x, const yaml_node_t *n, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(x->err, x->errlen, "%s:%lu: %s", x->file,
             n ? (unsigned long)n->start_mark.line + 1 : 1UL, msg);
    return RLT_EPARSE;
}

yaml_node_t *rlt__cy_node(rlt__cy *x, int id)
{
    x->visits++;
    return yaml_document_get_node(x->doc, id);
}

const char *rlt__cy_scalar(const yaml_node_t *n, size_t *len)
{
    if (n == NULL || n->type != YAML_SCALAR_NODE) return NULL;
    *len = n->data.scalar.length;
    return (const char *)n->data.scalar.value;
}

bool rlt__cy_eq(const char *s, size_t len, const char *lit)
{
    return len == strlen(lit) && memcmp(s, lit, len) == 0;
}

int rlt__cy_get_str(rlt__cy *x, const yaml_node_t *n, char *out, size_t cap, const char *what)
{
    size_t len;
    const char *s = rlt__cy_scalar(n, &len);
    if (s == NULL) return rlt__cy_fail(x, n, "%s must be a string", what);
    if (len >= cap) return rlt__cy_fail(x, n, "%s is longer than %zu bytes", what, cap - 1);
    if (memchr(s, '\0', len) != NULL) return rlt__cy_fail(x, n, "%s contains a NUL byte", what);
    memcpy(out, s, len);
    out[len] = '\0';
    return RLT_OK;
}

int rlt__cy_get_int(rlt__cy *x, const yaml_node_t *n, int64_t lo, int64_t hi, int64_t *out,
                   const char *what)
{
    size_t len;
    const char *s = rlt__cy_scalar(n, &len);
    int64_t v;
    if (s == NULL || !rlt__parse_i64(s, len, &v) || v < lo || v > hi)
        return rlt__cy_fail(x, n, "%s must be an integer in [%lld, %lld]", what, (long long)lo,
                    (long long)hi);
    *out = v;
    return RLT_OK;
}

int rlt__cy_get_bool(rlt__cy *x, const yaml_node_t *n, bool *out, const char *what)
{
    size_t len;
    const char *s = rlt__cy_scalar(n, &len);
    if (s != NULL && (rlt__cy_eq(s, len, "true") || rlt__cy_eq(s, len, "yes") || rlt__cy_eq(s, len, "on"))) {
        *out = true;
        return RLT_OK;
    }
    if (s != NULL && (rlt__cy_eq(s, len, "false") || rlt__cy_eq(s, len, "no") || rlt__cy_eq(s, len, "off"))) {
        *out = false;
        return RLT_OK;
    }
    return rlt__cy_fail(x, n, "%s must be true or false", what);
}

/* A duration: "250ms", "5s", or a bare integer of seconds. */
int rlt__cy_get_duration(rlt__cy *x, const yaml_node_t *n, rlt_ns *out, const char *what)
{
    size_t len;
    const char *s = rlt__cy_scalar(n, &len);
    if (s == NULL || rlt_duration_parse(s, len, RLT_NS_PER_S, out) != RLT_OK || *out < 0)
        return rlt__cy_fail(x, n, "%s must be a duration such as 5s or 250ms", what);
    return RLT_OK;
}

int rlt__cy_get_size(rlt__cy *x, const yaml_node_t *n, size_t *out, const char *what)
{
    int64_t v = 0;
    if (rlt__cy_get_int(x, n, 0, INT64_MAX / 2, &v, what) != RLT_OK) return RLT_EPARSE;
    *out = (size_t)v;
    return RLT_OK;
}

int rlt__cy_get_bytes(rlt__cy *x, const yaml_node_t *n, int64_t lo, int64_t hi, int64_t *out,
                      const char *what)
{
    size_t len;
    const char *s = rlt__cy_scalar(n, &len);
    size_t digits = 0;
    while (s != NULL && digits < len && s[digits] >= '0' && s[digits] <= '9')
        digits++;
    int64_t v, unit = 1;
    const char *u = s ? s + digits : NULL;
    size_t ul = len - digits;
    /* Redis's units: kb, mb, gb are 1024-based; k, m, g 1000-based; case-insensitive. */
    static const struct {
        const char *name;
        int64_t mul;
    } units[] = {{"", 1},           {"b", 1},           {"k", 1000},
                 {"kb", 1024},      {"m", 1000000},     {"mb", 1024 * 1024},
                 {"g", 1000000000}, {"gb", 1 << 30}};
    bool known = false;
    for (size_t i = 0; u != NULL && i < sizeof units / sizeof units[0] && !known; i++)
        if (strlen(units[i].name) == ul && strncasecmp(u, units[i].name, ul) == 0) {
            unit = units[i].mul;
            known = true;
        }
    if (s == NULL || digits == 0 || !known || !rlt__parse_i64(s, digits, &v) ||
        __builtin_mul_overflow(v, unit, &v) || v < lo || v > hi)
        return rlt__cy_fail(x, n, "%s must be a size in [%lld, %lld] bytes (units: kb, mb, gb)",
                            what, (long long)lo, (long long)hi);
    *out = v;
    return RLT_OK;
}

int rlt__cy_need_map(rlt__cy *x, const yaml_node_t *n, const char *what)
{
    if (n == NULL || n->type != YAML_MAPPING_NODE) return rlt__cy_fail(x, n, "%s must be a mapping", what);
    if (x->visits > x->max_visits)
        return rlt__cy_fail(x, n, "document too large once its aliases are expanded (alias bomb?)");
    return RLT_OK;
}

int rlt__cy_need_seq(rlt__cy *x, const yaml_node_t *n, const char *what)
{
    if (n == NULL || n->type != YAML_SEQUENCE_NODE) return rlt__cy_fail(x, n, "%s must be a list", what);
    if (x->visits > x->max_visits)
        return rlt__cy_fail(x, n, "document too large once its aliases are expanded (alias bomb?)");
    return RLT_OK;
}

const char *rlt__cy_key_of(const yaml_node_t *k, size_t *len)
{
    const char *s = rlt__cy_scalar(k, len);
    if (s == NULL) {
        *len = 0;
        return "";
    }
    return s;
}

int rlt__cy_get_choice(rlt__cy *x, const yaml_node_t *n, const char *const *names, size_t count,
                       size_t *index, const char *what)
{
    size_t len;
    const char *s = rlt__cy_scalar(n, &len);
    for (size_t i = 0; s != NULL && i < count; i++)
        if (rlt__cy_eq(s, len, names[i])) {
            *index = i;
            return RLT_OK;
        }
    return rlt__cy_fail(x, n, "%s", what);
}

int rlt__cy_get_fail(rlt__cy *x, const yaml_node_t *n, int *out)
{
    static const char *const names[] = {"open", "closed", "local"};
    static const int modes[] = {RLT__FAIL_OPEN, RLT__FAIL_CLOSED, RLT__FAIL_LOCAL};
    size_t i = 0;
    if (rlt__cy_get_choice(x, n, names, 3, &i, "fail must be open, closed or local") != RLT_OK)
        return RLT_EPARSE;
    *out = modes[i];
    return RLT_OK;
}

/* A Redis duration needs its unit ("50ms"): a bare number would be ambiguous here. */

/* A key of mapping pair p, for sorting and messages. */
typedef struct keyref {
    const char *s;
    size_t len;
    const yaml_node_t *node;
} keyref;

static int keyref_cmp(const void *a, const void *b)
{
    const keyref *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->s, y->s, n);
    if (c != 0) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    /* Equal keys: the one earlier in the file first, so the message names both in order. */
    return x->node->start_mark.index < y->node->start_mark.index ? -1 : 1;
}

int rlt__cy_check_document(rlt__cy *x)
{
    size_t nodes = (size_t)(x->doc->nodes.top - x->doc->nodes.start);
    x->max_visits = VISITS_PER_NODE * nodes + VISITS_MARGIN;
    keyref stack[16];
    for (yaml_node_t *n = x->doc->nodes.start; n < x->doc->nodes.top; n++) {
        if (n->type != YAML_MAPPING_NODE) continue;
        size_t np = (size_t)(n->data.mapping.pairs.top - n->data.mapping.pairs.start);
        if (np < 2) continue;
        keyref *k = np <= 16 ? stack : malloc(np * sizeof *k);
        if (k == NULL) return rlt__cy_fail(x, n, "out of memory");
        size_t m = 0;
        for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
            yaml_node_t *kn = yaml_document_get_node(x->doc, p->key);
            if (kn == NULL || kn->type != YAML_SCALAR_NODE) continue; /* refused by its reader */
            k[m++] = (keyref){.s = (const char *)kn->data.scalar.value,
                              .len = kn->data.scalar.length,
                              .node = kn};
        }
        /* Sorted, duplicates are neighbours: n log n, not n^2, for a mapping of 20,000 keys. */
        qsort(k, m, sizeof *k, keyref_cmp);
        int r = RLT_OK;
        for (size_t i = 1; i < m && r == RLT_OK; i++)
            if (k[i].len == k[i - 1].len && memcmp(k[i].s, k[i - 1].s, k[i].len) == 0)
                r = rlt__cy_fail(x, k[i].node, "duplicate key '%.*s' (first on line %lu)",
                                 (int)(k[i].len > 64 ? 64 : k[i].len), k[i].s,
                                 (unsigned long)k[i - 1].node->start_mark.line + 1);
        if (k != stack) free(k);
        if (r != RLT_OK) return r;
    }
    return RLT_OK;
}
