/* The playground and its live page on ratelimitd's HTTP port (ui.c): the embedded site
 * (webassets.h) on GET / (server.ui, --no-ui), and the live page's two JSON endpoints,
 * /v1/stats (decisions per second per policy, the backend) and /v1/peek (where a key stands,
 * charging nothing).  http.c routes to them after its bearer-token check. */
#ifndef RLT_SERVER_HTTP_UI_H
#define RLT_SERVER_HTTP_UI_H

#include "ratelimit/ratelimit.h"
#include "server/base/obuf.h"
#include "server/base/scratch.h"
#include "server/http/http1.h"
#include "server/request/request.h"
#include "webassets/webassets.h"

#include <stdbool.h>

struct rlt__srv;

/* The embedded file a GET or HEAD of req->path names when server.ui is on, else NULL. */
const rlt__webasset *rlt__ui_find(struct rlt__srv *s, const rlt__http_req *req);
/* Answers the file: 200 with its type, ETag and Cache-Control, or 304 when the request's
 * If-None-Match names its ETag; no body for HEAD (flags, reply.h). */
void rlt__ui_asset(rlt__obuf *o, const rlt__http_req *req, const rlt__webasset *a, unsigned flags);
/* GET /v1/stats: rlt__report_stats_json's body. */
void rlt__ui_stats(struct rlt__srv *s, rlt__obuf *o, unsigned flags, rlt_ns now);
/* GET /v1/peek?key=K&policy=P: where the key stands under the policy, as RL.PEEK answers it
 * (a cost-0 decision through the backend, not counted, nothing charged): 200 with
 * {"key","policy","policy_text","allowed","limit","remaining","retry_after_ms",
 * "reset_after_ms","delay_ms"}; 400 for a bad key or policy, or any other parameter.
 * An envoy rule instead of a policy (rlt__peek_parse's forms): ?rule=PATH&key=K, or
 * ?domain=D&descriptor=K=V[,K=V...] (the rule it matches, the key rls.c makes of it): the
 * same body with "key" the store key, "policy" "r:PATH" (what RL.PEEK takes) and "rule" PATH;
 * 404 for an unknown rule or a descriptor no rule matches.  The parsed request lives in sc
 * (the worker's scratch, released when it returns). */
void rlt__ui_peek(struct rlt__srv *s, rlt__obuf *o, rlt__scratch *sc, const rlt__http_req *req,
                  const rlt__session *ss, unsigned flags, rlt_ns now);

/* GET /v1/rules: the config's envoy rules, {"rules":[{"rule":PATH,"policy":"r:PATH","domain":D,
 * "descriptor":[{"key":K,"value":V or null (any value; "abc*": a prefix)}, ...],
 * "policy_text":T ("" when it keeps no state),"kind":"limit"|"shadow"|"unlimited"|"deny_all"},
 * ...],"quota_buckets":[{"domain":D,"rule":I (its index in the domain's quota_buckets),
 * "match":[{"key":K,"value":V ("*": any value, each BucketId its own budget)}, ...],
 * "kind":"policy"|"allow_all"|"deny_all","policy_text":T ("" for a blanket rule),
 * "shadow":B,"fail":"default"|"open"|"closed"|"local" (Redis mode),"ttl_ms":N (the
 * assignments' TTL; 0: three reporting intervals, at least 2 s),"line":N}, ...],
 * "quota_defaults":[{"domain":D,"kind":"allow_all"|"deny_all","ttl_ms":N}, ...] (the answer
 * to a BucketId no rule matches, for the domains with quota_buckets or a quota_default)} in
 * the config's order. */
void rlt__ui_rules(struct rlt__srv *s, rlt__obuf *o, unsigned flags);

#endif
