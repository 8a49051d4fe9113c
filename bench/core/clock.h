/* The core benchmarks' one clock read (bench_core.c, bench_priority.c): CLOCK_MONOTONIC in ns.
 * Benchmarks read a clock around their timed loops; the code they time never does. */
#ifndef RLT_BENCH_CORE_CLOCK_H
#define RLT_BENCH_CORE_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#endif
