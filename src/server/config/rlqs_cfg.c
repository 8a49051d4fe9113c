/* The config's quota buckets (Envoy's RLQS): each item of `quota_buckets:` matches BucketIds
 * by a map of keys and values and gives them a global budget (a policy) or a blanket rule;
 * `quota_default:` answers the BucketIds none matches, `assignment_ttl:` how long an
 * assignment lives. */
#include "server/config/rlqs_cfg.h"

#include "server/config/config.h"
#include "server/config/yaml.h"

#include <stdlib.h>
#include <string.h>

/* A BucketId has at most 16 pairs (envoy/rlqs_pb.h): a match naming more can never match. */
#define MAX_MATCH 16
/* The RLQS TokenBucket's fields are uint32: a budget whose rate or burst passes it cannot be
 * assigned to even one Envoy. */
#define TOKENS_MAX INT64_C(4294967295)

static int get_blanket(rlt__cy *x, const yaml_node_t *n, int *out, const char *what)
{
    static const char *const names[] = {"allow_all", "deny_all"};
    size_t i;
    if (rlt__cy_get_choice(x, n, names, 2, &i, what) != RLT_OK) return RLT_EPARSE;
    *out = i == 0 ? RLT__QUOTA_ALLOW_ALL : RLT__QUOTA_DENY_ALL;
    return RLT_OK;
}

static int get_ttl(rlt__cy *x, const yaml_node_t *n, rlt_ns *out)
{
    if (rlt__cy_get_duration(x, n, out, "assignment_ttl") != RLT_OK) return RLT_EPARSE;
    /* Envoy reads the TTL's whole seconds only (0 would expire the assignment at once) */
    if (*out < RLT_NS_PER_S || *out % RLT_NS_PER_S != 0)
        return rlt__cy_fail(x, n,
                            "assignment_ttl must be whole seconds, at least 1s (Envoy "
                            "reads a TTL's seconds only)");
    return RLT_OK;
}

static int parse_match(rlt__cy *x, yaml_node_t *n, rlt__qrule *q)
{
    if (rlt__cy_need_map(x, n, "match") != RLT_OK) return RLT_EPARSE;
    size_t count = (size_t)(n->data.mapping.pairs.top - n->data.mapping.pairs.start);
    if (count == 0) return rlt__cy_fail(x, n, "match needs at least one key");
    if (count > MAX_MATCH) return rlt__cy_fail(x, n, "match has more than %d keys", MAX_MATCH);
    q->keys = calloc(count, sizeof *q->keys);
    q->values = calloc(count, sizeof *q->values);
    if (q->keys == NULL || q->values == NULL) return rlt__cy_fail(x, n, "out of memory");
    FOR_PAIRS(x, n, k, v)
    {
        char key[RLT__STR_MAX], value[RLT__STR_MAX];
        if (rlt__cy_get_str(x, k, key, sizeof key, "a match key") != RLT_OK ||
            rlt__cy_get_str(x, v, value, sizeof value, "a match value") != RLT_OK)
            return RLT_EPARSE;
        if (key[0] == '\0' || value[0] == '\0')
            return rlt__cy_fail(x, k, "match keys and values must not be empty");
        size_t i = q->nmatch;
        if ((q->keys[i] = strdup(key)) == NULL || (q->values[i] = strdup(value)) == NULL) {
            free(q->keys[i]);
            return rlt__cy_fail(x, k, "out of memory");
        }
        q->nmatch++;
    }
    return RLT_OK;
}

/* A policy's budget: N per P and B, each assignable (1..2^32-1 tokens). */
static int parse_budget(rlt__cy *x, yaml_node_t *n, const char *text, rlt__qrule *q)
{
    char perr[200];
    if (rlt_policy_parse(&q->policy, text, strlen(text), perr, sizeof perr) != RLT_OK)
        return rlt__cy_fail(x, n, "policy '%s': %s", text, perr);
    if (q->policy.algo == RLT_CONCURRENCY)
        return rlt__cy_fail(x, n, "concurrency is not a quota (a rate is divided among Envoys)");
    int64_t burst = q->policy.burst > 0 ? q->policy.burst : q->policy.limit;
    if (q->policy.limit > TOKENS_MAX || burst > TOKENS_MAX)
        return rlt__cy_fail(x, n, "policy '%s': a quota's limit and burst are at most %lld", text,
                            (long long)TOKENS_MAX);
    /* Envoy reads fill_interval's whole seconds: a shorter period is sent as tokens per its
     * length rounded up to seconds (rlqs_envoy.h), which must fit the uint32 field too */
    rlt_ns p = q->policy.period, f = (p + RLT_NS_PER_S - 1) / RLT_NS_PER_S * RLT_NS_PER_S;
    if ((__int128)q->policy.limit * f / p > TOKENS_MAX)
        return rlt__cy_fail(x, n,
                            "policy '%s': at most %lld tokens per second (Envoy's fill "
                            "interval is whole seconds)",
                            text, (long long)TOKENS_MAX);
    strcpy(q->text, text);
    return RLT_OK;
}

