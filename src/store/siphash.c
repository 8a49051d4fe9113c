/* SipHash (Aumasson & Bernstein) for the store's key hash: a keyed PRF, so clients that choose
 * keys cannot force collisions without the per-store secret.  Written from the paper. */
#include <string.h>

#include "store/store_internal.h"

static inline uint64_t rotl(uint64_t x, int b)
{
    return (x << b) | (x >> (64 - b));
}

static inline uint64_t load64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

#define SIPROUND                                                                                   \
    do {                                                                                           \
        v0 += v1;                                                                                  \
        v1 = rotl(v1, 13);                                                                         \
        v1 ^= v0;                                                                                  \
        v0 = rotl(v0, 32);                                                                         \
        v2 += v3;                                                                                  \
        v3 = rotl(v3, 16);                                                                         \
        v3 ^= v2;                                                                                  \
        v0 += v3;                                                                                  \
        v3 = rotl(v3, 21);                                                                         \
        v3 ^= v0;                                                                                  \
        v2 += v1;                                                                                  \
        v1 = rotl(v1, 17);                                                                         \
        v1 ^= v2;                                                                                  \
        v2 = rotl(v2, 32);                                                                         \
    } while (0)

/* c and d are compile-time constants at both call sites, so the loops unroll. */
static inline __attribute__((always_inline)) uint64_t
siphash(const uint8_t key[16], const void *data, size_t len, int c, int d)
{
    const uint8_t *in = data;
    uint64_t k0 = load64(key), k1 = load64(key + 8);
    uint64_t v0 = k0 ^ UINT64_C(0x736f6d6570736575), v1 = k1 ^ UINT64_C(0x646f72616e646f6d);
    uint64_t v2 = k0 ^ UINT64_C(0x6c7967656e657261), v3 = k1 ^ UINT64_C(0x7465646279746573);
    const uint8_t *end = in + (len & ~(size_t)7);
    for (; in != end; in += 8) {
        uint64_t m = load64(in);
        v3 ^= m;
        for (int i = 0; i < c; i++)
            SIPROUND;
        v0 ^= m;
    }
    uint64_t b = (uint64_t)len << 56;
    switch (len & 7) {
    case 7:
        b |= (uint64_t)in[6] << 48; /* fall through */
    case 6:
        b |= (uint64_t)in[5] << 40; /* fall through */
    case 5:
        b |= (uint64_t)in[4] << 32; /* fall through */
    case 4:
        b |= (uint64_t)in[3] << 24; /* fall through */
    case 3:
        b |= (uint64_t)in[2] << 16; /* fall through */
    case 2:
        b |= (uint64_t)in[1] << 8; /* fall through */
    case 1:
        b |= (uint64_t)in[0];
        break;
    default:
        break;
    }
    v3 ^= b;
    for (int i = 0; i < c; i++)
        SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    for (int i = 0; i < d; i++)
        SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t rlt__siphash13(const uint8_t key[16], const void *data, size_t len)
{
    return siphash(key, data, len, 1, 3);
}

uint64_t rlt__siphash24(const uint8_t key[16], const void *data, size_t len)
{
    return siphash(key, data, len, 2, 4);
}
