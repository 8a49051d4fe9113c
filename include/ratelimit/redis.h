/* libratelimit_redis: the algorithms of ratelimit.h run inside Redis, so many servers share one
 * limit.  Link `ratelimit_redis` (it pulls in `ratelimit` and hiredis).
 *
 * The contract of this header, in one paragraph:
 *   - Every decision is one Lua script run on the Redis server holding the key: one round trip,
 *     atomic (no read-then-write from the client), and it answers exactly what rlt_decide
 *     answers for the same trace of requests (see docs/distributed.md for the time unit).
 *     A node that has the module ratelimit.so loaded (docs/redis-module.md) runs the same
 *     decision natively instead (RL.DECIDE), on the same keys and values: detected once per
 *     connection, or forced with rlt_redis_options.engine.
 *   - Time comes from the Redis server (TIME, microseconds) unless the call passes
 *     RLT_REDIS_CALLER_TIME, so skewed application clocks cannot mint allowance.
 *   - Every key written carries an expiry: the time until its state is fresh again, rounded
 *     up to the millisecond.  No key is immortal; no expiry resets a limiter early.
 *   - Failure is a decision: when Redis cannot answer within the timeout, the call returns
 *     RLT_EBACKEND or RLT_ETIMEDOUT *and* fills the decision from the call's fail mode
 *     (RLT_REDIS_FAIL_OPEN or fail-closed).  A circuit breaker answers at once while Redis is
 *     down; calls that may have been applied are never replayed.
 *   - Redis's own failovers are followed without a new handle: a Cluster's slot map is read
 *     again periodically and soon after a node fails (a promoted replica takes over its
 *     slots), and with Redis Sentinel the master is asked of the sentinels and followed on
 *     +switch-master.  State not yet replicated when a master fails is lost: a key may admit
 *     again what it was charged since its replica's last write (docs/distributed.md).
 *   - An rlt_redis handle owns its connections.  It is NOT thread-safe: use one handle per
 *     thread (each holds one connection per Redis node, and with Sentinel one subscribed
 *     connection to a sentinel).
 *
 * Status codes are ratelimit.h's: RLT_OK, RLT_EINVAL, RLT_ERANGE, RLT_EKEYLEN, RLT_ENOMEM,
 * RLT_EBACKEND (Redis unreachable, refused, or answered with an error), RLT_ETIMEDOUT.
 */
#ifndef RATELIMIT_REDIS_H
#define RATELIMIT_REDIS_H

#include "ratelimit/ratelimit.h"
#include "ratelimit/usage.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Longest key in bytes (the same bound as the keyed store's RLT_KEY_MAX). */
#define RLT_REDIS_KEY_MAX 512

/* Largest integer every number inside the Lua scripts stays below (Lua numbers are doubles). */
#define RLT_REDIS_NUM_MAX (INT64_C(1) << 53)

typedef struct rlt_redis rlt_redis;

/* How decisions run on a node. */
typedef enum rlt_redis_engine {
    RLT_REDIS_ENGINE_AUTO = 0,    /* option: the module where loaded, else the scripts; as a
                                     node's state: not detected yet (never connected) */
    RLT_REDIS_ENGINE_SCRIPTS = 1, /* the Lua scripts (EVALSHA) */
    RLT_REDIS_ENGINE_MODULE = 2   /* the module's RL.DECIDE (a node without it then answers
                                     every call with an error: RLT_EBACKEND) */
} rlt_redis_engine;

/* Options.  All-zero (with `servers` NULL) is a valid default: one server at
 * 127.0.0.1:6379, 50 ms timeout, breaker after 3 failures, no lease. */
/* The deadline of one Redis call when rlt_redis_options.timeout is 0 (the daemon's default too). */
#define RLT_REDIS_DEFAULT_TIMEOUT (50 * RLT_NS_PER_MS)

