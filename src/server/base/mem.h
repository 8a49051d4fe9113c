/* The daemon's memory budget (mem.c): max_memory is shared by the store (keys, states, policies,
 * tier assignments and the index, capped through rlt_store_options.max_bytes, evicting idle
 * state first, then the least recently used, or refusing new keys in fail_closed mode) and the
 * connections' input and output buffers (counted here: a buffer that would grow past the
 * connections' share is refused and its connection closed, as past max_output_buffer). */
#ifndef RLT_SERVER_BASE_MEM_H
#define RLT_SERVER_BASE_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The store's share of a budget of max_memory bytes (7/8) and the connections' (1/8). */
size_t rlt__mem_store_share(size_t max_memory);
size_t rlt__mem_conn_share(size_t max_memory);

/* Sets the connections' share in force (at start; 0 = unlimited, the default for tests). */
void rlt__mem_set_conn_limit(size_t bytes);
/* Takes `bytes` more for connection buffers: false (nothing taken) when it would pass the
 * limit.  Thread-safe. */
bool rlt__mem_conn_take(size_t bytes);
/* Takes them whatever the limit (a connection's first input buffer). */
void rlt__mem_conn_take_always(size_t bytes);
/* Gives back bytes taken. */
void rlt__mem_conn_give(size_t bytes);
/* Connection-buffer bytes in use, and the limit. */
size_t rlt__mem_conn_used(void);
size_t rlt__mem_conn_limit(void);

#endif
