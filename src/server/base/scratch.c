/* A bump arena per worker: one block, a fill level, marks to release to. */
#include "server/base/scratch.h"
#include "server/base/mem.h"

#include "ratelimit/ratelimit.h"

#include <stdalign.h>
#include <stdlib.h>

struct rlt__scratch {
    size_t cap, used, peak;
    unsigned char *data; /* malloc's: aligned for any object */
};

static size_t total; /* every arena's capacity (atomic) */

rlt__scratch *rlt__scratch_new(size_t cap)
{
    if (cap == 0) return NULL;
    rlt__scratch *sc = malloc(sizeof *sc);
    unsigned char *data = malloc(cap);
    if (sc == NULL || data == NULL) {
        free(sc);
        free(data);
        return NULL;
    }
    *sc = (rlt__scratch){.cap = cap, .data = data};
    rlt__mem_conn_take_always(cap);
    __atomic_add_fetch(&total, cap, __ATOMIC_RELAXED);
    return sc;
}

void rlt__scratch_free(rlt__scratch *sc)
{
    if (sc == NULL) return;
    rlt__mem_conn_give(sc->cap);
    __atomic_sub_fetch(&total, sc->cap, __ATOMIC_RELAXED);
    free(sc->data);
    free(sc);
}

int rlt__scratch_reserve(rlt__scratch *sc, size_t cap)
{
    if (cap <= sc->cap) return RLT_OK;
    if (sc->used != 0) return RLT_EINVAL;
    if (!rlt__mem_conn_take(cap - sc->cap)) return RLT_ENOMEM;
    unsigned char *data = realloc(sc->data, cap);
    if (data == NULL) {
        rlt__mem_conn_give(cap - sc->cap);
        return RLT_ENOMEM;
    }
    __atomic_add_fetch(&total, cap - sc->cap, __ATOMIC_RELAXED);
    sc->data = data;
    sc->cap = cap;
    return RLT_OK;
}

void *rlt__scratch_alloc(rlt__scratch *sc, size_t bytes)
{
    const size_t a = alignof(max_align_t);
    size_t start = (sc->used + a - 1) / a * a;
    if (start > sc->cap || bytes > sc->cap - start) return NULL;
    sc->used = start + bytes;
    if (sc->used > sc->peak) sc->peak = sc->used;
    return sc->data + start;
}

size_t rlt__scratch_mark(const rlt__scratch *sc)
{
    return sc->used;
}

void rlt__scratch_release(rlt__scratch *sc, size_t mark)
{
    if (mark < sc->used) sc->used = mark;
}

size_t rlt__scratch_cap(const rlt__scratch *sc)
{
    return sc->cap;
}

size_t rlt__scratch_peak(const rlt__scratch *sc)
{
    return sc->peak;
}

size_t rlt__scratch_total(void)
{
    return __atomic_load_n(&total, __ATOMIC_RELAXED);
}
