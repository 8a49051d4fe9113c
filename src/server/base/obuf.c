/* The output buffer every protocol writes its replies into: growable, with a hard cap that
 * turns a client that never reads into a closed connection instead of unbounded memory. */
#include "server/base/obuf.h"

#include "server/base/mem.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *rlt__obuf_room(rlt__obuf *b, size_t n)
{
    if (b->overflow) return NULL;
    if (b->max != 0 && (b->len + n > b->max || b->len + n < b->len)) {
        b->overflow = true;
        return NULL;
    }
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        /* The first RLT__OBUF_ALWAYS bytes are always granted (counted, never refused), so
         * that a full budget never silences a client: it gets its answer or its refusal. */
        if (b->budgeted && cap <= RLT__OBUF_ALWAYS) {
            rlt__mem_conn_take_always(cap - b->cap);
        } else if (b->budgeted && !rlt__mem_conn_take(cap - b->cap)) {
            b->overflow = true; /* the connections' share of max_memory is used up */
            return NULL;
        }
        char *d = realloc(b->data, cap);
        if (d == NULL) {
            if (b->budgeted) rlt__mem_conn_give(cap - b->cap);
            b->overflow = true;
            return NULL;
        }
        b->data = d;
        b->cap = cap;
    }
    return b->data + b->len;
}

void rlt__obuf_put(rlt__obuf *b, const void *p, size_t n)
{
    if (n == 0) return;
    char *w = rlt__obuf_room(b, n);
    if (w == NULL) return;
    memcpy(w, p, n);
    b->len += n;
}

void rlt__obuf_consume(rlt__obuf *b, size_t n)
{
    assert(n <= b->len);
    if (n < b->len) memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
}

void rlt__obuf_free(rlt__obuf *b)
{
    if (b->budgeted) rlt__mem_conn_give(b->cap);
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->overflow = false;
}

void rlt__obuf_printf(rlt__obuf *b, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof line) return rlt__obuf_put(b, line, (size_t)n);
    /* Longer than the stack line: format again into the buffer itself. */
    char *w = rlt__obuf_room(b, (size_t)n + 1);
    if (w == NULL) return;
    va_start(ap, fmt);
    vsnprintf(w, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}
