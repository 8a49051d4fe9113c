/* RESP request parser (multibulk and inline) and reply encoders; no I/O, no state. */
#include "server/resp/resp.h"

#include "core/text.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A count or length line holds at most "-9223372036854775808": anything longer is garbage,
 * refused at once instead of waiting for a CRLF that a hostile client never sends. */
#define NUM_LINE_MAX 20

/* What read_num_line found. */
typedef enum num_line { NUM_OK, NUM_PARTIAL, NUM_BAD } num_line;

/* Reads "<prefix><int>\r\n" starting at buf[pos] (buf[pos] is the prefix).  Returns NUM_OK
 * with *val and *next set, NUM_PARTIAL when more bytes are needed, NUM_BAD on malformed
 * input. */
static num_line read_num_line(const char *buf, size_t len, size_t pos, int64_t *val, size_t *next)
{
    size_t start = pos + 1;
    /* Fast path: a short positive number without a leading zero, directly followed by CRLF
     * (every length a client sends).  Anything else takes the general path below. */
    if (start + 2 < len && buf[start] >= '1' && buf[start] <= '9') {
        int64_t v = buf[start] - '0';
        size_t i = start + 1, stop = start + 18; /* 18 digits cannot overflow */
        while (i < len && i < stop && buf[i] >= '0' && buf[i] <= '9')
            v = v * 10 + (buf[i++] - '0');
        if (i + 1 < len && buf[i] == '\r' && buf[i + 1] == '\n') {
            *val = v;
            *next = i + 2;
            return NUM_OK;
        }
    }
    size_t limit = start + NUM_LINE_MAX + 1; /* digits, then the '\r' */
    size_t end = len < limit ? len : limit;
    size_t cr = start;
    while (cr < end && buf[cr] != '\r')
        cr++;
    if (cr == end) return len >= limit ? NUM_BAD : NUM_PARTIAL;
    if (cr + 1 >= len) return NUM_PARTIAL;
    if (buf[cr + 1] != '\n') return NUM_BAD;
    if (!rlt__parse_i64(buf + start, cr - start, val)) return NUM_BAD;
    *next = cr + 2;
    return NUM_OK;
}