typedef struct rlt_redis_options {
    const char *servers;       /* "host:port[,host:port...]": the server, or the seed nodes of a
                                  cluster; NULL = "127.0.0.1:6379".  Copied by open. */
    bool cluster;              /* route keys by hash slot across a Redis Cluster */
    const char *password;      /* sent with AUTH after every connect; NULL = none.  Copied. */
    const char *prefix;        /* prefix of every Redis key; NULL = "rlt:".  At most 64 bytes,
                                  no '{' or '}'.  Copied. */
    rlt_ns timeout;            /* deadline of one call: connect, send and reply; 0 = 50 ms */
    unsigned breaker_failures; /* consecutive failures of a node that open its breaker; 0 = 3 */
    rlt_ns backoff_min;  /* first time an open breaker waits before a trial call; 0 = 100 ms */
    rlt_ns backoff_max;  /* the wait doubles after each failed trial up to this; 0 = 5 s */
    int64_t lease_units; /* local lease size: units of allowance taken from Redis at once
                            for calls with RLT_REDIS_LEASE; 0 = leases off */
    rlt_ns lease_ttl;    /* a lease is spent within this time of its grant, then dropped;
                            0 = 100 ms */
    size_t lease_keys;   /* most keys holding a lease at once; 0 = 1024 */
    rlt_ns ttl_floor;    /* least expiry given to a key written (0..2^40 ns), for replays
                            with RLT_REDIS_CALLER_TIME whose clock runs slower than real
                            time; 0 = none: the expiry is exactly reset_after rounded up */

    /* Where decisions run.  AUTO (0): the module ratelimit.so on each node that has it
     * (detected once per connection with COMMAND INFO), the scripts elsewhere.  SCRIPTS or
     * MODULE: force one.  Calls with RLT_REDIS_CALLER_TIME use the module only when it was
     * loaded with `testing yes`. */
    rlt_redis_engine engine;

    /* Redis Sentinel (docs/distributed.md): with `sentinels` set ("host:port[,host:port...]",
     * at most 8; copied), `servers` is ignored and not parsed, `cluster` must be false, and the
     * master of `master_name` (required then, 1..128 bytes, no spaces; copied) is asked of the
     * sentinels (SENTINEL get-master-addr-by-name), followed on `+switch-master` (one
     * subscription per handle) and asked again after a failure of the master or every
     * `refresh_interval`.  Until a sentinel has answered, calls take their fail mode. */
    const char *sentinels;
    const char *master_name;
    /* Cluster: the slot map is read again at least this often (and at most every 100 ms
     * after a node failed, CLUSTERDOWN or a MOVED); Sentinel: the master is asked again this
     * often.  0 = 1 s. */
    rlt_ns refresh_interval;
} rlt_redis_options;

/* Per-call flags. */
enum {
    RLT_REDIS_FAIL_OPEN = 1,   /* without Redis: allow (default: deny, fail-closed) */
    RLT_REDIS_CALLER_TIME = 2, /* use the `now` argument (>= 0, floored to a microsecond)
                                  instead of the Redis server's clock: tests and replays */
    RLT_REDIS_LEASE = 4        /* answer from a local lease when one is held (see
                                  rlt_redis_options.lease_units and docs/distributed.md) */
};

/* Checks that `p` can run inside Redis: its period (and every derived number) must be a whole
 * number of microseconds and the scripts' arithmetic must stay below RLT_REDIS_NUM_MAX.
 * Returns RLT_OK; RLT_EINVAL for NULL, an uninitialised policy, or a period or block= duration
 * that is not a whole number of microseconds; RLT_ERANGE when a number would reach 2^53 (e.g.
 * burst x period too large, or block='s max or factor above 2^50); RLT_EINVAL also for an
 * adaptive concurrency policy (adaptive=: it learns in the keyed store only).  block= (the penalty box)
 * runs as in the core, its state in a companion key in the limit's slot (docs/distributed.md).
 * Every other function here returns the same codes for such a policy.  jitter= is supported: every
 * decision function here returns retry_after as rlt_jitter of the key at the caller's `now`
 * (whatever the clock flag), as the keyed store does. */
