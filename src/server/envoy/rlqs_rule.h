/* A BucketId's quota rule as the quota state reads it (rlqs_rule.c): its kind, its default
 * assignment TTL, and whether a reloaded rule answers as the old one, and the one log line of an
 * unknown domain. Functions of the config (no lock, no clock). */
#ifndef RLT_SERVER_ENVOY_RLQS_RULE_H
#define RLT_SERVER_ENVOY_RLQS_RULE_H

#include "ratelimit/ratelimit.h"
#include "server/config/config.h"

#include <stdbool.h>
#include <stddef.h>

/* Whether two quota bucket rules give the same answers (a reload that keeps a rule as it was
 * keeps its buckets and their ledgers).  Either may be NULL (quota_default). */
bool rlt__rlqs_same_rule(const rlt__qrule *a, const rlt__qrule *b);

/* The rule of the BucketId pairs[0..n) (sorted by key) in domain d: the first item of
 * quota_buckets whose match fits, NULL (quota_default) when none does. */
const rlt__qrule *rlt__rlqs_rule_of(const rlt__domain *d, const rlt__entry *pairs, size_t n);

/* The RLT__QUOTA_* kind of rule r of domain d (NULL: the domain's quota_default). */
int rlt__rlqs_rule_kind(const rlt__domain *d, const rlt__qrule *r);

/* The assignment TTL of rule r (may be NULL) of domain d: its assignment_ttl, else the
 * domain's, else 3 x `elapsed` (the reporting interval a report showed; <= 0 or a minute or
 * more: none), at least `least`, rounded up to whole seconds (few divisions; Envoy reads
 * whole seconds). */
rlt_ns rlt__rlqs_default_ttl(const rlt__domain *d, const rlt__qrule *r, rlt_ns elapsed,
                               rlt_ns least);

/* Whether r's TTL is configured (rule or domain), not taken from the reporting interval. */
bool rlt__rlqs_ttl_set(const rlt__domain *d, const rlt__qrule *r);

/* Logs once that `domain` (dlen bytes) is not in the config: remembered in seen[0..*n) (strdup'ed,
 * the caller frees them), at most `cap` of them (past it, nothing more is logged). */
void rlt__rlqs_log_unknown(char **seen, size_t *n, size_t cap, const char *domain, size_t dlen);

#endif
