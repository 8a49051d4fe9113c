/* SPOP v2 on the connection layer: ratelimitd as HAProxy's SPOE agent.  A connection starts
 * with HAPROXY-HELLO (answered by AGENT-HELLO with the frame size agreed: HAProxy's, at most
 * RLT__SPOP_MAX_FRAME), then carries NOTIFY frames, each answered at once by an ACK with the
 * same stream and frame ids (pipelining: any number may be in flight; HAProxy matches them by
 * id), until a HAPROXY-DISCONNECT.  Each message of a NOTIFY is one check:
 *   key       string: the key (an ipv4/ipv6 value is taken as addr)
 *   addr      ipv4, ipv6 or string: the client address, made a key by rlt_addr_key and
 *             appended to key after ':' (or the whole key without one)
 *   policy    a policy name or inline text; repeated for nested limits, decided all or nothing
 *   prefix    the IPv6 prefix (32..128) of the policy before it (before any: of every policy)
 *   cost      integer >= 0 (default 1)
 *   password  the server's password or a tenant's, when one is configured
 * and is answered in transaction variables: allowed (bool), limit, remaining, retry_after and
 * reset_after (integer seconds, as the headers carry them), ratelimit and ratelimit_policy
 * (the IETF fields' values); or error (a string) when the question could not be answered.
 * A frame that breaks the protocol gets AGENT-DISCONNECT with its status and the connection
 * closes; the daemon's other connections are not affected. */
#include "server/base/clock.h"
#include "server/base/mem.h"
#include "server/net/conn.h"
#include "server/net/protocol.h"
#include "server/request/decide.h"
#include "server/request/request.h"
#include "server/request/srv.h"
#include "server/spop/spop.h"
#include "server/stats/metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Per connection: whether HELLO was exchanged, and the frame size agreed then. */
typedef struct spop_state {
    bool hello;
    uint32_t max_frame;
} spop_state;

/* Most policies (nested limits) in one message. */
#define MAX_LIMITS 8

static int spop_open(rlt__conn *c)
{
    if (!rlt__mem_conn_take(sizeof(spop_state))) return RLT_ENOMEM;
    spop_state *st = calloc(1, sizeof *st);
    if (st == NULL) {
        rlt__mem_conn_give(sizeof(spop_state));
        return RLT_ENOMEM;
    }
    rlt__conn_set_state(c, st);
    return RLT_OK;
}

static void spop_close(rlt__conn *c)
{
    free(rlt__conn_state(c));
    rlt__conn_set_state(c, NULL);
    rlt__mem_conn_give(sizeof(spop_state));
}

/* One message's arguments. */
typedef struct spop_msg {
    const unsigned char *key, *pw;
    size_t klen, pwlen;
    char addr[64];
    bool has_addr;
    int64_t cost;
    size_t n;
    const unsigned char *policy[MAX_LIMITS];
    size_t plen[MAX_LIMITS];
    int prefix[MAX_LIMITS];
    int default_prefix;
} spop_msg;

static bool name_is(const unsigned char *s, size_t n, const char *lit)
{
    return n == strlen(lit) && memcmp(s, lit, n) == 0;
}

/* An address value as text for rlt_addr_key: typed addresses are written out (without
 * snprintf: addr=src is every request's), strings kept. */
static bool addr_text(const rlt__spop_value *v, char *out, size_t cap)
{
    const unsigned char *b = v->s;
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;
    if (v->type == RLT__SPOP_T_IPV4) {
        for (int i = 0; i < 4; i++) {
            unsigned x = b[i];
            if (x >= 100) out[n++] = (char)('0' + x / 100);
            if (x >= 10) out[n++] = (char)('0' + x / 10 % 10);
            out[n++] = (char)('0' + x % 10);
            out[n++] = i < 3 ? '.' : '\0';
        }
    } else if (v->type == RLT__SPOP_T_IPV6) {
        for (int i = 0; i < 16; i += 2) { /* every group, full: "0db8:..." is valid */
            out[n++] = hex[b[i] >> 4], out[n++] = hex[b[i] & 15];
            out[n++] = hex[b[i + 1] >> 4], out[n++] = hex[b[i + 1] & 15];
            out[n++] = i < 14 ? ':' : '\0';
        }
    } else if (v->type == RLT__SPOP_T_STRING && v->n < cap) {
        memcpy(out, v->s, v->n);
        out[v->n] = '\0';
    } else {
        return false;
    }
    return true;
}

static bool is_int(const rlt__spop_value *v)
{
    return v->type >= RLT__SPOP_T_INT32 && v->type <= RLT__SPOP_T_UINT64;
}