int rlt_redis_policy_check(const rlt_policy *p);

/* Creates a handle.  `opt` may be NULL for the defaults.  Does not need Redis (or a sentinel)
 * to be up: the first calls connect (bounded by the timeout) and the breaker handles an absent
 * server.  Returns RLT_OK and *out; RLT_EINVAL (NULL out, bad server list, bad prefix,
 * negative durations or lease; with `sentinels`: a bad sentinel list, more than 8, no or a bad
 * master_name, or `cluster` set); RLT_ENOMEM. */
int rlt_redis_open(rlt_redis **out, const rlt_redis_options *opt);

/* Closes every connection and frees the handle.  NULL is a no-op. */
void rlt_redis_close(rlt_redis *r);

/* Decides one request of `cost` for `key` (1..RLT_REDIS_KEY_MAX bytes) under `p`, as rlt_decide
 * does, inside Redis, and charges it there if allowed.  `flags`: RLT_REDIS_FAIL_OPEN,
 * RLT_REDIS_CALLER_TIME (then `now` is used, else it is ignored), RLT_REDIS_LEASE.
 * Returns RLT_OK with *d the decision (allowed or denied); RLT_EINVAL, RLT_ERANGE, RLT_EKEYLEN
 * for bad arguments (then *d is zeroed); RLT_EBACKEND or RLT_ETIMEDOUT when Redis could not
 * answer, and then *d is the fail-mode decision: allowed = (flags & RLT_REDIS_FAIL_OPEN),
 * limit as the policy's, remaining 0, retry_after (when denied) the time until the next trial
 * of the breaker, at least 1 ms.  A timed-out call may or may not have been applied in Redis;
 * it is never sent twice.  `now` and `cost` come in rlt_decide's order. */
int rlt_redis_decide(rlt_redis *r, const rlt_policy *p, unsigned flags, const void *key,
                     size_t klen, rlt_ns now, int64_t cost, rlt_decision *d);

/* One limit of a multi-limit check or a batch. */
typedef struct rlt_redis_check {
    const rlt_policy *policy;
    const void *key;
    size_t klen;
    int64_t cost; /* >= 0 */
} rlt_redis_check;

/* Checks n (1..64) limits at once in one script, all-or-nothing, as rlt_store_decide_multi:
 * consumes from every limit only if every one allows.  *combined gets allowed = all allowed,
 * the smallest remaining and the limit of the most restrictive limit, the longest retry_after
 * (-1 if any can never fit), the longest reset_after; *refused (may be NULL) the index of the
 * first limit that refused, or -1.  On a cluster every key must hash to the same slot: give
 * the keys a common hash tag, e.g. "{user42}:api" and "{user42}:upload" (RLT_EINVAL if not).
 * Concurrency policies are refused (RLT_EINVAL); RLT_REDIS_LEASE is ignored.  Returns as
 * rlt_redis_decide (on failure *combined is the fail-mode decision, *refused = -1). */
int rlt_redis_decide_multi(rlt_redis *r, const rlt_redis_check *checks, size_t n, unsigned flags,
                           rlt_ns now, rlt_decision *combined, int *refused);

/* Decides n independent requests, pipelined: all are sent, then all replies read, so n
 * decisions cost about one round trip per node.  out[i] and status[i] are what
 * rlt_redis_decide would give for checks[i] (status[i] is RLT_OK or an error, with out[i] then
 * the fail-mode decision).  RLT_REDIS_LEASE is ignored.  Returns RLT_OK when every status is
 * RLT_OK, else the first failing status.  n may be 0. */
int rlt_redis_decide_batch(rlt_redis *r, const rlt_redis_check *checks, size_t n, unsigned flags,
                           rlt_ns now, rlt_decision *out, int *status);

