/* Status codes to text: one table, generated from RLT_ERRNO_MAP. */
#include "ratelimit/ratelimit.h"

const char *rlt_strerror(int code)
{
    switch (code) {
#define RLT__CASE(name, value, text)                                                               \
    case value:                                                                                    \
        return text;
        RLT_ERRNO_MAP(RLT__CASE)
#undef RLT__CASE
    default:
        return "unknown status";
    }
}