/* Reads one argument into m.  Returns NULL or the message of what is wrong with it. */
static const char *read_arg(spop_msg *m, const unsigned char *name, size_t nlen,
                            const rlt__spop_value *v)
{
    bool str = v->type == RLT__SPOP_T_STRING || v->type == RLT__SPOP_T_BINARY;
    bool ip = v->type == RLT__SPOP_T_IPV4 || v->type == RLT__SPOP_T_IPV6;
    if (name_is(name, nlen, "key") && ip) name = (const unsigned char *)"addr", nlen = 4;
    if (name_is(name, nlen, "key")) {
        if (!str) return "key must be a string";
        m->key = v->s, m->klen = v->n;
    } else if (name_is(name, nlen, "addr")) {
        if (!addr_text(v, m->addr, sizeof m->addr)) return "addr must be an address or a string";
        m->has_addr = true;
    } else if (name_is(name, nlen, "policy")) {
        if (v->type != RLT__SPOP_T_STRING) return "policy must be a string";
        if (m->n == MAX_LIMITS) return "at most 8 policies in one message";
        m->policy[m->n] = v->s, m->plen[m->n] = v->n, m->prefix[m->n] = 0;
        m->n++;
    } else if (name_is(name, nlen, "prefix")) {
        int64_t p = (int64_t)v->u;
        if (!is_int(v) || p < 32 || p > 128) return "prefix must be an integer from 32 to 128";
        if (m->n == 0)
            m->default_prefix = (int)p;
        else
            m->prefix[m->n - 1] = (int)p;
    } else if (name_is(name, nlen, "cost")) {
        if (!is_int(v) || (int64_t)v->u < 0) return "cost must be an integer >= 0";
        m->cost = (int64_t)v->u;
    } else if (name_is(name, nlen, "password")) {
        if (!str) return "password must be a string";
        m->pw = v->s, m->pwlen = v->n;
    } else {
        return "unknown argument (key, addr, policy, prefix, cost, password)";
    }
    return NULL;
}

/* The value of field `f` ("RateLimit: ") in rlt_format_headers' lines, as a var. */
static void set_field(rlt__obuf *out, const char *hdr, const char *f, const char *var)
{
    const char *p = hdr;
    size_t fl = strlen(f);
    while (*p) {
        const char *e = strstr(p, "\r\n");
        if (e == NULL) return;
        if ((size_t)(e - p) > fl && memcmp(p, f, fl) == 0)
            return rlt__spop_ack_set_str(out, var, p + fl, (size_t)(e - p) - fl);
        p = e + 2;
    }
}

