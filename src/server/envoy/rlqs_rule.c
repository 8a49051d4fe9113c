/* A BucketId's quota rule as the quota state reads it (rlqs_rule.h). */
#include "server/envoy/rlqs_rule.h"

#include "server/base/log.h"

#include <stdlib.h>
#include <string.h>

bool rlt__rlqs_same_rule(const rlt__qrule *a, const rlt__qrule *b)
{
    if (a == NULL || b == NULL) return a == b;
    if (a->kind != b->kind || a->shadow != b->shadow || a->fail != b->fail || a->ttl != b->ttl ||
        strcmp(a->text, b->text) != 0 || a->nmatch != b->nmatch)
        return false;
    for (size_t i = 0; i < a->nmatch; i++)
        if (strcmp(a->keys[i], b->keys[i]) != 0 || strcmp(a->values[i], b->values[i]) != 0)
            return false;
    return true;
}

const rlt__qrule *rlt__rlqs_rule_of(const rlt__domain *d, const rlt__entry *pairs, size_t n)
{
    int i = rlt__config_quota_match(d, pairs, n);
    return i < 0 ? NULL : &d->qrules[i];
}

int rlt__rlqs_rule_kind(const rlt__domain *d, const rlt__qrule *r)
{
    return r                                         ? r->kind
           : d->quota_default == RLT__QUOTA_DENY_ALL ? RLT__QUOTA_DENY_ALL
                                                     : RLT__QUOTA_ALLOW_ALL;
}

bool rlt__rlqs_ttl_set(const rlt__domain *d, const rlt__qrule *r)
{
    return (r != NULL && r->ttl > 0) || d->quota_ttl > 0;
}

rlt_ns rlt__rlqs_default_ttl(const rlt__domain *d, const rlt__qrule *r, rlt_ns elapsed,
                               rlt_ns least)
{
    if (r != NULL && r->ttl > 0) return r->ttl;
    if (d->quota_ttl > 0) return d->quota_ttl;
    rlt_ns i = elapsed > 0 && elapsed < 60 * RLT_NS_PER_S ? elapsed : 0;
    rlt_ns t = 3 * i < least ? least : 3 * i;
    return (t + RLT_NS_PER_S - 1) / RLT_NS_PER_S * RLT_NS_PER_S;
}

void rlt__rlqs_log_unknown(char **seen, size_t *n, size_t cap, const char *domain, size_t dlen)
{
    for (size_t i = 0; i < *n; i++)
        if (strlen(seen[i]) == dlen && memcmp(seen[i], domain, dlen) == 0) return;
    if (*n == cap) return;
    char *s = strndup(domain, dlen);
    if (s == NULL) return;
    seen[(*n)++] = s;
    rlt__log(RLT__LOG_NOTICE, "rlqs: unknown domain '%.*s': its buckets are allowed all",
             (int)(dlen > 200 ? 200 : dlen), domain);
}
