/* The simulator's picture: the timeline as an SVG, one row per algorithm with its accepted and
 * rejected requests, the shaper's queue waits and the concurrency limiter's holds as bars, and
 * the worst window-length span marked; and the pieces every picture of the simulator shares. */
#include "cli/sim_svg.h"

#include "cli/sim_run.h"

#include <stdio.h>

#define SVG_TOP 56
#define SVG_ROW 50
#define SVG_LANES 4 /* stacked bars per row (queue waits, holds) before they share a lane */
#define SVG_LANE_DY 5

/* x of time t in hundredths of a pixel. */
static int64_t svg_x(rlt_ns t, span sp)
{
    return SVG_LEFT * 100 + (int64_t)((__int128)(t - sp.t0) * (SVG_PLOT * 100) / (sp.t1 - sp.t0));
}

static const char *px(char *buf, int64_t h)
{
    rlt__dec_format(buf, h, 100);
    return buf;
}

static void xml_text(FILE *f, const char *t)
{
    for (; *t; t++) {
        const char *e = *t == '<'   ? "&lt;"
                        : *t == '>' ? "&gt;"
                        : *t == '&' ? "&amp;"
                        : *t == '"' ? "&quot;"
                                    : NULL;
        if (e)
            fputs(e, f);
        else
            fputc(*t, f);
    }
}

void rlt__svg_head(FILE *f, int width, int height, const char *title)
{
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n",
            width, height, width, height);
    fputs("<title>", f);
    xml_text(f, title);
    fputs("</title>\n<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n"
          "<text x=\"10\" y=\"24\" font-size=\"15\" font-weight=\"bold\">",
          f);
    xml_text(f, title);
    fputs("</text>\n", f);
}

int rlt__svg_close(const sim *s, FILE *f)
{
    fputs("</svg>\n", f);
    if (fclose(f) != 0) {
        fprintf(stderr, "ratelimit " CMD ": writing %s failed\n", s->svg);
        return 1;
    }
    return 0;
}

/* The time axis: a dashed line and a label at every window boundary, a faint line at every
 * whole tick when there are few enough to read. */
static void svg_axis(const sim *s, FILE *f, span sp, int y0, int y1)
{
    char a[RLT__DEC_BUF], b[RLT__DEC_BUF], c[RLT__DEC_BUF], d[RLT__DEC_BUF];
    if ((sp.t1 - sp.t0) / NS <= 60 && sp.t0 % NS == 0)
        for (rlt_ns t = sp.t0; t <= sp.t1; t += NS)
            fprintf(f, "<line x1=\"%s\" y1=\"%d\" x2=\"%s\" y2=\"%d\" stroke=\"#f0f0f0\"/>\n",
                    px(a, svg_x(t, sp)), y0, px(b, svg_x(t, sp)), y1);
    for (rlt_ns t = sp.t0; t <= sp.t1; t += s->window) {
        int64_t x = svg_x(t, sp);
        fprintf(f,
                "<line x1=\"%s\" y1=\"%d\" x2=\"%s\" y2=\"%d\" stroke=\"#999999\" "
                "stroke-dasharray=\"4 3\"/>\n<text x=\"%s\" y=\"%d\" text-anchor=\"middle\">%s"
                "</text>\n",
                px(a, x), y0, px(b, x), y1, px(c, x), y1 + 16, ticks(d, t));
    }
    fprintf(f,
            "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">t (ticks); dashed lines: window "
            "boundaries</text>\n",
            SVG_LEFT + SVG_PLOT / 2, y1 + 34);
}

/* Bars from each accepted request's arrival to the end of its wait or hold, each in the lowest
 * lane free at its arrival (so that bars in the queue together never overlap). */
