/* The inline-policy cache (inline.c): policy texts that clients send in requests
 * (`RL.CHECK k gcra:100/1m`, CL.THROTTLE's numbers) interned as store policies, in a bounded,
 * evictable table.
 *
 * Slot k is the store policy named "i#k".  A slot holds one canonical text, its owner (a hash
 * of the tenant's key prefix; 0 for the admin) and its horizon: how long after its last use no
 * key of it can hold any state (every state is fresh again by then).  When a new text finds no
 * free slot, the least recently used slot idle past its horizon is reused: its store policy is
 * replaced with RLT_CHANGE_RESET, which mints nothing since each of its keys was fresh anyway.
 * Each tenant may hold at most its quota of slots (max / (tenants + 1)), so one tenant cannot
 * fill the table for the others; the admin may use every slot.  Evictions rewrite the store's
 * table under all its locks, so at most RLT__INLINE_EVICT_PER_S happen per second.
 *
 * Thread-safety: every call but rlt__inline_touch holds the caller's lock. */
#ifndef RLT_SERVER_REQUEST_INLINE_H
#define RLT_SERVER_REQUEST_INLINE_H

#include "ratelimit/ratelimit.h"
#include "ratelimit/store.h"
#include "server/backend/registry.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RLT__INLINE_EVICT_PER_S 10

typedef struct rlt__inline_slot {
    char *text; /* canonical policy text; NULL: free */
    int id;     /* its store policy id; -1 before the slot is first used */
    uint64_t owner;
    rlt_ns horizon;
    rlt_ns last; /* last use (relaxed atomic: touched without the lock) */
} rlt__inline_slot;

typedef struct rlt__inline_table {
    rlt__inline_slot *slot;
    size_t max;
    uint64_t epoch; /* bumped at every eviction: per-thread caches of older epochs are stale */
    int64_t evict_second;
    unsigned evictions;
} rlt__inline_table;

/* Allocates a table of `max` slots and takes back the "i#k" policies a snapshot restored into
 * the registry (their owner unknown: the admin's; last used at `now`).  Returns RLT_OK or
 * RLT_ENOMEM. */
int rlt__inline_open(rlt__inline_table *t, size_t max, rlt__registry *reg, rlt_ns now);
void rlt__inline_close(rlt__inline_table *t);

/* The slot of canonical text `canon` of policy `run` (the policy the store runs) for `owner`
 * at `now`: found, or a free slot, or an idle one reused.  Returns RLT_OK with *slot and
 * *id; RLT_ENOMEM with a message when the owner's quota or the table is full of policies in
 * use, or evictions are too frequent; another RLT_* code from the store. */
int rlt__inline_intern(rlt__inline_table *t, rlt__registry *reg, const rlt_policy *run,
                       const char *canon, uint64_t owner, size_t quota, rlt_ns now, size_t *slot,
                       int *id, char *err, size_t errlen);

/* Notes that slot `slot` was used at `now` (lock-free). */
void rlt__inline_touch(rlt__inline_table *t, size_t slot, rlt_ns now);

#endif
