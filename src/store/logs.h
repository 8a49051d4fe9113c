/* Sliding logs that pay for what they hold (logs.c): an entry of a sliding_log policy without
 * a penalty box keeps a compact log (src/core/sliding_log.h) of S slots, S between its live
 * entries and four times them (at least 1), not N: 24 bytes of state for a key with one entry
 * where the full log takes 16 + 8N.  An out-of-line block is the key (padded to 8) and then
 * the state, so a log can change size without moving its key's offset.  The states other
 * files hand around (multi-limit copies, snapshots, settles on a new key) stay in the full
 * layout, P->ssz bytes; rlt__state_get / _put convert at the entry.  Every function here
 * wants the shard's lock held. */
#ifndef RLT_STORE_LOGS_H
#define RLT_STORE_LOGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store_internal.h"
#include "store/table.h"

/* A new out-of-line block for a key of klen bytes (not copied in) under policy P, its state
 * zero (a compact log: empty, `slots` slots, at least 1); NULL when out of memory. */
uint8_t *rlt__ool_new(const rlt__pol *P, size_t klen, int64_t slots);

/* Entry e's state in the full layout, into `full` (P->ssz bytes). */
void rlt__state_get(const rlt_store *s, const rlt__slot *e, void *full);

/* Grows entry e's compact log to hold the entries of `full` (the full layout): RLT_OK (nothing
 * to do for other policies), or RLT_ENOMEM with e unchanged.  After it, rlt__state_put of
 * that state cannot fail. */
int rlt__state_reserve(rlt_store *s, rlt__shard *sh, rlt__slot *e, const void *full);

/* Makes entry e's state `full` (the full layout; all its entries are kept), growing a compact
 * log's block if it must.  RLT_OK, or RLT_ENOMEM with e unchanged. */
int rlt__state_put(rlt_store *s, rlt__shard *sh, rlt__slot *e, const void *full);

/* Before a decision of `cost` at `now` on entry e (settle_x > 0: before a settle charging
 * settle_x more): grows a compact log that would record more than it has room for.  RLT_OK
 * (nothing to do for other policies), or RLT_ENOMEM with e unchanged. */
int rlt__log_fit(rlt_store *s, rlt__shard *sh, rlt__slot *e, rlt_ns now, int64_t cost,
                 int64_t settle_x);

/* After a call that may have dropped entries from e's log: shrinks a compact log whose live
 * entries fill a quarter of its slots or less to twice them (nothing when out of memory). */
void rlt__log_trim(rlt_store *s, rlt__shard *sh, rlt__slot *e);

#endif
