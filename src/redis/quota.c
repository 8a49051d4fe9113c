/* libratelimit_redis's RLQS claims: one bucket's exchange with the fleet's other servers,
 * lua/quota.lua run on the node of the bucket's key (quota.h has the contract). */
#include "redis/quota.h"

#include "call.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOKENS_MAX INT64_C(4294967295)

int rlt__redis_quota_key(const rlt_redis *r, const void *key, size_t klen, char *buf, size_t cap)
{
    if (!r || !key || !buf || klen == 0 || klen > RLT__REDIS_QUOTA_KEY_MAX) return RLT_EINVAL;
    static const char hex[] = "0123456789ABCDEF";
    const unsigned char *k = key;
    size_t n = 0;
    /* prefix + "rlqs:{" + escaped key + "}": the braces make the whole key its hash tag */
    if (r->prefix_len + 6 > cap) return RLT_ENOSPC;
    memcpy(buf, r->prefix, r->prefix_len);
    memcpy(buf + r->prefix_len, "rlqs:{", 6);
    n = r->prefix_len + 6;
    for (size_t i = 0; i < klen; i++) {
        unsigned char c = k[i];
        bool plain = c >= 0x21 && c <= 0x7e && c != '%' && c != '{' && c != '}';
        if (n + (plain ? 1 : 3) + 1 > cap) return RLT_ENOSPC;
        if (plain) {
            buf[n++] = (char)c;
        } else {
            buf[n++] = '%';
            buf[n++] = hex[c >> 4];
            buf[n++] = hex[c & 15];
        }
    }
    buf[n++] = '}';
    return (int)n;
}

static int64_t clamp(int64_t v, int64_t hi)
{
    return v > hi ? hi : v;
}

int rlt__redis_quota_exchange(rlt_redis *r, uint64_t server, rlt__redis_quota *q)
{
    if (!r || !q || q->flags > (RLT__REDIS_QUOTA_EXPECT | RLT__REDIS_QUOTA_GAP) || q->demand < 0 ||
        q->held_q < 0 || q->held_b < 0 || q->cap_q < 0 || q->cap_b < 0 || q->cap_q > TOKENS_MAX ||
        q->cap_b > TOKENS_MAX || q->ttl < RLT_NS_PER_MS)
        return RLT_EINVAL;
    if (!q->key || q->klen == 0 || q->klen > RLT__REDIS_QUOTA_KEY_MAX) return RLT_EINVAL;
    /* the name on the stack for the usual keys: one exchange per bucket every 500 ms */
    char small[1024];
    size_t cap = r->prefix_len + 8 + 3 * q->klen;
    char *name = cap <= sizeof small ? small : malloc(cap);
    rlt__call *c = name ? rlt__call_new(1) : NULL;
    if (!c) {
        if (name != small) free(name);
        return RLT_ENOMEM;
    }
    int len = rlt__redis_quota_key(r, q->key, q->klen, name, cap);
    if (len < 0) {
        free(c);
        if (name != small) free(name);
        return RLT_EINVAL;
    }
    char id[17];
    snprintf(id, sizeof id, "%016llx", (unsigned long long)server);
    c->slot = r->opt.cluster ? rlt__key_slot(name, (size_t)len) : 0;
    c->script = RLT__S_QUOTA;
    rlt__arg(c, "EVALSHA", 7);
    rlt__arg(c, rlt__redis_scripts[RLT__S_QUOTA].sha, 40);
    rlt__arg(c, "1", 1);
    rlt__arg(c, name, (size_t)len);
    rlt__arg(c, id, 16);
    /* held is at most what may be divided: a larger one could only come from a bug upstream */
    rlt__arg_num(c, clamp(q->demand, RLT__REDIS_QUOTA_DEMAND_MAX));
    rlt__arg_num(c, clamp(q->held_q, q->cap_q));
    rlt__arg_num(c, clamp(q->held_b, q->cap_b));
    rlt__arg_num(c, q->cap_q);
    rlt__arg_num(c, q->cap_b);
    rlt__arg_num(c, rlt_retry_after_ms(q->ttl));
    rlt__arg_num(c, (int64_t)q->flags);
    redisReply *rep = NULL;
    int rc = rlt__run_free(r, c, &rep, NULL);
    if (name != small) free(name);
    if (rc) return rc;
    int64_t v[6];
    bool ok = rep->type == REDIS_REPLY_ARRAY && rep->elements == 6;
    for (size_t i = 0; ok && i < 6; i++) {
        ok = rep->element[i]->type == REDIS_REPLY_INTEGER && rep->element[i]->integer >= 0;
        v[i] = ok ? rep->element[i]->integer : 0;
    }
    freeReplyObject(rep);
    /* the script's promises (lua/quota.lua): a budget within Q and B and within the claim, both
     * parts zero or neither, a claim covering held, this server counted */
    int64_t hq = clamp(q->held_q, q->cap_q), hb = clamp(q->held_b, q->cap_b);
    ok = ok && v[0] <= q->cap_q && v[1] <= q->cap_b && v[0] <= v[2] && v[1] <= v[3] &&
         v[2] <= q->cap_q && v[3] <= q->cap_b && v[2] >= hq && v[3] >= hb &&
         (v[0] == 0) == (v[1] == 0) && v[4] >= 1;
    if (!ok) {
        r->st.errors++;
        return RLT_EBACKEND;
    }
    q->budget_q = v[0];
    q->budget_b = v[1];
    q->claim_q = v[2];
    q->claim_b = v[3];
    q->servers = v[4];
    q->total_demand = v[5];
    return RLT_OK;
}
