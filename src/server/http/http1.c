/* HTTP/1.1 request parser (RFC 9112), strict and sans-I/O: no I/O, no allocation, no state.
 *
 * One pass over the bytes, left to right, with 256-entry class tables instead of calls
 * (token characters, target characters, field-value characters, hex digits).  Every scan
 * stops at `end`, the smaller of the bytes present and the bound that applies, so a decision
 * never depends on bytes past the point it is taken at: that is why a prefix of a request is
 * PARTIAL or already the request's own error, never a different answer.  A chunked body is
 * scanned first (nothing written) and decoded in place only once its last byte is present,
 * so that a PARTIAL leaves the buffer as it was and the next call can parse it again.
 */
#include "server/http/http1.h"

#include <assert.h>
#include <stdint.h>
#include <string.h>

/* tchar (RFC 9110 5.6.2): method and field-name characters. */
static const unsigned char tchar[256] = {
    ['!'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1,         ['&'] = 1,         ['\''] = 1,
    ['*'] = 1, ['+'] = 1, ['-'] = 1, ['.'] = 1,         ['^'] = 1,         ['_'] = 1,
    ['`'] = 1, ['|'] = 1, ['~'] = 1, ['0' ... '9'] = 1, ['A' ... 'Z'] = 1, ['a' ... 'z'] = 1,
};

/* Request-target characters: visible ASCII except '#' (a fragment is never sent). */
static const unsigned char target_ch[256] = {[0x21 ... 0x22] = 1, [0x24 ... 0x7E] = 1};

/* field-value characters: HTAB, SP, VCHAR, obs-text.  Everything else (NUL, CR, LF, the other
 * controls, DEL) ends a value scan; the caller then sees whether it is the CRLF. */
static const unsigned char value_ch[256] = {['\t'] = 1, [0x20 ... 0x7E] = 1, [0x80 ... 0xFF] = 1};

/* Host characters (RFC 9112 3.2, RFC 3986 3.2.2): uri-host [ ":" port ], reg-name, IPv4 or an
 * IP-literal in brackets.  Checked per character only: enough to refuse the values that are
 * not a host at all (spaces, '/', '@', '?', '#', quotes, non-ASCII), as nginx does. */
static const unsigned char host_ch[256] = {
    ['0' ... '9'] = 1, ['A' ... 'Z'] = 1, ['a' ... 'z'] = 1, ['-'] = 1, ['.'] = 1,  ['_'] = 1,
    ['~'] = 1,         ['!'] = 1,         ['$'] = 1,         ['&'] = 1, ['\''] = 1, ['('] = 1,
    [')'] = 1,         ['*'] = 1,         ['+'] = 1,         [','] = 1, [';'] = 1,  ['='] = 1,
    ['%'] = 1,         ['['] = 1,         [']'] = 1,         [':'] = 1,
};

/* Hex digit value plus one; 0 for anything else. */
static const unsigned char hex1[256] = {
    ['0'] = 1,  ['1'] = 2,  ['2'] = 3,  ['3'] = 4,  ['4'] = 5,  ['5'] = 6,  ['6'] = 7,  ['7'] = 8,
    ['8'] = 9,  ['9'] = 10, ['A'] = 11, ['B'] = 12, ['C'] = 13, ['D'] = 14, ['E'] = 15, ['F'] = 16,
    ['a'] = 11, ['b'] = 12, ['c'] = 13, ['d'] = 14, ['e'] = 15, ['f'] = 16,
};

/* Eight bytes at a time (SWAR) over the long runs, request-targets and field values: a word
 * is skipped when none of its bytes can end the run, otherwise the byte loop decides.  The
 * tests below may flag a clean word (then the byte loop just does the work) but never miss a
 * byte < n, which is all correctness needs.  About 1.3x faster on a browser's header section. */
#define ONES UINT64_C(0x0101010101010101)
#define HIGHS UINT64_C(0x8080808080808080)

static uint64_t load64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Nonzero when some byte of x is < n (n <= 128). */
static uint64_t has_less(uint64_t x, uint64_t n)
{
    return (x - ONES * n) & ~x & HIGHS;
}

/* Nonzero when some byte of x is not a field-value character (or is HTAB). */
static uint64_t value_word_stops(uint64_t x)
{
    return has_less(x, 0x20) | has_less(x ^ (ONES * 0x7F), 1);
}

/* Nonzero when some byte of x is not a request-target character. */
static uint64_t target_word_stops(uint64_t x)
{
    return has_less(x, 0x21) | has_less(x ^ (ONES * 0x7F), 1) | has_less(x ^ (ONES * '#'), 1) |
           (x & HIGHS);
}

/* The end of the run of field-value characters starting at p[i], at most `end`. */
static size_t value_run(const unsigned char *p, size_t i, size_t end)
{
    for (;;) {
        while (end - i >= 8 && !value_word_stops(load64(p + i)))
            i += 8;
        size_t stop = end - i > 8 ? i + 8 : end;
        while (i < stop && value_ch[p[i]])
            i++;
        if (i < stop || i == end) return i;
    }
}

/* The end of the run of request-target characters starting at p[i], at most `end`. */
static size_t target_run(const unsigned char *p, size_t i, size_t end)
{
    for (;;) {
        while (end - i >= 8 && !target_word_stops(load64(p + i)))
            i += 8;
        size_t stop = end - i > 8 ? i + 8 : end;
        while (i < stop && target_ch[p[i]])
            i++;
        if (i < stop || i == end) return i;
    }
}

/* A chunk size has at most 16 hex digits (leading zeros included): 64 bits. */
#define CHUNK_DIGITS_MAX 16

/* Limits are clamped so that the sums below (max_header_bytes + max_body, v * 16 + 15 with
 * v <= max_body) cannot overflow a size_t. */
#define LIMIT_MAX (SIZE_MAX / 32)

/* s[0..n) equals the lowercase ASCII `lower`, ignoring case.  `c | 0x20` folds only letters
 * here: the other characters of the words compared ('-', digits) are matched by a control
 * character at most (0x0D, 0x10, 0x11 ...), and no control reaches this function (HTAB,
 * which does, folds to ')', in none of the words). */
static bool lc_eq(const unsigned char *s, const char *lower, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((s[i] | 0x20) != (unsigned char)lower[i]) return false;
    return true;
}

static bool is_ows(unsigned char c)
{
    return c == ' ' || c == '\t';
}

enum { LINE_NEED = 0, LINE_FIELD = 1, LINE_EMPTY = 2, LINE_BAD = -1 };

/* Scans the field line (or the empty line ending a field section) at p[i], within p[0..end).
 * LINE_FIELD: name at [*n0, +*nlen), value without OWS at [*v0, +*vlen), *next after its
 * CRLF.  LINE_EMPTY: *next after the CRLF.  LINE_NEED: a byte at or past `end` is needed.
 * LINE_BAD: *why says what is wrong (always a 400). */
static int field_line(const unsigned char *p, size_t i, size_t end, size_t *n0, size_t *nlen,
                      size_t *v0, size_t *vlen, size_t *next, const char **why)
{
    if (i >= end) return LINE_NEED;
    if (p[i] == '\r') {
        if (i + 1 >= end) return LINE_NEED;
        if (p[i + 1] != '\n') {
            *why = "bare CR in the header section";
            return LINE_BAD;
        }
        *next = i + 2;
        return LINE_EMPTY;
    }
    size_t s = i;
    while (i < end && tchar[p[i]])
        i++;
    if (i >= end) return LINE_NEED;
    if (p[i] != ':' || i == s) {
        if (i > s && is_ows(p[i]))
            *why = "whitespace between a header name and its colon";
        else if (i == s && is_ows(p[i]))
            *why = "obs-fold or a header line starting with whitespace";
        else if (p[i] == '\n')
            *why = "bare LF in the header section";
        else if (i == s && p[i] == ':')
            *why = "empty header name";
        else
            *why = "invalid character in a header name";
        return LINE_BAD;
    }
    *n0 = s;
    *nlen = i - s;
    i++;
    while (i < end && is_ows(p[i]))
        i++;
    size_t vs = i;
    i = value_run(p, i, end);
    if (i >= end) return LINE_NEED;
    if (p[i] != '\r') {
        *why =
            p[i] == '\n' ? "bare LF in the header section" : "control character in a header value";
        return LINE_BAD;
    }
    if (i + 1 >= end) return LINE_NEED;
    if (p[i + 1] != '\n') {
        *why = "bare CR in the header section";
        return LINE_BAD;
    }
    size_t ve = i;
    while (ve > vs && is_ows(p[ve - 1]))
        ve--;
    *v0 = vs;
    *vlen = ve - vs;
    *next = i + 2;
    return LINE_FIELD;
}

/* Reads a Connection value, a comma-separated token list. */
static void connection_tokens(const unsigned char *p, size_t n, bool *close, bool *keep_alive)
{
    size_t k = 0;
    while (k < n) {
        while (k < n && (is_ows(p[k]) || p[k] == ','))
            k++;
        size_t s = k;
        while (k < n && p[k] != ',')
            k++;
        size_t t = k;
        while (t > s && is_ows(p[t - 1]))
            t--;
        if (t - s == 5 && lc_eq(p + s, "close", 5)) *close = true;
        if (t - s == 10 && lc_eq(p + s, "keep-alive", 10)) *keep_alive = true;
    }
}

typedef struct chunk_scan {
    size_t end;   /* after the final CRLF */
    size_t total; /* decoded body bytes */
    int status;
    const char *why;
} chunk_scan;

enum { SCAN_NEED = 0, SCAN_DONE = 1, SCAN_BAD = -1 };

/* Checks the chunked body starting at p[i] without writing anything.  Bounds: each chunk-size
 * line RLT__HTTP_MAX_CHUNK_LINE bytes (400), decoded bytes max_body (413), framing bytes (size
 * lines, extensions, CRLFs) `max_framing` (413), trailer fields `trailer_budget` (431). */
static int chunked_scan(const unsigned char *p, size_t len, size_t i, size_t max_body,
                        size_t max_framing, size_t trailer_budget, chunk_scan *cs)
{
    size_t body0 = i, sum = 0;
    for (;;) {
        size_t s = i, v = 0, digits = 0;
        bool capped = len - s >= RLT__HTTP_MAX_CHUNK_LINE;
        size_t lend = capped ? s + RLT__HTTP_MAX_CHUNK_LINE : len;
        while (i < lend && hex1[p[i]]) {
            if (++digits > CHUNK_DIGITS_MAX) goto bad_size;
            v = v * 16 + (size_t)(hex1[p[i]] - 1);
            if (v > max_body - sum) {
                cs->status = 413;
                cs->why = "chunked body larger than the limit";
                return SCAN_BAD;
            }
            i++;
        }
        if (i >= lend) goto line_end;
        if (digits == 0) goto bad_size;
        if (is_ows(p[i]) || p[i] == ';') {
            /* chunk-ext = *( BWS ";" ... ): whitespace only before a ';'.  Extensions are
             * ignored; their bytes only have to be field-value characters. */
            while (i < lend && is_ows(p[i]))
                i++;
            if (i >= lend) goto line_end;
            if (p[i] != ';') {
                cs->why = "invalid chunk extension";
                goto bad;
            }
            while (i < lend && value_ch[p[i]])
                i++;
            if (i >= lend) goto line_end;
        }
        if (p[i] != '\r') {
            cs->why = p[i] == '\n' ? "bare LF in the chunked framing" : "invalid chunk size line";
            goto bad;
        }
        if (i + 1 >= lend) goto line_end;
        if (p[i + 1] != '\n') {
            cs->why = "bare CR in the chunked framing";
            goto bad;
        }
        i += 2;
        if ((i - body0) - sum > max_framing) goto too_much_framing;
        if (v == 0) break;
        if (len - i < v + 2) return SCAN_NEED;
        if (p[i + v] != '\r' || p[i + v + 1] != '\n') {
            cs->why = "chunk data not followed by CRLF";
            goto bad;
        }
        i += v + 2;
        sum += v;
        if ((i - body0) - sum > max_framing) goto too_much_framing;
        continue;
    line_end:
        if (!capped) return SCAN_NEED;
        cs->why = "chunk size line too long";
        goto bad;
    }
    /* Trailer fields, checked like header fields and ignored; the final empty line is not
     * counted in the budget. */
    size_t t0 = i;
    bool capped = len - t0 >= trailer_budget + 2;
    size_t tend = capped ? t0 + trailer_budget + 2 : len;
    for (;;) {
        size_t n0, nlen, v0, vlen, next;
        int r = field_line(p, i, tend, &n0, &nlen, &v0, &vlen, &next, &cs->why);
        if (r == LINE_NEED) {
            if (!capped) return SCAN_NEED;
            goto trailers;
        }
        if (r == LINE_BAD) goto bad;
        i = next;
        if (r == LINE_EMPTY) break;
        if (i - t0 > trailer_budget) goto trailers;
    }
    cs->end = i;
    cs->total = sum;
    return SCAN_DONE;
bad_size:
    cs->why = "invalid chunk size";
bad:
    cs->status = 400;
    return SCAN_BAD;
too_much_framing:
    cs->status = 413;
    cs->why = "chunked framing larger than the limit";
    return SCAN_BAD;
trailers:
    cs->status = 431;
    cs->why = "header section and trailers too large";
    return SCAN_BAD;
}

/* Decodes a chunked body that chunked_scan accepted, from p[i] up to `end`, moving the chunk
 * data down to p[i...].  The write position never passes the next size line, so every line
 * is read before anything is written over it.  Returns the end of the decoded bytes. */
static size_t chunked_decode(unsigned char *p, size_t i, size_t end)
{
    size_t w = i;
    for (;;) {
        size_t v = 0;
        for (; hex1[p[i]]; i++)
            v = v * 16 + (size_t)(hex1[p[i]] - 1);
        const unsigned char *lf = memchr(p + i, '\n', end - i);
        assert(lf != NULL);
        i = (size_t)(lf - p) + 1;
        if (v == 0) return w;
        memmove(p + w, p + i, v);
        w += v;
        i += v + 2;
    }
}

static size_t limit_or(size_t v, size_t dflt)
{
    if (v == 0) return dflt;
    return v > LIMIT_MAX ? LIMIT_MAX : v;
}

enum { STEP_BAD = -1, STEP_NEED = 0, STEP_OK = 1 };

/* The header section being parsed: p[0..end) may be looked at, end being the smaller of the
 * bytes present and max_header_bytes.  A step that needs a byte at `end` returns STEP_NEED
 * (PARTIAL or too large: the caller knows which); STEP_BAD sets status and why. */
typedef struct section {
    const unsigned char *p;
    size_t end;
    int status;
    const char *why;
} section;

static int step_bad(section *s, const char *why)
{
    s->status = 400;
    s->why = why;
    return STEP_BAD;
}

/* Leading empty lines and the request line (method SP origin-form SP HTTP-version CRLF)
 * from p[0]; on STEP_OK *pos is after its CRLF and req has the request-line fields. */
static int request_line(section *s, size_t *pos, rlt__http_req *req)
{
    const unsigned char *p = s->p;
    size_t end = s->end, i = 0;
    /* Leading empty lines (RFC 9112 2.2). */
    for (;;) {
        if (i >= end) return STEP_NEED;
        if (p[i] != '\r') break;
        if (i + 1 >= end) return STEP_NEED;
        if (p[i + 1] != '\n') return step_bad(s, "bare CR before the request line");
        i += 2;
    }
    size_t m0 = i;
    while (i < end && tchar[p[i]])
        i++;
    if (i >= end) return STEP_NEED;
    if (p[i] != ' ' || i == m0)
        return step_bad(s, p[i] == '\n' ? "bare LF before the request line" : "invalid method");
    size_t mlen = i - m0;
    req->method = RLT__HTTP_OTHER;
    if (mlen == 3 && memcmp(p + m0, "GET", 3) == 0)
        req->method = RLT__HTTP_GET;
    else if (mlen == 4 && memcmp(p + m0, "HEAD", 4) == 0)
        req->method = RLT__HTTP_HEAD;
    else if (mlen == 4 && memcmp(p + m0, "POST", 4) == 0)
        req->method = RLT__HTTP_POST;
    req->method_str = (const char *)p + m0;
    req->method_len = mlen;

    size_t t0 = ++i;
    if (i >= end) return STEP_NEED;
    if (p[i] != '/') return step_bad(s, "request-target is not in origin-form");
    i = target_run(p, i, end);
    if (i >= end) return STEP_NEED;
    if (p[i] != ' ') return step_bad(s, "invalid character in the request-target");
    req->target = (const char *)p + t0;
    req->target_len = i - t0;

    /* HTTP-version CRLF, with a shortcut for what nearly every client sends. */
    size_t v0 = ++i;
    if (end - i >= 10 && memcmp(p + i, "HTTP/1.1\r\n", 10) == 0) {
        req->minor = 1;
        *pos = i + 10;
        return STEP_OK;
    }
    while (i < end && p[i] > 0x20 && p[i] < 0x7F)
        i++;
    if (i >= end) return STEP_NEED;
    if (p[i] != '\r')
        return step_bad(s,
                        p[i] == '\n' ? "bare LF after the request line" : "invalid HTTP version");
    if (i + 1 >= end) return STEP_NEED;
    if (p[i + 1] != '\n') return step_bad(s, "bare CR in the request line");
    const unsigned char *v = p + v0;
    if (i - v0 != 8 || memcmp(v, "HTTP/", 5) != 0 || v[5] < '0' || v[5] > '9' || v[6] != '.' ||
        v[7] < '0' || v[7] > '9')
        return step_bad(s, "invalid HTTP version");
    if (v[5] != '1' || v[7] > '1') {
        s->status = 505;
        s->why = "HTTP version not supported";
        return STEP_BAD;
    }
    req->minor = v[7] - '0';
    *pos = i + 2;
    return STEP_OK;
}

/* What the header fields say about framing and the connection. */
typedef struct framing {
    bool host, have_cl, have_te, te_chunked, close, keep_alive, expect_continue;
    uint64_t cl;
} framing;

/* Takes note of one header field that matters to framing; false (with *why) for a 400. */
static bool field_meaning(framing *f, const unsigned char *name, size_t nlen,
                          const unsigned char *val, size_t vlen, const char **why)
{
    switch (nlen) {
    case 4:
        if (!lc_eq(name, "host", 4)) break;
        if (f->host) {
            *why = "more than one Host";
            return false;
        }
        f->host = true;
        for (size_t k = 0; k < vlen; k++) {
            if (!host_ch[val[k]]) {
                *why = "invalid Host";
                return false;
            }
        }
        break;
    case 6:
        if (lc_eq(name, "expect", 6) && vlen == 12 && lc_eq(val, "100-continue", 12))
            f->expect_continue = true;
        break;
    case 10:
        if (lc_eq(name, "connection", 10)) connection_tokens(val, vlen, &f->close, &f->keep_alive);
        break;
    case 14:
        if (!lc_eq(name, "content-length", 14)) break;
        if (f->have_cl) {
            *why = "more than one Content-Length";
            return false;
        }
        f->have_cl = true;
        if (vlen == 0) {
            *why = "empty Content-Length";
            return false;
        }
        for (size_t k = 0; k < vlen; k++) {
            if (val[k] < '0' || val[k] > '9') {
                *why = "Content-Length is not digits only";
                return false;
            }
            uint64_t d = (uint64_t)(val[k] - '0');
            if (f->cl > (UINT64_MAX - d) / 10) {
                *why = "Content-Length overflows";
                return false;
            }
            f->cl = f->cl * 10 + d;
        }
        break;
    case 17:
        if (!lc_eq(name, "transfer-encoding", 17)) break;
        if (f->have_te) {
            *why = "more than one Transfer-Encoding";
            return false;
        }
        f->have_te = true;
        f->te_chunked = vlen == 7 && lc_eq(val, "chunked", 7);
        break;
    default:
        break;
    }
    return true;
}

/* The header fields from p[*pos] through the empty line; on STEP_OK *pos is after it. */
static int header_fields(section *s, size_t *pos, size_t max_fields, rlt__http_req *req, framing *f)
{
    size_t i = *pos;
    for (;;) {
        size_t n0, nlen, v0, vlen, next;
        int r = field_line(s->p, i, s->end, &n0, &nlen, &v0, &vlen, &next, &s->why);
        if (r == LINE_NEED) return STEP_NEED;
        if (r == LINE_BAD) return step_bad(s, s->why);
        i = next;
        if (r == LINE_EMPTY) break;
        if (req->nheaders == max_fields) {
            s->status = 431;
            s->why = "too many header fields";
            return STEP_BAD;
        }
        rlt__http_header *h = &req->headers[req->nheaders++];
        h->name = (const char *)s->p + n0;
        h->nlen = nlen;
        h->value = (const char *)s->p + v0;
        h->vlen = vlen;
        if (!field_meaning(f, s->p + n0, nlen, s->p + v0, vlen, &s->why))
            return step_bad(s, s->why);
    }
    *pos = i;
    return STEP_OK;
}

/* RFC 9112 6.1-6.3 once the fields are known: the 400s before the 501 and the 413. */
static int check_framing(section *s, const framing *f, int minor, size_t max_body)
{
    if (minor == 1 && !f->host) return step_bad(s, "HTTP/1.1 request without Host");
    if (f->have_te && f->have_cl) return step_bad(s, "both Transfer-Encoding and Content-Length");
    if (f->have_te && minor == 0) return step_bad(s, "Transfer-Encoding in an HTTP/1.0 request");
    if (f->have_te && !f->te_chunked) {
        s->status = 501;
        s->why = "transfer coding not implemented (only chunked)";
        return STEP_BAD;
    }
    if (f->have_cl && f->cl > max_body) {
        s->status = 413;
        s->why = "Content-Length larger than the limit";
        return STEP_BAD;
    }
    return STEP_OK;
}

ssize_t rlt__http_parse(char *buf, size_t len, const rlt__http_limits *lim, rlt__http_req *req,
                        int *status, const char **err)
{
    int status_unused;
    const char *err_unused;
    if (status == NULL) status = &status_unused;
    if (err == NULL) err = &err_unused;
    rlt__http_limits l = {0};
    if (lim != NULL) l = *lim;
    size_t max_hdr = limit_or(l.max_header_bytes, RLT__HTTP_MAX_HEADER_BYTES_DEFAULT);
    size_t max_fields = l.max_headers == 0 || l.max_headers > RLT__HTTP_MAX_HEADERS_DEFAULT
                            ? RLT__HTTP_MAX_HEADERS_DEFAULT
                            : l.max_headers;
    size_t max_body = limit_or(l.max_body, RLT__HTTP_MAX_BODY_DEFAULT);

    req->nheaders = 0;
    req->header_len = 0;
    req->content_length = 0;
    req->query = NULL;
    req->query_len = 0;
    req->body = NULL;
    req->body_len = 0;
    req->keep_alive = false;
    req->expect_continue = false;
    req->chunked = false;

    /* Nothing of the header section is looked at past max_hdr: reaching `end` means PARTIAL
     * when fewer than max_hdr bytes are present, and "too large" otherwise. */
    section s = {.p = (const unsigned char *)buf, .end = len < max_hdr ? len : max_hdr};
    framing f = {0};
    size_t pos = 0;
    int r = request_line(&s, &pos, req);
    if (r == STEP_OK) r = header_fields(&s, &pos, max_fields, req, &f);
    if (r == STEP_OK) r = check_framing(&s, &f, req->minor, max_body);
    if (r == STEP_NEED) {
        if (len < max_hdr) return RLT__HTTP_PARTIAL;
        bool in_line = pos == 0; /* request_line sets pos only when it is complete */
        s.status = in_line ? 414 : 431;
        s.why = in_line ? "request line too long" : "header section too large";
        r = STEP_BAD;
    }
    if (r == STEP_BAD) {
        *status = s.status;
        *err = s.why;
        return RLT__HTTP_ERROR;
    }

    size_t hdr_len = pos;
    req->path = req->target;
    req->path_len = req->target_len;
    const char *q = memchr(req->target, '?', req->target_len);
    if (q != NULL) {
        req->path_len = (size_t)(q - req->target);
        req->query = q + 1;
        req->query_len = req->target_len - req->path_len - 1;
    }
    req->keep_alive = !f.close && (req->minor == 1 || f.keep_alive);
    req->expect_continue = req->minor == 1 && f.expect_continue;
    req->chunked = f.have_te;
    req->header_len = hdr_len;
    req->content_length = (size_t)f.cl;

    if (f.have_te) {
        chunk_scan cs;
        r = chunked_scan(s.p, len, hdr_len, max_body, max_hdr + max_body, max_hdr - hdr_len, &cs);
        if (r == SCAN_NEED) return RLT__HTTP_PARTIAL;
        if (r == SCAN_BAD) {
            *status = cs.status;
            *err = cs.why;
            return RLT__HTTP_ERROR;
        }
        size_t n = chunked_decode((unsigned char *)buf, hdr_len, cs.end) - hdr_len;
        assert(n == cs.total);
        if (n > 0) {
            req->body = buf + hdr_len;
            req->body_len = n;
        }
        return (ssize_t)cs.end;
    }
    if (len - hdr_len < f.cl) return RLT__HTTP_PARTIAL;
    if (f.cl > 0) {
        req->body = buf + hdr_len;
        req->body_len = (size_t)f.cl;
    }
    return (ssize_t)(hdr_len + (size_t)f.cl);
}

static unsigned char lower(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c;
}

const rlt__http_header *rlt__http_find(const rlt__http_req *req, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < req->nheaders; i++) {
        const rlt__http_header *h = &req->headers[i];
        if (h->nlen != n) continue;
        size_t k = 0;
        while (k < n && lower((unsigned char)h->name[k]) == lower((unsigned char)name[k]))
            k++;
        if (k == n) return h;
    }
    return NULL;
}
