/* Helpers shared by the store tests: a seeded RNG, a store with a fixed secret, policy text. */
#ifndef RLT_STORE_TEST_UTIL_H
#define RLT_STORE_TEST_UTIL_H

#include <stdint.h>
#include <string.h>

#include "ratelimit/store.h"
#include "store/store.h"
#include "store/table.h"

static inline uint64_t tu_rand(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static inline uint64_t tu_below(uint64_t *x, uint64_t n)
{
    return tu_rand(x) % n;
}

/* A store with a fixed secret so runs are reproducible.  Built with TU_FORCE_SIPHASH (the
 * *_siphash test executables), it hashes keys with the SipHash-1-3 fallback instead of the AES
 * hash a CPU with AES-NI gets; with TU_FORCE_BIG (the *_big ones), it takes the paths of a
 * store of millions of keys (the prefetch, the probe over the fingerprints) at any size. */
static inline rlt_store *tu_store(size_t max_keys, bool fail_closed, unsigned shards)
{
    rlt_store_options o;
    memset(&o, 0, sizeof o);
    o.max_keys = max_keys;
    o.fail_closed = fail_closed;
    o.shards = shards;
    o.has_secret = true;
    for (int i = 0; i < 16; i++)
        o.secret[i] = (uint8_t)(i * 7 + 1);
    rlt_store *s = NULL;
#ifdef TU_FORCE_SIPHASH
    if (rlt__store_open_hash(&s, &o, RLT__HASH_SIP) != RLT_OK) return NULL;
#else
    if (rlt_store_open(&s, &o) != RLT_OK) return NULL;
#endif
#ifdef TU_FORCE_BIG
    rlt__store_force_big(s);
#endif
    return s;
}

static inline rlt_policy tu_policy(const char *text)
{
    rlt_policy p;
    memset(&p, 0, sizeof p);
    rlt_policy_parse(&p, text, strlen(text), NULL, 0);
    return p;
}

/* Adds policy `text` as `name`; returns its id or a negative status. */
static inline int tu_add(rlt_store *s, const char *name, const char *text)
{
    rlt_policy p;
    int rc = rlt_policy_parse(&p, text, strlen(text), NULL, 0);
    if (rc) return rc;
    int id = -1;
    rc = rlt_store_set_policy(s, name, &p, RLT_CHANGE_RESET, &id);
    return rc ? rc : id;
}

#endif
