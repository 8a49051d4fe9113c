/* HTTP responses as ratelimitd writes them (reply.c): the status line, the headers every
 * answer has, the body; and the JSON error body.  http.c's endpoints and ui.c's share them. */
#ifndef RLT_SERVER_HTTP_REPLY_H
#define RLT_SERVER_HTTP_REPLY_H

#include "core/text.h"
#include "server/base/obuf.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Reply flags (rlt__pipe_reply.flags). */
enum {
    RLT__HF_CLOSE = 1,     /* send "Connection: close" (then the connection closes) */
    RLT__HF_HEAD = 2,      /* no body (HEAD, 304) */
    RLT__HF_KEEPALIVE = 4, /* HTTP/1.0 keep-alive: say so */
};

/* Appends z / v in decimal to o (inline: the hot path's replies are built with them). */
static inline void rlt__http_put_str(rlt__obuf *o, const char *z)
{
    rlt__obuf_put(o, z, strlen(z));
}
static inline void rlt__http_put_num(rlt__obuf *o, int64_t v)
{
    char b[24];
    rlt__obuf_put(o, b, rlt__format_i64(b, v));
}

/* One response: status line, Content-Type, Content-Length (blen, also without a body),
 * Connection as flags say, for a JSON ctype ("application/json...") `X-Content-Type-Options:
 * nosniff` and `Cache-Control: no-store`, `extra` (whole "Name: value\r\n" lines, may be
 * NULL), then the body unless RLT__HF_HEAD. */
void rlt__http_respond(rlt__obuf *o, int code, unsigned flags, const char *ctype, const char *extra,
                       const char *body, size_t blen);
/* {"error":"msg"} with status `code`, the message's quotes and backslashes escaped. */
void rlt__http_error(rlt__obuf *o, int code, unsigned flags, const char *extra, const char *msg);

#endif
