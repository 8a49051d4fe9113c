/* Tier assignments of one shard's keys (rlt_store_assign_tier): key -> tier index, chained,
 * never evicted but with their key (a forced eviction).  Caller holds the shard's lock. */
#ifndef RLT_STORE_ASSIGN_H
#define RLT_STORE_ASSIGN_H

#include <stddef.h>
#include <stdint.h>

#include "store/store_internal.h"

/* The assignment of the key of hash h, or NULL. */
const rlt__assign *rlt__assign_find(const rlt__shard *sh, uint64_t h, const void *key, size_t klen);

/* Assigns the key of hash h to tier index `tier` (a new assignment or a change).  RLT_OK,
 * RLT_EFULL (the shard's share of max_keys or max_bytes), RLT_ENOMEM. */
int rlt__assign_set(const rlt_store *s, rlt__shard *sh, uint64_t h, const void *key, size_t klen,
                    uint32_t tier);

/* Drops key's assignment, if any (its key left the store for room: forced eviction). */
void rlt__assign_drop(const rlt_store *s, rlt__shard *sh, const void *key, size_t klen);

/* Frees every assignment of the shard (closing, or a table swapped out). */
void rlt__assign_free(rlt__shard *sh);

#endif
