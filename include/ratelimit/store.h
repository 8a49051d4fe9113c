/* The keyed store: one limiter state per (policy, key), for millions of keys, from many threads.
 *
 * An rlt_store is an opaque handle.  It holds named policies (and tiers that pick a policy per
 * key), and the state of every key that is not fresh.  Every function is thread-safe unless
 * it says otherwise; decisions on one key are linearizable (no check-then-act race), and a
 * multi-limit check is all-or-nothing.  Time is a parameter: the store never reads a clock
 * and runs no thread of its own; the caller drives idle-key reclamation with rlt_store_sweep.
 * Depends on libc and pthreads only.
 */
#ifndef RATELIMIT_STORE_H
#define RATELIMIT_STORE_H

#include "ratelimit/adaptive.h"
#include "ratelimit/ratelimit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Longest key in bytes.  Keys are binary-safe; the empty key is invalid. */
#define RLT_KEY_MAX 512
/* Longest policy or tier name in bytes. */
#define RLT_NAME_MAX 63
/* The rule for policy and tier names: 1 to RLT_NAME_MAX bytes of 0x21..0x7e.  A caller that
 * must refuse a name before it changes anything (a config reload) checks it with this. */
bool rlt_store_name_valid(const char *name, size_t len);

typedef struct rlt_store rlt_store;

/* Options.  All-zero is a valid default: unbounded, evict-LRU-when-full, random secret. */
typedef struct rlt_store_options {
    size_t max_keys;    /* cap on live keys; 0 = none */
    size_t max_bytes;   /* cap on bytes of keys + states + index; 0 = none */
    bool fail_closed;   /* when full and no key is idle: refuse new keys (RLT_EFULL)
                           instead of evicting the least recently used key */
    bool has_secret;    /* use `secret` for the key hash instead of a random one */
    uint8_t secret[16]; /* SipHash key; random (getrandom) unless has_secret */
    unsigned shards;    /* lock shards, rounded up to a power of two; 0 = 1024, fewer for a
                           capped store (16,384 keys or 1 MiB per shard, down to 64) */
    /* Outstanding reservations (rlt_store_reserve); 0 = 65536. */
    size_t max_reservations;
    /* Outstanding reservations one holder may have (rlt_store_reserve_for); 0 = no bound
     * but max_reservations. */
    size_t max_reservations_per_holder;
} rlt_store_options;

/* What happens to keys' state when a policy is replaced under the same name. */
typedef enum rlt_change {
    RLT_CHANGE_KEEP = 0,  /* the used amount carries over (RLT_CONVERT_KEEP) */
    RLT_CHANGE_RESET = 1, /* every key of the policy starts fresh */
    RLT_CHANGE_SCALE = 2  /* used allowance scales to the new capacity (RLT_CONVERT_SCALE) */
} rlt_change;

/* Creates a store.  `opt` may be NULL for the defaults.  Returns RLT_OK and *out, RLT_ENOMEM,
 * or RLT_EINVAL. */
int rlt_store_open(rlt_store **out, const rlt_store_options *opt);

/* Frees the store and everything in it.  NULL is a no-op.  Not thread-safe with other calls. */
void rlt_store_close(rlt_store *s);

/* Adds or replaces the policy called `name` (1..RLT_NAME_MAX bytes).  Replacing keeps the id;
 * `how` says what happens to existing keys' state (if the algorithm or the state size changes,
 * KEEP and SCALE fall back to RESET; replacing a policy by an equal one, rlt_policy_equal,
 * with KEEP or SCALE changes nothing).  States are converted as of the latest `now` the store
 * has seen; a debt left by a settle carries over (rlt_state_convert).  Sets *id (may be NULL)
 * to the policy's id (>= 0).
 * Returns RLT_OK, RLT_EINVAL (bad name or policy), RLT_ENOMEM. */
int rlt_store_set_policy(rlt_store *s, const char *name, const rlt_policy *p, rlt_change how,
                         int *id);

/* The id of policy `name`, or RLT_ENOENT. */
int rlt_store_policy_id(const rlt_store *s, const char *name);

/* Copies policy `id` into *out.  RLT_OK or RLT_ENOENT. */
int rlt_store_get_policy(const rlt_store *s, int id, rlt_policy *out);

/* Tiers: a tier is a name for a policy id ("free" -> policy 0, "pro" -> policy 1).  A key may
 * be assigned a tier; rlt_store_decide_tier then uses the key's tier, or `default_tier` when it
 * has none.  Assignments are saved in snapshots and bounded like keys: a shard holds at most
 * its share of max_keys of them, counted in its bytes (max_bytes), and a key evicted for room
 * (the least recently used) takes its assignment with it; an idle key that is merely fresh
 * again keeps it.  Returns RLT_OK, RLT_EINVAL, RLT_ENOENT (unknown tier or policy),
 * RLT_EKEYLEN, RLT_EFULL (the bound), RLT_ENOMEM. */
