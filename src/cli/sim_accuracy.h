/* The simulator's accuracy report (sim_accuracy.c). */
#ifndef RLT_CLI_SIM_ACCURACY_H
#define RLT_CLI_SIM_ACCURACY_H

#include "cli/sim_types.h"

#include <stdio.h>

/* After rlt__sim_run: prints on stdout how the sliding window counter's verdicts and rate
 * estimates compare with the exact sliding log's, and, when `svg` is not NULL, writes the
 * picture of its errors over time into it and closes it.  0, or 1 with a message on stderr. */
int rlt__sim_accuracy(sim *s, FILE *svg);

#endif
