/* An adaptive concurrency limit as part of a concurrency policy: applying and writing the
 * options of its text (",adaptive=aimd|vegas,min=N[,init=N][,slow=DURATION]"),
 * rlt_policy_set_adaptive, and the
 * bridge from rlt_policy to adaptive.c's rlt_adapt_policy (policy.c reads the options:
 * rlt__adapt_option).  The policy's N stays the number of
 * slots, so it is the ceiling: the state's size and every reader of N keep their meaning. */
#include <stdio.h>
#include <string.h>

#include "ratelimit/adaptive.h"

#include "internal.h"

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
