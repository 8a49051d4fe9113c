/* The request model (request.c): what every front end (RESP, HTTP, and any protocol added
 * later) turns its input into, and the one place where a client is authenticated and where
 * keys are built.  A session says who the client is (admin, a tenant with its key prefix, or
 * nobody yet); a target is the (key, policy) pair a check applies to, resolved once. */
#ifndef RLT_SERVER_REQUEST_REQUEST_H
#define RLT_SERVER_REQUEST_REQUEST_H

#include "ratelimit/ratelimit.h"
#include "ratelimit/store.h"
#include "server/config/config.h"

#include <stdbool.h>
#include <stddef.h>

struct rlt__srv;

/* Who a client is. */
typedef enum rlt__auth {
    RLT__AUTH_NONE = 0,   /* not authenticated (wrong or no password while one is set) */
    RLT__AUTH_ADMIN = 1,  /* the server password, or no password and no tenants configured */
    RLT__AUTH_TENANT = 2, /* a tenant: every key gets the tenant's prefix */
} rlt__auth;

typedef struct rlt__session {
    rlt__auth auth;
    bool close;                /* QUIT or a fatal error: close after the replies are sent */
    char prefix[RLT__STR_MAX]; /* the tenant's key prefix */
    size_t prefix_len;
    /* What the identity was checked against, to check it again after a reload: the config,
     * and the credentials AUTH gave (none for the implicit admin of a config without any). */
    const rlt__config *cfg;
    bool has_user;
    char user[RLT__STR_MAX], secret[RLT__STR_MAX];
    size_t ulen, slen;
    /* RESP client state (cmd.c, cmd_conn.c): the protocol version HELLO chose, the client's id
     * and name, and a MULTI transaction's queued commands (serialized, owned). */
    int resp;
    uint64_t id;
    /* The client its requests come from, for per-client budgets (new inline texts): the
     * connection's first session id (rlt__session_init sets it to the new id), and its peer
     * address (a hash of the IP, odd; 0: none, e.g. tests).  The connection layer sets the
     * address; a door whose sessions last one request (HTTP, gRPC) copies both from its
     * connection's session (rlt__session_same_client). */
    uint64_t client, addr;
    char name[64];
    bool in_multi, multi_abort;
    char *mq;
    size_t mq_len, mq_cap, mq_count;
} rlt__session;

/* Sets up a session for the current config: RLT__AUTH_ADMIN when no password and no tenant
 * is configured, else RLT__AUTH_NONE until rlt__session_auth succeeds. */
void rlt__session_init(struct rlt__srv *s, rlt__session *ss);
/* Frees what the session owns (a MULTI queue).  The session can be initialised again. */
void rlt__session_free(rlt__session *ss);
/* Checks a password (RESP AUTH: `user` may be NULL for the default user) or a bearer token
 * (HTTP: user NULL) against the config, in time independent of where they differ, and sets
 * the session's identity.  Returns the identity; RLT__AUTH_NONE leaves the session
 * unauthenticated. */
rlt__auth rlt__session_auth(struct rlt__srv *s, rlt__session *ss, const char *user, size_t ulen,
                            const char *pw, size_t plen);
/* Brings the session's identity up to the current config: after a reload that removed its
 * tenant, changed its password, or added a password where there was none, the session is no
 * longer authenticated (RLT__AUTH_NONE: the next command gets NOAUTH), as Redis's ACL DELUSER
 * does to a user's connections.  One pointer comparison when nothing was reloaded.  Returns
 * the identity. */
rlt__auth rlt__session_refresh(struct rlt__srv *s, rlt__session *ss);
/* Whether any password or tenant is configured (AUTH makes sense). */
bool rlt__auth_required(struct rlt__srv *s);

/* Who holds the session's reservations (rlt_store_reserve_for): its tenant (every connection
 * of a tenant shares the tenant's bound), else the connection itself.  Never 0. */
uint64_t rlt__session_holder(const rlt__session *ss);

/* Makes ss, a session that lasts one request, count against the budgets of `conn`, its
 * connection's session: the same client and address. */
void rlt__session_same_client(rlt__session *ss, const rlt__session *conn);

struct rlt__asker;
/* Fills *who (srv.h) with what an inline policy's admission asks of this session: its tenant's
 * prefix, its client and address, and `now`. */
void rlt__session_asker(const rlt__session *ss, rlt_ns now, struct rlt__asker *who);

/* Builds the session's prefix + key into buf (RLT_KEY_MAX bytes).  Returns RLT_OK and *len,
 * or RLT_EKEYLEN when the key is empty or the whole is longer than RLT_KEY_MAX. */
int rlt__session_key(const rlt__session *ss, const char *key, size_t klen, char *buf,
                     size_t *len);

/* The key of a client address, for every door that takes one (the HTTP door's addr=, the SPOE
 * message's addr): [key ":"] rlt_addr_key(addr, prefix), into out (RLT_KEY_MAX bytes).  key
 * may be NULL (klen 0): the address key alone.  prefix 0 is the default /56.  Returns RLT_OK
 * and *len, or RLT_EINVAL with a message in err: a malformed address (named, never keyed as
 * a string), a prefix outside 32..128, or a key too long for RLT_KEY_MAX. */
int rlt__key_with_addr(const char *key, size_t klen, const char *addr, size_t alen, int prefix,
                       char *out, size_t *len, char *err, size_t errlen);

/* A resolved check target. */
typedef struct rlt__target {
    const char *key; /* the store key: the argument itself (no prefix) or kbuf */
    size_t klen;
    int policy_id; /* -1 with a tier */
    bool shadow;   /* the named policy is in shadow mode */
    bool is_tier;  /* "@tier": decide under the key's tier (tier holds the default) */
    char tier[RLT_NAME_MAX + 1];
} rlt__target;

/* Resolves a (key, policy) pair of any front end: the key with the session's prefix (into
 * kbuf, RLT_KEY_MAX bytes, when there is a prefix), then the policy: a named policy, inline
 * policy text, or (allow_tier) "@tier".  The key is checked first, so a bad key interns no
 * policy.  `now` is when (for the inline cache's use times).  Returns RLT_OK and *t, or an
 * RLT_* code with a message (no "ERR ") in err. */
int rlt__target_resolve(struct rlt__srv *s, const rlt__session *ss, const char *key, size_t klen,
                        const char *policy, size_t plen, bool allow_tier, rlt_ns now, char *kbuf,
                        rlt__target *t, char *err, size_t errlen);

/* A reservation id (rlt_store_reserve) as every front end carries it: 16 lowercase hex
 * digits, since a JSON number would lose the bits above 2^53.  format writes them and a NUL;
 * parse reads 1..16 hex digits of either case and returns false for anything else or 0. */
#define RLT__RESERVATION_HEX 16
void rlt__reservation_format(uint64_t id, char out[RLT__RESERVATION_HEX + 1]);
bool rlt__reservation_parse(const char *p, size_t n, uint64_t *id);

#endif
