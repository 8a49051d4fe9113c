/* The store's lifecycle for the part's other files and its tests (store.c): opening with a
 * chosen key hash, an empty twin for a snapshot load, and the swap that installs it.  The
 * public calls are in include/ratelimit/store.h. */
#ifndef RLT_STORE_STORE_H
#define RLT_STORE_STORE_H

#include "store/store_internal.h"

/* Which keyed hash a store opened by rlt__store_open_hash uses for its keys. */
enum { RLT__HASH_AUTO = 0, RLT__HASH_SIP = 1, RLT__HASH_AES = 2 };

/* rlt_store_open with the key hash chosen: RLT__HASH_AUTO (what rlt_store_open does: AES
 * where the CPU has AES-NI, else SipHash-1-3), RLT__HASH_SIP (the fallback, forced: for tests)
 * or RLT__HASH_AES (RLT_EINVAL where the CPU lacks it).  Returns as rlt_store_open. */
int rlt__store_open_hash(rlt_store **out, const rlt_store_options *opt, int hash);

/* A new, empty store with the same shards, caps, mode, secret and key hash as `s`, for building
 * a table off to the side (snapshot load).  RLT_OK or RLT_ENOMEM. */
int rlt__store_new_like(const rlt_store *s, rlt_store **out);

/* Exchanges the contents (policies, tiers, tables) of `s` with the private store `t`, as of
 * `now`; outstanding reservations of `s` end.  Takes every lock of `s`. */
void rlt__store_swap(rlt_store *s, rlt_store *t, rlt_ns now);

#endif
