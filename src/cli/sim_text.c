/* The simulator's text output: the table of end states, counts, worst bursts and contracts, and
 * the timeline of every request under every algorithm, one character per column. */
#include "cli/sim_text.h"

#include "cli/sim_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The state column: each algorithm's state at s->t_state in its own terms, from a peek at a
 * copy of its state and from the record of what it accepted. */
static void describe_state(sim *s, run *r)
{
    const rlt_ns T = s->t_state, W = s->window;
    const int64_t L = s->limit;
    char a[64], b[64], c[64];
    rlt_decision d;
    size_t sz = rlt_state_size(&r->p);
    void *copy = malloc(sz);
    if (!copy || rlt_decide(&r->p, memcpy(copy, r->st, sz), T, 0, &d) != RLT_OK)
        memset(&d, 0, sizeof d);
    free(copy);
    switch (r->p.algo) {
    case RLT_FIXED_WINDOW: {
        int64_t k = rlt__window_of(T, W);
        snprintf(r->state, sizeof r->state, "window [%s, %s): count %lld/%lld", ticks(a, k * W),
                 ticks(b, (k + 1) * W), (long long)(L - d.remaining), (long long)L);
        break;
    }
    case RLT_SLIDING_LOG: {
        size_t shown = 0, total = 0, n = 0;
        for (size_t i = 0; i < s->n; i++)
            if (r->ok[i] && s->r[i].t > T - W && s->r[i].t <= T) total++;
        n = (size_t)snprintf(r->state, sizeof r->state, "log [");
        for (size_t i = 0; i < s->n; i++) {
            if (!(r->ok[i] && s->r[i].t > T - W && s->r[i].t <= T)) continue;
            shown++;
            if (total > 4 && shown == 4) n += (size_t)snprintf(r->state + n, 16, ", ...");
            if (total > 4 && shown >= 4 && shown < total) continue;
            n += (size_t)snprintf(r->state + n, 40, "%s%s", shown > 1 ? ", " : "",
                                  ticks(a, s->r[i].t));
        }
        snprintf(r->state + n, sizeof r->state - n, "]: %lld/%lld", (long long)(L - d.remaining),
                 (long long)L);
        break;
    }
    case RLT_SLIDING_WINDOW: {
        int64_t k = rlt__window_of(T, W), prev = 0, curr = 0;
        for (size_t i = 0; i < s->n; i++) {
            if (!r->ok[i] || s->r[i].t > T) continue;
            int64_t ki = rlt__window_of(s->r[i].t, W);
            if (ki == k) curr += s->r[i].cost;
            if (ki == k - 1) prev += s->r[i].cost;
        }
        rlt_ns e = T - k * W;
        rlt__frac_format(a, sizeof a, W - e, W, 2, RLT__ROUND, 0);
        rlt__frac_format(b, sizeof b, (__int128)prev * (W - e) + (__int128)curr * W, W, 2,
                         RLT__ROUND, 0);
        snprintf(r->state, sizeof r->state, "%lld×%s + %lld ≈ %s of %lld", (long long)prev, a,
                 (long long)curr, b, (long long)L);
        break;
    }
    case RLT_TOKEN_BUCKET:
    case RLT_GCRA: {
        /* tokens = B - (time until full) x rate, from the library's own reset_after. */
        __int128 num = (__int128)r->p.burst * W - (__int128)d.reset_after * L;
        rlt__frac_format(a, sizeof a, num < 0 ? 0 : num, W, 2, RLT__FLOOR, 0);
        rlt__frac_format(b, sizeof b, (__int128)L * NS, W, 2, RLT__ROUND, 0);
        if (r->p.algo == RLT_GCRA)
            snprintf(r->state, sizeof r->state, "tat %s: tokens %s / %lld, +%s per tick",
                     ticks(c, T + d.reset_after), a, (long long)r->p.burst, b);
        else
            snprintf(r->state, sizeof r->state, "tokens %s / %lld, +%s per tick", a,
                     (long long)r->p.burst, b);
        break;
    }
    case RLT_LEAKY_BUCKET: {
        int64_t queued = 0;
        for (size_t i = 0; i < s->n; i++)
            if (r->ok[i] && s->r[i].t <= T && s->r[i].t + r->delay[i] > T) queued++;
        rlt__frac_format(a, sizeof a, W, (__int128)L * NS, 2, RLT__ROUND, 1);
        snprintf(r->state, sizeof r->state, "queue %lld/%lld, drains 1 per %s ticks",
                 (long long)queued, (long long)r->p.queue, a);
        break;
    }
    case RLT_CONCURRENCY: {
        int64_t live = 0;
        for (size_t i = 0; i < s->n; i++)
            if (r->ok[i] && s->r[i].t <= T && s->r[i].t + r->busy[i] > T) live++;
        snprintf(r->state, sizeof r->state, "in flight %lld/%lld, each held %s ticks",
                 (long long)live, (long long)L, ticks(a, s->hold < W ? s->hold : W));
        break;
    }
    default:
        snprintf(r->state, sizeof r->state, "?");
        break;
    }
}

/* Display width of UTF-8 text: code points (the table uses ×, ≈ and ≤, one column each). */
static size_t width_of(const char *t)
{
    size_t w = 0;
    for (; *t; t++)
        if (((unsigned char)*t & 0xC0) != 0x80) w++;
    return w;
}

static void print_row(char cells[NCOL][300], const size_t *w)
{
    for (int c = 0; c < NCOL; c++) {
        printf("| %s", cells[c]);
        for (size_t k = width_of(cells[c]); k < w[c]; k++)
            putchar(' ');
        putchar(' ');
    }
    puts("|");
}

