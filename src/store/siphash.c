/* SipHash (Aumasson & Bernstein) for the store's key hash: a keyed PRF, so clients that choose
 * keys cannot force collisions without the per-store secret.  The rounds live in siphash.h so
 * the store's hot path inlines them with its key expanded once; these are the out-of-line
 * entry points (snapshots, tests). */
#include "store/siphash.h"

uint64_t rlt__siphash13(const uint8_t key[16], const void *data, size_t len)
{
    rlt__sipkey k;
    rlt__sipkey_init(&k, key);
    return rlt__siphash(&k, data, len, 1, 3);
}

uint64_t rlt__siphash24(const uint8_t key[16], const void *data, size_t len)
{
    rlt__sipkey k;
    rlt__sipkey_init(&k, key);
    return rlt__siphash(&k, data, len, 2, 4);
}