static int parse_item(rlt__cy *x, yaml_node_t *e, rlt__qrule *q)
{
    if (rlt__cy_need_map(x, e, "a quota bucket") != RLT_OK) return RLT_EPARSE;
    q->line = (int)e->start_mark.line + 1;
    q->kind = -1;
    yaml_node_t *match = NULL, *policy = NULL;
    FOR_PAIRS(x, e, k, v)
    {
        size_t kl;
        const char *kk = rlt__cy_key_of(k, &kl);
        int r = RLT_OK;
        if (rlt__cy_eq(kk, kl, "match")) {
            match = v;
        } else if (rlt__cy_eq(kk, kl, "policy")) {
            policy = v;
        } else if (rlt__cy_eq(kk, kl, "blanket")) {
            r = get_blanket(x, v, &q->kind, "blanket must be allow_all or deny_all");
        } else if (rlt__cy_eq(kk, kl, "shadow_mode")) {
            r = rlt__cy_get_bool(x, v, &q->shadow, "shadow_mode");
        } else if (rlt__cy_eq(kk, kl, "fail")) {
            r = rlt__cy_get_fail(x, v, &q->fail);
        } else if (rlt__cy_eq(kk, kl, "assignment_ttl")) {
            r = get_ttl(x, v, &q->ttl);
        } else {
            r = rlt__cy_fail(x, k,
                             "unknown quota bucket field '%.*s' (match, policy, blanket, "
                             "shadow_mode, fail, assignment_ttl)",
                             (int)(kl > 64 ? 64 : kl), kk);
        }
        if (r != RLT_OK) return RLT_EPARSE;
    }
    if (match == NULL) return rlt__cy_fail(x, e, "a quota bucket needs match:");
    if (parse_match(x, match, q) != RLT_OK) return RLT_EPARSE;
    if ((policy != NULL) == (q->kind != -1))
        return rlt__cy_fail(x, e, "a quota bucket needs either policy: or blanket:");
    if (policy == NULL) return RLT_OK;
    q->kind = RLT__QUOTA_POLICY;
    char text[RLT__STR_MAX];
    if (rlt__cy_get_str(x, policy, text, sizeof text, "policy") != RLT_OK) return RLT_EPARSE;
    return parse_budget(x, policy, text, q);
}

int rlt__rlqs_cfg_parse(rlt__cy *x, rlt__domain *dom, yaml_node_t *buckets, yaml_node_t *dflt,
                        yaml_node_t *ttl)
{
    dom->quota_default = RLT__QUOTA_ALLOW_ALL;
    if (dflt != NULL && get_blanket(x, dflt, &dom->quota_default,
                                    "quota_default must be allow_all or deny_all") != RLT_OK)
        return RLT_EPARSE;
    if (ttl != NULL && get_ttl(x, ttl, &dom->quota_ttl) != RLT_OK) return RLT_EPARSE;
    if (buckets == NULL) return RLT_OK;
    if (rlt__cy_need_seq(x, buckets, "quota_buckets") != RLT_OK) return RLT_EPARSE;
    size_t count = (size_t)(buckets->data.sequence.items.top - buckets->data.sequence.items.start);
    dom->qrules = calloc(count ? count : 1, sizeof *dom->qrules);
    if (dom->qrules == NULL) return rlt__cy_fail(x, buckets, "out of memory");
    for (yaml_node_item_t *it = buckets->data.sequence.items.start;
         it < buckets->data.sequence.items.top; it++) {
        /* Counted first: what parse_item allocated is freed with the config on failure. */
        rlt__qrule *q = &dom->qrules[dom->nqrules++];
        if (parse_item(x, rlt__cy_node(x, *it), q) != RLT_OK) return RLT_EPARSE;
    }
    return RLT_OK;
}
