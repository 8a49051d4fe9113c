/* Exact decimal text for the ratelimit command: parsing "9.5" seconds into integer ns without
 * floating point, formatting ns back as trimmed decimals, fixed-point display of rationals, and
 * the small option parser every subcommand uses. */
#include "cli/cliutil.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int is_pow10(int64_t v)
{
    if (v < 1) return 0;
    while (v % 10 == 0)
        v /= 10;
    return v == 1;
}

static int pow10_digits(int64_t scale)
{
    int d = 0;
    while (scale > 1) {
        scale /= 10;
        d++;
    }
    return d;
}

int rlt__dec_parse(const char *s, size_t len, int64_t scale, int64_t *out)
{
    if (!s || !out || !is_pow10(scale)) return RLT__DEC_SYNTAX;
    size_t i = 0;
    int neg = 0;
    if (i < len && s[i] == '-') {
        neg = 1;
        i++;
    }
    size_t int_start = i;
    while (i < len && s[i] >= '0' && s[i] <= '9')
        i++;
    size_t int_end = i;
    if (int_end == int_start) return RLT__DEC_SYNTAX;
    size_t frac_start = i, frac_end = i;
    if (i < len && s[i] == '.') {
        frac_start = ++i;
        while (i < len && s[i] >= '0' && s[i] <= '9')
            i++;
        frac_end = i;
        if (frac_end == frac_start) return RLT__DEC_SYNTAX;
    }
    if (i != len) return RLT__DEC_SYNTAX;

    /* Magnitude as uint64 so that a syntax problem later in the text is still reported as
     * such; range is checked at the end. */
    int places = pow10_digits(scale);
    int range = 0;
    int64_t v = 0;
    for (size_t j = int_start; j < int_end; j++) {
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, s[j] - '0', &v))
            range = 1;
    }
    if (!range && __builtin_mul_overflow(v, scale, &v)) range = 1;
    int64_t frac = 0, place = scale;
    for (size_t j = frac_start; j < frac_end; j++) {
        int digit = s[j] - '0';
        if ((int)(j - frac_start) < places) {
            place /= 10;
            frac += digit * place;
        } else if (digit != 0) {
            return RLT__DEC_PRECISION;
        }
    }
    if (!range && __builtin_add_overflow(v, frac, &v)) range = 1;
    if (range) return RLT__DEC_RANGE;
    *out = neg ? -v : v;
    return RLT__DEC_OK;
}

const char *rlt__dec_strerror(int code)
{
    switch (code) {
    case RLT__DEC_OK:
        return "ok";
    case RLT__DEC_SYNTAX:
        return "not a decimal number";
    case RLT__DEC_PRECISION:
        return "more precise than the unit allows";
    case RLT__DEC_RANGE:
        return "out of range";
    default:
        return "bad number";
    }
}

size_t rlt__dec_format(char *buf, int64_t value, int64_t scale)
{
    char tmp[RLT__DEC_BUF];
    size_t n = 0;
    uint64_t mag = value < 0 ? (uint64_t)0 - (uint64_t)value : (uint64_t)value;
    uint64_t sc = (uint64_t)(scale < 1 ? 1 : scale);
    uint64_t ip = mag / sc, fp = mag % sc;
    if (value < 0) buf[n++] = '-';
    size_t t = 0;
    do {
        tmp[t++] = (char)('0' + ip % 10);
        ip /= 10;
    } while (ip);
    while (t)
        buf[n++] = tmp[--t];
    if (fp) {
        int places = pow10_digits((int64_t)sc);
        buf[n++] = '.';
        for (int k = places - 1; k >= 0; k--) {
            tmp[k] = (char)('0' + fp % 10);
            fp /= 10;
        }
        int last = places - 1;
        while (last > 0 && tmp[last] == '0')
            last--;
        for (int k = 0; k <= last; k++)
            buf[n++] = tmp[k];
    }
    buf[n] = '\0';
    return n;
}