static void svg_bars(const sim *s, FILE *f, const run *r, span sp, int y, const char *colour)
{
    rlt_ns lane_end[SVG_LANES];
    char a[RLT__DEC_BUF], b[RLT__DEC_BUF], c[RLT__DEC_BUF];
    for (int l = 0; l < SVG_LANES; l++)
        lane_end[l] = INT64_MIN;
    for (size_t k = 0; k < s->n; k++) {
        if (!r->ok[k] || r->busy[k] <= 0) continue;
        rlt_ns t = s->r[k].t, end = t + r->busy[k];
        int lane = 0;
        for (int l = 0; l < SVG_LANES; l++)
            if (lane_end[l] <= t) {
                lane = l;
                break;
            } else if (lane_end[l] < lane_end[lane]) {
                lane = l; /* all busy: share the one that frees first */
            }
        lane_end[lane] = end;
        int ly = y + 8 + lane * SVG_LANE_DY;
        fprintf(f,
                "<line x1=\"%s\" y1=\"%d\" x2=\"%s\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2.5\"/>"
                "\n",
                px(a, svg_x(t, sp)), ly, px(b, svg_x(end, sp)), ly, colour);
        if (r->p.algo == RLT_LEAKY_BUCKET) /* the send: where the request leaves the queue */
            fprintf(f, "<circle cx=\"%s\" cy=\"%d\" r=\"2.5\" fill=\"%s\"/>\n",
                    px(c, svg_x(end, sp)), ly, C_OK);
    }
}

static void svg_marks(const sim *s, FILE *f, const run *r, span sp, int y)
{
    char a[RLT__DEC_BUF], b[RLT__DEC_BUF], c[RLT__DEC_BUF], d[RLT__DEC_BUF];
    for (size_t k = 0; k < s->n; k++) {
        int64_t x = svg_x(s->r[k].t, sp);
        if (r->ok[k])
            fprintf(f,
                    "<circle cx=\"%s\" cy=\"%d\" r=\"4.5\" fill=\"%s\" stroke=\"#ffffff\" "
                    "stroke-width=\"1\"/>\n",
                    px(a, x), y, C_OK);
        else
            fprintf(
                f, "<path d=\"M%s %d L%s %d M%s %d L%s %d\" stroke=\"%s\" stroke-width=\"2.5\"/>\n",
                px(a, x - 400), y - 4, px(b, x + 400), y + 4, px(c, x - 400), y + 4, px(d, x + 400),
                y - 4, C_NO);
    }
}

/* One row: name, counts, the contract verdict; a band over the worst window-length span when
 * it holds more than L (the algorithm's right, or a violation in red); bars; marks. */
static void svg_row(const sim *s, FILE *f, const run *r, span sp, int i)
{
    char a[RLT__DEC_BUF], b[RLT__DEC_BUF], w[RLT__DEC_BUF];
    const int top = SVG_TOP + i * SVG_ROW, y = top + SVG_ROW / 2 - 6;
    fprintf(f, "<g>\n");
    if (i % 2 == 0)
        fprintf(f, "<rect x=\"0\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#f8f8f8\"/>\n", top,
                SVG_LEFT + SVG_PLOT + 20, SVG_ROW);
    fprintf(f, "<text x=\"10\" y=\"%d\" font-weight=\"bold\">%s</text>\n", top + 15, r->name);
    fprintf(f,
            "<text x=\"10\" y=\"%d\" font-size=\"10\" fill=\"#444444\">ok %lld, rejected %lld"
            "</text>\n",
            top + 28, (long long)r->n_ok, (long long)r->n_rej);
    fprintf(f, "<text x=\"10\" y=\"%d\" font-size=\"10\" fill=\"%s\">", top + 41,
            r->held ? C_OK : C_NO);
    xml_text(f, r->held ? "" : "VIOLATED ");
    xml_text(f, r->contract);
    xml_text(f, r->held ? " ✓" : "");
    fputs("</text>\n", f);
    if (r->worst > s->limit || !r->held) {
        int64_t x0 = svg_x(r->worst_t0, sp), x1 = svg_x(r->worst_t0 + s->window, sp);
        if (x1 > (SVG_LEFT + SVG_PLOT) * 100) x1 = (SVG_LEFT + SVG_PLOT) * 100;
        fprintf(f,
                "<rect x=\"%s\" y=\"%d\" width=\"%s\" height=\"%d\" fill=\"%s\" stroke=\"%s\" "
                "stroke-width=\"0.8\"/>\n",
                px(a, x0), top + 3, px(b, x1 - x0), SVG_ROW - 6, r->held ? C_BAND : "#fbd5d5",
                r->held ? "#e0b060" : C_NO);
        fprintf(f,
                "<text x=\"%s\" y=\"%d\" font-size=\"10\" fill=\"#7a5200\">%lld in %s ticks"
                "</text>\n",
                px(a, x0 + 300), top + 13, (long long)r->worst, ticks(w, s->window));
    }
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#dddddd\"/>\n", SVG_LEFT, y,
            SVG_LEFT + SVG_PLOT, y);
    if (r->p.algo == RLT_LEAKY_BUCKET) svg_bars(s, f, r, sp, y, C_WAIT);
    if (r->p.algo == RLT_CONCURRENCY) svg_bars(s, f, r, sp, y, C_HOLD);
    svg_marks(s, f, r, sp, y);
    fputs("</g>\n", f);
}

