/* The RLQS quota buckets as text (rlqs_report.c): /v1/stats' "quotas" member and /metrics'
 * per-bucket families, both rendered from one rlt__rlqs_view (rlqs_view.h) so that they
 * agree with each other and with the Live page, which reads /v1/stats.  Bounded: the
 * RLT__RLQS_VIEW_TOP buckets of the largest demand one by one, the rest summed. */
#ifndef RLT_SERVER_ENVOY_RLQS_REPORT_H
#define RLT_SERVER_ENVOY_RLQS_REPORT_H

#include "server/base/obuf.h"
#include "server/envoy/rlqs_view.h"

/* Appends `"quotas":{"buckets":N,"redis":B,"top":RLT__RLQS_VIEW_TOP,"shown":[ROW, ...],
 * "other":ROW}` where ROW is {"domain","bucket" (percent-encoded as /v1/top's names; "" in
 * other),"rule","policy_text" (encoded
 * alike),"kind","shadow","ttl_ms","fill_interval_ms","members","departed","demand",
 * "unknown","assigned_tokens_per_fill","assigned_max_tokens","budget_tokens_per_fill",
 * "budget_max_tokens","left_tokens_per_fill","left_max_tokens"}, plus in Redis mode "claim"
 * (unclaimed, claimed, failing), "claim_tokens_per_fill", "claim_max_tokens", "claim_servers";
 * other has "buckets" (how many it sums) and the sums of the numbers. */
void rlt__rlqs_report_json(const rlt__rlqs_view *v, rlt__obuf *o);

/* Appends the gauges ratelimitd_rlqs_bucket_{members,demand,assigned,budget,left} (and
 * _claim in Redis mode), labels domain and bucket (percent-encoded as /v1/top's; the summed
 * rest: domain "" and bucket "other", always there, 0 when nothing is summed), assigned, budget,
 * left and claim also by part (tokens_per_fill, max_tokens); then ratelimitd_rlqs_buckets_other,
 * how many buckets the "other" series sum. */
void rlt__rlqs_report_prometheus(const rlt__rlqs_view *v, rlt__obuf *o);

#endif
