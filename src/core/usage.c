/* Typed costs (include/ratelimit/usage.h): the usage and weighting texts and the exact integer
 * cost of a usage.  The notation is the arithmetic it denotes ("in*3+out*15+cached*1" is
 * 3 x in + 15 x out + 1 x cached), so a reader needs no key to it; integers only, and every
 * number is at most 2^40 - 1 so that the texts alone cannot overflow a term, while the sum is
 * still checked (counts up to 2^40 times weights up to 2^40 can). */
#include <string.h>

#include "core/text.h"
#include "ratelimit/ratelimit.h"
#include "ratelimit/usage.h"

static bool name_ok(const char *p, size_t len)
{
    if (len == 0 || len >= RLT_USAGE_NAME_MAX || p[0] < 'a' || p[0] > 'z') return false;
    for (size_t i = 0; i < len; i++) {
        char c = p[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
    }
    return true;
}

/* A number of the texts: decimal, 0 .. RLT_USAGE_VALUE_MAX.  RLT_OK, RLT_EINVAL, RLT_ERANGE. */
static int number(const char *p, size_t len, int64_t *out)
{
    if (len == 0 || p[0] < '0' || p[0] > '9') return RLT_EINVAL;
    for (size_t i = 0; i < len; i++)
        if (p[i] < '0' || p[i] > '9') return RLT_EINVAL;
    int64_t v;
    if (!rlt__parse_i64(p, len, &v)) return len > 1 && p[0] == '0' ? RLT_EINVAL : RLT_ERANGE;
    if (v > RLT_USAGE_VALUE_MAX) return RLT_ERANGE;
    *out = v;
    return RLT_OK;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* The next piece of text[*pos..len) up to `sep` (or the end); false when it is empty. */
static bool piece(const char *text, size_t len, size_t *pos, char sep, const char **p, size_t *n)
{
    size_t i = *pos;
    while (i < len && text[i] != sep)
        i++;
    *p = text + *pos;
    *n = i - *pos;
    if (i < len) i++;                                                /* past the separator */
    if (*n == 0 || (i == len && text[len - 1] == sep)) return false; /* "a,", "a,,b" */
    *pos = i;
    return true;
}

int rlt_usage_parse(const char *text, size_t len, rlt_usage *u)
{
    if (!text || !u || len == 0) return RLT_EINVAL;
    memset(u, 0, sizeof *u);
    for (size_t pos = 0; pos < len;) {
        const char *p;
        size_t n;
        if (!piece(text, len, &pos, ',', &p, &n)) return RLT_EINVAL;
        const char *eq = memchr(p, '=', n);
        if (!eq) return RLT_EINVAL;
        size_t nl = (size_t)(eq - p);
        if (!name_ok(p, nl) || u->n == RLT_USAGE_NAMES) return RLT_EINVAL;
        for (uint32_t j = 0; j < u->n; j++)
            if (strlen(u->item[j].name) == nl && memcmp(u->item[j].name, p, nl) == 0)
                return RLT_EINVAL;
        if (n - nl - 1 > 0 && eq[1] == '-') return RLT_EINVAL; /* negative */
        int rc = number(eq + 1, n - nl - 1, &u->item[u->n].count);
        if (rc) return rc;
        memcpy(u->item[u->n].name, p, nl);
        u->n++;
    }
    return RLT_OK;
}

int rlt_weights_names(const rlt_weights *w, const char *name)
{
    if (!w || !name) return 0;
    for (uint32_t j = 0; j < w->n; j++)
        if (strcmp(w->term[j].name, name) == 0) return 1;
    return 0;
}

int rlt_weights_parse(const char *text, size_t len, rlt_weights *w)
{
    if (!text || !w || len == 0) return RLT_EINVAL;
    memset(w, 0, sizeof *w);
    for (size_t pos = 0; pos < len;) {
        const char *p;
        size_t n;
        if (!piece(text, len, &pos, '+', &p, &n)) return RLT_EINVAL;
        const char *star = memchr(p, '*', n);
        const char *name = p, *num = NULL;
        size_t name_len = n, num_len = 0;
        if (star) {
            size_t a = (size_t)(star - p), b = n - a - 1;
            if (a > 0 && is_digit(p[0])) { /* W*name */
                num = p, num_len = a, name = star + 1, name_len = b;
            } else { /* name*W */
                name_len = a, num = star + 1, num_len = b;
            }
        } else if (is_digit(p[0])) { /* the constant term */
            int64_t c;
            int rc = number(p, n, &c);
            if (rc) return rc;
            w->base += c; /* at most 2^40 per term, and at most len terms: no overflow */
            if (w->base > RLT_USAGE_VALUE_MAX) return RLT_ERANGE;
            continue;
        }
        int64_t weight = 1;
        if (num) {
            int rc = number(num, num_len, &weight);
            if (rc) return rc;
        }
        if (!name_ok(name, name_len) || w->n == RLT_USAGE_NAMES) return RLT_EINVAL;
        for (uint32_t j = 0; j < w->n; j++)
            if (strlen(w->term[j].name) == name_len && memcmp(w->term[j].name, name, name_len) == 0)
                return RLT_EINVAL;
        memcpy(w->term[w->n].name, name, name_len);
        w->term[w->n].weight = weight;
        w->n++;
    }
    return RLT_OK;
}

int rlt_weights_cost(const rlt_weights *w, const rlt_usage *u, int64_t *cost)
{
    if (!w || !u || !cost || w->base < 0) return RLT_EINVAL;
    int64_t sum = w->base;
    for (uint32_t i = 0; i < u->n && i < RLT_USAGE_NAMES; i++) {
        if (u->item[i].count < 0) return RLT_EINVAL;
        for (uint32_t j = 0; j < w->n && j < RLT_USAGE_NAMES; j++) {
            if (strcmp(w->term[j].name, u->item[i].name) != 0) continue;
            int64_t t;
            if (w->term[j].weight < 0) return RLT_EINVAL;
            if (__builtin_mul_overflow(w->term[j].weight, u->item[i].count, &t) ||
                __builtin_add_overflow(sum, t, &sum))
                return RLT_ERANGE;
        }
    }
    *cost = sum;
    return RLT_OK;
}

size_t rlt_weights_format(const rlt_weights *w, char *buf, size_t cap)
{
    if (!w || !buf || cap == 0) return 0;
    char
        tmp[RLT_USAGE_NAMES * (RLT_USAGE_NAME_MAX + RLT__I64_TEXT_MAX + 2) + RLT__I64_TEXT_MAX + 2];
    size_t n = 0;
    for (uint32_t j = 0; j < w->n && j < RLT_USAGE_NAMES; j++) {
        if (n) tmp[n++] = '+';
        size_t l = strnlen(w->term[j].name, RLT_USAGE_NAME_MAX - 1);
        memcpy(tmp + n, w->term[j].name, l);
        n += l;
        tmp[n++] = '*';
        n += rlt__format_i64(tmp + n, w->term[j].weight);
    }
    if (w->base || n == 0) {
        if (n) tmp[n++] = '+';
        n += rlt__format_i64(tmp + n, w->base);
    }
    if (n + 1 > cap) return 0;
    memcpy(buf, tmp, n);
    buf[n] = 0;
    return n;
}
