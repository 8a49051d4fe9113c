/* Tiers for the store's other files (tier.c): the public calls are rlt_store_set_tier,
 * rlt_store_assign_tier, rlt_store_decide_tier and rlt_store_tier_policy. */
#ifndef RLT_STORE_TIER_H
#define RLT_STORE_TIER_H

#include <stddef.h>

#include "store/store_internal.h"

/* Appends a tier to a store nobody else can see yet (no locks; snapshot load).  RLT_OK,
 * RLT_EINVAL (invalid or duplicate name, unknown policy id), RLT_ENOMEM. */
int rlt__add_tier(rlt_store *s, const char *name, size_t nlen, int policy);

#endif
