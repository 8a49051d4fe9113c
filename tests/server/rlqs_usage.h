/* One RLQS usage fed to the quota state by hand, for the quota state's unit tests
 * (test_quotas_redis.c, test_quotas_hold.c): BucketId {name: value}, `rate` requests a second
 * over the last second, at `now`, under the state's lock.  Returns the answer; a report that
 * failed gives kind -100 - the error. */
#ifndef RLT_TESTS_SERVER_QUOTAS_USAGE_H
#define RLT_TESTS_SERVER_QUOTAS_USAGE_H

#include "server/envoy/rlqs.h"

#include <stdio.h>
#include <string.h>

static inline rlt__rlqs_answer rlqs_usage(rlt__rlqs *q, const rlt__config *c,
                                              rlt__rlqs_stream *st, const char *name,
                                              const char *value, int rate, rlt_ns now)
{
    rlt__entry e = {name, strlen(name), value, strlen(value)};
    char key[128];
    int klen = snprintf(key, sizeof key, "%s=%s", name, value);
    rlt__rlqs_use u = {&e, 1, key, (size_t)klen, RLT_NS_PER_S, (uint64_t)rate, 0};
    rlt__rlqs_answer a;
    rlt__rlqs_lock(q);
    int rc = rlt__rlqs_report(q, c, st, "q", 1, &u, now, &a);
    rlt__rlqs_unlock(q);
    if (rc != RLT_OK) a.kind = -100 - rc;
    return a;
}

#endif