static ssize_t parse_multibulk(char *buf, size_t len, const rlt__resp_limits *lim,
                               rlt__resp_arg *argv, size_t *argc, const char **err)
{
    int64_t n;
    size_t pos;
    num_line r = read_num_line(buf, len, 0, &n, &pos);
    if (r == NUM_PARTIAL) return RLT__RESP_PARTIAL;
    if (r == NUM_BAD || n < -1) {
        *err = "Protocol error: invalid multibulk length";
        return RLT__RESP_ERROR;
    }
    if (n > 0 && (uint64_t)n > lim->max_args) {
        *err = "Protocol error: too many arguments";
        return RLT__RESP_ERROR;
    }
    size_t count = n > 0 ? (size_t)n : 0;
    for (size_t i = 0; i < count; i++) {
        if (pos >= len) return RLT__RESP_PARTIAL;
        if (buf[pos] != '$') {
            *err = "Protocol error: expected '$' before a bulk string";
            return RLT__RESP_ERROR;
        }
        int64_t blen;
        size_t data;
        r = read_num_line(buf, len, pos, &blen, &data);
        if (r == NUM_PARTIAL) return RLT__RESP_PARTIAL;
        if (r == NUM_BAD || blen < 0 || (uint64_t)blen > lim->max_bulk) {
            *err = "Protocol error: invalid bulk length";
            return RLT__RESP_ERROR;
        }
        size_t b = (size_t)blen;
        if (len - data < b + 2) return RLT__RESP_PARTIAL;
        if (buf[data + b] != '\r' || buf[data + b + 1] != '\n') {
            *err = "Protocol error: expected CRLF after a bulk string";
            return RLT__RESP_ERROR;
        }
        argv[i].ptr = buf + data;
        argv[i].len = b;
        pos = data + b + 2;
    }
    *argc = count;
    assert(pos > 0 && pos <= len);
    return (ssize_t)pos;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

static int hex_val(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return NUM_BAD;
}

/* Splits line[0..n) into arguments the way redis-cli and Redis's inline parser do: words
 * separated by blanks, "double quotes" with \n \r \t \b \a \\ \" \xHH escapes, 'single
 * quotes' with \' only.  Unescapes in place (the output never outruns the input).  Returns
 * RLT_OK, or RLT_EPARSE with *err. */
static int split_inline(char *line, size_t n, const rlt__resp_limits *lim, rlt__resp_arg *argv,
                        size_t *argc, const char **err)
{
    size_t r = 0, count = 0;
    for (;;) {
        while (r < n && is_space(line[r]))
            r++;
        if (r == n) break;
        if (count == lim->max_args) {
            *err = "Protocol error: too many arguments";
            return RLT_EPARSE;
        }
        size_t w = r, start = r;
        bool dq = false, sq = false;
        for (;;) {
            if (dq) {
                if (r == n) goto unbalanced;
                if (line[r] == '\\' && r + 3 < n && line[r + 1] == 'x' &&
                    hex_val(line[r + 2]) >= 0 && hex_val(line[r + 3]) >= 0) {
                    line[w++] = (char)(hex_val(line[r + 2]) * 16 + hex_val(line[r + 3]));
                    r += 4;
                } else if (line[r] == '\\' && r + 1 < n) {
                    char c = line[r + 1];
                    switch (c) {
                    case 'n':
                        c = '\n';
                        break;
                    case 'r':
                        c = '\r';
                        break;
                    case 't':
                        c = '\t';
                        break;
                    case 'b':
                        c = '\b';
                        break;
                    case 'a':
                        c = '\a';
                        break;
                    default:
                        break;
                    }
                    line[w++] = c;
                    r += 2;
                } else if (line[r] == '"') {
                    /* A closing quote must end the word. */
                    if (r + 1 < n && !is_space(line[r + 1])) goto unbalanced;
                    r++;
                    break;
                } else {
                    line[w++] = line[r++];
                }
            } else if (sq) {
                if (r == n) goto unbalanced;
                if (line[r] == '\\' && r + 1 < n && line[r + 1] == '\'') {
                    line[w++] = '\'';
                    r += 2;
                } else if (line[r] == '\'') {
                    if (r + 1 < n && !is_space(line[r + 1])) goto unbalanced;
                    r++;
                    break;
                } else {
                    line[w++] = line[r++];
                }
            } else {
                if (r == n || is_space(line[r])) break;
                if (line[r] == '"') {
                    dq = true;
                    r++;
                } else if (line[r] == '\'') {
                    sq = true;
                    r++;
                } else {
                    line[w++] = line[r++];
                }
            }
        }
        assert(w <= r);
        argv[count].ptr = line + start;
        argv[count].len = w - start;
        count++;
    }
    *argc = count;
    return RLT_OK;
unbalanced:
    *err = "Protocol error: unbalanced quotes in request";
    return RLT_EPARSE;
}

static ssize_t parse_inline(char *buf, size_t len, const rlt__resp_limits *lim, rlt__resp_arg *argv,
                            size_t *argc, const char **err)
{
    size_t scan = len < lim->max_inline + 1 ? len : lim->max_inline + 1;
    char *nl = memchr(buf, '\n', scan);
    if (nl == NULL) {
        if (len > lim->max_inline) {
            *err = "Protocol error: too big inline request";
            return RLT__RESP_ERROR;
        }
        return RLT__RESP_PARTIAL;
    }
    size_t consumed = (size_t)(nl - buf) + 1;
    size_t n = consumed - 1;
    if (n > 0 && buf[n - 1] == '\r') n--;
    if (split_inline(buf, n, lim, argv, argc, err) != RLT_OK) return RLT__RESP_ERROR;
    return (ssize_t)consumed;
}

ssize_t rlt__resp_parse(char *buf, size_t len, const rlt__resp_limits *lim, rlt__resp_arg *argv,
                        size_t *argc, const char **err)
{
    static const char *unused;
    rlt__resp_limits l = {0};
    if (lim != NULL) l = *lim;
    if (l.max_args == 0) l.max_args = RLT__RESP_DEFAULT_MAX_ARGS;
    if (l.max_bulk == 0) l.max_bulk = RLT__RESP_DEFAULT_MAX_BULK;
    if (l.max_inline == 0) l.max_inline = RLT__RESP_DEFAULT_MAX_INLINE;
    if (err == NULL) err = &unused;
    *argc = 0;
    if (len == 0) return RLT__RESP_PARTIAL;
    if (buf[0] == '*') return parse_multibulk(buf, len, &l, argv, argc, err);
    return parse_inline(buf, len, &l, argv, argc, err);
}

/* Longest "<prefix><int64>\r\n" line. */
#define NUM_LINE_BYTES (1 + 20 + 2)

static size_t put_line(char *w, char prefix, int64_t v)
{
    w[0] = prefix;
    size_t n = 1 + rlt__format_i64(w + 1, v);
    w[n++] = '\r';
    w[n++] = '\n';
    return n;
}

static void put_prefixed_num(rlt__obuf *b, char prefix, int64_t v)
{
    char line[NUM_LINE_BYTES];
    rlt__obuf_put(b, line, put_line(line, prefix, v));
}

void rlt__resp_simple(rlt__obuf *b, const char *s)
{
    rlt__obuf_put(b, "+", 1);
    rlt__obuf_put(b, s, strlen(s));
    rlt__obuf_put(b, "\r\n", 2);
}

void rlt__resp_error(rlt__obuf *b, const char *s)
{
    size_t n = strlen(s);
    char *w = rlt__obuf_room(b, n + 3);
    if (w == NULL) return;
    w[0] = '-';
    /* An error line must not contain CR or LF: replace them. */
    for (size_t i = 0; i < n; i++)
        w[1 + i] = (s[i] == '\r' || s[i] == '\n') ? ' ' : s[i];
    memcpy(w + 1 + n, "\r\n", 2);
    b->len += n + 3;
}

void rlt__resp_errorf(rlt__obuf *b, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    rlt__resp_error(b, msg);
}

void rlt__resp_int(rlt__obuf *b, int64_t v)
{
    put_prefixed_num(b, ':', v);
}

void rlt__resp_bulk(rlt__obuf *b, const void *p, size_t n)
{
    put_prefixed_num(b, '$', (int64_t)n);
    rlt__obuf_put(b, p, n);
    rlt__obuf_put(b, "\r\n", 2);
}

void rlt__resp_null(rlt__obuf *b)
{
    rlt__obuf_put(b, "$-1\r\n", 5);
}

void rlt__resp_array(rlt__obuf *b, size_t n)
{
    put_prefixed_num(b, '*', (int64_t)n);
}

void rlt__resp_ints(rlt__obuf *b, const int64_t *v, size_t n)
{
    /* Formatted on the stack, then appended in one piece (the cap counts the exact bytes). */
    char w[NUM_LINE_BYTES * (RLT__RESP_INTS_MAX + 1)];
    assert(n <= RLT__RESP_INTS_MAX);
    size_t k = put_line(w, '*', (int64_t)n);
    for (size_t i = 0; i < n; i++)
        k += put_line(w + k, ':', v[i]);
    rlt__obuf_put(b, w, k);
}