int rlt__sim_svg(sim *s, FILE *f, const char *title)
{
    span sp = rlt__sim_span(s);
    const int width = SVG_LEFT + SVG_PLOT + 30;
    const int y_axis = SVG_TOP + NALGO * SVG_ROW;
    const int height = y_axis + 100;
    char h[RLT__DEC_BUF], w[RLT__DEC_BUF];
    rlt__svg_head(f, width, height, title);
    fprintf(f,
            "<text x=\"10\" y=\"42\" font-size=\"11\" fill=\"#444444\">each algorithm with "
            "limit %lld per %s ticks; concurrency: %lld in flight, each request held %s "
            "ticks</text>\n",
            (long long)s->limit, ticks(w, s->window), (long long)s->limit,
            ticks(h, s->hold < s->window ? s->hold : s->window));
    for (int i = 0; i < NALGO; i++)
        svg_row(s, f, &s->runs[i], sp, i);
    svg_axis(s, f, sp, SVG_TOP, y_axis);
    int ly = height - 26, lx = 10;
    fprintf(f,
            "<circle cx=\"%d\" cy=\"%d\" r=\"4.5\" fill=\"%s\"/><text x=\"%d\" y=\"%d\">"
            "accepted</text>\n",
            lx + 5, ly - 4, C_OK, lx + 14, ly);
    lx += 84;
    fprintf(f,
            "<path d=\"M%d %d L%d %d M%d %d L%d %d\" stroke=\"%s\" stroke-width=\"2.5\"/>"
            "<text x=\"%d\" y=\"%d\">rejected</text>\n",
            lx, ly - 8, lx + 8, ly, lx, ly, lx + 8, ly - 8, C_NO, lx + 14, ly);
    lx += 80;
    fprintf(f,
            "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2.5\"/>"
            "<circle cx=\"%d\" cy=\"%d\" r=\"2.5\" fill=\"%s\"/><text x=\"%d\" y=\"%d\">"
            "waiting in the queue, then sent</text>\n",
            lx, ly - 4, lx + 22, ly - 4, C_WAIT, lx + 22, ly - 4, C_OK, lx + 30, ly);
    lx += 240;
    fprintf(f,
            "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2.5\"/>"
            "<text x=\"%d\" y=\"%d\">in flight</text>\n",
            lx, ly - 4, lx + 22, ly - 4, C_HOLD, lx + 28, ly);
    lx += 95;
    fprintf(f,
            "<rect x=\"%d\" y=\"%d\" width=\"22\" height=\"12\" fill=\"%s\" stroke=\"#e0b060\" "
            "stroke-width=\"0.8\"/><text x=\"%d\" y=\"%d\">more than %lld in %s ticks, as the "
            "algorithm allows</text>\n",
            lx, ly - 10, C_BAND, lx + 28, ly, (long long)s->limit, ticks(w, s->window));
    fprintf(f,
            "<text x=\"10\" y=\"%d\" font-size=\"10\" fill=\"#444444\">✓: the algorithm's own "
            "contract held on this run (checked on every request); a broken one would be "
            "marked VIOLATED in red</text>\n",
            height - 8);
    return rlt__svg_close(s, f);
}
