/* RL.RELEASE key policy lease [LATENCY d] [OUTCOME success|dropped|ignore]: the options that
 * teach an adaptive concurrency limit (rlt_store_release_report). */
#include "server/resp/cmd_release.h"

#include "ratelimit/adaptive.h"

#include <string.h>
#include <strings.h>

static bool is(const rlt__resp_arg *a, const char *name)
{
    size_t l = strlen(name);
    return a->len == l && strncasecmp(a->ptr, name, l) == 0;
}

bool rlt__resp_release_options(const rlt__resp_arg *a, size_t n, rlt_ns *latency_ns, int *outcome,
                               rlt__obuf *o)
{
    *latency_ns = -1;
    *outcome = RLT_OUTCOME_SUCCESS;
    bool has_outcome = false;
    for (size_t i = 4; i < n; i += 2) {
        if (i + 1 >= n) {
            rlt__resp_error(o, "ERR syntax error: LATENCY and OUTCOME take a value");
            return false;
        }
        const rlt__resp_arg *v = &a[i + 1];
        if (is(&a[i], "LATENCY") && *latency_ns < 0) {
            rlt_ns d;
            if (rlt_duration_parse(v->ptr, v->len, RLT_NS_PER_MS, &d) != RLT_OK || d < 0 ||
                d > RLT_ADAPT_LATENCY_MAX) {
                rlt__resp_error(o, "ERR LATENCY must be a duration 0..1h (a bare number is ms: "
                                   "12, 850us, 1s)");
                return false;
            }
            *latency_ns = d;
        } else if (is(&a[i], "OUTCOME") && !has_outcome) {
            has_outcome = true;
            if (is(v, "success"))
                *outcome = RLT_OUTCOME_SUCCESS;
            else if (is(v, "dropped"))
                *outcome = RLT_OUTCOME_DROPPED;
            else if (is(v, "ignore"))
                *outcome = RLT_OUTCOME_IGNORE;
            else {
                rlt__resp_error(o, "ERR unknown OUTCOME (success, dropped or ignore)");
                return false;
            }
        } else {
            rlt__resp_error(o, "ERR syntax error: RL.RELEASE takes LATENCY and OUTCOME, once each");
            return false;
        }
    }
    if (has_outcome && *latency_ns < 0) {
        rlt__resp_error(o, "ERR OUTCOME needs LATENCY (the request's latency)");
        return false;
    }
    return true;
}
