/* The fleet simulator's output: the table (one row per mode: admitted, over-admission in the
 * worst window, under-admission against the exact limiter, messages per admitted request) and
 * the picture (each mode's admissions in the last window of T over time, against R x T + B). */
#include "cli/fleet_types.h"

#include "cli/sim_svg.h" /* rlt__svg_head */
#include "cli/svg.h"

#include <stdlib.h>
#include <string.h>

/* 100 x num / den with two decimals ("0.00" when den is 0). */
static const char *pct(char *buf, size_t cap, int64_t num, int64_t den)
{
    if (den <= 0 || !rlt__frac_format(buf, cap, (__int128)num * 100, den, 2, RLT__ROUND, 0))
        snprintf(buf, cap, "0.00");
    return buf;
}

static const char *secs(char *buf, rlt_ns t)
{
    rlt__dec_format(buf, t, NS);
    return buf;
}

void rlt__fleet_table(const fleet *f)
{
    const fleet_opts *o = &f->o;
    char a[RLT__DEC_BUF], b[RLT__DEC_BUF], c[RLT__DEC_BUF], d[RLT__DEC_BUF];
    int64_t wb = rlt__fleet_window_budget(f), exact = f->m[M_EXACT].admitted;
    printf("ratelimit sim --fleet: %lld nodes, pattern %s, %s s in steps of %s s, seed %llu\n",
           (long long)o->nodes, rlt__fleet_pattern_name(o->pattern), secs(a, o->duration),
           secs(b, o->step), (unsigned long long)o->seed);
    printf("budget %s: R x T + B = %lld in a window of T = %s s\n", o->budget_text, (long long)wb,
           secs(a, o->window));
    rlt__dec_format(c, o->demand_m, 1000);
    printf("demand D = %s per second per node: %lld requests in all\n", c, (long long)f->demand);
    printf("quota division: interval %s s, TTL %s s, latency %s s, no assignment %s, expired "
           "%s;\nleases of %lld units, dropped %s s after their grant\n\n",
           secs(a, o->interval), secs(b, o->ttl), secs(d, o->latency), o->no_assignment.text,
           o->expired.text, (long long)o->lease_units, secs(c, o->lease_ttl));
    printf("%-20s %10s %10s %7s %10s %7s %10s %12s\n", "mode", "admitted", "over", "%", "under",
           "%", "messages", "per admitted");
    for (int i = 0; i < NMODE; i++) {
        const fleet_mode *m = &f->m[i];
        int64_t over = m->worst > wb ? m->worst - wb : 0;
        int64_t under = exact > m->admitted ? exact - m->admitted : 0;
        char op[32], up[32], per[32];
        if (!m->admitted ||
            !rlt__frac_format(per, sizeof per, m->messages, m->admitted, 5, RLT__ROUND, 0))
            snprintf(per, sizeof per, "-");
        printf("%-20s %10lld %10lld %7s %10lld %7s %10lld %12s\n", m->name, (long long)m->admitted,
               (long long)over, pct(op, sizeof op, over, wb), (long long)under,
               pct(up, sizeof up, under, exact), (long long)m->messages, per);
    }
    printf("\nover: the most admitted in any window of T beyond R x T + B (%% of R x T + B)\n"
           "under: what the exact limiter admitted and this mode did not (%% of the exact's)\n"
           "messages: to the limiter (checks, lease requests, usage reports)\n");
}

#define W 900
#define H 430
#define LEFT 90
#define PLOT 780
#define TOP 80
#define HEIGHT 290
static const char *colour[NMODE] = {"#3a6ea5", "#e09f00", "#2a9d3a", "#d62828"};

static const char *px(char *buf, int64_t h)
{
    rlt__dec_format(buf, h, 100);
    return buf;
}

/* The admissions of the last w steps at each step (from step w - 1; before it, since 0). */
static void window_sums(const fleet *f, const fleet_mode *m, int64_t *out)
{
    int64_t w = f->o.window / f->o.step, sum = 0;
    for (int64_t k = 0; k < f->steps; k++) {
        sum += m->adm[k];
        if (k >= w) sum -= m->adm[k - w];
        out[k] = sum;
    }
}

