/* Inputs of ratelimitd's HTTP endpoints (httpin.c), apart from the connection so that they
 * can be unit-tested and fuzzed: /v1/check's query string, and envoyproxy/ratelimit's /json
 * body with its decision and proto3-JSON reply. */
#ifndef RLT_SERVER_HTTPIN_H
#define RLT_SERVER_HTTPIN_H

#include "ratelimit/ratelimit.h"
#include "ratelimit/store.h"
#include "server/config.h"
#include "server/obuf.h"
#include "server/request.h"

#include <stddef.h>
#include <stdint.h>

struct rlt__srv;

#define RLT__ENVOY_MAX_DESCRIPTORS 32
#define RLT__ENVOY_MAX_ENTRIES 16

typedef struct rlt__envoy_req {
    void *json; /* owned parse tree (jansson) */
    const char *domain;
    size_t dlen;
    size_t ndesc;
    size_t nentries[RLT__ENVOY_MAX_DESCRIPTORS];
    rlt__entry entries[RLT__ENVOY_MAX_DESCRIPTORS][RLT__ENVOY_MAX_ENTRIES];
    int64_t hits_addend; /* default 1 */
} rlt__envoy_req;

/* Parses an envoy ratelimit /json body.  Returns RLT_OK, or RLT_EINVAL with a message in err;
 * either way rlt__envoy_free releases it. */
int rlt__envoy_parse(const char *body, size_t len, rlt__envoy_req *r, char *err, size_t errlen);
void rlt__envoy_free(rlt__envoy_req *r);
/* Decides an envoy request of session ss (its tenant prefix goes before every key) and
 * appends the JSON reply to out.  Returns RLT_OK with *http_status 200 or 429, or an RLT_*
 * code with a message in err (a bad request). */
int rlt__envoy_decide(struct rlt__srv *s, const rlt__envoy_req *r, const rlt__session *ss,
                      rlt_ns now, rlt__obuf *out, int *http_status, char *err, size_t errlen);

typedef struct rlt__check_req {
    char key[RLT_KEY_MAX + 1];
    size_t klen;
    char policy[512];
    size_t plen;
    int64_t cost;
} rlt__check_req;

/* Parses "key=K&policy=P&cost=N" (URL-encoded; policy defaults to "default", cost to 1).
 * Returns RLT_OK, or RLT_EINVAL with a message in err. */
int rlt__check_parse(const char *query, size_t len, rlt__check_req *r, char *err, size_t errlen);

#endif
