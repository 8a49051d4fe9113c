/* The simulator's pictures (sim_svg.c): the timeline as an SVG, and what every picture of the
 * simulator shares (sim_accuracy.c draws the other): the plot's place and the colours. */
#ifndef RLT_CLI_SIM_SVG_H
#define RLT_CLI_SIM_SVG_H

#include "cli/sim_types.h"

#include <stdio.h>

/* The plot: x from SVG_LEFT, SVG_PLOT pixels wide. */
#define SVG_LEFT 210
#define SVG_PLOT 720

/* Colours: accepted, rejected, waiting in the shaper's queue, in flight, over-L band. */
#define C_OK "#2a9d3a"
#define C_NO "#d62828"
#define C_WAIT "#e09f00"
#define C_HOLD "#3a6ea5"
#define C_BAND "#fff1d6"

/* Writes the timeline picture of the runs (after rlt__sim_run) with `title` into `f`, opened
 * before anything was printed so that a bad path fails first, and closes it.  0, or 1 with a
 * message on stderr when writing failed. */
int rlt__sim_svg(sim *s, FILE *f, const char *title);

/* The XML prolog, the <svg> element of width x height pixels, a white background and `title`
 * (escaped) as the document's title and its heading. */
void rlt__svg_head(FILE *f, int width, int height, const char *title);

/* Ends the <svg> element and closes f: 0, or 1 with a message naming s->svg on stderr. */
int rlt__svg_close(const sim *s, FILE *f);

#endif
