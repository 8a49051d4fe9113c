/* The inline-policy cache (inline.c): policy texts that clients send in requests
 * (`RL.CHECK k gcra:100/1m`, CL.THROTTLE's numbers) interned as store policies, in a bounded,
 * evictable table.
 *
 * Slot k is the store policy named "i#k".  A slot holds one canonical text, its owner (a hash
 * of the tenant's key prefix; 0 for the admin) and its horizon: how long after its last use no
 * key of it can hold any state (every state is fresh again by then).  When a new text finds no
 * free slot, the least recently used slot idle past its horizon is reused: its store policy is
 * replaced with RLT_CHANGE_RESET, which mints nothing since each of its keys was fresh anyway.
 *
 * When no slot is idle, the table is not full for anyone: like a full store, which evicts its
 * least recently used key, it evicts its least recently used policy together with its keys
 * (they start fresh, as an evicted key does), provided that policy was not used in the last
 * RLT__INLINE_GRACE ns (a request resolved in this turn is still decided under the policy it
 * resolved).  So one client's thousands of distinct texts cannot make the table refuse another
 * client's text: they can only push out the least recently used policies' state, which the
 * same client can already do to the least recently used keys by sending keys.  A fail-closed
 * store (`fail_closed`: a full store refuses new keys rather than evict) refuses here too.
 * With a Redis backend an eviction drops nothing: Redis keys carry the policy's numbers.
 * Each tenant may hold at most its quota of slots (max / (tenants + 1)); at its quota it
 * reuses or evicts its own, so one tenant cannot push out the others; the admin may use every
 * slot.
 *
 * A replacement rewrites the store's table under all its locks, so replacements are budgeted
 * (budget.h: GCRA, a rate per second and a burst): RLT__INLINE_ALL_* for all clients together,
 * and within it RLT__INLINE_CLIENT_* per client (the connection its requests come on),
 * RLT__INLINE_ADDR_* per peer address (all its connections: one that reconnects for each new
 * text gets no more) and RLT__INLINE_TENANT_* per tenant (all its connections, wherever from).
 * A client that keeps sending new texts spends its own budgets and leaves the rest of the
 * global one to the others: it cannot starve their new texts.  A text over any of them is refused;
 * nothing is charged.  Finding a text already interned, or a free slot, costs no budget: the
 * table's size bounds those.
 *
 * Thread-safety: every call but rlt__inline_touch holds the caller's lock. */
#ifndef RLT_SERVER_REQUEST_INLINE_H
#define RLT_SERVER_REQUEST_INLINE_H

#include "ratelimit/ratelimit.h"
#include "ratelimit/store.h"
#include "server/backend/registry.h"
#include "server/request/budget.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Budgets of replacements: per second, and at once.  The global rate keeps store rewrites
 * rare; a connection's rate is a fifth of it and an address's or a tenant's half, so no one
 * takes it all; the bursts let a client bring in a handful of new texts at once, and let an
 * address (every local client is 127.0.0.1) hold 20 more than one flooding connection takes. */
#define RLT__INLINE_ALL_PER_S 10
#define RLT__INLINE_ALL_BURST 30
#define RLT__INLINE_CLIENT_PER_S 2
#define RLT__INLINE_CLIENT_BURST 10
#define RLT__INLINE_ADDR_PER_S 5
#define RLT__INLINE_ADDR_BURST 30
#define RLT__INLINE_TENANT_PER_S 5
#define RLT__INLINE_TENANT_BURST 10
/* Budgets kept per connection, per address and per tenant.  A budget is refilling for at most
 * burst / rate (6 s) after a charge, and at most ALL_BURST + 6 x ALL_PER_S (90) replacements
 * happen in 6 s, so 128 entries never run out (budget.h). */
#define RLT__INLINE_BUDGETS 128
/* A policy used this recently is never evicted with live keys (well over one event-loop turn). */
#define RLT__INLINE_GRACE RLT_NS_PER_S

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
    rlt__budgets all, clients, addrs, tenants; /* replacements' budgets (`all`: one entry) */
} rlt__inline_table;

/* Who asks for a new text: the tenant (a hash of its key prefix; 0 for the admin, who has no
 * tenant budget), the client (its connection) and its address; 0: none, no such budget. */
typedef struct rlt__inline_who {
    uint64_t owner;
    uint64_t client, addr;
} rlt__inline_who;

/* Allocates a table of `max` slots and takes back the "i#k" policies a snapshot restored into
 * the registry (their owner unknown: the admin's; last used at `now`).  Returns RLT_OK or
 * RLT_ENOMEM. */
int rlt__inline_open(rlt__inline_table *t, size_t max, rlt__registry *reg, rlt_ns now);
void rlt__inline_close(rlt__inline_table *t);

/* The slot of canonical text `canon` of policy `run` (the policy the store runs) for `who`
 * at `now`: found, or a free slot, or an idle one reused, or (`evict_live`: the store is not
 * fail-closed) the least recently used one past its grace evicted with its keys; a reuse or
 * an eviction within the budgets (the global one, who's connection's, address's, tenant's), which
 * it then charges.  Returns RLT_OK with *slot and *id; RLT_ENOMEM with a message when every
 * candidate was used within the grace (or, without `evict_live`, is in use), or a budget is
 * spent ("... change too fast"); another RLT_* code from the store. */
int rlt__inline_intern(rlt__inline_table *t, rlt__registry *reg, const rlt_policy *run,
                       const char *canon, rlt__inline_who who, size_t quota, bool evict_live,
                       rlt_ns now, size_t *slot, int *id, char *err, size_t errlen);

/* Notes that slot `slot` was used at `now` (lock-free). */
void rlt__inline_touch(rlt__inline_table *t, size_t slot, rlt_ns now);

#endif
