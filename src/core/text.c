/* Decimal integers as text: the one strict parser and the one formatter every part uses. */
#include "text.h"

#include <string.h>

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

/* "00".."99": two digits per division, half the divisions of the digit-at-a-time loop. */
static const char digit_pairs[201] =
    "00010203040506070809101112131415161718192021222324252627282930"
    "31323334353637383940414243444546474849505152535455565758596061"
    "62636465666768697071727374757677787980818283848586878889909192"
    "93949596979899";

size_t rlt__format_i64(char *buf, int64_t v)
{
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    size_t o = 0;
    if (v < 0) buf[o++] = '-';
    if (u < 10) {
        buf[o++] = (char)('0' + u);
        return o;
    }
    char tmp[20];
    size_t i = sizeof tmp;
    while (u >= 100) {
        size_t r = (size_t)(u % 100);
        u /= 100;
        i -= 2;
        memcpy(tmp + i, digit_pairs + 2 * r, 2);
    }
    if (u >= 10) {
        i -= 2;
        memcpy(tmp + i, digit_pairs + 2 * u, 2);
    } else {
        tmp[--i] = (char)('0' + u);
    }
    memcpy(buf + o, tmp + i, sizeof tmp - i);
    return o + sizeof tmp - i;
}
