/* Room for new entries (evict.c): the insert that keeps a shard within its caps, evicting
 * when it must.  The sweep is public (rlt_store_sweep). */
#ifndef RLT_STORE_EVICT_H
#define RLT_STORE_EVICT_H

#include <stddef.h>
#include <stdint.h>

#include "store/store_internal.h"

/* Inserts a new entry with a zero state (or with `block` as its out-of-line block when not
 * NULL), making room first by the store's rules (caller holds the shard lock).  Returns RLT_OK
 * and *out, RLT_EFULL, RLT_ENOMEM.  Any slot pointer held before the call is invalid after
 * it. */
int rlt__insert(rlt_store *s, rlt__shard *sh, uint64_t h, int pid, const void *key, size_t klen,
                rlt_ns now, uint8_t *block, rlt__slot **out);

#endif
