/* HTTP header arithmetic: Retry-After in whole seconds rounded up, and the RateLimit fields of
 * draft-ietf-httpapi-ratelimit-headers-11 with the legacy RateLimit-* and X-RateLimit-* trios
 * carrying the same numbers.  What q, w, r and t mean for each algorithm is one table, in
 * docs/algorithms.md ("HTTP headers"); this file is that table:
 *
 *   q, w  the sustained rate N per W, whatever the burst or queue: a client that paces itself
 *         at q per w seconds is never refused for rate.  The draft's w is whole seconds, so a
 *         period that is not a whole number of seconds is rounded up to w and q is scaled down
 *         to floor(N x w / W): q/w never promises more than N/W (10 per 100 ms is q=100;w=1).
 *         The concurrency limiter has no window (its period is a lease timeout): q = N slots,
 *         qu="concurrent-requests", no w.
 *   r     the decision's remaining: units that may be sent now (for a token bucket or GCRA
 *         with burst B > N that can exceed q).
 *   t     on a denial, Retry-After exactly (the draft: Retry-After is never earlier than t);
 *         on an allowed request, the seconds until the quota is entirely back (full bucket,
 *         empty windows, drained queue), so that "no more than r before t" is always safe.  A
 *         concurrency slot comes back when a lease is released, which no clock predicts: an
 *         allowed concurrency decision has no t (nor a legacy Reset field). */
#include "internal.h"

#include <stdio.h>

int64_t rlt_retry_after_seconds(rlt_ns retry_after)
{
    if (retry_after < 0) return -1;
    return rlt__ceil_div(retry_after, RLT_NS_PER_S);
}

int64_t rlt_retry_after_ms(rlt_ns retry_after)
{
    if (retry_after < 0) return -1;
    return rlt__ceil_div(retry_after, RLT_NS_PER_MS);
}

static bool token_ok(const char *name)
{
    if (!*name || strlen(name) > 64) return false;
    for (const char *c = name; *c; c++) {
        bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                  (*c >= '0' && *c <= '9') || *c == '_' || *c == '.' || *c == ':' || *c == '-';
        if (!ok) return false;
    }
    return true;
}

/* The numbers of the table above, for one decision. */
typedef struct fields {
    long long q, w, r, t; /* w < 0: no window; t < 0: no reset */
    const char *qu;       /* NULL: the draft's default unit, "requests" */
} fields;

static fields table(const rlt_policy *p, const rlt_decision *d)
{
    fields f = {.q = (long long)p->limit, .w = -1, .t = -1, .qu = NULL};
    f.r = (long long)(d->remaining > 0 ? d->remaining : 0);
    long long retry = (long long)rlt_retry_after_seconds(d->retry_after);
    if (p->algo == RLT_CONCURRENCY) {
        f.qu = "concurrent-requests";
        if (!d->allowed) f.t = retry >= 0 ? retry : 0;
        return f;
    }
    int64_t w = rlt__ceil_div(p->period, RLT_NS_PER_S);
    f.w = (long long)w;
    /* floor(N x w / W) >= N since w seconds >= W: exact in 128 bits (N x w x 1e9 < 2^127),
     * capped at INT64_MAX for a sub-nanosecond-per-unit rate. */
    __int128 q = (__int128)p->limit * w * RLT_NS_PER_S / p->period;
    f.q = q > INT64_MAX ? (long long)INT64_MAX : (long long)q;
    if (!d->allowed && retry >= 0)
        f.t = retry;
    else
        f.t = (long long)rlt_retry_after_seconds(d->reset_after > 0 ? d->reset_after : 0);
    return f;
}

int rlt_format_headers(char *buf, size_t cap, const char *name, const rlt_policy *p,
                       const rlt_decision *d, unsigned which)
{
    if (!buf || !p || !d || cap == 0) return RLT_EINVAL;
    if (!name) name = "default";
    if (!token_ok(name)) return RLT_EINVAL;
    if (p->algo < RLT_FIXED_WINDOW || p->algo > RLT_CONCURRENCY || p->period <= 0 || p->limit <= 0)
        return RLT_EINVAL;
    fields f = table(p, d);

    size_t used = 0;
    int n;
#define RLT__PUT(...)                                                                              \
    do {                                                                                           \
        n = snprintf(buf + used, cap - used, __VA_ARGS__);                                         \
        if (n < 0 || (size_t)n >= cap - used) return RLT_ENOSPC;                                   \
        used += (size_t)n;                                                                         \
    } while (0)
    buf[0] = '\0';
    /* A cost that can never fit gets no Retry-After: no wait would make it succeed, and a
     * client told "0" (or "when fresh") would only come back to be refused again. */
    if ((which & RLT_HDR_RETRY_AFTER) && !d->allowed && d->retry_after >= 0)
        RLT__PUT("Retry-After: %lld\r\n", (long long)rlt_retry_after_seconds(d->retry_after));
    if (which & RLT_HDR_IETF) {
        RLT__PUT("RateLimit-Policy: \"%s\";q=%lld", name, f.q);
        if (f.qu) RLT__PUT(";qu=\"%s\"", f.qu);
        if (f.w >= 0) RLT__PUT(";w=%lld", f.w);
        RLT__PUT("\r\nRateLimit: \"%s\";r=%lld", name, f.r);
        if (f.t >= 0) RLT__PUT(";t=%lld", f.t);
        RLT__PUT("\r\n");
    }
    static const char *const prefix[2] = {"", "X-"};
    for (int x = 0; x < 2; x++) {
        if (!(which & (x ? RLT_HDR_X : RLT_HDR_LEGACY))) continue;
        RLT__PUT("%sRateLimit-Limit: %lld\r\n%sRateLimit-Remaining: %lld\r\n", prefix[x], f.q,
                 prefix[x], f.r);
        if (f.t >= 0) RLT__PUT("%sRateLimit-Reset: %lld\r\n", prefix[x], f.t);
    }
#undef RLT__PUT
    return (int)used;
}
