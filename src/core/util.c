/* Small helpers every part shares, so that none writes its own: the multi-limit combine, the
 * name hash and the gcd. */
#include "internal.h"

void rlt_decision_combine(rlt_decision *acc, const rlt_decision *d, bool first)
{
    if (first) {
        *acc = *d;
        acc->lease = 0;
        return;
    }
    acc->allowed = acc->allowed && d->allowed;
    if (d->remaining < acc->remaining) {
        acc->remaining = d->remaining;
        acc->limit = d->limit;
    }
    /* -1 (never) wins over any finite wait: the combined cost can never fit either. */
    if (acc->retry_after >= 0 && (d->retry_after < 0 || d->retry_after > acc->retry_after))
        acc->retry_after = d->retry_after;
    if (d->reset_after > acc->reset_after) acc->reset_after = d->reset_after;
    if (d->delay > acc->delay) acc->delay = d->delay;
}

uint64_t rlt_hash_fnv1a(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = UINT64_C(14695981039346656037);
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= UINT64_C(1099511628211);
    }
    return h;
}

int64_t rlt_gcd(int64_t a, int64_t b)
{
    while (b != 0) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}
