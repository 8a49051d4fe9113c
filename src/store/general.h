/* The general decision under the shard lock (general.c), for the hot path's callers. */
#ifndef RLT_STORE_GENERAL_H
#define RLT_STORE_GENERAL_H

#include <stddef.h>
#include <stdint.h>

#include "store/store_internal.h"

/* The decision on (id, key) at `now` for cost `cost` into *d, when the hot path does not take
 * it (caller holds sh's lock; id is a known policy).  The decision is taken at the effective
 * instant (never before a drop) and re-expressed relative to `now`, jitter included.  RLT_OK
 * (allowed or denied), RLT_EINVAL (a negative cost, or as rlt_decide), RLT_EFULL, RLT_ENOMEM.
 * Out of line, and reading the drop floor and the policy itself, so that the hot path keeps
 * none of what only this path needs. */
int rlt__decide_locked_general(rlt_store *s, rlt__shard *sh, uint64_t h, int id, const void *key,
                               size_t klen, rlt_ns now, int64_t cost, rlt_decision *d);

/* A decision function for rlt__decide_locked_with: rlt_decide's arguments and returns, and
 * the caller's `arg`. */
typedef int (*rlt__decide_fn)(const rlt_policy *p, void *st, rlt_ns now, int64_t cost,
                              rlt_decision *d, const void *arg);

/* rlt__decide_locked_general with `fn(..., arg)` deciding in place of rlt_decide (a priority
 * class's decision, classes.c): the same entry, insertion, drop floor and jitter around it.
 * Caller holds sh's lock; id is a known policy.  Returns as rlt__decide_locked_general, or
 * what fn returns. */
int rlt__decide_locked_with(rlt_store *s, rlt__shard *sh, uint64_t h, int id, const void *key,
                            size_t klen, rlt_ns now, int64_t cost, rlt__decide_fn fn,
                            const void *arg, rlt_decision *d);

#endif
