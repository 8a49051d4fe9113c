/* SipHash-c-d (Aumasson & Bernstein), inline, with the key expanded once: the store hashes
 * every call's key, so the four initial words are computed when the store opens and the
 * rounds unroll into the caller.  Written from the paper. */
#ifndef RLT_STORE_SIPHASH_H
#define RLT_STORE_SIPHASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A 128-bit SipHash key expanded into the initial state v0..v3. */
typedef struct rlt__sipkey {
    uint64_t v[4];
} rlt__sipkey;

static inline uint64_t rlt__sip_load64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline void rlt__sipkey_init(rlt__sipkey *k, const uint8_t key[16])
{
    const uint64_t k0 = rlt__sip_load64(key), k1 = rlt__sip_load64(key + 8);
    k->v[0] = k0 ^ UINT64_C(0x736f6d6570736575);
    k->v[1] = k1 ^ UINT64_C(0x646f72616e646f6d);
    k->v[2] = k0 ^ UINT64_C(0x6c7967656e657261);
    k->v[3] = k1 ^ UINT64_C(0x7465646279746573);
}

static inline uint64_t rlt__sip_rotl(uint64_t x, int b)
{
    return (x << b) | (x >> (64 - b));
}

#define RLT__SIPROUND                                                                              \
    do {                                                                                           \
        v0 += v1;                                                                                  \
        v1 = rlt__sip_rotl(v1, 13);                                                                \
        v1 ^= v0;                                                                                  \
        v0 = rlt__sip_rotl(v0, 32);                                                                \
        v2 += v3;                                                                                  \
        v3 = rlt__sip_rotl(v3, 16);                                                                \
        v3 ^= v2;                                                                                  \
        v0 += v3;                                                                                  \
        v3 = rlt__sip_rotl(v3, 21);                                                                \
        v3 ^= v0;                                                                                  \
        v2 += v1;                                                                                  \
        v1 = rlt__sip_rotl(v1, 17);                                                                \
        v1 ^= v2;                                                                                  \
        v2 = rlt__sip_rotl(v2, 32);                                                                \
    } while (0)

/* SipHash-c-d of data[0..len).  c and d are compile-time constants at every call site, so the
 * round loops unroll.  The last 1-7 bytes are read with one or two overlapping loads when the
 * message has 8 bytes or more (the bytes before the tail are part of the message, so the loads
 * stay inside it), byte by byte otherwise. */
static inline __attribute__((always_inline)) uint64_t
rlt__siphash(const rlt__sipkey *k, const void *data, size_t len, int c, int d)
{
    const uint8_t *in = data;
    uint64_t v0 = k->v[0], v1 = k->v[1], v2 = k->v[2], v3 = k->v[3];
    const size_t tail = len & 7;
    const uint8_t *end = in + (len - tail);
    for (; in != end; in += 8) {
        uint64_t m = rlt__sip_load64(in);
        v3 ^= m;
        for (int i = 0; i < c; i++)
            RLT__SIPROUND;
        v0 ^= m;
    }
    uint64_t b = (uint64_t)len << 56;
    if (tail) {
        if (len >= 8) {
            /* The 8 bytes ending at the message's end hold the tail in their top bytes. */
            b |= rlt__sip_load64(in + tail - 8) >> (64 - 8 * tail);
        } else {
            for (size_t i = 0; i < tail; i++)
                b |= (uint64_t)in[i] << (8 * i);
        }
    }
    v3 ^= b;
    for (int i = 0; i < c; i++)
        RLT__SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    for (int i = 0; i < d; i++)
        RLT__SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

/* SipHash-c-d (c compression rounds, d finalisation rounds) with a 128-bit key, out of line
 * (siphash.c): the store uses 1-3 for keys; 2-4 is there so the tests can check the reference
 * vectors. */
uint64_t rlt__siphash13(const uint8_t key[16], const void *data, size_t len);
uint64_t rlt__siphash24(const uint8_t key[16], const void *data, size_t len);

#endif
