/* HTTP header arithmetic: Retry-After rounded up, the IETF RateLimit fields, legacy trios. */
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

int rlt_format_headers(char *buf, size_t cap, const char *name, const rlt_policy *p,
                       const rlt_decision *d, unsigned which)
{
    if (!buf || !p || !d || cap == 0) return RLT_EINVAL;
    if (!name) name = "default";
    if (!token_ok(name)) return RLT_EINVAL;
    long long limit = (long long)d->limit;
    long long remaining = (long long)(d->remaining > 0 ? d->remaining : 0);
    long long window = (long long)rlt__ceil_div(p->period, RLT_NS_PER_S);
    long long retry = (long long)rlt_retry_after_seconds(d->retry_after);
    long long reset = (long long)rlt_retry_after_seconds(d->reset_after);
    if (!d->allowed && retry > reset) reset = retry;

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
    if ((which & RLT_HDR_RETRY_AFTER) && !d->allowed && retry >= 0)
        RLT__PUT("Retry-After: %lld\r\n", retry);
    if (which & RLT_HDR_IETF) {
        RLT__PUT("RateLimit-Policy: \"%s\";q=%lld;w=%lld\r\n", name, limit, window);
        RLT__PUT("RateLimit: \"%s\";r=%lld;t=%lld\r\n", name, remaining, reset);
    }
    if (which & RLT_HDR_LEGACY)
        RLT__PUT("RateLimit-Limit: %lld\r\nRateLimit-Remaining: %lld\r\nRateLimit-Reset: %lld\r\n",
                 limit, remaining, reset);
    if (which & RLT_HDR_X)
        RLT__PUT("X-RateLimit-Limit: %lld\r\nX-RateLimit-Remaining: %lld\r\n"
                 "X-RateLimit-Reset: %lld\r\n",
                 limit, remaining, reset);
#undef RLT__PUT
    return (int)used;
}
