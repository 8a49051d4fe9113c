/* What the core's trace fuzzers (fuzz_decide.c, fuzz_settle.c) share: the invariant check that
 * names the operation and the instant it failed at, the periods the policies are drawn from,
 * and saturating addition for the expected waits.  Each target includes it once. */
#ifndef RLT_FUZZ_TRACE_H
#define RLT_FUZZ_TRACE_H

#include <stdio.h>
#include <stdlib.h>

#include "ratelimit/ratelimit.h"

/* Aborts with the failed condition, the operation's index `op` and the clock `now` (both in
 * scope where it is used). */
#define FUZZ_CHECK(c)                                                                              \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: invariant failed: %s (op %zu, now %lld)\n", __FILE__,          \
                    __LINE__, #c, op, (long long)now);                                             \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* Periods a header byte picks from: tiny ones (rounding), a prime, and the usual units. */
static const rlt_ns periods[] = {
    1, 3, 7, 1000, 999983, RLT_NS_PER_MS, RLT_NS_PER_S, 7 * RLT_NS_PER_S};

/* a + b, clamped to the int64 range. */
static inline rlt_ns sat_add(rlt_ns a, rlt_ns b)
{
    rlt_ns r;
    if (__builtin_add_overflow(a, b, &r)) return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

#endif
