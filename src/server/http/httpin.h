/* Inputs of ratelimitd's HTTP endpoints (httpin.c), apart from the connection so that they
 * can be unit-tested and fuzzed: /v1/check's query string, and envoyproxy/ratelimit's /json
 * body (decided and rendered by rls.h). */
#ifndef RLT_SERVER_HTTP_HTTPIN_H
#define RLT_SERVER_HTTP_HTTPIN_H

#include "ratelimit/ratelimit.h"
#include "ratelimit/store.h"
#include "server/config/config.h"
#include "server/envoy/rls.h"
#include "server/base/obuf.h"
#include "server/request/request.h"

#include <stddef.h>
#include <stdint.h>

struct rlt__srv;

/* Parses an envoy ratelimit /json body (rls.h's request; its strings point into the parse
 * tree).  Returns RLT_OK, or RLT_EINVAL with a message in err; either way rlt__envoy_free
 * releases it. */
int rlt__envoy_parse(const char *body, size_t len, rlt__envoy_req *r, char *err, size_t errlen);
void rlt__envoy_free(rlt__envoy_req *r);

/* The most limits one /v1/check decides together (policy= repeated), as the SPOE message. */
#define RLT__CHECK_MAX_LIMITS 8

/* A limit after the first of a nested /v1/check: its key (the address masked to its prefix)
 * and its policy. */
typedef struct rlt__check_limit {
    char key[RLT_KEY_MAX + 1];
    size_t klen;
    char policy[512];
    size_t plen;
} rlt__check_limit;

typedef struct rlt__check_req {
    char key[RLT_KEY_MAX + 1];
    size_t klen;
    char policy[512];
    size_t plen;
    int64_t cost;
    /* addr=A[&prefix=P]: the key is [key ":"] the address's key (rlt__key_with_addr) */
    int deny_status; /* the status of a denial: 429 (default, 0 here), or 403 for auth_request */
    bool has_cost;
    /* Charge after the response: reserve=1 on /v1/check (timeout_ms: how long it waits for
     * its settle, 0 = the store's default); reservation (the id, hex) on /v1/settle. */
    bool reserve;
    int64_t timeout_ms;
    uint64_t reservation;
    /* Priority classes: class= (critical, default, sheddable; default when absent) and
     * class_reserve= (0..100, the percent of the limit each class step loses; when absent, -1
     * with class= (the policy's reserve=), 0 without: every class equal). */
    int klass;
    int class_reserve;
    /* Limits: 1, or 2..RLT__CHECK_MAX_LIMITS when policy= is repeated (decided all or nothing);
     * key/policy above are the first, more[0..nlimits-1) the others (only those are written). */
    size_t nlimits;
    rlt__check_limit more[RLT__CHECK_MAX_LIMITS - 1];
} rlt__check_req;

/* Percent-decodes s[0..n) ('+' is a space) into out[0..cap) (out NULL: only validates).
 * Returns RLT_OK and *len, RLT_ENOSPC when it does not fit, or RLT_EPARSE for a bad escape
 * ('%' not followed by two hex digits). */
int rlt__url_decode(const char *s, size_t n, char *out, size_t cap, size_t *len);

/* Parses "key=K&policy=P&cost=N[&addr=A[&prefix=P]][&deny_status=403][&reserve=1]
 * [&timeout_ms=T][&reservation=HEX]" (URL-encoded; policy defaults to "default", cost to 1,
 * deny_status to 0: the default 429; reserve takes 0 or 1, timeout_ms 1..86400000).  Which
 * endpoint takes which is the caller's check.  policy= repeated (up to RLT__CHECK_MAX_LIMITS)
 * gives nested limits on the same key or address: a prefix= after a policy is that policy's,
 * one before any policy every policy's default (at most one each), so
 * "addr=A&policy=p64&prefix=64&policy=p48&prefix=48" keys A's /64 and A's /48.
 * Returns RLT_OK, or RLT_EINVAL with a message in err. */
int rlt__check_parse(const char *query, size_t len, rlt__check_req *r, char *err, size_t errlen);

/* /v1/peek's envoy forms: "rule=PATH&key=K" (the key as the store holds it: what RL.PEEK
 * takes), or "domain=D&descriptor=K=V[,K=V...][&rule=PATH]" (a descriptor as ShouldRateLimit
 * gets it: entries split at ',', each at its first '='; rule=, when given, must be the rule it
 * matches). */
typedef struct rlt__peek_req {
    bool envoy; /* rule=, domain= or descriptor= given: an envoy form (else rlt__check_parse's) */
    char key[RLT_KEY_MAX + 1];
    size_t klen;
    char rule[RLT__STR_MAX];
    size_t rlen;
    char domain[RLT__STR_MAX];
    size_t dlen;
    char desc[RLT_KEY_MAX + 1]; /* the descriptor's text; entries point into it */
    size_t desclen;
    rlt__entry entries[RLT__ENVOY_MAX_ENTRIES];
    size_t nentries;
} rlt__peek_req;

/* Parses /v1/peek's query into r.  r->envoy false: none of rule, domain, descriptor is given
 * (the caller parses the policy form with rlt__check_parse).  Returns RLT_OK, or RLT_EINVAL
 * with a message in err: an unknown or repeated parameter (in either form), bad percent-encoding,
 * policy= with an envoy form, a descriptor without domain or with key, rule= without key or
 * descriptor, an entry without '=' or with an empty name, more than RLT__ENVOY_MAX_ENTRIES entries.
 */
int rlt__peek_parse(const char *query, size_t len, rlt__peek_req *r, char *err, size_t errlen);

#endif
