/* An adaptive concurrency limit as part of a concurrency policy: the options of its text
 * (",adaptive=aimd|vegas,min=N[,init=N][,slow=DURATION]"), rlt_policy_set_adaptive, and the
 * bridge from rlt_policy to adaptive.c's rlt_adapt_policy.  The policy's N stays the number of
 * slots, so it is the ceiling: the state's size and every reader of N keep their meaning. */
#include <stdio.h>
#include <string.h>

#include "ratelimit/adaptive.h"

#include "internal.h"

static int fail(char *err, size_t errlen, const char *o, size_t olen, const char *why)
{
    if (err && errlen) snprintf(err, errlen, "option \"%.*s\": %s", (int)olen, o, why);
    return RLT_EPARSE;
}

static int parse_count(const char *v, size_t len, int64_t *out)
{
    int64_t x = 0;
    if (len == 0 || len > 7) return RLT_EPARSE;
    for (size_t i = 0; i < len; i++) {
        if (v[i] < '0' || v[i] > '9') return RLT_EPARSE;
        x = x * 10 + (v[i] - '0');
    }
    *out = x;
    return RLT_OK;
}

int rlt__adapt_option(const char *o, size_t olen, rlt__adapt_opts *a, char *err, size_t errlen)
{
    static const char *const keys[] = {"adaptive=", "min=", "init=", "slow="};
    for (unsigned k = 0; k < 4; k++) {
        size_t kl = strlen(keys[k]);
        if (olen < kl || memcmp(o, keys[k], kl) != 0) continue;
        const char *v = o + kl;
        size_t vl = olen - kl;
        if (a->seen & (1u << k)) return fail(err, errlen, o, olen, "given twice");
        a->seen |= 1u << k;
        if (k == 0) {
            if (vl == 4 && memcmp(v, "aimd", 4) == 0)
                a->algo = RLT_ADAPT_AIMD;
            else if (vl == 5 && memcmp(v, "vegas", 5) == 0)
                a->algo = RLT_ADAPT_VEGAS;
            else
                return fail(err, errlen, o, olen, "expected adaptive=aimd or adaptive=vegas");
        } else if (k == 3) {
            if (rlt_duration_parse(v, vl, 0, &a->slow) || a->slow <= 0 ||
                a->slow > RLT_ADAPT_LATENCY_MAX)
                return fail(err, errlen, o, olen, "expected a duration up to 1h, e.g. slow=500ms");
        } else if (parse_count(v, vl, k == 1 ? &a->min : &a->init) ||
                   (k == 1 ? a->min : a->init) < 1) {
            return fail(err, errlen, o, olen, "expected a positive integer up to 65536");
        }
        return 1;
    }
    return 0;
}

int rlt_policy_set_adaptive(rlt_policy *p, int algo, int64_t floor, int64_t initial,
                            rlt_ns slow_ns)
{
    if (!p || p->scale_ <= 0 || p->algo != RLT_CONCURRENCY) return RLT_EINVAL;
    if (algo == 0) {
        p->adapt = 0;
        p->adapt_min = p->adapt_init = p->adapt_slow = 0;
        return RLT_OK;
    }
    if (initial == 0) initial = floor;
    rlt_adapt_policy a = {(rlt_adapt_algo)algo, floor, p->limit, initial, slow_ns, 0, 0};
    if (rlt_adapt_policy_check(&a)) return RLT_EINVAL;
    p->adapt = algo;
    p->adapt_min = floor;
    p->adapt_init = initial;
    p->adapt_slow = slow_ns;
    return RLT_OK;
}

int rlt__adapt_apply(rlt_policy *p, const rlt__adapt_opts *a, const char *text, size_t len,
                     char *err, size_t errlen)
{
    if (a->seen == 0) return RLT_OK;
    const char *why = NULL;
    if (p->algo != RLT_CONCURRENCY)
        why = "adaptive=, min=, init= and slow= apply to concurrency only";
    else if (!(a->seen & 1))
        why = "min=, init= and slow= need adaptive=aimd or adaptive=vegas";
    else if (a->slow && a->algo != RLT_ADAPT_AIMD)
        why = "slow= applies to adaptive=aimd only";
    else if (rlt_policy_set_adaptive(p, a->algo, a->min ? a->min : 1, a->init, a->slow))
        why = "expected 1 <= min <= init <= N (N, the ceiling, is the concurrency limit)";
    if (!why) return RLT_OK;
    if (err && errlen) snprintf(err, errlen, "policy \"%.*s\": %s", (int)len, text, why);
    return RLT_EPARSE;
}

int rlt__adapt_format(const rlt_policy *p, char *buf, size_t cap, size_t n)
{
    if (p->adapt) {
        int k = snprintf(buf + n, cap - n, ",adaptive=%s,min=%lld",
                         p->adapt == RLT_ADAPT_AIMD ? "aimd" : "vegas", (long long)p->adapt_min);
        if (k < 0 || (size_t)k >= cap - n) return RLT_ENOSPC;
        n += (size_t)k;
        if (p->adapt_init != p->adapt_min) {
            k = snprintf(buf + n, cap - n, ",init=%lld", (long long)p->adapt_init);
            if (k < 0 || (size_t)k >= cap - n) return RLT_ENOSPC;
            n += (size_t)k;
        }
        if (p->adapt_slow > 0) {
            k = snprintf(buf + n, cap - n, ",slow=%lldns", (long long)p->adapt_slow);
            if (k < 0 || (size_t)k >= cap - n) return RLT_ENOSPC;
            n += (size_t)k;
        }
    }
    return (int)n;
}
