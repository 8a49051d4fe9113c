/* nghttp2's memory, counted in the connections' budget (mem.h) per session. */
#include "server/grpc/grpc_internal.h"

#include "server/base/mem.h"

#include <stdlib.h>

/* ---- nghttp2's memory, counted ---------------------------------------------------------- */

/* nghttp2 allocates per stream and per connection (stream state, HPACK tables, queued frames);
 * each block carries its size in front so that a free can give it back to the budget.  Counted
 * whatever the limit (refusing inside nghttp2 would end the whole session): the budget then
 * refuses this layer's own allocations, new streams first. */
typedef union h2_block {
    size_t size;
    max_align_t align;
} h2_block;

static void *h2_malloc(size_t size, void *user)
{
    h2_block *b = malloc(sizeof *b + size);
    if (b == NULL) return NULL;
    b->size = size;
    ((gconn *)user)->h2_bytes += size;
    rlt__mem_conn_take_always(size);
    return b + 1;
}

static void h2_free(void *p, void *user)
{
    if (p == NULL) return;
    h2_block *b = (h2_block *)p - 1;
    ((gconn *)user)->h2_bytes -= b->size;
    rlt__mem_conn_give(b->size);
    free(b);
}

static void *h2_calloc(size_t n, size_t size, void *user)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) return NULL;
    void *p = h2_malloc(total, user);
    if (p != NULL) memset(p, 0, total);
    return p;
}

static void *h2_realloc(void *p, size_t size, void *user)
{
    if (p == NULL) return h2_malloc(size, user);
    h2_block *b = (h2_block *)p - 1;
    size_t old = b->size;
    h2_block *nb = realloc(b, sizeof *nb + size);
    if (nb == NULL) return NULL;
    nb->size = size;
    gconn *g = user;
    g->h2_bytes = g->h2_bytes - old + size;
    rlt__mem_conn_give(old);
    rlt__mem_conn_take_always(size);
    return nb + 1;
}

nghttp2_mem rlt__grpc_h2_mem(gconn *g)
{
    return (nghttp2_mem){g, h2_malloc, h2_free, h2_calloc, h2_realloc};
}
