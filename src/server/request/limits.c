/* Multi-limit reservations' shared door half (limits.h): resolving a limit, reading a usage,
 * and the error texts of RESP and HTTP. */
#include <stdio.h>

#include "server/request/decide.h"
#include "server/request/limits.h"

int rlt__limit_resolve(struct rlt__srv *s, const rlt__session *ss, const char *key, size_t klen,
                       const char *policy, size_t plen, const char *w, size_t wlen, rlt_ns now,
                       char *kbuf, rlt_limit *out, char *err, size_t errlen)
{
    rlt__target t;
    int st = rlt__target_resolve(s, ss, key, klen, policy, plen, false, now, kbuf, &t, err, errlen);
    if (st != RLT_OK) return st;
    out->policy = t.policy_id;
    out->key = t.key;
    out->klen = t.klen;
    if (!w) return RLT_OK;
    st = rlt_weights_parse(w, wlen, &out->weights);
    if (st == RLT_ERANGE)
        snprintf(err, errlen, "cost weight out of range (at most %lld)",
                 (long long)RLT_USAGE_VALUE_MAX);
    else if (st != RLT_OK)
        snprintf(err, errlen,
                 "cost must be a weighting like in*3+out*15+cached*1 (terms name, "
                 "name*W or W joined by +; names [a-z][a-z0-9_]*, at most 8)");
    return st;
}

int rlt__limit_usage(const char *p, size_t n, const char *what, rlt_usage *u, char *err,
                     size_t errlen)
{
    int st = rlt_usage_parse(p, n, u);
    if (st == RLT_ERANGE)
        snprintf(err, errlen, "%s count out of range (at most %lld)", what,
                 (long long)RLT_USAGE_VALUE_MAX);
    else if (st != RLT_OK)
        snprintf(err, errlen,
                 "%s must be named counts like in=1200,out=4096 (counts >= 0, "
                 "names distinct, at most 8)",
                 what);
    return st;
}

const char *rlt__limits_strerror(const struct rlt__srv *s, int st, bool settle)
{
    if (!rlt__decide_can_reserve_limits(s))
        return "multi-limit reservations are not held by this backend";
    switch (st) {
    case RLT_ENOENT:
        return settle ? "unknown reservation: never made for these keys and policies (in this "
                        "order), already settled, or expired (charged as estimated)"
                      : "unknown policy";
    case RLT_EINVAL:
        return settle ? "usage names a count no limit of the reservation weighs"
                      : "a policy cannot settle (leaky bucket, concurrency), or the estimate "
                        "names a count no limit weighs, or (Redis Cluster) the limits' keys are "
                        "in several hash slots: give them a common {hash tag}";
    case RLT_ERANGE:
        return "cost out of range: a weighting times the usage leaves int64 (2^53 in Redis mode)";
    case RLT_EBACKEND:
    case RLT_ETIMEDOUT:
        return settle ? "Redis could not answer: not settled (retry it: a settle that was "
                        "applied is then unknown)"
                      : "Redis could not answer";
    case RLT_EFULL:
        return "reservation table full: settle or let some expire";
    default:
        return rlt_strerror(st);
    }
}
