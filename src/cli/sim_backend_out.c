/* `ratelimit sim --backend`: the table (goodput, availability and latency per class, for the
 * requests arriving from the change on), critical traffic's unloaded latency, the limit over
 * time as text, and the same as an SVG picture with the backend's servers drawn beside. */
#include "cli/sim_backend_out.h"
#include "cli/sim_svg.h" /* rlt__svg_head */
#include "cli/svg.h"

#include <string.h>

#define MS RLT_NS_PER_MS
#define COLS 20

/* ns as milliseconds with one decimal (truncated). */
static const char *ms(char *b, rlt_ns t)
{
    snprintf(b, 24, "%lld.%lld", (long long)(t / MS), (long long)(t % MS / (MS / 10)));
    return b;
}

/* num / den as a percentage with two decimals, truncated (an availability is never rounded
 * up to a bound it missed); "-" when den is 0. */
static const char *percent(char *b, __int128 num, __int128 den)
{
    if (den <= 0) return strcpy(b, "-");
    int64_t bp = (int64_t)(num * 10000 / den);
    snprintf(b, 24, "%lld.%02lld%%", (long long)(bp / 100), (long long)(bp % 100));
    return b;
}

static const char *secs(char *b, rlt_ns t)
{
    rlt__dec_format(b, t, RLT_NS_PER_S);
    return b;
}

static void table(const bk_sim *s)
{
    const bk_opts *o = &s->o;
    char a[32], b[32], c[32], d[32], e[32], f[32], g[32], h[32];
    rlt_ns after = o->duration - o->change_at;
    printf("%-20s %9s %8s %9s %9s %9s %9s %9s %9s %9s %6s\n", "mode", "goodput/s", "of C2",
           "critical", "default", "sheddable", "crit p50", "crit p99", "def p99", "shed p99",
           "limit");
    for (int i = 0; i < BK_MODES; i++) {
        const bk_mode *m = &s->m[i];
        printf("%-20s %9lld %8s %9s %9s %9s %9s %9s %9s %9s %6lld\n", m->name,
               (long long)((__int128)m->good_after * RLT_NS_PER_S / after),
               percent(a, (__int128)m->good_after * o->service, (__int128)o->cap_after * after),
               percent(b, m->good[0], m->offered[0]), percent(c, m->good[1], m->offered[1]),
               percent(d, m->good[2], m->offered[2]), ms(e, m->p50[0]), ms(f, m->p99[0]),
               ms(g, m->p99[1]), ms(h, m->p99[2]), (long long)m->limit_at[m->nsamples - 1]);
    }
    printf("\ncritical alone on the whole backend, unlimited (unloaded): p50 %s ms, p99 %s ms\n",
           ms(a, s->unloaded.p50[0]), ms(b, s->unloaded.p99[0]));
}

static rlt_ns column_step(const bk_opts *o)
{
    rlt_ns step = o->duration / COLS;
    step -= step % BK_SAMPLE;
    return step > 0 ? step : BK_SAMPLE;
}

static void over_time(const bk_sim *s)
{
    rlt_ns step = column_step(&s->o);
    char a[RLT__DEC_BUF];
    printf("\nlimit over time (requests in flight allowed), every %s s:\n%-20s", secs(a, step),
           "t (s)");
    for (rlt_ns t = 0; t <= s->o.duration; t += step)
        printf(" %5s", secs(a, t));
    printf("\n%-20s", "servers");
    for (rlt_ns t = 0; t <= s->o.duration; t += step)
        printf(" %5lld", (long long)(t < s->o.change_at ? s->o.cap : s->o.cap_after));
    printf("\n");
    for (int i = 0; i < BK_MODES; i++) {
        const bk_mode *m = &s->m[i];
        printf("%-20s", m->name);
        for (rlt_ns t = 0; t <= s->o.duration; t += step)
            printf(" %5lld", (long long)m->limit_at[t / BK_SAMPLE]);
        printf("\n");
    }
}

#define W 980
#define H 420
#define LEFT 70
#define TOP 60
#define PLOT 880
#define HEIGHT 300

static const char *const colour[BK_MODES] = {"#d62828", "#f28482", "#3a6ea5",
                                             "#8ecae6", "#2a9d3a", "#95d5b2"};

