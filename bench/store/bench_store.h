/* What the store benchmarks beside `ratelimit bench` share (settle.c, beside.c): the clock,
 * a store with one policy, and the keys "user:<n>". */
#ifndef RLT_BENCH_STORE_H
#define RLT_BENCH_STORE_H

#include "ratelimit/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/clock.h"

static inline int64_t bs_mono_ns(void)
{
    return now_ns(); /* the core benchmarks' clock read */
}

/* A default store with the one policy `text`, named "p" (*id).  0, or -1 on any failure. */
static inline int bs_store(const char *text, rlt_store **s, int *id)
{
    rlt_policy p;
    if (rlt_store_open(s, NULL)) return -1;
    if (rlt_policy_parse(&p, text, strlen(text), NULL, 0) ||
        rlt_store_set_policy(*s, "p", &p, RLT_CHANGE_RESET, id)) {
        rlt_store_close(*s);
        return -1;
    }
    return 0;
}

typedef char bs_key[24];

/* n keys "user:0" ... into *keys and their lengths into *klen (the caller frees both).  0, or
 * -1 out of memory. */
static inline int bs_keys(long n, bs_key **keys, size_t **klen)
{
    *keys = malloc((size_t)n * sizeof **keys);
    *klen = malloc((size_t)n * sizeof **klen);
    if (!*keys || !*klen) {
        free(*keys);
        free(*klen);
        return -1;
    }
    for (long i = 0; i < n; i++)
        (*klen)[i] = (size_t)snprintf((*keys)[i], sizeof (*keys)[i], "user:%ld", i);
    return 0;
}

#endif
