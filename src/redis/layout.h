/* The Redis layout of ratelimit's state, shared by libratelimit_redis (the Lua scripts' client)
 * and the Redis module (src/redismodule), so both name and bound keys by one rule: a key written
 * by one is read by the other.  Pure code: no hiredis, no module API.  Not installed. */
#ifndef RLT_REDIS_LAYOUT_H
#define RLT_REDIS_LAYOUT_H

#include "ratelimit/ratelimit.h"

/* Every number the scripts handle stays at or below 2^50 (a few are added together, and sums
 * must stay below 2^53); instants may reach 2^52 microseconds (year 2112). */
#define RLT__LIM (INT64_C(1) << 50)
#define RLT__NOW_MAX (INT64_C(1) << 52)
/* Longest Redis key name: prefix (<= 64) + {tag} (<= 512 + 2) + the escaped key (<= 3 x 512)
 * + the policy tail. */
#define RLT__KEYNAME_MAX (64 + 2 + 512 + 3 * 512 + 192)
#define RLT__SLOTS 16384

/* A policy at microsecond resolution, as the scripts take it: the rate N/W reduced to
 * unit/scale (one unit of cost is `unit` scaled microseconds, one microsecond is `scale`). */
typedef struct rlt__rpol {
    int algo;
    int64_t N, W, B, Q, D, scale, unit; /* W in microseconds */
    /* Calendar windows (fixed_window:N/1mo): "months,std_off,dst_off,has_dst,start kind,day,
     * month,week,secs,end kind,day,month,week,secs" for the scripts (lib/05_calendar.lua);
     * "" for every other policy.  W is then the nominal length, which the scripts ignore. */
    char cal[128];
    /* The penalty box (block=, src/core/block.c) in microseconds: the first block, the factor,
     * the longest block; blk 0 = none.  Its state is a companion key (rlt__block_tail). */
    int64_t blk, bfac, bmax;
} rlt__rpol;

/* Converts `p` to microseconds with the scripts' bounds.  Returns RLT_OK; RLT_EINVAL for a NULL
 * or uninitialised policy, or a period or block= duration that is not a whole number of
 * microseconds; RLT_ERANGE when a number would pass the 2^50 bound (rlt_redis_policy_check's
 * contract).  A calendar window's rule goes into o->cal.  A penalty box goes into blk..bmax. */
int rlt__rpol_from(const rlt_policy *p, rlt__rpol *o);

/* Writes the Redis key name of `key` under `p` into buf[0..cap):
 *     prefix + "{" + tag + "}" + key with '%' and ':' as %25 and %3A + ":algo:N:W:B:Q:D"
 * where tag is Redis Cluster's hash tag of the key (its own non-empty {tag}, else all of it),
 * so the name shares the key's slot, and the policy's numbers (W in ns) end it, so a changed
 * policy starts from fresh state (a calendar window adds ":calK:ZONE:HASH", K its months, HASH
 * the FNV-1a of its zone rule's integers).  Injective: two distinct (key, policy) pairs never share
 * a name ("x" and "{x}" share a slot, not a state).  Returns the length; RLT_EKEYLEN for an empty
 * key or one longer than 512 bytes; RLT_ENOSPC when it does not fit. */
int rlt__key_name(const char *prefix, size_t plen, const rlt_policy *p, const void *key,
                  size_t klen, char *buf, size_t cap);

/* The policy part of a key name, ":algo:N:W:B:Q:D", into tail[0..RLT__KEYTAIL_MAX) with a NUL;
 * returns its length.  rlt__key_name = rlt__key_name_tail(..., this tail, ...). */
#define RLT__KEYTAIL_MAX 192
int rlt__key_tail(const rlt_policy *p, char tail[RLT__KEYTAIL_MAX]);

/* The penalty box's companion key (block=): the policy's key name followed by
 * ":blk:BLOCK:FACTOR:MAX" (ns), into tail[0..RLT__BLKTAIL_MAX) with a NUL; returns its length
 * (0 and "" for a policy without block=).  The name keeps the key's hash tag, so both keys
 * share a slot; no algorithm's name ends so (their tails have 6 or 9 fields, the 7th "calK"). The
 * value is "until:level": the latest block's end in us (exclusive) and its level; no key =
 * never blocked. */
#define RLT__BLKTAIL_MAX 80
int rlt__block_tail(const rlt_policy *p, char tail[RLT__BLKTAIL_MAX]);

/* rlt__key_name with the policy's tail already formatted (a caller that caches it). */
int rlt__key_name_tail(const char *prefix, size_t plen, const char *tail, size_t tl,
                       const void *key, size_t klen, char *buf, size_t cap);

/* Redis Cluster hash slot of a key (CRC16/XMODEM of the hash tag, mod 16384). */
unsigned rlt__key_slot(const char *key, size_t len);

#endif
