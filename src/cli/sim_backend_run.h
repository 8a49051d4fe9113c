/* The model of `ratelimit sim --backend` (sim_backend_run.c). */
#ifndef RLT_CLI_SIM_BACKEND_RUN_H
#define RLT_CLI_SIM_BACKEND_RUN_H

#include "cli/sim_backend_types.h"

/* Runs mode m over the arrivals of s (all of them, or critical only for the unloaded run),
 * filling m's figures and limit_at (owned by m).  0, or 1 with a message on stderr when memory
 * ran out. */
int rlt__bk_run(const bk_sim *s, bk_mode *m);

#endif
