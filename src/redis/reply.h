/* The decoding of libratelimit_redis's replies into decisions (reply.c).  Not installed.  Each
 * function returns RLT_OK, or RLT_EBACKEND for a reply of another shape, or numbers the
 * algorithm could not have produced (a denial that fits, an allowance that never fits). */
#ifndef RLT_REDIS_REPLY_H
#define RLT_REDIS_REPLY_H

#include "internal.h"

/* One limit's decision as the multi-limit script replies it: {allowed, limit, remaining, ru,
 * rn, su, sn, du, dn, lease} (each duration as us and the ns below). */
int rlt__parse_decision(const redisReply *e, rlt_decision *d);

/* The reply of the script a one-limit decision of l ran (call.c, build_names): the algorithm's
 * own compact reply, or the multi-limit script's for a policy with block=. */
int rlt__parse_single(const rlt__limit *l, const redisReply *e, rlt_decision *d);

/* The module's RL.DECIDE reply of n limits into dec[0..n): an array of one string per limit,
 * "allowed limit remaining retry_after reset_after delay lease" (ns). */
int rlt__parse_module(const redisReply *e, size_t n, rlt_decision *dec);

#endif
