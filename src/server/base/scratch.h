/* A worker's scratch space (scratch.c): one bump arena per worker thread, passed to whatever
 * needs room for one request (keys being built, argument vectors) instead of hidden
 * per-thread buffers.  Its capacity is fixed at creation and counted in max_memory with the
 * connections' buffers (used_memory_connections); an allocation that would pass it fails
 * (NULL, nothing taken), never overflows.  A request takes a mark first and releases to it
 * when done, so nested requests (a transaction's commands) nest like a stack.  Not
 * thread-safe: one arena belongs to one thread. */
#ifndef RLT_SERVER_BASE_SCRATCH_H
#define RLT_SERVER_BASE_SCRATCH_H

#include <stddef.h>

/* Each worker's capacity: the largest request's needs (EXEC's argument vector of 1024 entries
 * and 16 keys of RLT_KEY_MAX) with room to spare. */
#define RLT__SCRATCH_CAP ((size_t)64 * 1024)

typedef struct rlt__scratch rlt__scratch;

/* A new arena of `cap` bytes (> 0), counted in the connections' share of max_memory whatever
 * its limit (like a connection's first buffer).  NULL when memory runs out. */
rlt__scratch *rlt__scratch_new(size_t cap);
/* Frees it and gives its bytes back to the budget.  NULL is a no-op. */
void rlt__scratch_free(rlt__scratch *sc);
/* Grows the arena to `cap` bytes when it is smaller, only while nothing is taken from it (a
 * protocol's open, outside any request): RLT_OK, RLT_EINVAL when something is taken, or
 * RLT_ENOMEM when memory or the connections' share of max_memory runs out (unchanged). */
int rlt__scratch_reserve(rlt__scratch *sc, size_t cap);
/* `bytes` from the arena, aligned for any object; NULL (nothing taken) when they would pass
 * its capacity.  Zero bytes give a valid pointer. */
void *rlt__scratch_alloc(rlt__scratch *sc, size_t bytes);
/* The arena's fill, to release to later; and the release (marks taken later are void). */
size_t rlt__scratch_mark(const rlt__scratch *sc);
void rlt__scratch_release(rlt__scratch *sc, size_t mark);
/* Its capacity, and the most it has held since creation. */
size_t rlt__scratch_cap(const rlt__scratch *sc);
size_t rlt__scratch_peak(const rlt__scratch *sc);
/* Every live arena's capacity together (INFO's used_memory_scratch, a part of
 * used_memory_connections).  Thread-safe. */
size_t rlt__scratch_total(void);

#endif