/* Decides message m and writes its variables into the open ACK, its keys built in sc. */
static void answer_in(rlt__conn *c, rlt__scratch *sc, spop_msg *m, rlt_ns now, rlt__obuf *out)
{
    rlt__srv *s = rlt__conn_srv(c);
    rlt__session *ss = rlt__conn_session(c);
    char err[300];
    if (rlt__session_refresh(s, ss) == RLT__AUTH_NONE) {
        if (m->pw == NULL ||
            rlt__session_auth(s, ss, NULL, 0, (const char *)m->pw, m->pwlen) == RLT__AUTH_NONE)
            return rlt__spop_ack_set_str(out, "error", "NOAUTH missing or wrong password", 32);
    }
    if (m->n == 0) return rlt__spop_ack_set_str(out, "error", "no policy argument", 18);
    if (m->key == NULL && !m->has_addr)
        return rlt__spop_ack_set_str(out, "error", "no key or addr argument", 23);
    char(*keys)[RLT_KEY_MAX] = rlt__scratch_alloc(sc, m->n * RLT_KEY_MAX);
    char(*kbufs)[RLT_KEY_MAX] = rlt__scratch_alloc(sc, m->n * RLT_KEY_MAX);
    if (keys == NULL || kbufs == NULL)
        return rlt__spop_ack_set_str(out, "error", "out of scratch space for the keys", 33);
    rlt_check checks[MAX_LIMITS];
    rlt__target t0 = {0};
    for (size_t i = 0; i < m->n; i++) {
        size_t kl = m->klen;
        const char *k = (const char *)m->key;
        if (m->has_addr) {
            int prefix = m->prefix[i] ? m->prefix[i] : m->default_prefix;
            if (rlt__key_with_addr(k, m->klen, m->addr, strlen(m->addr), prefix, keys[i], &kl, err,
                                   sizeof err) != RLT_OK)
                return rlt__spop_ack_set_str(out, "error", err, strlen(err));
            k = keys[i];
        }
        rlt__target t;
        if (rlt__target_resolve(s, ss, k, kl, (const char *)m->policy[i], m->plen[i], false, now,
                                kbufs[i], &t, err, sizeof err) != RLT_OK)
            return rlt__spop_ack_set_str(out, "error", err, strlen(err));
        rlt_policy pp;
        /* A lease would never be released: SPOE has no answer after the response. */
        if (rlt__registry_policy(&s->reg, t.policy_id, &pp) == RLT_OK && pp.algo == RLT_CONCURRENCY)
            return rlt__spop_ack_set_str(out, "error", "a concurrency policy needs a release", 36);
        if (i == 0) t0 = t;
        checks[i] =
            (rlt_check){.policy = t.policy_id, .key = t.key, .klen = t.klen, .cost = m->cost};
    }
    rlt_decision d;
    int refused = -1, st;
    if (m->n == 1)
        st = rlt__decide(s, t0.policy_id, t0.shadow, t0.key, t0.klen, now, m->cost, &d);
    else
        st = rlt__decide_multi(s, checks, m->n, now, &d, &refused);
    if (st != RLT_OK) {
        const char *e = rlt__decide_strerror(s, checks[0].policy, now, st, err, sizeof err);
        return rlt__spop_ack_set_str(out, "error", e, strlen(e));
    }
    rlt__spop_ack_set_bool(out, "allowed", d.allowed);
    rlt__spop_ack_set_int(out, "limit", d.limit);
    rlt__spop_ack_set_int(out, "remaining", d.remaining);
    rlt__spop_ack_set_int(out, "retry_after",
                          d.allowed ? 0 : rlt_retry_after_seconds(d.retry_after));
    rlt__spop_ack_set_int(out, "reset_after", rlt_retry_after_seconds(d.reset_after));
    /* The IETF fields of the refusing limit (or the first), named as HTTP names them. */
    int which = refused >= 0 ? refused : 0;
    rlt_policy p;
    char name[RLT_NAME_MAX + 1] = "inline", hdr[1024];
    const unsigned char *pn = m->policy[which];
    if (memchr(pn, ':', m->plen[which]) == NULL && m->plen[which] <= RLT_NAME_MAX) {
        memcpy(name, pn, m->plen[which]);
        name[m->plen[which]] = '\0';
    }
    if (rlt__registry_policy(&s->reg, checks[which].policy, &p) == RLT_OK &&
        rlt_format_headers(hdr, sizeof hdr, name, &p, &d, RLT_HDR_IETF) > 0) {
        set_field(out, hdr, "RateLimit: ", "ratelimit");
        set_field(out, hdr, "RateLimit-Policy: ", "ratelimit_policy");
    }
}

/* answer_in with the worker's scratch, released after the message. */
static void answer(rlt__conn *c, spop_msg *m, rlt_ns now, rlt__obuf *out)
{
    rlt__scratch *sc = rlt__conn_scratch(c);
    size_t mark = rlt__scratch_mark(sc);
    answer_in(c, sc, m, now, out);
    rlt__scratch_release(sc, mark);
}

/* A NOTIFY: every message answered in one ACK of at most max_frame bytes.  Returns
 * RLT__SPOP_ST_NORMAL, or the status to disconnect with and its message in *err: INVALID for a
 * payload that breaks the protocol, TOO_BIG for answers that do not fit the agreed frame (many
 * messages in one NOTIFY under a small max-frame-size). */
static rlt__spop_status notify(rlt__conn *c, const rlt__spop_frame *f, uint32_t max_frame,
                               rlt_ns now, const char **err)
{
    rlt__obuf *out = rlt__conn_out(c);
    size_t mark = out->len;
    size_t ack = rlt__spop_ack_begin(out, f->stream_id, f->frame_id);
    rlt__spop_reader r = {f->payload, f->payload + f->plen};
    while (r.p < r.end) {
        const unsigned char *mname;
        size_t mlen;
        if (!rlt__spop_read_bytes(&r, &mname, &mlen) || r.p >= r.end) goto bad;
        unsigned nargs = *r.p++;
        spop_msg m = {.cost = 1};
        const char *argerr = NULL;
        for (unsigned i = 0; i < nargs; i++) {
            const unsigned char *an;
            size_t al;
            rlt__spop_value v;
            if (!rlt__spop_read_bytes(&r, &an, &al) || !rlt__spop_read_value(&r, &v)) goto bad;
            if (argerr == NULL) argerr = read_arg(&m, an, al, &v);
        }
        rlt__conn_request_done(c);
        if (argerr)
            rlt__spop_ack_set_str(out, "error", argerr, strlen(argerr));
        else
            answer(c, &m, now, out);
    }
    rlt__spop_ack_end(out, ack);
    if (!out->overflow && out->len - ack - 4 > max_frame) {
        out->len = mark;
        *err = "the ACK does not fit the agreed max-frame-size: fewer messages a NOTIFY";
        return RLT__SPOP_ST_TOO_BIG;
    }
    return RLT__SPOP_ST_NORMAL;
bad:
    out->len = mark; /* drop the half-written ACK */
    *err = "NOTIFY's messages run past the frame or hold an unknown data type";
    return RLT__SPOP_ST_INVALID;
}