/* Releases concurrency lease `lease` (from rlt_redis_decide's d->lease) of `key` under the
 * concurrency policy `p`.  Returns RLT_OK; RLT_ENOENT when the lease is unknown, already
 * released or reclaimed after the policy's timeout; RLT_EINVAL for a non-concurrency policy;
 * RLT_EBACKEND, RLT_ETIMEDOUT (the lease then expires by itself after the timeout). */
int rlt_redis_release(rlt_redis *r, const rlt_policy *p, unsigned flags, const void *key,
                      size_t klen, rlt_ns now, int64_t lease);

/* Forgets `key` under `p` (deletes its Redis key and any local lease): it becomes fresh.
 * Returns RLT_OK (also when it was not there), RLT_EINVAL, RLT_EKEYLEN, RLT_EBACKEND,
 * RLT_ETIMEDOUT. */
int rlt_redis_reset(rlt_redis *r, const rlt_policy *p, const void *key, size_t klen);

/* Writes the Redis key that holds `key`'s state under `p` into buf[0..cap) (binary, no NUL
 * needed) and returns its length, or RLT_ENOSPC / RLT_EINVAL / RLT_EKEYLEN.  For tests and
 * operators (e.g. PTTL on it). */
int rlt_redis_key_name(const rlt_redis *r, const rlt_policy *p, const void *key, size_t klen,
                       char *buf, size_t cap);

/* Counters of one handle since open.  Every decision made without Redis is counted. */
typedef struct rlt_redis_stats {
    uint64_t decisions;       /* decisions answered (with or without Redis) */
    uint64_t round_trips;     /* command batches sent to Redis (scripts, loads, redirects) */
    uint64_t fail_open;       /* decisions allowed without Redis (fail-open) */
    uint64_t fail_closed;     /* decisions denied without Redis (fail-closed) */
    uint64_t timeouts;        /* calls that hit the deadline */
    uint64_t errors;          /* connection failures and error replies */
    uint64_t breaker_opened;  /* times a node's breaker opened */
    uint64_t short_circuited; /* calls answered at once because a breaker was open */
    uint64_t connects;        /* successful (re)connections */
    uint64_t script_loads;    /* SCRIPT LOADs after NOSCRIPT (restart, flush, new node) */
    uint64_t redirects;       /* cluster MOVED and ASK replies followed */
    uint64_t lease_local;     /* decisions answered from a local lease, without Redis */
    uint64_t lease_grants;    /* leases taken from Redis */
    unsigned nodes;           /* Redis nodes known */
    unsigned nodes_open;      /* nodes whose breaker is open now */

    /* Decision calls that ran on the module (RL.DECIDE) rather than a script. */
    uint64_t module_calls;

    uint64_t tryagain;        /* cluster TRYAGAIN replies retried (after a short backoff) */
    uint64_t topology_reads;  /* slot maps read (CLUSTER SLOTS) or masters asked of sentinels */
    uint64_t master_switches; /* Sentinel: times the master's address changed */
} rlt_redis_stats;

/* Local lease units the handle holds now (RLT_REDIS_LEASE: granted by Redis, not yet spent,
 * within lease_ttl of their grant), summed over its keys; 0 without leases.  `now` is read as
 * rlt_redis_decide does: the caller's clock with RLT_REDIS_CALLER_TIME in flags, else the
 * library's monotonic clock.  Unlike every other call it may run on another thread than the
 * handle's while the handle is open: each key's units and expiry are read atomically (the sum
 * is not one instant's).  0 for NULL. */
int64_t rlt_redis_lease_units(const rlt_redis *r, unsigned flags, rlt_ns now);

/* Fills *out with the handle's counters. */
void rlt_redis_stats_get(const rlt_redis *r, rlt_redis_stats *out);

/* One Redis node as the handle sees it. */
typedef struct rlt_redis_node_info {
    char addr[272];          /* "host:port", NUL-terminated */
    rlt_redis_engine engine; /* SCRIPTS or MODULE: the path its decisions take (as detected on
                                the current or last connection, or forced); AUTO: not known
                                yet, no connection so far */
    bool caller_time;        /* its module accepts RLT_REDIS_CALLER_TIME (`testing yes`) */
    bool connected;          /* a connection is open now */
    bool breaker_open;       /* its circuit breaker is open */
} rlt_redis_node_info;

