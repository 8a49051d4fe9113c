/* The simulator's runs (sim_run.c): every algorithm of s->runs over the requests s->r. */
#ifndef RLT_CLI_SIM_RUN_H
#define RLT_CLI_SIM_RUN_H

#include "cli/sim_types.h"

/* Sets up s->runs (one policy per algorithm from s->limit, s->window and s->block, or row a's
 * s->policy_text[a] when set, a refused text leaving that row's error and an empty run) and runs
 * each over the sorted requests, filling every field of each run but `state`.  Returns 0, 2
 * after a usage error (a --limit/--window/--block no algorithm can take), or 1 after another
 * error; the message is on stderr. */
int rlt__sim_run(sim *s);

/* Frees what rlt__sim_run allocated in s->runs and zeroes them (a second run may follow). */
void rlt__sim_free_runs(sim *s);

/* Whole windows covering every arrival, every wait and hold of every run, and s->t_state. */
span rlt__sim_span(const sim *s);

#endif
