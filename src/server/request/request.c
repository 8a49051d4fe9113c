/* The request model: sessions, authentication and key construction for every protocol, and
 * the resolution of a (key, policy) pair into a check target. */
#include "server/request/request.h"

#include "server/request/srv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool rlt__auth_required(rlt__srv *s)
{
    const rlt__config *c = rlt__srv_config(s);
    return c->set.password[0] != '\0' || c->ntenants > 0;
}

static uint64_t next_session_id = 1;

void rlt__session_init(rlt__srv *s, rlt__session *ss)
{
    memset(ss, 0, sizeof *ss);
    ss->resp = 2;
    ss->id = __atomic_fetch_add(&next_session_id, 1, __ATOMIC_RELAXED);
    ss->client = ss->id;
    ss->cfg = rlt__srv_config(s);
    ss->auth = rlt__auth_required(s) ? RLT__AUTH_NONE : RLT__AUTH_ADMIN;
}

void rlt__session_free(rlt__session *ss)
{
    free(ss->mq);
    ss->mq = NULL;
    ss->mq_len = ss->mq_cap = ss->mq_count = 0;
}

/* Equal without an early exit on the first differing byte (the length is not secret). */
static bool secret_eq(const char *want, const char *got, size_t glen)
{
    size_t wl = strlen(want);
    if (wl == 0 || wl != glen) return false;
    unsigned char diff = 0;
    for (size_t i = 0; i < wl; i++)
        diff |= (unsigned char)(want[i] ^ got[i]);
    return diff == 0;
}

/* Checks credentials against config c and sets the identity (not the remembered ones). */
static rlt__auth check(const rlt__config *c, rlt__session *ss, const char *user, size_t ulen,
                       const char *pw, size_t plen)
{
    bool default_user = user == NULL || (ulen == 7 && memcmp(user, "default", 7) == 0);
    if (default_user && secret_eq(c->set.password, pw, plen)) {
        ss->auth = RLT__AUTH_ADMIN;
        ss->prefix_len = 0;
        return ss->auth;
    }
    for (size_t t = 0; t < c->ntenants; t++) {
        const rlt__tenant *tn = &c->tenants[t];
        if (!default_user && !(strlen(tn->name) == ulen && memcmp(tn->name, user, ulen) == 0))
            continue;
        if (!secret_eq(tn->password, pw, plen)) continue;
        size_t pl = strlen(tn->prefix);
        memcpy(ss->prefix, tn->prefix, pl);
        ss->prefix_len = pl;
        ss->auth = RLT__AUTH_TENANT;
        return ss->auth;
    }
    ss->auth = RLT__AUTH_NONE;
    ss->prefix_len = 0;
    return ss->auth;
}

rlt__auth rlt__session_auth(rlt__srv *s, rlt__session *ss, const char *user, size_t ulen,
                            const char *pw, size_t plen)
{
    const rlt__config *c = rlt__srv_config(s);
    ss->cfg = c;
    ss->has_user = user != NULL && ulen < sizeof ss->user;
    ss->ulen = ss->has_user ? ulen : 0;
    if (ss->has_user) memcpy(ss->user, user, ulen);
    ss->slen = plen < sizeof ss->secret ? plen : 0;
    memcpy(ss->secret, pw, ss->slen);
    return check(c, ss, ss->has_user ? ss->user : NULL, ss->ulen, pw, plen);
}

rlt__auth rlt__session_refresh(rlt__srv *s, rlt__session *ss)
{
    const rlt__config *c = rlt__srv_config(s);
    if (ss->cfg == c) return ss->auth;
    ss->cfg = c;
    if (ss->auth == RLT__AUTH_NONE) return ss->auth;
    if (ss->slen == 0) {
        /* The implicit admin of a config without secrets stays one only while there are none. */
        ss->auth = rlt__auth_required(s) ? RLT__AUTH_NONE : RLT__AUTH_ADMIN;
        ss->prefix_len = 0;
        return ss->auth;
    }
    return check(c, ss, ss->has_user ? ss->user : NULL, ss->ulen, ss->secret, ss->slen);
}