int rlt__fleet_svg(const fleet *f, FILE *out)
{
    int64_t *sums = malloc((size_t)f->steps * NMODE * sizeof *sums);
    if (!sums) {
        fprintf(stderr, "ratelimit " FLEET_CMD ": out of memory\n");
        fclose(out);
        return 1;
    }
    int64_t wb = rlt__fleet_window_budget(f), top = wb;
    for (int i = 0; i < NMODE; i++) {
        window_sums(f, &f->m[i], sums + i * f->steps);
        for (int64_t k = 0; k < f->steps; k++)
            if (sums[i * f->steps + k] > top) top = sums[i * f->steps + k];
    }
    top += top / 10 + 1;
    char title[200], a[RLT__DEC_BUF], b[RLT__DEC_BUF], c[RLT__DEC_BUF];
    snprintf(title, sizeof title,
             "ratelimit sim --fleet %lld --pattern %s: admitted in the last %s s",
             (long long)f->o.nodes, rlt__fleet_pattern_name(f->o.pattern), secs(a, f->o.window));
    rlt__svg_head(out, W, H, title);
#define Y(v) ((int64_t)(TOP + HEIGHT) * 100 - (int64_t)((__int128)(v)*HEIGHT * 100 / top))
#define X(k) ((int64_t)LEFT * 100 + (int64_t)((__int128)(k)*PLOT * 100 / f->steps))
    for (int i = 0; i < NMODE; i++)
        rlt__svg_key(out, LEFT + i * 190, colour[i], f->m[i].name);
    rlt__svg_frame(out, LEFT, TOP, PLOT, HEIGHT);
    fprintf(
        out,
        "<line x1=\"%d\" x2=\"%d\" y1=\"%s\" y2=\"%s\" stroke=\"#000\" stroke-dasharray=\"6 4\"/>"
        "<text x=\"%d\" y=\"%s\" text-anchor=\"end\">R x T + B = %lld</text>\n",
        LEFT, LEFT + PLOT, px(a, Y(wb)), px(b, Y(wb)), LEFT + PLOT - 4, px(c, Y(wb) - 400),
        (long long)wb);
    for (int t = 0; t <= 4; t++) {
        rlt_ns at = f->o.duration / 4 * t;
        fprintf(out, "<text x=\"%s\" y=\"%d\" text-anchor=\"middle\">%s s</text>\n",
                px(a, X(at / f->o.step)), TOP + HEIGHT + 18, secs(b, at));
    }
    fprintf(out,
            "<text x=\"%d\" y=\"%s\" text-anchor=\"end\">0</text>"
            "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%lld</text>\n",
            LEFT - 6, px(a, Y(0) + 400), LEFT - 6, TOP + 12, (long long)top);
    /* One point per pixel column: the most any step under it shows (the worst stays seen). */
    for (int i = 0; i < NMODE; i++) {
        fprintf(out, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"",
                colour[i]);
        const int64_t *s = sums + i * f->steps;
        const char *sep = "";
        for (int64_t col = 0; col < PLOT; col++) {
            int64_t k0 = col * f->steps / PLOT, k1 = (col + 1) * f->steps / PLOT, v = 0;
            if (k1 <= k0) continue;
            for (int64_t k = k0; k < k1; k++)
                if (s[k] > v) v = s[k];
            fprintf(out, "%s%s,%s", sep, px(a, X(k1)), px(b, Y(v)));
            sep = " ";
        }
        fputs("\"/>\n", out);
    }
    fprintf(out,
            "<text x=\"%d\" y=\"%d\">time (the admissions of the window of T that ends there)"
            "</text>\n",
            LEFT, TOP + HEIGHT + 44);
#undef X
#undef Y
    free(sums);
    fputs("</svg>\n", out);
    if (fclose(out) != 0) {
        fprintf(stderr, "ratelimit " FLEET_CMD ": cannot write %s\n", f->o.svg);
        return 1;
    }
    return 0;
}
