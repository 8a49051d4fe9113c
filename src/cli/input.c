/* Line parsers of the ratelimit command: request traces ("TIME KEY [COST]") and nginx/Apache
 * combined access logs, with a locale-free date parser.  Pure functions over one line of bytes:
 * no I/O, no allocation, so they are unit-tested and fed any bytes. */
#include "cli/cliutil.h"
#include "core/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* Shown text of a field in a message: at most 40 bytes of it. */
#define SHOW(p, n) (int)((n) > 40 ? 40 : (n)), (p)

int rlt__trace_parse(const char *line, size_t len, int64_t unit_ns, int key_optional,
                     rlt__trace_line *out, char *err, size_t errlen)
{
    if (len && line[len - 1] == '\r') len--;
    const char *f[5];
    size_t fl[5];
    int nf = 0;
    size_t i = 0;
    while (i < len) {
        while (i < len && is_blank(line[i]))
            i++;
        if (i >= len) break;
        size_t start = i;
        while (i < len && !is_blank(line[i]))
            i++;
        if (nf == 0 && line[start] == '#') return 0;
        if (nf == (key_optional ? 3 : 4))
            return errf(err, errlen,
                        key_optional ? "too many fields (expected TIME KEY [COST])"
                                     : "too many fields (expected TIME KEY [COST "
                                       "[reserve:NAME|settle:NAME]])");
        f[nf] = line + start;
        fl[nf] = i - start;
        nf++;
    }
    if (nf == 0) return 0;
    for (size_t k = 0; k < len; k++)
        if (line[k] == '\0') return errf(err, errlen, "NUL byte in the line");
    int rc = rlt__dec_parse(f[0], fl[0], unit_ns, &out->time);
    if (rc != RLT__DEC_OK)
        return errf(err, errlen, "bad TIME '%.*s': %s", SHOW(f[0], fl[0]),
                    rc == RLT__DEC_PRECISION ? "more precise than 1 ns" : rlt__dec_strerror(rc));
    out->key = NULL;
    out->klen = 0;
    out->cost = 1;
    out->op = RLT__TRACE_REQUEST;
    out->name = NULL;
    out->nlen = 0;
    if (nf < 2) {
        if (key_optional) return 1;
        return errf(err, errlen, "missing KEY (expected TIME KEY [COST])");
    }
    if (fl[1] > RLT_KEY_MAX)
        return errf(err, errlen, "KEY is longer than %d bytes", (int)RLT_KEY_MAX);
    out->key = f[1];
    out->klen = fl[1];
    if (nf >= 3) {
        int64_t c;
        rc = rlt__dec_parse(f[2], fl[2], 1, &c);
        if (rc == RLT__DEC_PRECISION)
            return errf(err, errlen, "bad COST '%.*s': not a whole number", SHOW(f[2], fl[2]));
        if (rc != RLT__DEC_OK)
            return errf(err, errlen, "bad COST '%.*s': %s", SHOW(f[2], fl[2]),
                        rlt__dec_strerror(rc));
        if (c < 0) return errf(err, errlen, "bad COST '%.*s': negative", SHOW(f[2], fl[2]));
        out->cost = c;
    }
    if (nf == 4) {
        size_t p = fl[3] > 8 && memcmp(f[3], "reserve:", 8) == 0  ? 8
                   : fl[3] > 7 && memcmp(f[3], "settle:", 7) == 0 ? 7
                                                                  : 0;
        if (p == 0 || fl[3] - p > RLT__TRACE_NAME_MAX)
            return errf(err, errlen,
                        "too many fields (expected TIME KEY [COST [reserve:NAME|settle:NAME]], "
                        "NAME 1..%d bytes)",
                        RLT__TRACE_NAME_MAX);
        out->op = p == 8 ? RLT__TRACE_RESERVE : RLT__TRACE_SETTLE;
        out->name = f[3] + p;
        out->nlen = fl[3] - p;
    }
    return 1;
}

/* ---- Dates ---- */

