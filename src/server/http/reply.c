/* HTTP responses as ratelimitd writes them (reply.h). */
#include "server/http/reply.h"

#include <stdio.h>
#include <string.h>

static const char *reason(int code)
{
    switch (code) {
    case 200:
        return "OK";
    case 304:
        return "Not Modified";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 413:
        return "Content Too Large";
    case 414:
        return "URI Too Long";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 501:
        return "Not Implemented";
    case 503:
        return "Service Unavailable";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Error";
    }
}

void rlt__http_respond(rlt__obuf *o, int code, unsigned flags, const char *ctype, const char *extra,
                       const char *body, size_t blen)
{
    rlt__http_put_str(o, "HTTP/1.1 ");
    rlt__http_put_num(o, code);
    rlt__obuf_put(o, " ", 1);
    rlt__http_put_str(o, reason(code));
    rlt__http_put_str(o, "\r\nContent-Type: ");
    rlt__http_put_str(o, ctype);
    rlt__http_put_str(o, "\r\nContent-Length: ");
    rlt__http_put_num(o, (int64_t)blen);
    rlt__http_put_str(o, flags & RLT__HF_CLOSE       ? "\r\nConnection: close\r\n"
                         : flags & RLT__HF_KEEPALIVE ? "\r\nConnection: keep-alive\r\n"
                                                     : "\r\n");
    /* JSON answers hold decisions and counters: no cache may keep them, and no browser may
     * take one for a page or a script. */
    if (strncmp(ctype, "application/json", 16) == 0)
        rlt__http_put_str(o, "X-Content-Type-Options: nosniff\r\nCache-Control: no-store\r\n");
    if (extra) rlt__http_put_str(o, extra);
    rlt__obuf_put(o, "\r\n", 2);
    if (!(flags & RLT__HF_HEAD)) rlt__obuf_put(o, body, blen);
}

/* {"error":"msg"} with JSON escaping of the few characters messages can hold. */
void rlt__http_error(rlt__obuf *o, int code, unsigned flags, const char *extra, const char *msg)
{
    char body[600];
    size_t n = (size_t)snprintf(body, sizeof body, "{\"error\":\"");
    for (const char *p = msg; *p && n + 8 < sizeof body; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\') body[n++] = '\\';
        body[n++] = c < 32 ? ' ' : (char)c;
    }
    n += (size_t)snprintf(body + n, sizeof body - n, "\"}\n");
    if (n > sizeof body - 1) n = sizeof body - 1;
    rlt__http_respond(o, code, flags, "application/json", extra, body, n);
}
