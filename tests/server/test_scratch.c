/* Tests of a worker's scratch arena (src/server/base/scratch.c): allocations aligned for any
 * object and never past the capacity (NULL, nothing taken), marks that nest like a stack,
 * growth only while nothing is taken and within max_memory's connection share, and every byte
 * counted in the connections' memory and given back when freed. */
#include "test.h"

#include "ratelimit/ratelimit.h"
#include "server/base/mem.h"
#include "server/base/scratch.h"

#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

TEST(allocations_are_aligned_and_never_pass_the_capacity)
{
    rlt__scratch *sc = rlt__scratch_new(1000);
    ASSERT(sc != NULL);
    ASSERT_EQ(rlt__scratch_cap(sc), 1000);
    unsigned char *a = rlt__scratch_alloc(sc, 3);
    unsigned char *b = rlt__scratch_alloc(sc, 5);
    ASSERT(a != NULL && b != NULL);
    ASSERT_EQ((uintptr_t)b % alignof(max_align_t), 0);
    ASSERT(b >= a + 3);
    size_t before = rlt__scratch_mark(sc);
    ASSERT(rlt__scratch_alloc(sc, 1000) == NULL); /* refused whole */
    ASSERT_EQ(rlt__scratch_mark(sc), before);     /* nothing taken */
    ASSERT(rlt__scratch_alloc(sc, SIZE_MAX) == NULL);
    ASSERT_EQ(rlt__scratch_mark(sc), before);
    memset(rlt__scratch_alloc(sc, 1000 - before - 16), 0xab, 1000 - before - 16); /* fits */
    ASSERT(rlt__scratch_alloc(sc, 64) == NULL);
    rlt__scratch_free(sc);
    ASSERT(rlt__scratch_new(0) == NULL);
    rlt__scratch_free(NULL);
}

TEST(marks_nest_like_a_stack)
{
    rlt__scratch *sc = rlt__scratch_new(4096);
    ASSERT(sc != NULL);
    size_t outer = rlt__scratch_mark(sc);
    char *x = rlt__scratch_alloc(sc, 100);
    size_t inner = rlt__scratch_mark(sc);
    for (int i = 0; i < 1000; i++) { /* many requests, each released: the arena never fills */
        size_t m = rlt__scratch_mark(sc);
        ASSERT(rlt__scratch_alloc(sc, 3000) != NULL);
        rlt__scratch_release(sc, m);
    }
    ASSERT_EQ(rlt__scratch_mark(sc), inner);
    rlt__scratch_release(sc, outer);
    ASSERT_EQ(rlt__scratch_mark(sc), 0);
    ASSERT(rlt__scratch_alloc(sc, 0) == (void *)x); /* the outer request's room again */
    ASSERT(rlt__scratch_peak(sc) >= 3100);
    rlt__scratch_free(sc);
}

TEST(every_byte_is_counted_in_the_connections_memory)
{
    size_t used = rlt__mem_conn_used(), total = rlt__scratch_total();
    rlt__scratch *sc = rlt__scratch_new(RLT__SCRATCH_CAP);
    ASSERT(sc != NULL);
    ASSERT_EQ(rlt__mem_conn_used(), used + RLT__SCRATCH_CAP);
    ASSERT_EQ(rlt__scratch_total(), total + RLT__SCRATCH_CAP);
    ASSERT_EQ(rlt__scratch_reserve(sc, 100), RLT_OK); /* smaller: unchanged */
    ASSERT_EQ(rlt__scratch_reserve(sc, 2 * RLT__SCRATCH_CAP), RLT_OK);
    ASSERT_EQ(rlt__mem_conn_used(), used + 2 * RLT__SCRATCH_CAP);
    ASSERT_EQ(rlt__scratch_total(), total + 2 * RLT__SCRATCH_CAP);
    /* Not while something is taken (it would move what a request holds). */
    ASSERT(rlt__scratch_alloc(sc, 1) != NULL);
    ASSERT_EQ(rlt__scratch_reserve(sc, 3 * RLT__SCRATCH_CAP), RLT_EINVAL);
    rlt__scratch_release(sc, 0);
    /* Not past the connections' share of max_memory: refused, nothing changed. */
    rlt__mem_set_conn_limit(rlt__mem_conn_used() + 1000);
    ASSERT_EQ(rlt__scratch_reserve(sc, 3 * RLT__SCRATCH_CAP), RLT_ENOMEM);
    ASSERT_EQ(rlt__scratch_cap(sc), 2 * RLT__SCRATCH_CAP);
    rlt__mem_set_conn_limit(0);
    rlt__scratch_free(sc);
    ASSERT_EQ(rlt__mem_conn_used(), used);
    ASSERT_EQ(rlt__scratch_total(), total);
}