static void disconnect(rlt__conn *c, rlt__spop_status st, const char *msg)
{
    rlt__srv *s = rlt__conn_srv(c);
    if (st != RLT__SPOP_ST_NORMAL) rlt__mcount(&rlt__mslot_get(&s->metrics)->errors, 1);
    rlt__spop_put_disconnect(rlt__conn_out(c), st, msg);
    rlt__conn_close_after(c);
}

static size_t spop_feed(rlt__conn *c, char *in, size_t len, rlt_ns now)
{
    spop_state *st = rlt__conn_state(c);
    size_t off = 0;
    while (off < len) {
        rlt__spop_frame f;
        rlt__spop_status status = RLT__SPOP_ST_NORMAL;
        const char *err = NULL;
        ssize_t n = rlt__spop_frame_parse(in + off, len - off,
                                          st->hello ? st->max_frame : RLT__SPOP_MAX_FRAME, &f,
                                          &status, &err);
        if (n == RLT__SPOP_PARTIAL) break;
        if (n == RLT__SPOP_ERROR) {
            disconnect(c, status, err);
            return len;
        }
        off += (size_t)n;
        if (f.type == RLT__SPOP_HAPROXY_HELLO && !st->hello) {
            rlt__spop_hello h;
            rlt__spop_status hs = rlt__spop_hello_parse(f.payload, f.plen, &h);
            if (hs != RLT__SPOP_ST_NORMAL) {
                disconnect(c, hs, rlt__spop_status_text(hs));
                return len;
            }
            st->hello = true;
            st->max_frame = h.max_frame < RLT__SPOP_MAX_FRAME ? h.max_frame : RLT__SPOP_MAX_FRAME;
            rlt__spop_put_agent_hello(rlt__conn_out(c), st->max_frame);
            if (h.healthcheck) { /* HAProxy's check closes after our HELLO */
                rlt__conn_close_after(c);
                return len;
            }
        } else if (f.type == RLT__SPOP_HAPROXY_DISCONNECT) {
            disconnect(c, RLT__SPOP_ST_NORMAL, "bye");
            return len;
        } else if (f.type == RLT__SPOP_NOTIFY && st->hello) {
            if (f.flags & RLT__SPOP_ABORT) continue; /* nothing to cancel: no fragments */
            const char *e = NULL;
            rlt__spop_status ns = notify(c, &f, st->max_frame, now, &e);
            rlt__mslot *ms = rlt__mslot_get(&rlt__conn_srv(c)->metrics);
            rlt__metrics_hist(ms->spop_lat, &ms->spop_lat_sum_ns, rlt__now() - now);
            if (ns != RLT__SPOP_ST_NORMAL) {
                disconnect(c, ns, e);
                return len;
            }
        } else {
            disconnect(c, RLT__SPOP_ST_INVALID,
                       f.type == RLT__SPOP_NOTIFY          ? "NOTIFY before HELLO"
                       : f.type == RLT__SPOP_HAPROXY_HELLO ? "a second HELLO"
                                                           : "an agent's frame sent to the agent");
            return len;
        }
        if (rlt__conn_out(c)->overflow) break;
    }
    return off;
}

static void spop_refuse(rlt__conn *c, rlt__refusal why, rlt__obuf *out)
{
    (void)c;
    switch (why) {
    case RLT__REFUSE_FULL:
        rlt__spop_put_disconnect(out, RLT__SPOP_ST_RESOURCE, "max number of clients reached");
        break;
    case RLT__REFUSE_TIMEOUT:
        rlt__spop_put_disconnect(out, RLT__SPOP_ST_TIMEOUT, "frame not completed in time");
        break;
    case RLT__REFUSE_TOO_LARGE:
        rlt__spop_put_disconnect(out, RLT__SPOP_ST_TOO_BIG, "frame too large");
        break;
    }
}

const rlt__proto rlt__proto_spop = {
    .name = "spop",
    .open = spop_open,
    .close = spop_close,
    .feed = spop_feed,
    .refuse = spop_refuse,
};
