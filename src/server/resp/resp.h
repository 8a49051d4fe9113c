/* RESP (the Redis protocol): a sans-I/O request parser and reply encoders.
 *
 * The parser never reads a socket and never allocates: the caller feeds the bytes it has and
 * gets back one command at a time, as argument slices pointing into its own buffer, with the
 * picohttpparser contract "bytes consumed / need more / error".  Both request forms are
 * accepted: multibulk arrays of bulk strings (what every client library sends) and inline
 * commands (one line of space-separated words, with Redis's quoting, for telnet and
 * redis-cli's inline mode).  Every length is bounded by rlt__resp_limits.
 */
#ifndef RLT_SERVER_RESP_RESP_H
#define RLT_SERVER_RESP_RESP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "server/base/obuf.h"
#include "server/config/config.h"

/* Returned by rlt__resp_parse when the buffer holds only part of a command. */
#define RLT__RESP_PARTIAL (-2)
/* Returned by rlt__resp_parse on a protocol error; the connection must answer and close. */
#define RLT__RESP_ERROR (-1)

/* One argument: len bytes at ptr (binary-safe, not NUL-terminated). */
typedef struct rlt__resp_arg {
    const char *ptr;
    size_t len;
} rlt__resp_arg;

/* Bounds.  All-zero means the defaults. */
typedef struct rlt__resp_limits {
    size_t max_args;   /* arguments per command, including the name; default 1024 */
    size_t max_bulk;   /* bytes per bulk string; default 65536 */
    size_t max_inline; /* bytes per inline command line; default 65536 */
} rlt__resp_limits;

/* The defaults (RLT__RESP_DEFAULT_MAX_ARGS, _BULK, _INLINE) are the config's (config.h), whose
 * server.max_args and server.max_bulk start from them. */

/* Parses the first command in buf[0..len).
 *   - returns n > 0: a whole command took the first n bytes; argv[0..*argc) hold its
 *     arguments (pointing into buf; *argc may be 0 for an empty line or an empty array,
 *     which the caller skips).  argv must have room for lim->max_args entries.
 *   - returns RLT__RESP_PARTIAL: more bytes are needed; nothing was consumed.  Calling again
 *     with the same bytes plus more is correct (the parser keeps no state).
 *   - returns RLT__RESP_ERROR: the bytes are not valid RESP within the limits; *err is set to
 *     a static message without the "ERR " prefix, e.g. "Protocol error: invalid bulk length".
 * Inline commands are unescaped in place, which is why buf is not const.  `lim` may be NULL
 * for the defaults.  Thread-safe (no state). */
ssize_t rlt__resp_parse(char *buf, size_t len, const rlt__resp_limits *lim, rlt__resp_arg *argv,
                        size_t *argc, const char **err);

/* Integer arguments are parsed by rlt__parse_i64 (core/text.h), as every part parses them. */

/* Reply encoders (RESP2). */
void rlt__resp_simple(rlt__obuf *b, const char *s);         /* +s\r\n */
void rlt__resp_error(rlt__obuf *b, const char *s);          /* -s\r\n (s carries its prefix) */
void rlt__resp_errorf(rlt__obuf *b, const char *fmt, ...);  /* printf-style, max 512 bytes */
void rlt__resp_int(rlt__obuf *b, int64_t v);                /* :v\r\n */
void rlt__resp_bulk(rlt__obuf *b, const void *p, size_t n); /* $n\r\n...\r\n */
void rlt__resp_null(rlt__obuf *b);                          /* $-1\r\n */
void rlt__resp_array(rlt__obuf *b, size_t n);               /* *n\r\n */
/* An array of n <= RLT__RESP_INTS_MAX integers (*n\r\n:v0\r\n...), appended in one piece. */
#define RLT__RESP_INTS_MAX 16
void rlt__resp_ints(rlt__obuf *b, const int64_t *v, size_t n);

#endif