static __int128 floor_div128(__int128 a, __int128 b)
{
    __int128 q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

size_t rlt__frac_format(char *buf, size_t cap, __int128 num, __int128 den, int places, int mode,
                        int trim)
{
    if (!buf || cap == 0 || den <= 0 || places < 0 || places > 18) return 0;
    __int128 p10 = 1;
    for (int k = 0; k < places; k++)
        p10 *= 10;
    __int128 scaled = mode == RLT__ROUND ? floor_div128(2 * num * p10 + den, 2 * den)
                                         : floor_div128(num * p10, den);
    char tmp[64];
    size_t t = 0, n = 0;
    int neg = scaled < 0;
    unsigned __int128 mag = neg ? (unsigned __int128)(-scaled) : (unsigned __int128)scaled;
    for (int k = 0; k < places; k++) {
        tmp[t++] = (char)('0' + (int)(mag % 10));
        mag /= 10;
    }
    do {
        tmp[t++] = (char)('0' + (int)(mag % 10));
        mag /= 10;
    } while (mag);
    /* tmp holds the digits reversed: places fraction digits first. */
    size_t lo = 0;
    if (trim)
        while (lo < (size_t)places && tmp[lo] == '0')
            lo++;
    size_t need = (size_t)neg + (t - (size_t)places) + ((size_t)places > lo ? 1 + places - lo : 0);
    if (need + 1 > cap) return 0;
    if (neg) buf[n++] = '-';
    for (size_t k = t; k > (size_t)places; k--)
        buf[n++] = tmp[k - 1];
    if ((size_t)places > lo) {
        buf[n++] = '.';
        for (size_t k = (size_t)places; k > lo; k--)
            buf[n++] = tmp[k - 1];
    }
    buf[n] = '\0';
    return n;
}

int64_t rlt__dec_unit_ns(const char *name)
{
    if (!name) return 0;
    if (strcmp(name, "s") == 0) return RLT_NS_PER_S;
    if (strcmp(name, "ms") == 0) return RLT_NS_PER_MS;
    if (strcmp(name, "us") == 0) return RLT_NS_PER_US;
    if (strcmp(name, "ns") == 0) return 1;
    return 0;
}

int rlt__opt(int argc, char **argv, int *i, const char *cmd, const char *name, const char **val)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0) return 0;
    if (a[n] == '=') {
        *val = a + n + 1;
        return 1;
    }
    if (a[n] != '\0') return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "ratelimit %s: option %s needs a value\n", cmd, name);
        return -1;
    }
    *val = argv[++*i];
    return 1;
}

int rlt__opt_int(const char *cmd, const char *name, const char *val, int64_t min, int64_t max,
                 int64_t *out)
{
    return rlt__opt_dec(cmd, name, val, 1, min, max, out);
}

int rlt__opt_dec(const char *cmd, const char *name, const char *val, int64_t scale, int64_t min,
                 int64_t max, int64_t *out)
{
    int64_t v;
    int rc = rlt__dec_parse(val, strlen(val), scale, &v);
    if (rc == RLT__DEC_PRECISION && scale == 1) {
        fprintf(stderr, "ratelimit %s: %s '%s': not a whole number\n", cmd, name, val);
        return -1;
    }
    if (rc != RLT__DEC_OK) {
        fprintf(stderr, "ratelimit %s: %s '%s': %s\n", cmd, name, val, rlt__dec_strerror(rc));
        return -1;
    }
    if (v < min || v > max) {
        char lo[RLT__DEC_BUF], hi[RLT__DEC_BUF];
        rlt__dec_format(lo, min, scale);
        rlt__dec_format(hi, max, scale);
        fprintf(stderr, "ratelimit %s: %s '%s': must be between %s and %s\n", cmd, name, val, lo,
                hi);
        return -1;
    }
    *out = v;
    return 0;
}

int rlt__opt_time(const char *cmd, const char *name, const char *v, rlt_ns min, rlt_ns max,
                  rlt_ns *out)
{
    size_t n = strlen(v), d = n;
    while (d > 0 && v[d - 1] >= 'a' && v[d - 1] <= 'z')
        d--;
    int64_t unit = RLT_NS_PER_S;
    if (d < n) {
        unit = strcmp(v + d, "m") == 0 ? 60 * RLT_NS_PER_S : rlt__dec_unit_ns(v + d);
        if (unit == 0) {
            rlt__usage_error(cmd, "%s '%s': unknown unit '%s' (ns us ms s m)", name, v, v + d);
            return -1;
        }
    }
    int64_t x;
    int rc = rlt__dec_parse(v, d, unit, &x);
    if (rc != RLT__DEC_OK) {
        rlt__usage_error(cmd, "%s '%s': %s", name, v, rlt__dec_strerror(rc));
        return -1;
    }
    if (x < min || x > max) {
        char a[RLT__DEC_BUF], b[RLT__DEC_BUF];
        rlt__dec_format(a, min, RLT_NS_PER_S);
        rlt__dec_format(b, max, RLT_NS_PER_S);
        rlt__usage_error(cmd, "%s '%s': must be between %s s and %s s", name, v, a, b);
        return -1;
    }
    *out = x;
    return 0;
}

int rlt__usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ratelimit %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see ratelimit %s --help)\n", cmd);
    va_end(ap);
    return 2;
}

int rlt__opt_policy(const char *cmd, const char *val, rlt_policy *p)
{
    char err[256];
    err[0] = '\0';
    int rc = rlt_policy_parse(p, val, strlen(val), err, sizeof err);
    if (rc != RLT_OK) {
        fprintf(stderr, "ratelimit %s: --policy '%s': %s\n", cmd, val,
                err[0] ? err : rlt_strerror(rc));
        return -1;
    }
    return 0;
}