/* Fills *out for node i of the handle (0 <= i < rlt_redis_stats.nodes; a cluster's nodes appear
 * as the slot table names them), e.g. for a daemon's INFO.  Does no I/O; NOT thread-safe with
 * calls on the same handle.  Returns RLT_OK; RLT_EINVAL for NULL arguments; RLT_ENOENT when i is
 * not a node. */
int rlt_redis_node_info_get(const rlt_redis *r, unsigned i, rlt_redis_node_info *out);

/* ---- Charge after the response: reserve and settle in Redis ---------------------------- */

/* How long a reservation waits for its settle when the caller gives no timeout (the keyed
 * store's RLT_RESERVE_DEFAULT_TIMEOUT). */
#define RLT_REDIS_RESERVE_DEFAULT_TIMEOUT (300 * RLT_NS_PER_S)

/* Reserves `estimate` (>= 0) on `key` under `p` inside Redis, as rlt_store_reserve does
 * locally: one script decides it as rlt_redis_decide would (an estimate of 0 charges nothing
 * and is recorded whatever the decision, as locally) and, when allowed, charges it and creates the
 * reservation, atomically.  The reservation is its own Redis key beside the limit's (the
 * limit's name + ":r:" + the id in hex: the same hash tag, so the same Cluster slot) holding
 * reserved_at (the Redis clock, or the caller's with RLT_REDIS_CALLER_TIME) and the estimate,
 * with an expiry of `timeout` ns (0: RLT_REDIS_RESERVE_DEFAULT_TIMEOUT) rounded up to the ms:
 * unsettled by then it is gone and stays charged as estimated.  *reservation gets its id, 64
 * bits from getrandom(2), never 0, when allowed; 0 when denied or on failure.  Reserves and
 * settles always run the script, also on nodes with the module loaded (the same values).
 * `flags`: RLT_REDIS_FAIL_OPEN, RLT_REDIS_CALLER_TIME (RLT_REDIS_LEASE is ignored).
 * Returns RLT_OK (allowed or denied); RLT_EINVAL for NULL arguments, estimate or timeout < 0,
 * or a policy that cannot settle (rlt_settle_supported); RLT_ERANGE, RLT_EKEYLEN as
 * rlt_redis_decide; RLT_EBACKEND or RLT_ETIMEDOUT when Redis could not answer (or no random
 * id could be drawn), with *d the fail-mode decision as rlt_redis_decide's and no
 * reservation (a fail-open allow has nothing to settle). */
int rlt_redis_reserve(rlt_redis *r, const rlt_policy *p, unsigned flags, const void *key,
                      size_t klen, rlt_ns now, int64_t estimate, rlt_ns timeout, rlt_decision *d,
                      uint64_t *reservation);

/* Settles reservation `reservation` of `key` under `p` at `real_cost` (>= 0), in one
 * script that reads and deletes the reservation's key (at most once: a second settle finds
 * nothing) and applies rlt_settle's maths to the limit's state at `now` (the Redis clock, or
 * the caller's with RLT_REDIS_CALLER_TIME): a higher cost is charged past the limit as a
 * debt, a lower one refunds only what the reservation still holds; never mints.  The debt
 * saturates, as rlt_settle's does, where the scripts' numbers stay exact (a window's count and
 * a token bucket's used amount at 2^52, a GCRA's tat at 2^53 - 2^50 us; docs/distributed.md):
 * a real_cost up to INT64_MAX is charged as far as that holds and the key keeps denying.
 * *d is a peek (cost 0) after it.  Returns RLT_OK; RLT_ENOENT when no such reservation is
 * outstanding (never made, already settled, expired: nothing changes); RLT_EINVAL for NULL
 * arguments, real_cost < 0 or a policy that cannot settle; RLT_ERANGE, RLT_EKEYLEN as
 * rlt_redis_decide (a policy or a caller's `now` out of the scripts' range); RLT_EBACKEND or
 * RLT_ETIMEDOUT when Redis could not answer: *d is zeroed but for its limit and nothing changes
 * locally (a timed-out settle may or may not have been applied; it is never sent twice, and a retry
 * of it finds RLT_ENOENT if it was). */
