/* A keyed hash of the store's keys from AES rounds, for CPUs with AES-NI: about fifteen
 * instructions for a key of up to 16 bytes where SipHash-1-3 takes ~100, so that the next
 * call's slot address exists sooner (docs/performance.md, "Where the time goes").
 *
 * Construction (ours; the idea is Go's runtime map hash, aeshashbody, which keys AES rounds
 * with a per-process random seed).  Five 128-bit round keys k0..k4 are expanded once from the
 * store's 16-byte secret with SipHash-2-4 (rlt__aeskey_init).  A message m of n bytes is read
 * as 16-byte blocks b1..bj, j = max(1, ceil(n / 16)): the last one ends at m's end and may
 * overlap the one before it; a message of under 16 bytes is packed into one block from at most
 * two overlapping loads (8..15 bytes: the first and the last 8; 4..7: the first and the last
 * 4; 1..3: bytes 0, n/2 and n-1), so no byte outside m is read.  Given n, the blocks determine
 * m, and n itself is in the starting state:
 *
 *     x = k0 ^ n
 *     every block but the last:   x = E2(x ^ bi),  E2 = AESENC k2 after AESENC k1
 *     the last block:             x = E4(x ^ bj),  E4 = AESENC k1, k2, k3, k4
 *     h = low 64 bits of x
 *
 * Two AES rounds spread every input byte over the whole 128-bit state, so a block's bytes are
 * mixed through the state before the next block is added, and the last block, the common case
 * for keys of up to 16 bytes, gets four rounds with secret keys.
 *
 * What it promises, honestly.  SipHash is a PRF with a security proof against an attacker
 * who sees its outputs; this is not, and four rounds of AES are far from the ten that make it
 * a cipher: with outputs in hand, integral and differential attacks on 4-round AES find keys.
 * The store never shows its hash: an attacker choosing keys sees only decisions and, at best,
 * timing.  To make keys collide in a shard and a probe sequence they must predict where keys
 * land under 640 unknown key bits, i.e. find an input difference that cancels through at
 * least two (for 16-byte keys, four) AES rounds with unknown round keys; the best two-round
 * characteristics hold with probability 2^-30 per pair of keys, and each try costs the
 * attacker a request.  That is the same argument Go (runtime map hash with AES-NI, a random
 * seed per process) and Rust's aHash make for hash tables, and it fits ours: a bucketed table
 * with a random secret per store, linear probing that degrades gracefully, and per-shard key
 * caps.  Where the CPU lacks AES-NI, or a caller wants the PRF, the store uses SipHash-1-3. */
#include "store/aeshash.h"

#include <string.h>

#include "store/siphash.h"

void rlt__aeskey_init(rlt__aeskey *k, const uint8_t secret[16])
{
    for (int i = 0; i < 5; i++) {
        for (int j = 0; j < 2; j++) {
            const uint8_t ctr[8] = {'r', 'l', 't', 'a', 'e', 's', (uint8_t)i, (uint8_t)j};
            k->k[i][j] = rlt__siphash24(secret, ctr, sizeof ctr);
        }
    }
}

#if RLT__AESHASH_X86

bool rlt__aeshash_supported(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("aes") && __builtin_cpu_supports("sse4.1");
}

RLT__AESHASH_TARGET uint64_t rlt__aeshash(const rlt__aeskey *k, const void *data, size_t len)
{
    return rlt__aeshash_inline(k, data, len);
}

#else

bool rlt__aeshash_supported(void)
{
    return false;
}

uint64_t rlt__aeshash(const rlt__aeskey *k, const void *data, size_t len)
{
    (void)k;
    (void)data;
    (void)len;
    return 0; /* never called: rlt__aeshash_supported() is false */
}

#endif