static int svg(const bk_sim *s, FILE *out)
{
    const bk_opts *o = &s->o;
    int64_t top = o->cap > o->cap_after ? o->cap : o->cap_after;
    for (int i = 0; i < BK_MODES; i++)
        for (size_t k = 0; k < s->m[i].nsamples; k++)
            if (s->m[i].limit_at[k] > top) top = s->m[i].limit_at[k];
    top += top / 10 + 1;
    char title[200];
    snprintf(title, sizeof title,
             "ratelimit sim --backend %lld: the limit over time (servers %lld, then %lld)",
             (long long)o->cap, (long long)o->cap, (long long)o->cap_after);
    rlt__svg_head(out, W, H, title);
    size_t n = s->m[0].nsamples;
#define X(k) (LEFT + (int64_t)(k)*PLOT / (int64_t)(n > 1 ? n - 1 : 1))
#define Y(v) (TOP + HEIGHT - (int64_t)(v)*HEIGHT / top)
    for (int i = 0; i < BK_MODES; i++)
        rlt__svg_key(out, LEFT + i * 150, colour[i], s->m[i].name);
    rlt__svg_frame(out, LEFT, TOP, PLOT, HEIGHT);
    size_t kc = (size_t)(o->change_at / BK_SAMPLE);
    fprintf(out,
            "<polyline fill=\"none\" stroke=\"#000\" stroke-dasharray=\"6 4\" points=\"%lld,%lld "
            "%lld,%lld %lld,%lld %lld,%lld\"/>\n",
            (long long)X(0), (long long)Y(o->cap), (long long)X(kc), (long long)Y(o->cap),
            (long long)X(kc), (long long)Y(o->cap_after), (long long)X(n - 1),
            (long long)Y(o->cap_after));
    for (int i = 0; i < BK_MODES; i++) {
        fprintf(out, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"",
                colour[i]);
        for (size_t k = 0; k < n; k++)
            fprintf(out, "%s%lld,%lld", k ? " " : "", (long long)X(k),
                    (long long)Y(s->m[i].limit_at[k]));
        fputs("\"/>\n", out);
    }
    char a[RLT__DEC_BUF];
    for (int t = 0; t <= 4; t++) {
        rlt_ns at = o->duration / 4 * t;
        fprintf(out, "<text x=\"%lld\" y=\"%d\" text-anchor=\"middle\">%s s</text>\n",
                (long long)X(at / BK_SAMPLE), TOP + HEIGHT + 18, secs(a, at));
    }
    fprintf(out,
            "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">0</text>"
            "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%lld</text>\n"
            "<text x=\"%d\" y=\"%d\">dashed: the servers; lines: each mode's limit</text>\n",
            LEFT - 6, TOP + HEIGHT, LEFT - 6, TOP + 12, (long long)top, LEFT, TOP + HEIGHT + 44);
#undef X
#undef Y
    fputs("</svg>\n", out);
    if (fclose(out) != 0) {
        fprintf(stderr, "ratelimit " BK_CMD ": cannot write %s\n", o->svg);
        return 1;
    }
    return 0;
}

int rlt__bk_print(const bk_sim *s, FILE *out)
{
    const bk_opts *o = &s->o;
    char a[RLT__DEC_BUF], b[32], c[32], d[RLT__DEC_BUF];
    printf("ratelimit sim --backend %lld: %lld servers, %lld from t = %s s; service %s ms "
           "(+-5 %%), timeout %s ms; %s s\n",
           (long long)o->cap, (long long)o->cap, (long long)o->cap_after, secs(a, o->change_at),
           ms(b, o->service), ms(c, o->timeout), secs(d, o->duration));
    printf("requests per second: critical %lld, default %lld, sheddable %lld, x%lld from the "
           "change (%lld); reserve %d %%\n",
           (long long)o->rate[0], (long long)o->rate[1], (long long)o->rate[2], (long long)o->surge,
           (long long)(o->rate[2] * o->surge), o->reserve);
    printf("figures of the requests arriving from t = %s s on; C2 = %lld servers answer %lld "
           "requests per second\n\n",
           secs(a, o->change_at), (long long)o->cap_after,
           (long long)((__int128)o->cap_after * RLT_NS_PER_S / o->service));
    table(s);
    over_time(s);
    if (out && svg(s, out)) return 1;
    return fflush(stdout) == 0 ? 0 : 1;
}