int rlt_store_set_tier(rlt_store *s, const char *tier, int policy_id);
int rlt_store_assign_tier(rlt_store *s, const void *key, size_t klen, const char *tier);
int rlt_store_decide_tier(rlt_store *s, const char *default_tier, const void *key, size_t klen,
                          rlt_ns now, int64_t cost, rlt_decision *d);
/* The policy id rlt_store_decide_tier would decide `key` under (its tier's, else
 * default_tier's), without deciding: for a caller that decides elsewhere (in Redis) but keeps
 * tier assignments here.  Returns RLT_OK and *policy_id, RLT_ENOENT, RLT_EINVAL, RLT_EKEYLEN. */
int rlt_store_tier_policy(rlt_store *s, const char *default_tier, const void *key, size_t klen,
                          int *policy_id);

/* Decides one request for `key` under policy `id`, as rlt_decide does, and keeps the state.
 * Returns RLT_OK (see d->allowed), RLT_ENOENT (no such policy), RLT_EKEYLEN, RLT_EINVAL,
 * RLT_ERANGE as rlt_decide, RLT_EFULL (fail-closed store at its cap, new key refused),
 * RLT_ENOMEM. */
int rlt_store_decide(rlt_store *s, int id, const void *key, size_t klen, rlt_ns now, int64_t cost,
                     rlt_decision *d);

/* One key of a batch: `klen` bytes at `key` (rules as for rlt_store_decide). */
typedef struct rlt_key {
    const void *key;
    size_t klen;
} rlt_key;

/* Decides n requests under policy `id`, item i for keys[i] with cost costs[i] (costs NULL:
 * every cost is 1), at the same `now`, as n calls of rlt_store_decide in index order would:
 * item i's decision goes to out[i] and its status (every return of rlt_store_decide) to
 * status[i] (status may be NULL).  A server hands it the requests of one pipeline read.
 * It hashes the keys and prefetches their table slots ahead of deciding, so one thread
 * overlaps the cache misses that one-at-a-time calls pay in sequence.
 * Atomicity: each item is linearizable exactly like rlt_store_decide (no check-then-act
 * race), and items on the same key take effect in index order; the batch as a whole is NOT
 * atomic: other threads' decisions may interleave between items, and an item that fails
 * does not undo or stop the others.  Use rlt_store_decide_multi for all-or-nothing.
 * out[i] is all-zero when status[i] != RLT_OK.  Thread-safe; keys, costs, out and status
 * must not overlap.  Returns RLT_OK when every item returned RLT_OK (denied items included),
 * else the status of the first item that failed; RLT_EINVAL (nothing decided) for a NULL
 * store, or NULL keys or out with n > 0.  n == 0 returns RLT_OK. */
int rlt_store_decide_batch(rlt_store *s, int id, const rlt_key *keys, size_t n, rlt_ns now,
                           const int64_t *costs, rlt_decision *out, int *status);

/* One limit of a multi-limit check. */
typedef struct rlt_check {
    int policy;      /* policy id */
    const void *key; /* key bytes */
    size_t klen;
    int64_t cost; /* cost for this limit (>= 0) */
} rlt_check;

/* Checks n limits at once, all-or-nothing: consumes from every limit only if every one allows.
 * *combined gets allowed = all allowed, the smallest remaining and limit of the most
 * restrictive limit, the longest retry_after (-1 if any can never fit), the longest
 * reset_after.  *refused (may be NULL) is set to the index of the first limit that refused,
 * or -1.  Concurrency policies are not allowed here (RLT_EINVAL).  Linearizable with every
 * other call.  Returns as rlt_store_decide. */
int rlt_store_decide_multi(rlt_store *s, const rlt_check *checks, size_t n, rlt_ns now,
                           rlt_decision *combined, int *refused);

/* The earliest time a request of `cost` on `key` under `id` would be allowed (rlt_when). */
int rlt_store_when(rlt_store *s, int id, const void *key, size_t klen, rlt_ns now, int64_t cost,
                   rlt_ns *at);

/* Forgets `key` under policy `id` (it becomes fresh).  RLT_OK (also when it was not there),
 * RLT_ENOENT for an unknown policy, RLT_EKEYLEN. */
int rlt_store_reset(rlt_store *s, int id, const void *key, size_t klen);

/* Releases a concurrency lease taken by rlt_store_decide.  As rlt_release. */
int rlt_store_release(rlt_store *s, int id, const void *key, size_t klen, rlt_ns now,
                      int64_t lease);

/* rlt_store_release reporting the request's latency (ns) and outcome (rlt_outcome), which an
 * adaptive concurrency policy learns from (rlt_release_report's contract); latency_ns < 0 is
 * rlt_store_release itself.  RLT_EINVAL or RLT_ERANGE (nothing released) for a bad report. */
