/* The Redis layout shared by libratelimit_redis and the Redis module: the microsecond policy
 * with the scripts' 2^50 bounds, key names, and Redis Cluster hash slots (see layout.h). */
#include "redis/layout.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

int rlt__rpol_from(const rlt_policy *p, rlt__rpol *o)
{
    if (!p || p->algo < RLT_FIXED_WINDOW || p->algo > RLT_CONCURRENCY || p->scale_ <= 0 ||
        p->unit_ <= 0 || p->limit <= 0 || p->period <= 0)
        return RLT_EINVAL;
    if (p->period % RLT_NS_PER_US != 0) return RLT_EINVAL;
    if (p->adapt) return RLT_EINVAL; /* an adaptive limit learns in the store only */
    o->blk = o->bfac = o->bmax = 0;
    if (p->block > 0) { /* the penalty box: whole microseconds, within the scripts' bounds */
        if (p->block % RLT_NS_PER_US != 0 || p->block_max % RLT_NS_PER_US != 0) return RLT_EINVAL;
        if (p->block_max / RLT_NS_PER_US > RLT__LIM || p->block_factor > RLT__LIM)
            return RLT_ERANGE;
        o->blk = p->block / RLT_NS_PER_US;
        o->bfac = p->block_factor;
        o->bmax = p->block_max / RLT_NS_PER_US;
    }
    o->algo = (int)p->algo;
    o->N = p->limit;
    o->W = p->period / RLT_NS_PER_US;
    o->B = p->burst;
    o->Q = p->queue;
    o->D = p->delay;
    o->cal[0] = '\0';
    if (p->months != 0) { /* the scripts never use W then: only the bounds of N */
        if (p->algo != RLT_FIXED_WINDOW || o->N > RLT__LIM) return RLT_ERANGE;
        const rlt_zone *z = &p->zone;
        snprintf(o->cal, sizeof o->cal, "%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d", p->months,
                 z->std_off, z->dst_off, z->has_dst, z->start.kind, z->start.day, z->start.month,
                 z->start.week, z->start.secs, z->end.kind, z->end.day, z->end.month, z->end.week,
                 z->end.secs);
        o->scale = o->unit = 1;
        return RLT_OK;
    }
    if (o->N > RLT__LIM || o->W > RLT__LIM || o->B > RLT__LIM || o->Q > RLT__LIM) return RLT_ERANGE;
    int64_t g = rlt_gcd(o->N, o->W);
    o->scale = o->N / g;
    o->unit = o->W / g;
    if (o->scale > RLT__LIM / 1000) return RLT_ERANGE; /* ns rounding multiplies a rest by 1000 */
    switch (p->algo) {
    case RLT_TOKEN_BUCKET:
    case RLT_GCRA:
        if (o->B > RLT__LIM / o->unit) return RLT_ERANGE; /* cap = B x unit */
        break;
    case RLT_LEAKY_BUCKET:
        if (o->Q + 1 > RLT__LIM / o->unit) return RLT_ERANGE; /* cap + unit */
        break;
    case RLT_SLIDING_WINDOW:
        if (o->N > RLT__LIM / o->W || o->N > RLT__LIM / 1000) return RLT_ERANGE; /* N x W */
        break;
    default:
        break;
    }
    return RLT_OK;
}

int rlt__key_tail(const rlt_policy *p, char tail[RLT__KEYTAIL_MAX])
{
    int n = snprintf(tail, RLT__KEYTAIL_MAX, ":%d:%lld:%lld:%lld:%lld:%lld", (int)p->algo,
                     (long long)p->limit, (long long)p->period, (long long)p->burst,
                     (long long)p->queue, (long long)p->delay);
    if (p->months == 0 || n < 0 || n >= RLT__KEYTAIL_MAX) return n;
    const rlt_zone *z = &p->zone;
    int32_t f[] = {z->std_off,     z->dst_off,    z->has_dst,    z->start.kind, z->start.day,
                   z->start.month, z->start.week, z->start.secs, z->end.kind,   z->end.day,
                   z->end.month,   z->end.week,   z->end.secs};
    int m = snprintf(tail + n, (size_t)(RLT__KEYTAIL_MAX - n), ":cal%d:%s:%016llx", p->months,
                     z->name, (unsigned long long)rlt_hash_fnv1a(f, sizeof f));
    return m < 0 || m >= RLT__KEYTAIL_MAX - n ? RLT__KEYTAIL_MAX - 1 : n + m;
}

