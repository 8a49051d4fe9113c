/* HTTP/1.1 (RFC 9112): a strict, sans-I/O request parser.
 *
 * The same shape as resp.h: the parser never reads a socket, never allocates and keeps no
 * state; the caller feeds the bytes it has and gets back one whole request at a time (request
 * line, header fields and body), as slices pointing into its own buffer, with the contract
 * "bytes consumed / need more / error".  It answers the way nginx does to the framing tricks
 * that request smuggling is made of: one Content-Length made of digits only, never with
 * Transfer-Encoding, only `chunked` as a transfer coding, no obs-fold, no bare CR, no control
 * characters.  Every length is bounded by rlt__http_limits, so that a hostile client can make
 * the connection hold at most 2 * (max_header_bytes + max_body) + 2 bytes for one request.
 *
 * Choices where RFC 9112 leaves one:
 *   - line endings are CRLF only: a bare LF is refused (400) in the request line, the header
 *     fields and the chunked framing (nginx accepts a bare LF; refusing it closes the
 *     "LF vs CRLF" smuggling disagreements with front ends);
 *   - leading empty lines (CRLF) before the request line are skipped and counted in the
 *     consumed bytes and in max_header_bytes (RFC 9112 section 2.2);
 *   - only origin-form targets ("/path?query"): absolute-form, authority-form and "*" get 400;
 *     a target is visible ASCII (0x21..0x7E) except '#';
 *   - a second Host, Content-Length or Transfer-Encoding header is a 400, even when equal;
 *     a Host value with a character that no host has (space, '/', '@', non-ASCII ...) too;
 *   - a Content-Length that does not fit 64 bits is a 400, one above max_body a 413.
 */
#ifndef RLT_SERVER_HTTP_HTTP1_H
#define RLT_SERVER_HTTP_HTTP1_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Returned by rlt__http_parse when the buffer holds only part of a request. */
#define RLT__HTTP_PARTIAL (-2)
/* Returned by rlt__http_parse on a request that must be refused; the connection answers
 * *status and closes (the framing is lost). */
#define RLT__HTTP_ERROR (-1)

/* Room for header fields in rlt__http_req, and the default (and largest) max_headers. */
#define RLT__HTTP_MAX_HEADERS_DEFAULT 64
#define RLT__HTTP_MAX_HEADER_BYTES_DEFAULT 8192
#define RLT__HTTP_MAX_BODY_DEFAULT 65536
/* Longest chunk-size line (hex digits, extensions, CRLF) of a chunked body. */
#define RLT__HTTP_MAX_CHUNK_LINE 1024

typedef enum rlt__http_method {
    RLT__HTTP_GET,
    RLT__HTTP_HEAD,
    RLT__HTTP_POST,
    RLT__HTTP_OTHER /* any other valid token (PUT, DELETE, get ...): the handler answers 405 */
} rlt__http_method;

/* One header field: the name as sent (compare it case-insensitively) and the value without
 * its surrounding whitespace (OWS).  Not NUL-terminated. */
typedef struct rlt__http_header {
    const char *name;
    size_t nlen;
    const char *value;
    size_t vlen;
} rlt__http_header;

/* Bounds.  All-zero (or a NULL pointer) means the defaults. */
typedef struct rlt__http_limits {
    size_t max_header_bytes; /* request line + header fields + the empty line, and the
                                chunked trailers on top; default 8192 */
    size_t max_headers;      /* header fields; default and at most 64 (larger is clamped) */
    size_t max_body;         /* decoded body bytes; default 65536 */
} rlt__http_limits;

/* One request.  Every pointer points into the buffer given to rlt__http_parse. */
typedef struct rlt__http_req {
    rlt__http_method method;
    const char *method_str; /* the method token as sent */
    size_t method_len;
    const char *target; /* origin-form request-target as sent, starts with '/' */
    size_t target_len;
    const char *path; /* target up to '?' (or all of it) */
    size_t path_len;
    const char *query; /* after '?'; NULL and 0 when there is no '?' */
    size_t query_len;
    int minor; /* HTTP/1.0 -> 0, HTTP/1.1 -> 1 */
    rlt__http_header headers[RLT__HTTP_MAX_HEADERS_DEFAULT];
    size_t nheaders;
    bool keep_alive;       /* 1.1 unless "Connection: close"; 1.0 only with "Connection:
                              keep-alive" (token lists, case-insensitive; close wins) */
    bool expect_continue;  /* HTTP/1.1 with "Expect: 100-continue" */
    bool chunked;          /* the body came with Transfer-Encoding: chunked */
    size_t header_len;     /* bytes of the header section (leading empty lines, request line,
                              fields, empty line), set as soon as it is complete and valid, even
                              when the call returns PARTIAL for the body: the connection layer
                              then knows whether to send "100 Continue"; 0 before that */
    size_t content_length; /* the Content-Length value, set with header_len (0 without one):
                              a PARTIAL request then needs header_len + content_length bytes,
                              so the caller need not parse again before it has them */
    const char *body;      /* the Content-Length body, or the chunked body decoded in place;
                              NULL and 0 when there is none */
    size_t body_len;
} rlt__http_req;

/* Parses the first request in buf[0..len).
 *   - returns n > 0: a whole request (leading empty lines, request line, header section and
 *     whole body) took the first n bytes; *req describes it.  A chunked body has then been
 *     decoded in place (buf[header_len..n) is overwritten, which is why buf is not const): do
 *     not parse those bytes again, consume them.
 *   - returns RLT__HTTP_PARTIAL: more bytes are needed; nothing was consumed or changed.
 *     Calling again with the same bytes plus more is correct (the parser keeps no state).
 *     req->header_len and req->expect_continue are set once the header section is complete.
 *   - returns RLT__HTTP_ERROR: the request must be refused; *status is the HTTP status to
 *     answer (400, 413, 414, 431, 501 or 505) and *err a static message (no CR or LF).  The
 *     connection must be closed after the answer: the framing is lost.
 * A prefix of a request is PARTIAL or already the same error: a result never changes as bytes
 * are added.  `lim` may be NULL for the defaults; `status` and `err` may be NULL.  The time is
 * linear in the bytes examined, which are at most 2 * (max_header_bytes + max_body) + 2.
 * Thread-safe (no state). */
ssize_t rlt__http_parse(char *buf, size_t len, const rlt__http_limits *lim, rlt__http_req *req,
                        int *status, const char **err);

/* The first header field of req named `name` (NUL-terminated, compared case-insensitively),
 * or NULL if there is none. */
const rlt__http_header *rlt__http_find(const rlt__http_req *req, const char *name);

#endif