int rlt_store_release_report(rlt_store *s, int id, const void *key, size_t klen, rlt_ns now,
                             int64_t lease, rlt_ns latency_ns, int outcome);

/* Examines at most `budget` entries, continuing where the last sweep stopped, and drops those
 * that are fresh at `now`.  A fresh entry is equivalent to no entry at `now` and later, not
 * before: so once the store has dropped an entry at some instant (here, when making room for
 * a new key, or when a release empties a concurrency key), any later call whose `now` is
 * earlier than that instant is decided as of that instant, with retry_after, reset_after and
 * delay still counted from the caller's `now`.  Time the store has seen pass is never
 * un-seen, and no drop changes a decision.  A peek or a denial never drops anything.
 * Returns how many were dropped. */
size_t rlt_store_sweep(rlt_store *s, rlt_ns now, size_t budget);

/* fork() while other threads use the store.  A fork copies the store with whatever locks
 * other threads held at that instant, and those threads do not exist in the child: its next
 * call on the store would wait for good.  So a program that may fork while the store is in use
 * calls rlt_store_fork_prepare(s) just before fork() and, just after, rlt_store_fork_parent(s)
 * in the parent and rlt_store_fork_child(s) in the child: the three handlers of
 * pthread_atfork, in that order (a program with several stores prepares them in one order and
 * releases them in the reverse).  prepare takes every lock of the store in the lock order,
 * waiting for the calls in flight to finish (each takes microseconds; no call waits on
 * anything outside the store while holding a lock); until parent or child, every other call
 * on `s` waits.  parent releases them; child gives the child a store whose locks are all free
 * (re-initialised: the child's only thread is the one that forked) and whose keys and states
 * are the parent's at the fork.  The calling thread must not be inside a call on `s` (it
 * never is outside one).  NULL is a no-op.  Not for a store being closed concurrently. */
void rlt_store_fork_prepare(rlt_store *s);
void rlt_store_fork_parent(rlt_store *s);
void rlt_store_fork_child(rlt_store *s);

typedef struct rlt_store_stats {
    uint64_t keys;           /* live entries */
    uint64_t bytes;          /* bytes held for entries, states and the index */
    uint64_t evicted_idle;   /* fresh entries dropped (on touch or by sweep) */
    uint64_t evicted_forced; /* non-fresh entries evicted because the store was full */
    uint64_t refused_full;   /* new keys refused by a fail-closed store */
    uint64_t allowed;        /* decisions that allowed */
    uint64_t denied;         /* decisions that denied */
} rlt_store_stats;

/* Fills *out with a consistent-enough snapshot of the counters (each counter exact, the set
 * not atomic). */
void rlt_store_stats_get(const rlt_store *s, rlt_store_stats *out);

/* Writes the whole store (policies, tiers, keys and states) to `path` atomically: a temp file
 * beside it, fsync, rename, fsync of the directory.  `now` is the store's clock at the time of
 * saving and `wall_ns` the wall clock (CLOCK_REALTIME) then; both are recorded so that a
 * restore after downtime credits the time that passed.  Returns RLT_OK or RLT_EIO. */
int rlt_store_save(rlt_store *s, const char *path, rlt_ns now, int64_t wall_ns);

/* Loads a snapshot written by rlt_store_save into `s`, replacing its policies, tiers and keys.
 * `now` is the store's clock now and `wall_ns` the wall clock now: every stored instant is
 * moved so that the wall-clock downtime counts as elapsed (a wall clock that went backwards
 * counts as no downtime, minting nothing).  A damaged, truncated or unknown-version file is
 * refused whole with RLT_ECORRUPT and leaves `s` unchanged; RLT_EIO when it cannot be read. */
int rlt_store_load(rlt_store *s, const char *path, rlt_ns now, int64_t wall_ns);

/* ---- Charge after the response: reservations ------------------------------------------ */

/* How long a reservation waits for its settle when the caller gives no timeout. */
#define RLT_RESERVE_DEFAULT_TIMEOUT (300 * RLT_NS_PER_S)

