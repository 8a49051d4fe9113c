/* Policies for the store's other files (policy.c): name checks and the private append a
 * snapshot load uses.  The public calls are rlt_store_set_policy, rlt_store_policy_id,
 * rlt_store_get_policy and rlt_store_name_valid. */
#ifndef RLT_STORE_POLICY_H
#define RLT_STORE_POLICY_H

#include <stdbool.h>
#include <stddef.h>

#include "store/store_internal.h"

/* Whether name[0..len) is a valid policy or tier name: 1..RLT_NAME_MAX printable ASCII bytes
 * without spaces. */
bool rlt__valid_name(const char *name, size_t len);

/* The length of the NUL-terminated `name` into *len: RLT_OK when it is a valid name, else
 * RLT_EINVAL (NULL, too long, a byte outside the printable range). */
int rlt__name_len(const char *name, size_t *len);

/* Appends a policy to a store nobody else can see yet (no locks).  RLT_OK, RLT_EINVAL
 * (invalid or duplicate name, invalid policy), RLT_ENOMEM. */
int rlt__add_policy(rlt_store *s, const char *name, size_t nlen, const rlt_policy *p);

#endif