uint64_t rlt__session_holder(const rlt__session *ss)
{
    if (ss->auth == RLT__AUTH_TENANT) return rlt_hash_fnv1a(ss->prefix, ss->prefix_len) | 1;
    return (ss->id << 1) + 2; /* even: never a tenant's (odd), never 0 */
}

void rlt__session_same_client(rlt__session *ss, const rlt__session *conn)
{
    ss->client = conn->client;
    ss->addr = conn->addr;
}

void rlt__session_asker(const rlt__session *ss, rlt_ns now, rlt__asker *who)
{
    *who = (rlt__asker){.owner = ss->prefix,
                        .olen = ss->prefix_len,
                        .client = ss->client,
                        .addr = ss->addr,
                        .now = now};
}

int rlt__session_key(const rlt__session *ss, const char *key, size_t klen, char *buf, size_t *len)
{
    size_t pl = ss->prefix_len;
    if (klen == 0 || klen > RLT_KEY_MAX || pl + klen > RLT_KEY_MAX) return RLT_EKEYLEN;
    memcpy(buf, ss->prefix, pl);
    memcpy(buf + pl, key, klen);
    *len = pl + klen;
    return RLT_OK;
}

int rlt__target_resolve(rlt__srv *s, const rlt__session *ss, const char *key, size_t klen,
                        const char *policy, size_t plen, bool allow_tier, rlt_ns now, char *kbuf,
                        rlt__target *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    t->policy_id = -1;
    if (ss->prefix_len == 0) {
        if (klen == 0 || klen > RLT_KEY_MAX) goto bad_key;
        t->key = key;
        t->klen = klen;
    } else {
        if (rlt__session_key(ss, key, klen, kbuf, &t->klen) != RLT_OK) goto bad_key;
        t->key = kbuf;
    }
    if (allow_tier && plen > 1 && policy[0] == '@') {
        if (plen - 1 > RLT_NAME_MAX) {
            snprintf(err, errlen, "tier name too long");
            return RLT_EINVAL;
        }
        memcpy(t->tier, policy + 1, plen - 1);
        t->tier[plen - 1] = '\0';
        t->is_tier = true;
        return RLT_OK;
    }
    rlt__asker who;
    rlt__session_asker(ss, now, &who);
    int st = rlt__srv_resolve(s, policy, plen, &who, &t->policy_id, &t->shadow, err, errlen);
    return st;
bad_key:
    snprintf(err, errlen, "invalid key: empty or longer than %d bytes (tenant prefix included)",
             RLT_KEY_MAX);
    return RLT_EKEYLEN;
}

void rlt__reservation_format(uint64_t id, char out[RLT__RESERVATION_HEX + 1])
{
    static const char hex[] = "0123456789abcdef";
    for (int i = RLT__RESERVATION_HEX - 1; i >= 0; i--, id >>= 4)
        out[i] = hex[id & 15];
    out[RLT__RESERVATION_HEX] = '\0';
}

bool rlt__reservation_parse(const char *p, size_t n, uint64_t *id)
{
    if (n == 0 || n > RLT__RESERVATION_HEX) return false;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return false;
        v = v << 4 | (uint64_t)d;
    }
    *id = v;
    return v != 0;
}

int rlt__key_with_addr(const char *key, size_t klen, const char *addr, size_t alen, int prefix,
                       char *out, size_t *len, char *err, size_t errlen)
{
    if (klen + 1 + RLT_ADDR_KEY_MAX > RLT_KEY_MAX) {
        snprintf(err, errlen, "key too long to take an address after it");
        return RLT_EINVAL;
    }
    size_t n = 0;
    if (klen > 0) {
        memcpy(out, key, klen);
        out[klen] = ':';
        n = klen + 1;
    }
    int r = rlt_addr_key(addr, alen, prefix, out + n, RLT_ADDR_KEY_MAX);
    if (r == RLT_EINVAL) {
        snprintf(err, errlen, "prefix must be an integer from 32 to 128");
        return RLT_EINVAL;
    }
    if (r < 0) {
        snprintf(err, errlen, "malformed address \"%.*s\" (an IPv4 or IPv6 address, no port)",
                 (int)(alen > 64 ? 64 : alen), addr);
        return RLT_EINVAL;
    }
    *len = n + (size_t)r;
    return RLT_OK;
}
