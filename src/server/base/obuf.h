/* The output buffer of a connection (obuf.c): every protocol appends its replies here and the
 * connection layer sends them.  Growable up to a hard cap; a write past the cap is dropped
 * and marks the buffer, and the connection is then closed (Redis's output buffer limit). */
#ifndef RLT_SERVER_BASE_OBUF_H
#define RLT_SERVER_BASE_OBUF_H

#include <stdbool.h>
#include <stddef.h>

/* A budgeted buffer's capacity up to this size is granted whatever the budget. */
#define RLT__OBUF_ALWAYS 4096

/* A growable output buffer with a hard cap.  All-zero is an empty buffer with no cap. */
typedef struct rlt__obuf {
    char *data;
    size_t len;
    size_t cap;
    size_t max;    /* 0 = no cap; appends that would pass it set `overflow` and drop */
    bool overflow; /* a write was dropped: the connection must be closed */
    bool budgeted; /* its capacity counts in the connections' memory budget (mem.h) */
} rlt__obuf;

/* Appends bytes; on allocation failure or past `max` sets overflow and appends nothing. */
void rlt__obuf_put(rlt__obuf *b, const void *p, size_t n);
/* Drops the first n bytes (they were written to the socket). */
void rlt__obuf_consume(rlt__obuf *b, size_t n);
/* Frees the memory; the buffer is empty and usable again. */
void rlt__obuf_free(rlt__obuf *b);

/* Makes room for n more bytes and returns where they go, or NULL (overflow set) when that
 * would pass `max` or memory runs out.  The caller writes at most n bytes and advances len. */
char *rlt__obuf_room(rlt__obuf *b, size_t n);
/* Appends printf-style text (any length); on overflow as rlt__obuf_put. */
void rlt__obuf_printf(rlt__obuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
