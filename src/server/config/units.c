/* envoyproxy/ratelimit's time units: one table for their names and lengths. */
#include "server/config/units.h"

#include <string.h>
#include <strings.h>

static const struct {
    const char *name;
    int64_t seconds;
} units[] = {
    [RLT__UNIT_UNKNOWN] = {"UNKNOWN", 0},     [RLT__UNIT_SECOND] = {"SECOND", 1},
    [RLT__UNIT_MINUTE] = {"MINUTE", 60},      [RLT__UNIT_HOUR] = {"HOUR", 3600},
    [RLT__UNIT_DAY] = {"DAY", 86400},         [RLT__UNIT_MONTH] = {"MONTH", 30 * 86400},
    [RLT__UNIT_YEAR] = {"YEAR", 365 * 86400}, [RLT__UNIT_WEEK] = {"WEEK", 7 * 86400},
};
#define NUNITS (sizeof units / sizeof units[0])

const char *rlt__unit_name(int unit)
{
    return unit > 0 && (size_t)unit < NUNITS ? units[unit].name : NULL;
}

rlt_ns rlt__unit_ns(int unit)
{
    return unit > 0 && (size_t)unit < NUNITS ? units[unit].seconds * RLT_NS_PER_S : 0;
}

int rlt__unit_from_name(const char *name, size_t len)
{
    for (size_t i = 1; i < NUNITS; i++)
        if (len == strlen(units[i].name) && strncasecmp(name, units[i].name, len) == 0)
            return (int)i;
    return RLT__UNIT_UNKNOWN;
}

int rlt__unit_of_period(rlt_ns period)
{
    for (size_t i = 1; i < NUNITS; i++)
        if (period == units[i].seconds * RLT_NS_PER_S) return (int)i;
    return RLT__UNIT_UNKNOWN;
}
