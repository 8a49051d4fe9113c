/* Tests of the config's quota buckets (Envoy's RLQS): `quota_buckets:`, `quota_default:` and
 * `assignment_ttl:` read from YAML with file:line errors, and BucketId matching. */
#include "test.h"

#include "server/config/config.h"
#include "server/config/load.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static char err_[600];

static rlt__config *parse(const char *y)
{
    rlt__config *c = NULL;
    err_[0] = '\0';
    rlt__config_parse(y, strlen(y), "q.yaml", &c, err_, sizeof err_);
    return c;
}

static const char *example = "domain: edge\n"
                             "assignment_ttl: 5s\n"
                             "quota_default: deny_all\n"
                             "quota_buckets:\n"
                             "  - match: {name: web, env: prod}\n"
                             "    policy: token_bucket:100/1s,burst=50\n"
                             "  - match: {name: api, user: \"*\"}\n"
                             "    policy: gcra:10/1m\n"
                             "    assignment_ttl: 2s\n"
                             "    shadow_mode: true\n"
                             "  - match: {name: blocked}\n"
                             "    blanket: deny_all\n"
                             "  - match: {name: web}\n"
                             "    blanket: allow_all\n";

static int match(const rlt__domain *d, int n, ...)
{
    rlt__entry e[8];
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) {
        e[i].key = va_arg(ap, const char *);
        e[i].value = va_arg(ap, const char *);
        e[i].klen = strlen(e[i].key);
        e[i].vlen = strlen(e[i].value);
    }
    va_end(ap);
    return rlt__config_quota_match(d, e, (size_t)n);
}

TEST(quota_buckets_are_read_with_their_budgets_and_blankets)
{
    rlt__config *c = parse(example);
    ASSERT(c != NULL);
    const rlt__domain *d = rlt__config_domain(c, "edge", 4);
    ASSERT(d != NULL);
    ASSERT_EQ(d->nqrules, 4);
    ASSERT_EQ(d->quota_default, RLT__QUOTA_DENY_ALL);
    ASSERT_EQ(d->quota_ttl, 5 * RLT_NS_PER_S);
    const rlt__qrule *q = &d->qrules[0];
    ASSERT(q->kind == RLT__QUOTA_POLICY && q->policy.limit == 100 &&
           q->policy.period == RLT_NS_PER_S && q->policy.burst == 50 && q->line == 5);
    ASSERT_STR_EQ(q->text, "token_bucket:100/1s,burst=50");
    ASSERT(d->qrules[1].shadow && d->qrules[1].ttl == 2 * RLT_NS_PER_S);
    ASSERT_EQ(d->qrules[2].kind, RLT__QUOTA_DENY_ALL);
    ASSERT_EQ(d->qrules[3].kind, RLT__QUOTA_ALLOW_ALL);
    rlt__config_free(c);
}

TEST(the_first_matching_bucket_wins_and_a_star_matches_any_value)
{
    rlt__config *c = parse(example);
    const rlt__domain *d = rlt__config_domain(c, "edge", 4);
    ASSERT_EQ(match(d, 2, "env", "prod", "name", "web"), 0);
    ASSERT_EQ(match(d, 3, "env", "prod", "name", "web", "path", "/x"), 0); /* extra keys */
    ASSERT_EQ(match(d, 2, "env", "dev", "name", "web"), 3);
    ASSERT_EQ(match(d, 1, "name", "web"), 3);
    ASSERT_EQ(match(d, 2, "name", "api", "user", "alice"), 1);
    ASSERT_EQ(match(d, 1, "name", "api"), -1); /* "*" needs the key */
    ASSERT_EQ(match(d, 1, "name", "blocked"), 2);
    ASSERT_EQ(match(d, 1, "name", "webx"), -1);
    ASSERT_EQ(match(d, 1, "nam", "web"), -1);
    rlt__config_free(c);
}