static int is_leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int days_in_month(int64_t y, int m)
{
    static const int dm[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29 : dm[m - 1];
}

int rlt__civil_to_epoch(int64_t year, int month, int day, int hour, int minute, int second,
                        int offset_min, int64_t *out)
{
    if (year < -1000000 || year > 1000000 || month < 1 || month > 12 || day < 1 ||
        day > days_in_month(year, month) || hour < 0 || hour > 23 || minute < 0 || minute > 59 ||
        second < 0 || second > 60 || offset_min < -24 * 60 || offset_min > 24 * 60)
        return -1;
    int64_t days = rlt__days_from_civil(year, month, day);
    *out = days * 86400 + hour * 3600 + minute * 60 + second - (int64_t)offset_min * 60;
    return 0;
}

/* Reads exactly n digits at s[*i]; -1 if they are not all digits. */
static int64_t digits(const char *s, size_t len, size_t *i, int n)
{
    int64_t v = 0;
    for (int k = 0; k < n; k++, (*i)++) {
        if (*i >= len || s[*i] < '0' || s[*i] > '9') return -1;
        v = v * 10 + (s[*i] - '0');
    }
    return v;
}

static int expect(const char *s, size_t len, size_t *i, char c)
{
    if (*i >= len || s[*i] != c) return -1;
    (*i)++;
    return 0;
}

/* Parses "DD/Mon/YYYY:HH:MM:SS +ZZZZ" (the text between the brackets). */
static int parse_clf_date(const char *s, size_t len, int64_t *out)
{
    static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    size_t i = 0;
    int64_t day = digits(s, len, &i, 2);
    if (day < 0 || expect(s, len, &i, '/') || i + 3 > len) return -1;
    int mon = 0;
    for (int k = 0; k < 12; k++)
        if (memcmp(s + i, months[k], 3) == 0) mon = k + 1;
    if (!mon) return -1;
    i += 3;
    if (expect(s, len, &i, '/')) return -1;
    int64_t year = digits(s, len, &i, 4);
    if (year < 0 || expect(s, len, &i, ':')) return -1;
    int64_t hh = digits(s, len, &i, 2);
    if (hh < 0 || expect(s, len, &i, ':')) return -1;
    int64_t mi = digits(s, len, &i, 2);
    if (mi < 0 || expect(s, len, &i, ':')) return -1;
    int64_t ss = digits(s, len, &i, 2);
    if (ss < 0 || expect(s, len, &i, ' ') || i >= len) return -1;
    int sign = s[i] == '+' ? 1 : s[i] == '-' ? -1 : 0;
    if (!sign) return -1;
    i++;
    int64_t oh = digits(s, len, &i, 2), om = digits(s, len, &i, 2);
    if (oh < 0 || om < 0 || om > 59 || oh > 23 || i != len) return -1;
    return rlt__civil_to_epoch(year, (int)mon, (int)day, (int)hh, (int)mi, (int)ss,
                               sign * (int)(oh * 60 + om), out);
}

/* Skips one blank-delimited field starting at s[*i]; returns its start or NULL at the end. */
static const char *field(const char *s, size_t len, size_t *i, size_t *flen)
{
    while (*i < len && is_blank(s[*i]))
        (*i)++;
    if (*i >= len) return NULL;
    size_t start = *i;
    while (*i < len && !is_blank(s[*i]))
        (*i)++;
    *flen = *i - start;
    return s + start;
}

/* Skips a double-quoted string with backslash escapes starting at s[*i] == '"'. */
static int quoted(const char *s, size_t len, size_t *i)
{
    if (expect(s, len, i, '"')) return -1;
    while (*i < len && s[*i] != '"') {
        if (s[*i] == '\\' && *i + 1 < len) (*i)++;
        (*i)++;
    }
    return expect(s, len, i, '"');
}

/* Records field number nf + 1 (when kept) and counts it. */
static void keep(rlt__access_line *out, const char *p, size_t n)
{
    if (out->nfield < RLT__ACCESS_FIELDS) out->field[out->nfield] = (rlt__field){p, n};
    out->nfield++;
}

int rlt__combined_parse(const char *line, size_t len, rlt__access_line *out, char *err,
                        size_t errlen)
{
    if (len && line[len - 1] == '\r') len--;
    size_t i = 0, fl;
    out->nfield = 0;
    const char *host = field(line, len, &i, &fl);
    if (!host) return 0;
    out->host = host;
    out->hlen = fl;
    keep(out, host, fl);
    if (fl > RLT_KEY_MAX)
        return errf(err, errlen, "client address is longer than %d bytes", (int)RLT_KEY_MAX);
    for (int k = 0; k < 2; k++) {
        const char *f = field(line, len, &i, &fl);
        if (!f) return errf(err, errlen, "expected HOST IDENT USER [DATE] \"REQUEST\" STATUS BYTES");
        keep(out, f, fl);
    }
    while (i < len && is_blank(line[i]))
        i++;
    if (i >= len || line[i] != '[')
        return errf(err, errlen, "expected '[' before the timestamp after HOST IDENT USER");
    const char *close = memchr(line + i, ']', len - i);
    if (!close) return errf(err, errlen, "timestamp has no closing ']'");
    size_t dlen = (size_t)(close - (line + i + 1));
    if (parse_clf_date(line + i + 1, dlen, &out->epoch_s))
        return errf(err, errlen, "bad timestamp '[%.*s]': expected [DD/Mon/YYYY:HH:MM:SS +ZZZZ]",
                    SHOW(line + i + 1, dlen));
    keep(out, line + i + 1, dlen);
    i = (size_t)(close - line) + 1;
    while (i < len && is_blank(line[i]))
        i++;
    size_t q0 = i;
    if (quoted(line, len, &i)) return errf(err, errlen, "bad or unterminated \"REQUEST\" field");
    keep(out, line + q0 + 1, i - q0 - 2);
    const char *st = field(line, len, &i, &fl);
    if (!st || fl != 3 || st[0] < '1' || st[0] > '5' || st[1] < '0' || st[1] > '9' || st[2] < '0' ||
        st[2] > '9')
        return errf(err, errlen, "bad STATUS (expected a 3-digit HTTP status)");
    keep(out, st, fl);
    const char *by = field(line, len, &i, &fl);
    if (!by) return errf(err, errlen, "missing BYTES");
    if (!(fl == 1 && by[0] == '-'))
        for (size_t k = 0; k < fl; k++)
            if (by[k] < '0' || by[k] > '9')
                return errf(err, errlen, "bad BYTES '%.*s'", SHOW(by, fl));
    keep(out, by, fl);
    /* Referer and user agent (combined) are optional (common log format); if present they
     * must be quoted.  Fields appended after them (nginx log_format additions such as
     * $request_time or "$http_x_api_key") may be quoted or bare. */
    for (;;) {
        while (i < len && is_blank(line[i]))
            i++;
        if (i >= len) return 1;
        if (line[i] == '"') {
            q0 = i;
            if (quoted(line, len, &i))
                return errf(err, errlen, "bad or unterminated quoted field after BYTES");
            keep(out, line + q0 + 1, i - q0 - 2);
        } else if (out->nfield < 9) {
            return errf(err, errlen, "bad or unterminated quoted field after BYTES");
        } else {
            const char *f = field(line, len, &i, &fl);
            keep(out, f, fl);
        }
    }
}

int rlt__access_field(const char *name)
{
    static const char *const names[9][2] = {
        {"remote_addr", "remote_addr"}, {"ident", "ident"},        {"user", "remote_user"},
        {"time", "time_local"},         {"request", "request"},    {"status", "status"},
        {"bytes", "body_bytes_sent"},   {"referer", "http_referer"},
        {"user_agent", "http_user_agent"}};
    for (int k = 0; k < 9; k++)
        if (strcmp(name, names[k][0]) == 0 || strcmp(name, names[k][1]) == 0) return k + 1;
    int n = 0;
    for (const char *c = name; *c; c++) {
        if (*c < '0' || *c > '9' || n > RLT__ACCESS_FIELDS) return 0;
        n = n * 10 + (*c - '0');
    }
    return n >= 1 && n <= RLT__ACCESS_FIELDS ? n : 0;
}
