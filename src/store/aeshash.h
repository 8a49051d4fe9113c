/* The store's fast keyed hash: AES rounds keyed with round keys expanded from the store's
 * secret, used where the CPU has AES-NI (checked once at open); SipHash-1-3 otherwise.  The
 * design and why it is acceptable for the store are in aeshash.c's opening comment. */
#ifndef RLT_STORE_AESHASH_H
#define RLT_STORE_AESHASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Five 128-bit round keys, derived from a 16-byte secret by rlt__aeskey_init. */
typedef struct rlt__aeskey {
    _Alignas(16) uint64_t k[5][2];
} rlt__aeskey;

/* True when this CPU runs rlt__aeshash (x86-64 with AES-NI and SSE4.1); false elsewhere. */
bool rlt__aeshash_supported(void);

/* Expands `secret` into the round keys (SipHash-2-4 of the secret over a counter).  Portable:
 * it runs on any CPU, so a store can be set up before anything asks whether AES-NI exists. */
void rlt__aeskey_init(rlt__aeskey *k, const uint8_t secret[16]);

/* The 64-bit keyed hash of data[0..len).  Reads no byte outside data[0..len).  Only call it
 * when rlt__aeshash_supported() returned true. */
uint64_t rlt__aeshash(const rlt__aeskey *k, const void *data, size_t len);

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define RLT__AESHASH_X86 1
#include <immintrin.h>
#include <string.h>

/* Functions that run AES instructions carry this: the rest of the build stays portable. */
#define RLT__AESHASH_TARGET __attribute__((target("aes,sse4.1")))

static inline RLT__AESHASH_TARGET uint64_t rlt__aes_load64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline RLT__AESHASH_TARGET uint32_t rlt__aes_load32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline RLT__AESHASH_TARGET __m128i rlt__aes_rk(const rlt__aeskey *k, int i)
{
    return _mm_load_si128((const __m128i *)(const void *)k->k[i]);
}

/* rlt__aeshash, inline: for callers that are themselves RLT__AESHASH_TARGET (the store's
 * single-call path), so the hash unrolls into them without a call. */
static inline __attribute__((always_inline)) RLT__AESHASH_TARGET uint64_t
rlt__aeshash_inline(const rlt__aeskey *k, const void *data, size_t len)
{
    const uint8_t *m = data;
    const __m128i k1 = rlt__aes_rk(k, 1), k2 = rlt__aes_rk(k, 2);
    __m128i x = _mm_xor_si128(rlt__aes_rk(k, 0), _mm_cvtsi64_si128((long long)len));
    __m128i b;
    if (len > 16) {
        const uint8_t *last = m + len - 16;
        for (; m < last; m += 16) {
            b = _mm_loadu_si128((const __m128i *)(const void *)m);
            x = _mm_aesenc_si128(_mm_aesenc_si128(_mm_xor_si128(x, b), k1), k2);
        }
        b = _mm_loadu_si128((const __m128i *)(const void *)last);
    } else if (len >= 8) {
        b = _mm_set_epi64x((long long)rlt__aes_load64(m + len - 8), (long long)rlt__aes_load64(m));
    } else if (len >= 4) {
        b = _mm_cvtsi64_si128(
            (long long)((uint64_t)rlt__aes_load32(m + len - 4) << 32 | rlt__aes_load32(m)));
    } else if (len > 0) {
        b = _mm_cvtsi32_si128(
            (int)((uint32_t)m[0] | (uint32_t)m[len / 2] << 8 | (uint32_t)m[len - 1] << 16));
    } else {
        b = _mm_setzero_si128();
    }
    x = _mm_aesenc_si128(_mm_xor_si128(x, b), k1);
    x = _mm_aesenc_si128(x, k2);
    x = _mm_aesenc_si128(x, rlt__aes_rk(k, 3));
    x = _mm_aesenc_si128(x, rlt__aes_rk(k, 4));
    return (uint64_t)_mm_cvtsi128_si64(x);
}

/* rlt__aeshash_inline for a key of 8..16 bytes (the common ones; the caller has checked the
 * length): the same function, told the range so that the length's dispatch folds away. */
static inline __attribute__((always_inline)) RLT__AESHASH_TARGET uint64_t
rlt__aeshash_8to16(const rlt__aeskey *k, const void *data, size_t len)
{
    if (len < 8 || len > 16) __builtin_unreachable();
    return rlt__aeshash_inline(k, data, len);
}
#else
#define RLT__AESHASH_X86 0
#endif

#endif
