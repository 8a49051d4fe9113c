/* The simulator's requests (sim_traffic.c): each function appends to s->r (sim_types.h) and
 * returns 0, 2 after a usage error, or 1 after another error, with its message on stderr. */
#ifndef RLT_CLI_SIM_TRAFFIC_H
#define RLT_CLI_SIM_TRAFFIC_H

#include "cli/sim_types.h"

/* The --pattern s->pattern (boundary, steady, burst, random) from s->limit, s->window,
 * s->rate_e9, s->duration and s->seed; an unknown name is a usage error. */
int rlt__sim_pattern(sim *s);

/* The --at list of times in ticks, "1,2,9.5", each of cost 1. */
int rlt__sim_at(sim *s, const char *list);

/* The --trace file at `path` ("-": stdin), lines "TIME [KEY [COST]]" (rlt__trace_parse). */
int rlt__sim_trace(sim *s, const char *path);

/* Sorts the requests by time, keeping the input order of equal times. */
void rlt__sim_sort(sim *s);

#endif
