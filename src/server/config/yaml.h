/* Internals of the YAML config reader, shared by its files (load.c, rules.c): the parse
 * context and the typed readers of YAML nodes (yaml.c).  Every reader returns RLT_OK, or
 * RLT_EPARSE after writing "file:line: reason" into the context's error buffer. */
#ifndef RLT_SERVER_CONFIG_YAML_H
#define RLT_SERVER_CONFIG_YAML_H

#include "server/config/config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <yaml.h>

#define MAX_DEPTH 16     /* nested descriptor levels */
#define MAX_NESTING 64   /* nested YAML collections in a document (load.c) */
/* Node visits allowed: every node of the document a few times over (the root is read twice),
 * plus a margin.  An alias bomb ("billion laughs") references a few nodes billions of times:
 * it passes this bound after a few thousand visits and is refused at once, while a genuine
 * file of any size (20,000 rules) loads. */
#define VISITS_PER_NODE 4
#define VISITS_MARGIN 10000
#define MAX_FILE (16 << 20)

typedef struct rlt__cy {
    yaml_document_t *doc;
    const char *file;
    char *err;
    size_t errlen;
    size_t visits;
    size_t max_visits;
    size_t rules_cap; /* room in c->rules */ /* VISITS_PER_NODE x the document's nodes + VISITS_MARGIN */
    rlt__config *c;
} rlt__cy;


/* ---- node readers (yaml.c) ---- */
int rlt__cy_fail(rlt__cy *x, const yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
yaml_node_t *rlt__cy_node(rlt__cy *x, int id);
const char *rlt__cy_scalar(const yaml_node_t *n, size_t *len);
bool rlt__cy_eq(const char *s, size_t len, const char *lit);
int rlt__cy_get_str(rlt__cy *x, const yaml_node_t *n, char *out, size_t cap, const char *what);
int rlt__cy_get_int(rlt__cy *x, const yaml_node_t *n, int64_t lo, int64_t hi, int64_t *out,
                   const char *what);
int rlt__cy_get_bool(rlt__cy *x, const yaml_node_t *n, bool *out, const char *what);
int rlt__cy_get_duration(rlt__cy *x, const yaml_node_t *n, rlt_ns *out, const char *what);
int rlt__cy_get_size(rlt__cy *x, const yaml_node_t *n, size_t *out, const char *what);
/* A size in bytes: digits with an optional unit (kb, mb, gb: 1024-based; k, m, g). */
int rlt__cy_get_bytes(rlt__cy *x, const yaml_node_t *n, int64_t lo, int64_t hi, int64_t *out,
                      const char *what);
int rlt__cy_need_map(rlt__cy *x, const yaml_node_t *n, const char *what);
int rlt__cy_need_seq(rlt__cy *x, const yaml_node_t *n, const char *what);
const char *rlt__cy_key_of(const yaml_node_t *k, size_t *len);
/* One of names[0..count) (exactly): its *index; else fails with the message `what`. */
int rlt__cy_get_choice(rlt__cy *x, const yaml_node_t *n, const char *const *names, size_t count,
                       size_t *index, const char *what);
/* `fail: open|closed|local`: RLT__FAIL_*. */
int rlt__cy_get_fail(rlt__cy *x, const yaml_node_t *n, int *out);

/* Iterates a mapping's pairs as (k, v) node pointers ("continue" works, "break" does not). */
#define FOR_PAIRS(x, n, k, v)                                                                      \
    for (yaml_node_pair_t *p_##k = (n)->data.mapping.pairs.start;                                  \
         p_##k < (n)->data.mapping.pairs.top; p_##k++)                                             \
        for (yaml_node_t *k = rlt__cy_node(x, p_##k->key), *v = rlt__cy_node(x, p_##k->value);     \
             k != NULL; k = NULL)

/* The whole document's shape, before any section is read: no mapping has a key twice (go-yaml,
 * which envoyproxy/ratelimit reads its files with, refuses those too).  Sets max_visits. */
int rlt__cy_check_document(rlt__cy *x);

#endif