void rlt__sim_states(sim *s)
{
    for (int a = 0; a < NALGO; a++)
        if (!s->runs[a].error[0]) describe_state(s, &s->runs[a]);
}

void rlt__sim_cells(const sim *s, char cells[NALGO + 1][NCOL][300])
{
    char a[RLT__DEC_BUF], b[RLT__DEC_BUF];
    snprintf(cells[0][0], 300, "algorithm");
    snprintf(cells[0][1], 300, "state at t = %s", ticks(a, s->t_state));
    snprintf(cells[0][2], 300, "ok");
    snprintf(cells[0][3], 300, "rejected");
    snprintf(cells[0][4], 300, "worst %s-tick burst", ticks(b, s->window));
    snprintf(cells[0][5], 300, "max delay");
    snprintf(cells[0][6], 300, "own contract");
    for (int i = 0; i < NALGO; i++) {
        const run *r = &s->runs[i];
        snprintf(cells[i + 1][0], 300, "%s", r->name);
        snprintf(cells[i + 1][1], 300, "%s", r->state);
        snprintf(cells[i + 1][2], 300, "%lld", (long long)r->n_ok);
        snprintf(cells[i + 1][3], 300, "%lld", (long long)r->n_rej);
        snprintf(cells[i + 1][4], 300, "%lld", (long long)r->worst);
        snprintf(cells[i + 1][5], 300, "%s", ticks(a, r->max_delay));
        snprintf(cells[i + 1][6], 300, "%s: %s", r->contract, r->held ? "held" : "VIOLATED");
    }
}

void rlt__sim_table(sim *s)
{
    static char cells[NALGO + 1][NCOL][300];
    rlt__sim_states(s);
    rlt__sim_cells(s, cells);
    size_t w[NCOL] = {0};
    for (int i = 0; i <= NALGO; i++)
        for (int c = 0; c < NCOL; c++)
            if (width_of(cells[i][c]) > w[c]) w[c] = width_of(cells[i][c]);
    print_row(cells[0], w);
    for (int c = 0; c < NCOL; c++) {
        fputs("|-", stdout);
        for (size_t k = 0; k < w[c]; k++)
            putchar('-');
        putchar('-');
    }
    puts("|");
    for (int i = 1; i <= NALGO; i++)
        print_row(cells[i], w);
}

static size_t col_of(rlt_ns t, span sp, size_t cols)
{
    __int128 c = (__int128)(t - sp.t0) * (__int128)cols / (sp.t1 - sp.t0);
    if (c < 0) c = 0;
    if (c >= (__int128)cols) c = (__int128)cols - 1;
    return (size_t)c;
}

void rlt__sim_timeline(sim *s)
{
    const size_t cols = (size_t)s->width;
    const int pad = 16;
    span sp = rlt__sim_span(s);
    char a[RLT__DEC_BUF], b[RLT__DEC_BUF], per[64];
    rlt__frac_format(per, sizeof per, sp.t1 - sp.t0, (__int128)cols * NS, 3, RLT__ROUND, 1);
    printf("\ntimeline t = %s .. %s, one column = %s ticks: o accepted, x rejected, # both, "
           "= queued, - in flight\n",
           ticks(a, sp.t0), ticks(b, sp.t1), per);
    char *labels = malloc(cols + 64), *ruler = malloc(cols + 2), *row = malloc(cols + 1);
    unsigned char *flags = malloc(cols);
    if (!labels || !ruler || !row || !flags) goto out;
    memset(labels, ' ', cols + 63);
    labels[cols + 63] = '\0';
    memset(ruler, '-', cols + 1);
    ruler[cols + 1] = '\0';
    size_t free_from = 0, last_label = 0;
    for (rlt_ns t = sp.t0; t <= sp.t1; t += s->window) {
        size_t c = (size_t)((__int128)(t - sp.t0) * (__int128)cols / (sp.t1 - sp.t0));
        ruler[c] = '|';
        size_t len = rlt__dec_format(a, t, NS);
        if (c >= free_from && c + len < cols + 63) {
            memcpy(labels + c, a, len);
            free_from = c + len + 1;
            last_label = c + len;
        }
    }
    labels[last_label] = '\0';
    printf("%*s%s\n%*s%s\n", pad, "", labels, pad, "", ruler);
    for (int i = 0; i < NALGO; i++) {
        run *r = &s->runs[i];
        memset(flags, 0, cols);
        for (size_t k = 0; k < s->n; k++) {
            size_t c = col_of(s->r[k].t, sp, cols);
            flags[c] |= r->ok[k] ? 1 : 2;
            if (r->ok[k] && r->busy[k] > 0) {
                /* the end instant itself is free again: stop one ns short of it */
                size_t e = col_of(s->r[k].t + r->busy[k] - 1, sp, cols);
                for (size_t j = c + 1; j <= e; j++)
                    flags[j] |= i == CONC ? 8 : 4;
            }
        }
        for (size_t c = 0; c < cols; c++)
            row[c] = (flags[c] & 3) == 3 ? '#'
                     : flags[c] & 1      ? 'o'
                     : flags[c] & 2      ? 'x'
                     : flags[c] & 4      ? '='
                     : flags[c] & 8      ? '-'
                                         : '.';
        row[cols] = '\0';
        printf("%-*s%s\n", pad, r->name, row);
    }
out:
    free(labels);
    free(ruler);
    free(row);
    free(flags);
}
