/* Priority classes: the part of a limit each class may use.  Critical may use the whole
 * limit; each step down loses R = ceil(limit x reserve% / 100), so a reserve of 20 % keeps
 * the top fifth for critical and the next fifth for default and critical (Stripe keeps 20 %
 * of its concurrency for critical traffic).  The rule is the same for a rate limit's
 * remaining allowance and a concurrency limit's slots: the caller passes what is in use.
 * Integers only: limit <= 2^62 keeps limit x 100 and 2R within int64. */
#include "ratelimit/adaptive.h"

#include "internal.h"

static const char *const names[RLT_CLASS_COUNT] = {"critical", "default", "sheddable"};

int rlt_class_parse(const char *s, size_t len, rlt_class *c)
{
    if (!s || !c) return RLT_EINVAL;
    for (int i = 0; i < RLT_CLASS_COUNT; i++)
        if (strlen(names[i]) == len && memcmp(names[i], s, len) == 0) {
            *c = (rlt_class)i;
            return RLT_OK;
        }
    return RLT_EINVAL;
}

const char *rlt_class_name(rlt_class c)
{
    return (unsigned)c < RLT_CLASS_COUNT ? names[c] : "?";
}

int rlt_class_ceiling(int64_t limit, int reserve_pct, rlt_class c, int64_t *ceiling)
{
    if (!ceiling || limit < 0 || limit > INT64_MAX / 128 || reserve_pct < 0 || reserve_pct > 100 ||
        (unsigned)c >= RLT_CLASS_COUNT)
        return RLT_EINVAL;
    int64_t r = rlt__ceil_div(limit * reserve_pct, 100);
    int64_t top = limit - (int64_t)c * r;
    *ceiling = top > 0 ? top : 0;
    return RLT_OK;
}

int rlt_class_admits(int64_t limit, int reserve_pct, rlt_class c, int64_t in_use, int64_t cost,
                     bool *admit)
{
    int64_t top;
    if (!admit || in_use < 0 || cost < 0) return RLT_EINVAL;
    int rc = rlt_class_ceiling(limit, reserve_pct, c, &top);
    if (rc) return rc;
    *admit = in_use <= top && cost <= top - in_use;
    return RLT_OK;
}