TEST(a_domain_without_quota_buckets_allows_all_by_default)
{
    rlt__config *c = parse("domain: plain\ndescriptors:\n  - key: k\n    rate_limit: {unit: "
                           "second, requests_per_unit: 1}\n");
    ASSERT(c != NULL);
    const rlt__domain *d = rlt__config_domain(c, "plain", 5);
    ASSERT(d != NULL && d->nqrules == 0 && d->quota_default == RLT__QUOTA_ALLOW_ALL);
    ASSERT_EQ(match(d, 1, "k", "v"), -1);
    rlt__config_free(c);
    c = parse("domain: q\nquota_buckets:\n  - match: {a: b}\n    policy: fixed_window:5/1s\n");
    ASSERT(c != NULL && rlt__config_domain(c, "q", 1)->nqrules == 1);
    rlt__config_free(c);
}

static void refused(const char *y, const char *where, const char *what)
{
    rlt__config *c = parse(y);
    if (c != NULL || strstr(err_, where) == NULL || strstr(err_, what) == NULL)
        fprintf(stderr, "unexpected: %s -> %s\n", y, err_);
    ASSERT(c == NULL);
    ASSERT(strstr(err_, where) != NULL);
    ASSERT(strstr(err_, what) != NULL);
}

TEST(bad_quota_buckets_are_refused_with_file_and_line)
{
    refused("quota_buckets: []\n", "q.yaml:1:", "need a domain");
    refused("domain: d\nquota_buckets:\n  - policy: gcra:1/1s\n", "q.yaml:3:", "needs match:");
    refused("domain: d\nquota_buckets:\n  - match: {a: b}\n", "q.yaml:3:", "either policy");
    refused("domain: d\nquota_buckets:\n  - match: {a: b}\n    policy: gcra:1/1s\n"
            "    blanket: deny_all\n",
            "q.yaml:3:", "either policy");
    refused("domain: d\nquota_buckets:\n  - match: {}\n    blanket: deny_all\n",
            "q.yaml:3:", "at least one key");
    refused("domain: d\nquota_buckets:\n  - match: {a: \"\"}\n    blanket: deny_all\n",
            "q.yaml:3:", "must not be empty");
    refused("domain: d\nquota_buckets:\n  - match: {a: b}\n    blanket: maybe\n",
            "q.yaml:4:", "allow_all or deny_all");
    refused("domain: d\nquota_buckets:\n  - match: {a: b}\n    policy: nope:1/1s\n",
            "q.yaml:4:", "policy 'nope:1/1s'");
    refused("domain: d\nquota_buckets:\n  - match: {a: b}\n    policy: concurrency:5/1m\n",
            "q.yaml:4:", "concurrency");
    refused("domain: d\nquota_buckets:\n  - match: {a: b}\n    policy: gcra:5000000000/1s\n",
            "q.yaml:4:", "at most 4294967295");
    refused("domain: d\nquota_buckets:\n  - match: {a: b}\n    blanket: deny_all\n"
            "    colour: red\n",
            "q.yaml:5:", "unknown quota bucket field 'colour'");
    refused("domain: d\nassignment_ttl: 10ms\n", "q.yaml:2:", "at least 1s");
    refused("domain: d\nassignment_ttl: 500ms\n", "q.yaml:2:", "whole seconds, at least 1s");
    refused("domain: d\nquota_buckets:\n  - match: {a: b}\n    blanket: deny_all\n"
            "    assignment_ttl: 1500ms\n",
            "q.yaml:5:", "whole seconds");
    refused("domain: d\nquota_buckets:\n  - match: {a: b}\n    policy: gcra:500000000/100ms\n",
            "q.yaml:4:", "tokens per second");
    refused("domain: d\nquota_default: sometimes\n", "q.yaml:2:", "quota_default");
    refused("domain: d\nquota_buckets: {a: b}\n", "q.yaml:2:", "quota_buckets");
    refused("domain: d\nquota_buckets:\n  - match: {k0: v, k1: v, k2: v, k3: v, k4: v, k5: v, "
            "k6: v, k7: v, k8: v, k9: v, ka: v, kb: v, kc: v, kd: v, ke: v, kf: v, kg: v}\n"
            "    blanket: deny_all\n",
            "q.yaml:3:", "more than 16 keys");
}
