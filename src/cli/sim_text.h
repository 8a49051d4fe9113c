/* The simulator's text output (sim_text.c), on stdout, after rlt__sim_run. */
#ifndef RLT_CLI_SIM_TEXT_H
#define RLT_CLI_SIM_TEXT_H

#include "cli/sim_types.h"

/* Fills each run's state column (at s->t_state) in its own terms (a refused row: none). */
void rlt__sim_states(sim *s);

/* The table's cells after rlt__sim_states: row 0 the header, row 1 + a run a's name, state,
 * ok, rejected, worst burst, max delay and contract with its verdict, each NUL-terminated. */
void rlt__sim_cells(const sim *s, char cells[NALGO + 1][NCOL][300]);

/* Fills each run's state column (at s->t_state) and prints the table: per algorithm its state,
 * ok, rejected, worst burst of one window, max delay and its own contract's verdict. */
void rlt__sim_table(sim *s);

/* Prints the timeline over rlt__sim_span(s) in s->width columns: o accepted, x rejected,
 * # both, = queued, - in flight. */
void rlt__sim_timeline(sim *s);

#endif
