/* The daemon's clock, its only clock reads (docs/server.md "Time"): the UTC time of day at
 * start, carried on by the monotonic clock. */
#include "server/base/clock.h"

#include <time.h>

/* The daemon's clock: UTC time of day at start, carried on by the monotonic clock.  Set once
 * by rlt__clock_start before any worker thread starts, read-only afterwards. */
static rlt_ns clock_base;    /* (wall at start - origin) - monotonic at start */
static int64_t clock_origin; /* UTC midnight of the start day, ns since the epoch */

static rlt_ns mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (rlt_ns)ts.tv_sec * RLT_NS_PER_S + ts.tv_nsec;
}

void rlt__clock_start(int64_t wall_ns)
{
    int64_t day = 86400 * RLT_NS_PER_S;
    clock_origin = wall_ns / day * day - (wall_ns % day < 0 ? day : 0);
    clock_base = (wall_ns - clock_origin) - mono();
}

int64_t rlt__clock_origin(void)
{
    return clock_origin;
}

rlt_ns rlt__now(void)
{
    return mono() + clock_base;
}

rlt_ns rlt__now_mono(void)
{
    return mono();
}

int64_t rlt__now_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * RLT_NS_PER_S + ts.tv_nsec;
}
