/* envoyproxy/ratelimit's time units (units.c): the protobuf enum RateLimitResponse.RateLimit.Unit,
 * the names its config files use (rate_limit.unit: SECOND ... YEAR) and the window each one
 * stands for.  The config reads them; the envoy decision and its renderers report them.
 * Windows are fixed, of 1 s, 60 s, 3600 s, 86400 s, 7 x 86400 s (WEEK), 30 x 86400 s (MONTH)
 * and 365 x 86400 s (YEAR). */
#ifndef RLT_SERVER_CONFIG_UNITS_H
#define RLT_SERVER_CONFIG_UNITS_H

#include "ratelimit/ratelimit.h"

#include <stddef.h>

/* The protobuf enum values of RateLimitResponse.RateLimit.Unit. */
enum {
    RLT__UNIT_UNKNOWN = 0,
    RLT__UNIT_SECOND = 1,
    RLT__UNIT_MINUTE = 2,
    RLT__UNIT_HOUR = 3,
    RLT__UNIT_DAY = 4,
    RLT__UNIT_MONTH = 5,
    RLT__UNIT_YEAR = 6,
    RLT__UNIT_WEEK = 7,
};

/* The unit's name ("MINUTE"), or NULL for an unknown unit.  Thread-safe (constant table). */
const char *rlt__unit_name(int unit);
/* The unit's length in ns (envoyproxy/ratelimit's divider), or 0 for an unknown unit. */
rlt_ns rlt__unit_ns(int unit);
/* The unit named name[0..len) (any case, "minute" or "MINUTE"), or RLT__UNIT_UNKNOWN. */
int rlt__unit_from_name(const char *name, size_t len);
/* The unit whose length is `period` ns, or RLT__UNIT_UNKNOWN. */
int rlt__unit_of_period(rlt_ns period);

#endif
