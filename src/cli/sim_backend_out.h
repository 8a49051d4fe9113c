/* The output of `ratelimit sim --backend` (sim_backend_out.c). */
#ifndef RLT_CLI_SIM_BACKEND_OUT_H
#define RLT_CLI_SIM_BACKEND_OUT_H

#include "cli/sim_backend_types.h"

#include <stdio.h>

/* Prints the table and the limit over time of the runs to stdout, and writes the SVG into
 * `svg` when not NULL (closing it).  0, or 1 with a message when a write failed. */
int rlt__bk_print(const bk_sim *s, FILE *svg);

#endif
