/* Decimal integers as text: the one strict parser and the one formatter every part uses. */
#include "text.h"

bool rlt__parse_i64(const char *p, size_t len, int64_t *out)
{
    if (p == NULL || len == 0 || len > RLT__I64_TEXT_MAX) return false;
    size_t i = 0;
    bool neg = p[0] == '-';
    if (neg && ++i == len) return false;
    if (p[i] == '0' && (len - i > 1 || neg)) return false; /* leading zero, or "-0" */
    /* Accumulate negatively so that INT64_MIN parses without overflow. */
    int64_t v = 0;
    for (; i < len; i++) {
        if (p[i] < '0' || p[i] > '9') return false;
        int64_t digit = p[i] - '0';
        if (v < (INT64_MIN + digit) / 10) return false;
        v = v * 10 - digit;
    }
    if (!neg) {
        if (v == INT64_MIN) return false;
        v = -v;
    }
    *out = v;
    return true;
}
