/* The memory budget's bookkeeping for connection buffers: one atomic counter, checked before a
 * buffer grows. */
#include "server/base/mem.h"

static size_t conn_used;
static size_t conn_limit;

size_t rlt__mem_store_share(size_t max_memory)
{
    return max_memory - max_memory / 8;
}

size_t rlt__mem_conn_share(size_t max_memory)
{
    return max_memory / 8;
}

void rlt__mem_set_conn_limit(size_t bytes)
{
    __atomic_store_n(&conn_limit, bytes, __ATOMIC_RELAXED);
}

bool rlt__mem_conn_take(size_t bytes)
{
    size_t limit = __atomic_load_n(&conn_limit, __ATOMIC_RELAXED);
    size_t after = __atomic_add_fetch(&conn_used, bytes, __ATOMIC_RELAXED);
    if (limit != 0 && after > limit) {
        __atomic_sub_fetch(&conn_used, bytes, __ATOMIC_RELAXED);
        return false;
    }
    return true;
}

void rlt__mem_conn_take_always(size_t bytes)
{
    __atomic_add_fetch(&conn_used, bytes, __ATOMIC_RELAXED);
}

void rlt__mem_conn_give(size_t bytes)
{
    __atomic_sub_fetch(&conn_used, bytes, __ATOMIC_RELAXED);
}

size_t rlt__mem_conn_used(void)
{
    return __atomic_load_n(&conn_used, __ATOMIC_RELAXED);
}

size_t rlt__mem_conn_limit(void)
{
    return __atomic_load_n(&conn_limit, __ATOMIC_RELAXED);
}
