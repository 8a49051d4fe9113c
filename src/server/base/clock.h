/* The daemon's clock (clock.c). */
#ifndef RLT_SERVER_BASE_CLOCK_H
#define RLT_SERVER_BASE_CLOCK_H

#include "ratelimit/ratelimit.h"

#include <stdint.h>

/* The daemon's clock (its only clock reads; docs/server.md "Time").  rlt__clock_start(wall)
 * sets origin = UTC midnight (00:00:00Z) of the day of `wall` (CLOCK_REALTIME, ns since the
 * epoch); from then on rlt__now() = (wall - origin) + (monotonic now - monotonic at start):
 * monotonic, small (|now| x a policy's scale must fit int64 for GCRA), and with fixed windows
 * of 1 s, 1 min, 1 h and 1 day aligned to UTC like envoyproxy/ratelimit's.  Call it once,
 * before any thread reads the clock.  Before it, rlt__now() is the monotonic clock.
 * Snapshots: save at (now, now + origin); load at (wall - origin, wall): the store then shifts
 * saved instants by origin_old - origin_new, whole days, so windows keep their meaning. */
void rlt__clock_start(int64_t wall_ns);
int64_t rlt__clock_origin(void);
rlt_ns rlt__now(void);
/* CLOCK_MONOTONIC in ns: the deadlines of waits on a condition variable set to that clock. */
rlt_ns rlt__now_mono(void);
/* CLOCK_REALTIME in ns since the epoch. */
int64_t rlt__now_wall(void);

#endif