int rlt__block_tail(const rlt_policy *p, char tail[RLT__BLKTAIL_MAX])
{
    tail[0] = '\0';
    if (p->block <= 0) return 0;
    int n = snprintf(tail, RLT__BLKTAIL_MAX, ":blk:%lld:%lld:%lld", (long long)p->block,
                     (long long)p->block_factor, (long long)p->block_max);
    return n < 0 || n >= RLT__BLKTAIL_MAX ? 0 : n;
}

int rlt__key_name_tail(const char *prefix, size_t plen, const char *tail, size_t tl,
                       const void *key, size_t klen, char *buf, size_t cap)
{
    if (!key || klen == 0 || klen > 512) return RLT_EKEYLEN;
    const char *k = key;
    /* The hash tag: Redis Cluster's rule on the key itself (the bytes between its first '{'
     * and the next '}', if any, else the whole key), so the name lands in the key's own slot
     * (cluster clients route module commands by the key). */
    const char *tag = k;
    size_t tagl = klen;
    const char *open = memchr(k, '{', klen);
    if (open) {
        const char *close = memchr(open + 1, '}', klen - (size_t)(open - k) - 1);
        if (close && close > open + 1) {
            tag = open + 1;
            tagl = (size_t)(close - open - 1);
        }
    }
    /* Then the whole key, with '%' and ':' as %25 and %3A: injective, and the first ':' after
     * the tag starts the policy's tail, so two distinct (key, policy) pairs never share a name
     * ("x" and "{x}" have one tag but two names). */
    size_t escl = klen;
    for (size_t i = 0; i < klen; i++)
        escl += (k[i] == '%' || k[i] == ':') ? 2 : 0;
    size_t need = plen + 2 + tagl + escl + tl;
    if (need > cap) return RLT_ENOSPC;
    char *o = buf;
    memcpy(o, prefix, plen), o += plen;
    *o++ = '{';
    memcpy(o, tag, tagl), o += tagl;
    *o++ = '}';
    for (size_t i = 0; i < klen; i++) {
        if (k[i] == '%' || k[i] == ':') {
            *o++ = '%';
            *o++ = k[i] == '%' ? '2' : '3';
            *o++ = k[i] == '%' ? '5' : 'A';
        } else {
            *o++ = k[i];
        }
    }
    memcpy(o, tail, tl), o += tl;
    return (int)(o - buf);
}

int rlt__key_name(const char *prefix, size_t plen, const rlt_policy *p, const void *key,
                  size_t klen, char *buf, size_t cap)
{
    char tail[RLT__KEYTAIL_MAX];
    int tl = rlt__key_tail(p, tail);
    return rlt__key_name_tail(prefix, plen, tail, (size_t)tl, key, klen, buf, cap);
}

/* CRC16/XMODEM (poly 0x1021, init 0), as Redis Cluster specifies. */
static uint16_t crc16(const char *buf, size_t len)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc = (uint16_t)(crc ^ ((uint16_t)(unsigned char)buf[i] << 8));
        for (int b = 0; b < 8; b++)
            crc = (uint16_t)((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    return crc;
}

unsigned rlt__key_slot(const char *key, size_t len)
{
    /* Redis's rule: hash the bytes between the first '{' and the first '}' after it, if that
     * span is not empty; otherwise the whole key. */
    const char *open = memchr(key, '{', len);
    if (open) {
        size_t s = (size_t)(open - key);
        const char *close = memchr(open + 1, '}', len - s - 1);
        if (close && close > open + 1)
            return crc16(open + 1, (size_t)(close - open - 1)) & (RLT__SLOTS - 1);
    }
    return crc16(key, len) & (RLT__SLOTS - 1);
}
