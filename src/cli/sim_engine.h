/* `ratelimit sim`'s engine (sim_engine.c): what the command (sim.c) and the page
 * (web/wasm/sim_export.c) both call, so that they print the same bytes for the same options. */
#ifndef RLT_CLI_SIM_ENGINE_H
#define RLT_CLI_SIM_ENGINE_H

#include "cli/sim_types.h"

#include <stdio.h>

/* rlt__sim_configure's answer to --help or -h: the caller prints its usage. */
#define RLT__SIM_HELP 3

/* A fresh simulation with `sim`'s defaults (limit 4, window 10 ticks, rate 0.5, width 60). */
void rlt__sim_defaults(sim *s);

/* Reads `sim`'s options argv[1..argc) (not --serve or --fleet) into s, which keeps pointers
 * into argv, then builds, sorts and checks its requests and sets s->t_state.  Returns 0,
 * RLT__SIM_HELP, 2 after a usage error or 1 after another error, the message on stderr. */
int rlt__sim_configure(sim *s, int argc, char **argv);

/* After rlt__sim_run: prints `sim`'s standard output (the title, the table and the timeline,
 * or with s->accuracy the accuracy report) and writes the picture into `svg` when it is not
 * NULL (closing it).  0, or 1 with a message on stderr. */
int rlt__sim_report(sim *s, FILE *svg);

/* Frees the requests and the runs of s (s stays usable as an empty simulation). */
void rlt__sim_free(sim *s);

#endif
