/* HTTP's multi-limit reservations (limits.c): POST /v1/mreserve and POST /v1/msettle, JSON in
 * and out, the same decisions as RESP's RL.MRESERVE / RL.MSETTLE (docs/llm.md). */
#ifndef RLT_SERVER_HTTP_LIMITS_H
#define RLT_SERVER_HTTP_LIMITS_H

#include "server/http/http1.h"
#include "server/net/conn.h"
#include "server/request/request.h"

/* Answers one POST of /v1/mreserve (settle false) or /v1/msettle (settle true) of session ss
 * at `now` into c's output: 200 with the decision's JSON and one RateLimit-Policy and
 * RateLimit field per limit (allowed or not: a denial of /v1/mreserve is 429), 400 for bad
 * input naming it, 404 for an unknown reservation, 501 for a backend without them, 503 for a
 * full table or when Redis could not answer. */
void rlt__http_budget(rlt__conn *c, const rlt__http_req *req, const rlt__session *ss,
                      unsigned flags, rlt_ns now, bool settle);

#endif
