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

#endif