int rlt_redis_settle(rlt_redis *r, const rlt_policy *p, unsigned flags, const void *key,
                     size_t klen, rlt_ns now, uint64_t reservation, int64_t real_cost,
                     rlt_decision *d);

/* ---- One reservation over several limits in Redis (include/ratelimit/budget.h's, shared) -- */

/* One limit of a multi-limit reservation: a policy that can settle, a key, a weighting. */
typedef struct rlt_redis_limit {
    const rlt_policy *policy;
    const void *key;
    size_t klen;
    rlt_weights weights;
} rlt_redis_limit;

/* rlt_store_reserve_limits's decision in Redis, in one script (lua/budget.lua): n (1..16)
 * limits charged the cost of `estimate` under each weighting, all or nothing, and when allowed
 * one reservation recorded beside the first limit's key (its name + ":m:" + the id in hex: the
 * same hash tag) with every limit's key, what it holds and its weighting, expiring after
 * `timeout` ns (0: RLT_REDIS_RESERVE_DEFAULT_TIMEOUT): unsettled, every limit stays charged
 * as it stands.  On a cluster every key must hash to one slot (a common hash tag).  *combined,
 * each (may be NULL: n entries) and *refused (may be NULL) as rlt_store_reserve_limits's;
 * *reservation the id (getrandom(2), never 0) when allowed, else 0.  The holder bound of the
 * local store does not apply (Redis's memory and the timeout bound the reservations).
 * `flags` as rlt_redis_reserve's.  Returns RLT_OK (allowed or denied); RLT_EINVAL (NULL
 * arguments, n out of range, a limit twice, keys in several slots, a policy that cannot settle,
 * a usage name no limit weighs, a negative count, timeout < 0); RLT_ERANGE (a cost past int64),
 * RLT_EKEYLEN; RLT_EBACKEND or RLT_ETIMEDOUT when Redis could not answer, with *combined the
 * fail-mode decision and no reservation. */
int rlt_redis_reserve_limits(rlt_redis *r, const rlt_redis_limit *limits, size_t n,
                             unsigned flags, const rlt_usage *estimate, rlt_ns now,
                             rlt_ns timeout, rlt_decision *combined, rlt_decision *each,
                             int *refused, uint64_t *reservation);

/* rlt_store_settle_limits's settle in Redis, in one script: the reservation's limits are
 * keys[0..n) (policy, key; cost ignored) in the reservation's order; each is charged its cost
 * of `usage` (its weighting without the constant term) out of what it holds, the excess as a
 * debt; final: the rest refunded by rlt_settle's rule and the reservation ends.  *combined,
 * each, charged as rlt_store_settle_limits's.  Returns RLT_OK; RLT_ENOENT (no such reservation
 * for these keys: never made, settled, expired, another key set); RLT_EINVAL (NULL arguments,
 * a usage name no limit weighs, a negative count); RLT_ERANGE (a cost past 2^53 - 1, where the
 * script's numbers stop being exact: nothing changes); RLT_EKEYLEN; RLT_EBACKEND or
 * RLT_ETIMEDOUT when Redis could not answer (a timed-out settle may have been applied: a retry
 * finds RLT_ENOENT if so). */
int rlt_redis_settle_limits(rlt_redis *r, uint64_t reservation, const rlt_redis_check *keys,
                            size_t n, unsigned flags, const rlt_usage *usage, bool final,
                            rlt_ns now, rlt_decision *combined, rlt_decision *each,
                            int64_t *charged);

#ifdef __cplusplus
}
#endif
#endif /* RATELIMIT_REDIS_H */
