/* What the command's pictures share beyond their plots (svg.c): opening the file first, the
 * legend's entries, the plot's frame.  No dependency on any one simulator's data. */
#ifndef RLT_CLI_SVG_H
#define RLT_CLI_SVG_H

#include <stdio.h>

/* Opens `path` for a picture before anything is printed, so that a bad path fails first: 0
 * with *out set (NULL when path is NULL), or 1 after "ratelimit CMD: cannot write PATH: why"
 * on stderr. */
int rlt__svg_open(const char *cmd, const char *path, FILE **out);

/* One entry of a picture's legend at x: a swatch of `colour`, then `name`. */
void rlt__svg_key(FILE *f, int x, const char *colour, const char *name);

/* The plot's frame: a grey rectangle of w x h pixels at (x, y). */
void rlt__svg_frame(FILE *f, int x, int y, int w, int h);

#endif