/* Reserves `estimate` (>= 0) on `key` under policy `id` at `now`: decides it as
 * rlt_store_decide does and, when allowed, records a reservation (an estimate of 0 charges
 * nothing, *d says whether a cost-1 request would be allowed, and it is recorded either way:
 * its settle charges the whole real cost, as a debt if the limit is used up) and sets *reservation
 * to its id: 64 unguessable bits (SipHash of a counter under a secret drawn from the store's),
 * never 0. Denied: nothing is charged or recorded and *reservation is 0.  The reservation waits
 * `timeout` ns (0: RLT_RESERVE_DEFAULT_TIMEOUT) for rlt_store_settle; unsettled by then, it
 * expires and stays charged as estimated.  At most max_reservations are outstanding in the
 * store, whatever keys they are on: a full store first drops the expired ones, then refuses
 * with RLT_EFULL, charging nothing.  Reservations are not in snapshots: rlt_store_load ends every
 * outstanding one (charged as estimated), and so do closing the store and replacing the
 * policy with other numbers or resetting its keys (rlt_store_set_policy).
 * Thread-safe and linearizable with every decision on the key (the charge and the record are
 * one step under the key's lock).  Returns RLT_OK (allowed or denied, see d->allowed);
 * RLT_EINVAL for NULL arguments, estimate or timeout < 0, or a policy that cannot settle
 * (rlt_settle_supported: not the leaky bucket nor concurrency); RLT_EFULL (the reservation
 * table, or a fail-closed store at its cap); RLT_ENOENT, RLT_EKEYLEN, RLT_ERANGE, RLT_ENOMEM
 * as rlt_store_decide. */
int rlt_store_reserve(rlt_store *s, int id, const void *key, size_t klen, rlt_ns now,
                      int64_t estimate, rlt_ns timeout, rlt_decision *d, uint64_t *reservation);

/* rlt_store_reserve on behalf of `holder` (a non-zero id the caller gives each client:
 * a connection, a tenant).  Holders are counted in RLT__RESV_BUCKETS buckets by a keyed hash
 * of the id (two holders may share one: each bound then applies to the two together).  A
 * holder's bucket holds at most max_reservations_per_holder outstanding (RLT_EFULL beyond,
 * after its expired ones are dropped).  When the whole table is full and dropping the expired
 * ones frees nothing, the bucket holding the most (when it is not the caller's) loses every
 * outstanding reservation, each ended early and charged as estimated (never minting: as an
 * expiry), and the call is retried once: so one client filling the table cannot lock the
 * others out; at worst it loses its own reservations' refunds.  holder 0 is rlt_store_reserve:
 * counted apart, bounded only by max_reservations, and never ended early for others. */
int rlt_store_reserve_for(rlt_store *s, uint64_t holder, int id, const void *key, size_t klen,
                          rlt_ns now, int64_t estimate, rlt_ns timeout, rlt_decision *d,
                          uint64_t *reservation);

/* Settles reservation `reservation` of `key` under policy `id` at its real cost `real_cost`
 * (>= 0), at `now`, by rlt_settle (its contract: a higher cost is charged as debt past the
 * limit, a lower one refunds only what the reservation still holds, never minting), and ends
 * the reservation: a second settle of it finds nothing.  *d is a peek (cost 0) after it.
 * Thread-safe, linearizable with every decision on the key.  Returns RLT_OK; RLT_ENOENT when
 * no such reservation is outstanding for this key and policy (never made, already settled,
 * expired, or ended by a load: nothing changes); RLT_EINVAL (NULL arguments, real_cost < 0);
 * RLT_ERANGE when the debt would leave int64 (the reservation stays outstanding); RLT_EFULL
 * when a debt needs a new entry in a fail-closed store at its cap (likewise); RLT_EKEYLEN,
 * RLT_ENOMEM. */
int rlt_store_settle(rlt_store *s, int id, const void *key, size_t klen, rlt_ns now,
                     uint64_t reservation, int64_t real_cost, rlt_decision *d);

/* Outstanding reservations at `now` (expired ones not counted).  Locks each shard in turn:
 * exact when nothing reserves or settles meanwhile.  0 for NULL. */
size_t rlt_store_reservations(rlt_store *s, rlt_ns now);

/* Concurrency leases held at `now`: slots acquired (rlt_decide with cost 1 on an
 * RLT_CONCURRENCY policy), neither released nor past their timeout, summed over every key.
 * Counted when called (each shard locked in turn, one slot read per key; 0 at once when no
 * policy is a concurrency limiter): exact when nothing acquires or releases meanwhile, and
 * no cost on any decision.  0 for NULL. */
size_t rlt_store_leases(rlt_store *s, rlt_ns now);

/* Decides one request of priority class c for `key` under policy `id`, as rlt_decide_class
 * does with a reserve of reserve_pct percent (include/ratelimit/adaptive.h), and keeps the
 * state: the class's ceiling is checked and the cost charged under one lock.  Critical, or a
 * reserve of 0, is rlt_store_decide.  Thread-safe as rlt_store_decide.  Returns as
 * rlt_store_decide; RLT_EINVAL also for an unknown class or a reserve outside 0..100. */
int rlt_store_decide_class(rlt_store *s, int id, const void *key, size_t klen, rlt_ns now,
                           int64_t cost, rlt_class c, int reserve_pct, rlt_decision *d);

#ifdef __cplusplus
}
#endif
#endif /* RATELIMIT_STORE_H */
