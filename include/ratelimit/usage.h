/* Typed costs: a usage made of named counts ("in=1200,out=300,cached=800") and, per limit,
 * an integer weighting of those names ("in*3+out*15+cached*1"), so that one settle charges a
 * token limit, an output-token limit and a money budget in micro-units from the same usage.
 * Pure functions over plain structs, integers only: part of the core (libc alone). */
#ifndef RATELIMIT_USAGE_H
#define RATELIMIT_USAGE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* At most this many names in one usage or one weighting. */
#define RLT_USAGE_NAMES 8
/* A name is 1..15 bytes of [a-z0-9_], starting with a letter. */
#define RLT_USAGE_NAME_MAX 16
/* The largest weight and the largest count the texts accept: 2^40 - 1 (a weight times a count
 * may still overflow int64; rlt_weights_cost refuses that, exactly). */
#define RLT_USAGE_VALUE_MAX ((INT64_C(1) << 40) - 1)

/* A usage: named counts, each >= 0, names distinct.  All zero: no count. */
typedef struct rlt_usage {
    uint32_t n;
    struct {
        char name[RLT_USAGE_NAME_MAX]; /* NUL-terminated */
        int64_t count;
    } item[RLT_USAGE_NAMES];
} rlt_usage;

/* A weighting: cost = base + sum of weight x count over the named terms.  All zero: cost 0. */
typedef struct rlt_weights {
    int64_t base; /* the constant term (a bare integer: "1" counts requests) */
    uint32_t n;
    struct {
        char name[RLT_USAGE_NAME_MAX];
        int64_t weight;
    } term[RLT_USAGE_NAMES];
} rlt_weights;

/* Parses a usage "name=count[,name=count...]" from text[0..len): counts decimal, 0 ..
 * RLT_USAGE_VALUE_MAX, names distinct and valid, at most RLT_USAGE_NAMES.  Thread-safe.
 * Returns RLT_OK and fills *u; RLT_EINVAL (NULL arguments, empty text, a bad name, a
 * negative count, a repeated name, too many names); RLT_ERANGE (a count above
 * RLT_USAGE_VALUE_MAX).  On error *u is unspecified. */
int rlt_usage_parse(const char *text, size_t len, rlt_usage *u);

/* Parses a weighting from text[0..len): terms joined by '+', each "name", "name*W", "W*name"
 * or a bare integer "W" (the constant term; several add up), W decimal 0 ..
 * RLT_USAGE_VALUE_MAX; a name may appear once.  "in*3+out*15+cached*1", "1", "in+out".
 * Thread-safe.  Returns RLT_OK and fills *w; RLT_EINVAL (NULL arguments, empty text or term,
 * a bad name, a repeated name, more than RLT_USAGE_NAMES names); RLT_ERANGE (a number above
 * RLT_USAGE_VALUE_MAX). */
int rlt_weights_parse(const char *text, size_t len, rlt_weights *w);

/* Whether weighting `w` names `name` (NUL-terminated).  0 or 1. */
int rlt_weights_names(const rlt_weights *w, const char *name);

/* The cost of usage `u` under weighting `w`: base + sum over u's items of their term's weight
 * x count (an item w does not name weighs 0: the caller decides whether that is an error, as
 * a multi-limit settle does).  Exact: RLT_ERANGE when the sum leaves int64 (nothing set).
 * Returns RLT_OK and *cost; RLT_EINVAL for NULL arguments or a negative count or weight. */
int rlt_weights_cost(const rlt_weights *w, const rlt_usage *u, int64_t *cost);

/* Writes `w` back as text into buf[0..cap) (NUL-terminated, the parse's canonical form:
 * "in*3+out*15+cached*1", the base last, "0" for an empty weighting).  Returns the length, or
 * 0 when it does not fit. */
size_t rlt_weights_format(const rlt_weights *w, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* RATELIMIT_USAGE_H */
