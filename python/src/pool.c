/* libratelimit._native: the pools of connections that the Redis and daemon stores reuse
 * across calls, under the GIL.  Apart from both stores' code so that each uses the pool and
 * neither calls the other. */
#include "native.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The process's id, kept by a fork handler rather than asked of the kernel: getpid(2) is a
 * system call (glibc caches it no more), and the pool is asked on every call. */
static pid_t self_pid;
static pthread_once_t self_once = PTHREAD_ONCE_INIT;

static void self_after_fork(void)
{
    self_pid = getpid();
}

static void self_init(void)
{
    self_pid = getpid();
    pthread_atfork(NULL, NULL, self_after_fork);
}

pid_t pyrlt_self_pid(void)
{
    pthread_once(&self_once, self_init);
    return self_pid;
}

void *pyrlt_pool_take(pyrlt_pool *p)
{
    pid_t pid = pyrlt_self_pid();
    if (p->pid != pid) { /* forked: the pooled connections are the parent's */
        p->n = 0;
        p->pid = pid;
    }
    return p->n ? p->items[--p->n] : NULL;
}

void pyrlt_pool_give(pyrlt_pool *p, void *item, void (*close_fn)(void *))
{
    if (!item) return;
    if (p->pid != pyrlt_self_pid()) { /* taken before a fork in another thread: not ours to pool */
        close_fn(item);
        return;
    }
    if (p->n == p->cap) {
        size_t nc = p->cap ? p->cap * 2 : 8;
        void **ni = realloc(p->items, nc * sizeof *ni);
        if (!ni) {
            close_fn(item);
            return;
        }
        p->items = ni;
        p->cap = nc;
    }
    p->items[p->n++] = item;
}

void pyrlt_pool_clear(pyrlt_pool *p, void (*close_fn)(void *))
{
    for (size_t i = 0; i < p->n; i++)
        if (p->pid == pyrlt_self_pid()) close_fn(p->items[i]);
    free(p->items);
    memset(p, 0, sizeof *p);
}
