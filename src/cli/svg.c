/* The pictures' shared pieces (svg.h). */
#include "cli/svg.h"

#include <errno.h>
#include <string.h>

int rlt__svg_open(const char *cmd, const char *path, FILE **out)
{
    *out = NULL;
    if (path && !(*out = fopen(path, "w"))) {
        fprintf(stderr, "ratelimit %s: cannot write %s: %s\n", cmd, path, strerror(errno));
        return 1;
    }
    return 0;
}

void rlt__svg_key(FILE *f, int x, const char *colour, const char *name)
{
    fprintf(f,
            "<rect x=\"%d\" y=\"36\" width=\"14\" height=\"4\" fill=\"%s\"/>"
            "<text x=\"%d\" y=\"42\">%s</text>\n",
            x, colour, x + 20, name);
}

void rlt__svg_frame(FILE *f, int x, int y, int w, int h)
{
    fprintf(f,
            "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#999\"/>\n",
            x, y, w, h);
}
