/* The single call's decision for the store's other files (decide.c): the public entry point
 * is rlt_store_decide (include/ratelimit/store.h). */
#ifndef RLT_STORE_DECIDE_H
#define RLT_STORE_DECIDE_H

#include <stddef.h>
#include <stdint.h>

#include "store/store_internal.h"

/* The decision under a held shard lock (sh is the shard of h, the key's hash), as
 * rlt_store_decide makes it: RLT_OK (allowed or denied), RLT_ENOENT (unknown policy id),
 * RLT_EINVAL (negative cost), RLT_EFULL, RLT_ENOMEM.  For reserve.c. */
int rlt__decide_in_shard(rlt_store *s, rlt__shard *sh, uint64_t h, int id, const void *key,
                         size_t klen, rlt_ns now, int64_t cost, rlt_decision *d);

#endif
