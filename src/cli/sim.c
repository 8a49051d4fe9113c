/* `ratelimit sim`: every algorithm over exactly the same request trace on a virtual clock, with
 * a table of end states and counts, a text timeline, an optional SVG of the same picture, and
 * the sliding-window-counter accuracy report.  Everything is integer arithmetic on ns (a tick
 * is one second of the virtual clock), so the output is byte-identical on every machine. */
#include "cli/cli.h"
#include "cli/cliutil.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CMD "sim"
#define NALGO 6
#define MAX_REQUESTS 5000000
#define NS RLT_NS_PER_S

typedef struct req {
    rlt_ns t;
    int64_t cost;
    size_t order; /* input position: the sort is stable */
} req;

typedef struct run {
    const char *name;
    rlt_policy p;
    void *st;
    unsigned char *ok; /* per request */
    rlt_ns *delay;     /* per request */
    int64_t n_ok, n_rej, worst;
    rlt_ns max_delay;
    char state[256];
} run;

typedef struct sim {
    int64_t limit;
    rlt_ns window;
    const char *pattern; /* boundary steady burst random at trace */
    const char *source;  /* the --at text or the --trace path */
    int64_t rate_e9;     /* requests per tick x 1e9 */
    uint64_t seed;
    rlt_ns duration;
    rlt_ns until;
    int has_until;
    int64_t width;
    const char *svg;
    int accuracy;
    req *r;
    size_t n, cap;
    run runs[NALGO];
    rlt_ns t_state; /* the instant of the state column */
} sim;

static void usage(FILE *f)
{
    fputs("usage: ratelimit sim [--limit L] [--window W] [--pattern NAME | --at T,T,... | --trace "
          "FILE]\n"
          "                     [--rate R] [--seed S] [--duration D] [--until T] [--width COLS]\n"
          "                     [--svg FILE] [--accuracy]\n"
          "Runs fixed window, sliding log, sliding window counter, token bucket, GCRA and leaky\n"
          "bucket over the same requests on a virtual clock (a tick is one second) and prints a\n"
          "table of their end states and a timeline.\n"
          "  --limit L       requests per window (default 4); token bucket and GCRA: capacity L,\n"
          "                  rate L/W; leaky bucket: queue L, draining one request every W/L\n"
          "  --window W      window in ticks, a decimal (default 10)\n"
          "  --pattern NAME  boundary (default: L requests just before t = W and L just after),\n"
          "                  steady (one every 1/R ticks), burst (2L requests, idle, 2L again),\n"
          "                  random (Poisson arrivals at R per tick from --seed, times in ms)\n"
          "  --at LIST       explicit request times in ticks: --at 1,2,9.5\n"
          "  --trace FILE    lines 'TIME [KEY [COST]]' (KEY ignored; '-' reads stdin)\n"
          "  --rate R        requests per tick for steady and random (default 0.5)\n"
          "  --seed S        seed for random (default 1)\n"
          "  --duration D    ticks of traffic for steady and random (default 3W)\n"
          "  --until T       show the state at tick T (default: the last request's time)\n"
          "  --width COLS    timeline columns (default 60)\n"
          "  --svg FILE      also write the timeline as an SVG picture\n"
          "  --accuracy      instead of the table: sliding window counter vs the exact log\n",
          f);
}

#define fail_usage(...) rlt__usage_error(CMD, __VA_ARGS__)

/* Times the simulator accepts: +-2^61 ns (73 years) keeps every window and pixel computation
 * far from int64's edge. */
#define T_LIMIT (INT64_C(1) << 61)

static int add_req(sim *s, rlt_ns t, int64_t cost)
{
    if (t < -T_LIMIT || t > T_LIMIT) {
        char a[RLT__DEC_BUF];
        rlt__dec_format(a, t, NS);
        fprintf(stderr,
                "ratelimit " CMD ": time %s is outside the simulator's range (+-%lld ticks)\n", a,
                (long long)(T_LIMIT / NS));
        return -1;
    }
    if (s->n == s->cap) {
        if (s->n >= MAX_REQUESTS) {
            fprintf(stderr,
                    "ratelimit " CMD ": more than %d requests; lower --rate or "
                    "--duration\n",
                    MAX_REQUESTS);
            return -1;
        }
        size_t nc = s->cap ? s->cap * 2 : 64;
        req *nr = realloc(s->r, nc * sizeof *nr);
        if (!nr) {
            fprintf(stderr, "ratelimit " CMD ": out of memory\n");
            return -1;
        }
        s->r = nr;
        s->cap = nc;
    }
    s->r[s->n] = (req){t, cost, s->n};
    s->n++;
    return 0;
}

/* ---- Traffic ---- */

/* splitmix64: a tiny, well-mixed, fully specified generator. */
static uint64_t next_u64(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* An Exp(1) variate as k + frac/2^64 using only integer comparisons (von Neumann, 1951): a
 * descending run of uniforms started at x has odd length with probability e^-x; accept x
 * then, else add one to k and try again.  No libm, so every machine draws the same times. */
static void exp_draw(uint64_t *x, uint64_t *k, uint64_t *frac)
{
    for (*k = 0;; (*k)++) {
        uint64_t first = next_u64(x), u = first;
        int n = 1;
        for (;;) {
            uint64_t v = next_u64(x);
            if (v >= u) break;
            u = v;
            n++;
        }
        if (n & 1) {
            *frac = first;
            return;
        }
    }
}

static rlt_ns round_ms(rlt_ns t)
{
    rlt_ns q = t / RLT_NS_PER_MS, r = t % RLT_NS_PER_MS;
    if (r < 0) {
        q--;
        r += RLT_NS_PER_MS;
    }
    return (q + (r * 2 >= RLT_NS_PER_MS)) * RLT_NS_PER_MS;
}

static int gen_pattern(sim *s)
{
    const int64_t L = s->limit;
    const rlt_ns W = s->window;
    rlt_ns gap = W / (25 * L); /* L requests fit in W/25 */
    if (gap < 1) gap = 1;
    if (strcmp(s->pattern, "boundary") == 0) {
        for (int64_t i = 0; i < L; i++)
            if (add_req(s, W - (L - i) * gap, 1)) return 1;
        for (int64_t i = 0; i < L; i++)
            if (add_req(s, W + i * gap, 1)) return 1;
        return 0;
    }
    if (strcmp(s->pattern, "burst") == 0) {
        for (int b = 0; b < 2; b++)
            for (int64_t i = 0; i < 2 * L; i++)
                if (add_req(s, W / 10 + b * 2 * W + i * gap, 1)) return 1;
        return 0;
    }
    /* Mean gap between requests, ns. */
    __int128 mean = (__int128)NS * NS / s->rate_e9;
    if (mean < 1) mean = 1;
    if (strcmp(s->pattern, "steady") == 0) {
        for (int64_t i = 0;; i++) {
            __int128 t = mean * i;
            if (t >= s->duration) break;
            if (add_req(s, round_ms((rlt_ns)t), 1)) return 1;
        }
        return 0;
    }
    if (strcmp(s->pattern, "random") == 0) {
        uint64_t x = s->seed;
        __int128 t = 0;
        for (;;) {
            uint64_t k, frac;
            exp_draw(&x, &k, &frac);
            t += mean * k + (((unsigned __int128)frac * (unsigned __int128)mean) >> 64);
            if (t >= s->duration) break;
            if (add_req(s, round_ms((rlt_ns)t), 1)) return 1;
        }
        return 0;
    }
    return fail_usage("unknown --pattern '%s' (boundary, steady, burst, random)", s->pattern);
}

static int parse_at(sim *s, const char *list)
{
    const char *p = list;
    for (;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        rlt_ns t;
        int rc = rlt__dec_parse(p, len, NS, &t);
        if (rc != RLT__DEC_OK)
            return fail_usage("--at: bad time '%.*s': %s", (int)len, p,
                              rc == RLT__DEC_PRECISION ? "more precise than 1 ns"
                                                       : rlt__dec_strerror(rc));
        if (add_req(s, t, 1)) return 1;
        if (!e) return 0;
        p = e + 1;
    }
}

static int read_trace(sim *s, const char *path)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (!f) {
        fprintf(stderr, "ratelimit " CMD ": cannot open %s: %s\n", path, strerror(errno));
        return 1;
    }
    char *line = NULL, err[160];
    size_t cap = 0;
    ssize_t len;
    long lineno = 0;
    int rc = 0;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (len && line[len - 1] == '\n') len--;
        rlt__trace_line tl;
        int pr = rlt__trace_parse(line, (size_t)len, NS, 1, &tl, err, sizeof err);
        if (pr < 0) {
            fprintf(stderr, "ratelimit " CMD ": %s:%ld: %s\n", path, lineno, err);
            rc = 1;
            break;
        }
        if (pr == 1 && add_req(s, tl.time, tl.cost)) {
            rc = 1;
            break;
        }
    }
    if (!rc && ferror(f)) {
        fprintf(stderr, "ratelimit " CMD ": reading %s: %s\n", path, strerror(errno));
        rc = 1;
    }
    free(line);
    if (f != stdin) fclose(f);
    return rc;
}

static int req_cmp(const void *a, const void *b)
{
    const req *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

typedef struct ev {
    rlt_ns t;
    int64_t cost;
} ev;

static int ev_cmp(const void *a, const void *b)
{
    rlt_ns x = ((const ev *)a)->t, y = ((const ev *)b)->t;
    return x < y ? -1 : x > y;
}

/* ---- Running ---- */

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

static const char *ticks(char *buf, rlt_ns t)
{
    rlt__dec_format(buf, t, NS);
    return buf;
}

/* The largest accepted cost inside any half-open span [x, x + W), over sorted times. */
static int64_t worst_span(const ev *e, size_t n, rlt_ns W)
{
    int64_t best = 0, sum = 0;
    size_t lo = 0;
    for (size_t hi = 0; hi < n; hi++) {
        sum += e[hi].cost;
        while (e[hi].t - e[lo].t >= W)
            sum -= e[lo++].cost;
        if (sum > best) best = sum;
    }
    return best;
}

static int init_runs(sim *s)
{
    static const struct {
        const char *name;
        rlt_algo algo;
    } algos[NALGO] = {{"Fixed window", RLT_FIXED_WINDOW},
                      {"Sliding log", RLT_SLIDING_LOG},
                      {"Sliding counter", RLT_SLIDING_WINDOW},
                      {"Token bucket", RLT_TOKEN_BUCKET},
                      {"GCRA", RLT_GCRA},
                      {"Leaky bucket", RLT_LEAKY_BUCKET}};
    for (int a = 0; a < NALGO; a++) {
        run *r = &s->runs[a];
        r->name = algos[a].name;
        int64_t queue = algos[a].algo == RLT_LEAKY_BUCKET ? s->limit : 0;
        int rc = rlt_policy_init(&r->p, algos[a].algo, s->limit, s->window, 0, queue, 0);
        if (rc != RLT_OK) {
            char w[RLT__DEC_BUF];
            return fail_usage("%s cannot take --limit %lld --window %s: %s", r->name,
                              (long long)s->limit, ticks(w, s->window), rlt_strerror(rc));
        }
        r->st = calloc(1, rlt_state_size(&r->p));
        r->ok = calloc(s->n ? s->n : 1, 1);
        r->delay = calloc(s->n ? s->n : 1, sizeof *r->delay);
        if (!r->st || !r->ok || !r->delay) {
            fprintf(stderr, "ratelimit " CMD ": out of memory\n");
            return 1;
        }
    }
    return 0;
}

static int run_all(sim *s)
{
    ev *evs = malloc((s->n ? s->n : 1) * sizeof *evs);
    if (!evs) {
        fprintf(stderr, "ratelimit " CMD ": out of memory\n");
        return 1;
    }
    for (int a = 0; a < NALGO; a++) {
        run *r = &s->runs[a];
        size_t m = 0;
        for (size_t i = 0; i < s->n; i++) {
            rlt_decision d;
            int rc = rlt_decide(&r->p, r->st, s->r[i].t, s->r[i].cost, &d);
            if (rc != RLT_OK) {
                char w[RLT__DEC_BUF];
                fprintf(stderr, "ratelimit " CMD ": %s at t = %s: %s\n", r->name,
                        ticks(w, s->r[i].t), rlt_strerror(rc));
                free(evs);
                return 1;
            }
            r->ok[i] = d.allowed;
            r->delay[i] = d.allowed ? d.delay : 0;
            if (d.allowed) {
                r->n_ok++;
                if (d.delay > r->max_delay) r->max_delay = d.delay;
                /* A shaper's burst is what leaves it: count the leaky bucket at send time. */
                evs[m++] = (ev){s->r[i].t + r->delay[i], s->r[i].cost};
            } else {
                r->n_rej++;
            }
        }
        /* Arrivals are sorted and the shaper sends FIFO, so this is a cheap check. */
        for (size_t i = 1; i < m; i++)
            if (evs[i].t < evs[i - 1].t) {
                qsort(evs, m, sizeof *evs, ev_cmp);
                break;
            }
        r->worst = worst_span(evs, m, s->window);
    }
    free(evs);
    return 0;
}

/* ---- State column ---- */

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
        int64_t k = floor_div(T, W);
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
        int64_t k = floor_div(T, W), prev = 0, curr = 0;
        for (size_t i = 0; i < s->n; i++) {
            if (!r->ok[i] || s->r[i].t > T) continue;
            int64_t ki = floor_div(s->r[i].t, W);
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
    default:
        snprintf(r->state, sizeof r->state, "?");
        break;
    }
}

/* ---- Table ---- */

/* Display width of UTF-8 text: code points (the table uses × and ≈, one column each). */
static size_t width_of(const char *t)
{
    size_t w = 0;
    for (; *t; t++)
        if (((unsigned char)*t & 0xC0) != 0x80) w++;
    return w;
}

#define NCOL 6
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

static void print_table(sim *s)
{
    static char cells[NALGO + 1][NCOL][300];
    char a[RLT__DEC_BUF], b[RLT__DEC_BUF];
    snprintf(cells[0][0], 300, "algorithm");
    snprintf(cells[0][1], 300, "state at t = %s", ticks(a, s->t_state));
    snprintf(cells[0][2], 300, "ok");
    snprintf(cells[0][3], 300, "rejected");
    snprintf(cells[0][4], 300, "worst %s-tick burst", ticks(b, s->window));
    snprintf(cells[0][5], 300, "max delay");
    for (int i = 0; i < NALGO; i++) {
        run *r = &s->runs[i];
        snprintf(cells[i + 1][0], 300, "%s", r->name);
        snprintf(cells[i + 1][1], 300, "%s", r->state);
        snprintf(cells[i + 1][2], 300, "%lld", (long long)r->n_ok);
        snprintf(cells[i + 1][3], 300, "%lld", (long long)r->n_rej);
        snprintf(cells[i + 1][4], 300, "%lld%s", (long long)r->worst,
                 r->worst > s->limit ? " !" : "");
        snprintf(cells[i + 1][5], 300, "%s", ticks(a, r->max_delay));
    }
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

/* ---- Timeline ---- */

typedef struct span {
    rlt_ns t0, t1; /* [t0, t1): whole windows covering every arrival, send and the state */
} span;

static span time_span(const sim *s)
{
    rlt_ns lo = s->t_state, hi = s->t_state;
    for (size_t i = 0; i < s->n; i++) {
        if (s->r[i].t < lo) lo = s->r[i].t;
        for (int a = 0; a < NALGO; a++) {
            rlt_ns end = s->r[i].t + s->runs[a].delay[i];
            if (end > hi) hi = end;
        }
    }
    span sp = {floor_div(lo, s->window) * s->window, (floor_div(hi, s->window) + 1) * s->window};
    return sp;
}

static size_t col_of(rlt_ns t, span sp, size_t cols)
{
    __int128 c = (__int128)(t - sp.t0) * (__int128)cols / (sp.t1 - sp.t0);
    if (c < 0) c = 0;
    if (c >= (__int128)cols) c = (__int128)cols - 1;
    return (size_t)c;
}

static void print_timeline(sim *s)
{
    const size_t cols = (size_t)s->width;
    const int pad = 16;
    span sp = time_span(s);
    char a[RLT__DEC_BUF], b[RLT__DEC_BUF], per[64];
    rlt__frac_format(per, sizeof per, sp.t1 - sp.t0, (__int128)cols * NS, 3, RLT__ROUND, 1);
    printf("\ntimeline t = %s .. %s, one column = %s ticks: o accepted, x rejected, # both, "
           "= queued\n",
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
            if (r->ok[k] && r->delay[k] > 0) {
                size_t e = col_of(s->r[k].t + r->delay[k], sp, cols);
                for (size_t j = c + 1; j <= e; j++)
                    flags[j] |= 4;
            }
        }
        for (size_t c = 0; c < cols; c++)
            row[c] = (flags[c] & 3) == 3 ? '#'
                     : flags[c] & 1      ? 'o'
                     : flags[c] & 2      ? 'x'
                     : flags[c] & 4      ? '='
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

/* ---- SVG ---- */

#define SVG_LEFT 150
#define SVG_PLOT 720
#define SVG_TOP 50
#define SVG_ROW 40

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
        switch (*t) {
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '&':
            fputs("&amp;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        default:
            fputc(*t, f);
        }
    }
}

/* Writes the picture into `f` (opened before anything was printed) and closes it. */
static int write_svg(sim *s, FILE *f, const char *title)
{
    span sp = time_span(s);
    const int width = SVG_LEFT + SVG_PLOT + 30;
    const int height = SVG_TOP + NALGO * SVG_ROW + 70;
    char a[RLT__DEC_BUF], b[RLT__DEC_BUF], c[RLT__DEC_BUF], d[RLT__DEC_BUF];
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
    const int y_axis = SVG_TOP + NALGO * SVG_ROW;
    for (rlt_ns t = sp.t0; t <= sp.t1; t += s->window) {
        int64_t x = svg_x(t, sp);
        fprintf(f,
                "<line x1=\"%s\" y1=\"%d\" x2=\"%s\" y2=\"%d\" stroke=\"#bbbbbb\" "
                "stroke-dasharray=\"4 3\"/>\n<text x=\"%s\" y=\"%d\" text-anchor=\"middle\">%s"
                "</text>\n",
                px(a, x), SVG_TOP - 8, px(b, x), y_axis, px(c, x), y_axis + 16, ticks(d, t));
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">t (ticks)</text>\n",
            SVG_LEFT + SVG_PLOT / 2, y_axis + 34);
    for (int i = 0; i < NALGO; i++) {
        run *r = &s->runs[i];
        int y = SVG_TOP + i * SVG_ROW + SVG_ROW / 2;
        fprintf(f, "<g>\n<text x=\"10\" y=\"%d\">%s</text>\n", y - 2, r->name);
        fprintf(f,
                "<text x=\"10\" y=\"%d\" font-size=\"10\" fill=\"%s\">ok %lld, rejected %lld, "
                "worst %lld%s</text>\n",
                y + 11, r->worst > s->limit ? "#d62828" : "#555555", (long long)r->n_ok,
                (long long)r->n_rej, (long long)r->worst, r->worst > s->limit ? " !" : "");
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#eeeeee\"/>\n", SVG_LEFT,
                y, SVG_LEFT + SVG_PLOT, y);
        for (size_t k = 0; k < s->n; k++) {
            if (!r->ok[k] || r->delay[k] <= 0) continue;
            fprintf(f,
                    "<line x1=\"%s\" y1=\"%d\" x2=\"%s\" y2=\"%d\" stroke=\"#e6b800\" "
                    "stroke-width=\"3\" stroke-opacity=\"0.7\"/>\n",
                    px(a, svg_x(s->r[k].t, sp)), y + 6 + (int)(k % 3) * 3,
                    px(b, svg_x(s->r[k].t + r->delay[k], sp)), y + 6 + (int)(k % 3) * 3);
        }
        for (size_t k = 0; k < s->n; k++) {
            int64_t x = svg_x(s->r[k].t, sp);
            if (r->ok[k])
                fprintf(f, "<circle cx=\"%s\" cy=\"%d\" r=\"4\" fill=\"#2a9d3a\"/>\n", px(a, x), y);
            else
                fprintf(f,
                        "<path d=\"M%s %d L%s %d M%s %d L%s %d\" stroke=\"#d62828\" "
                        "stroke-width=\"2\"/>\n",
                        px(a, x - 400), y - 4, px(b, x + 400), y + 4, px(c, x - 400), y + 4,
                        px(d, x + 400), y - 4);
        }
        fputs("</g>\n", f);
    }
    int ly = height - 14;
    fprintf(f,
            "<circle cx=\"%d\" cy=\"%d\" r=\"4\" fill=\"#2a9d3a\"/><text x=\"%d\" y=\"%d\">"
            "accepted</text>\n",
            SVG_LEFT, ly - 4, SVG_LEFT + 10, ly);
    fprintf(f,
            "<path d=\"M%d %d L%d %d M%d %d L%d %d\" stroke=\"#d62828\" stroke-width=\"2\"/>"
            "<text x=\"%d\" y=\"%d\">rejected</text>\n",
            SVG_LEFT + 96, ly - 8, SVG_LEFT + 104, ly, SVG_LEFT + 96, ly, SVG_LEFT + 104, ly - 8,
            SVG_LEFT + 110, ly);
    fprintf(f,
            "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#e6b800\" "
            "stroke-width=\"3\"/><text x=\"%d\" y=\"%d\">time queued</text>\n",
            SVG_LEFT + 190, ly - 4, SVG_LEFT + 210, ly - 4, SVG_LEFT + 216, ly);
    fputs("</svg>\n", f);
    if (fclose(f) != 0) {
        fprintf(stderr, "ratelimit " CMD ": writing %s failed\n", s->svg);
        return 1;
    }
    return 0;
}

/* ---- Accuracy ---- */

static void pct(char *buf, size_t cap, int64_t part, int64_t whole)
{
    if (whole <= 0) whole = 1;
    rlt__frac_format(buf, cap, (__int128)part * 100, whole, 3, RLT__ROUND, 0);
}

static void print_accuracy(sim *s)
{
    const run *lg = &s->runs[1], *sw = &s->runs[2];
    const rlt_ns W = s->window;
    const int64_t n = (int64_t)s->n, L = s->limit;
    /* Each request is judged by both rules on the same history, the counter's own accepted
     * requests: the counter's verdict (the library's) against the exact rule "accepted cost in
     * (t - W, t] plus this cost <= L".  Judging them on separate runs instead would count every
     * later request after their histories first part as a disagreement.  The rate error is
     * |estimate - exact count| at each arrival, both x W to stay integral. */
    int64_t both_ok = 0, both_no = 0, wrong_ok = 0, wrong_no = 0, split = 0;
    __int128 err_sum = 0;
    int64_t k = INT64_MIN, prev = 0, curr = 0, exact = 0;
    size_t lo = 0;
    for (size_t i = 0; i < s->n; i++) {
        rlt_ns t = s->r[i].t;
        int64_t ki = floor_div(t, W);
        if (k == INT64_MIN || ki > k + 1) {
            prev = 0;
            curr = 0;
        } else if (ki == k + 1) {
            prev = curr;
            curr = 0;
        }
        k = ki;
        while (lo < i && s->r[lo].t <= t - W) {
            if (sw->ok[lo]) exact -= s->r[lo].cost;
            lo++;
        }
        __int128 est = (__int128)prev * (W - (t - k * W)) + (__int128)curr * W;
        __int128 diff = est - (__int128)exact * W;
        err_sum += diff < 0 ? -diff : diff;
        int exact_ok = exact + s->r[i].cost <= L;
        if (sw->ok[i] && exact_ok)
            both_ok++;
        else if (!sw->ok[i] && !exact_ok)
            both_no++;
        else if (sw->ok[i])
            wrong_ok++;
        else
            wrong_no++;
        split += sw->ok[i] != lg->ok[i];
        if (sw->ok[i]) {
            curr += s->r[i].cost;
            exact += s->r[i].cost;
        }
    }
    char a[64], b[64], w[RLT__DEC_BUF];
    printf("accuracy: sliding window counter vs the exact sliding log, limit %lld per %s ticks\n",
           (long long)L, ticks(w, W));
    printf("trace: %s, %lld requests", s->pattern, (long long)n);
    if (n) printf(", t = %s .. %s", ticks(a, s->r[0].t), ticks(b, s->r[s->n - 1].t));
    printf("\n\neach request judged by both rules on the same history (what the counter let "
           "through):\n");
    printf("                   requests    share\n");
    pct(a, sizeof a, both_ok, n);
    printf("both allow       %10lld  %7s%%\n", (long long)both_ok, a);
    pct(a, sizeof a, both_no, n);
    printf("both reject      %10lld  %7s%%\n", (long long)both_no, a);
    pct(a, sizeof a, wrong_ok, n);
    printf("wrongly allowed  %10lld  %7s%%  (the exact count of the last %s ticks was full)\n",
           (long long)wrong_ok, a, w);
    pct(a, sizeof a, wrong_no, n);
    printf("wrongly rejected %10lld  %7s%%  (the exact count had room)\n", (long long)wrong_no, a);
    pct(a, sizeof a, wrong_ok + wrong_no, n);
    printf("disagree         %10lld  %7s%%\n\n", (long long)(wrong_ok + wrong_no), a);
    __int128 den = (__int128)(n ? n : 1) * W;
    rlt__frac_format(a, sizeof a, err_sum, den, 4, RLT__ROUND, 0);
    rlt__frac_format(b, sizeof b, err_sum * 100, den * L, 2, RLT__ROUND, 0);
    printf("mean rate error: |estimate - exact count| = %s requests on average at each\n"
           "                 arrival (%s%% of the limit)\n",
           a, b);
    pct(a, sizeof a, split, n);
    printf("run separately:  counter accepted %lld, log accepted %lld; their verdicts differ\n"
           "                 on %lld requests (%s%%), later ones because their histories part\n",
           (long long)sw->n_ok, (long long)lg->n_ok, (long long)split, a);
    printf("(Cloudflare measured 0.003%% of 400M requests wrongly allowed or rejected and a\n"
           " 6%% average difference between the real and the estimated rate.)\n");
}

/* ---- Main ---- */

static void free_sim(sim *s)
{
    for (int a = 0; a < NALGO; a++) {
        free(s->runs[a].st);
        free(s->runs[a].ok);
        free(s->runs[a].delay);
    }
    free(s->r);
}

static int sim_main(sim *s, int argc, char **argv)
{
    const char *v, *at = NULL, *trace = NULL, *rate = NULL, *duration = NULL;
    int64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        int m;
        const char *o = argv[i];
        if (strcmp(o, "--help") == 0 || strcmp(o, "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(o, "--accuracy") == 0) {
            s->accuracy = 1;
            continue;
        }
#define OPT(name) (m = rlt__opt(argc, argv, &i, CMD, name, &v)) < 0 ? -1 : m
        if ((m = OPT("--limit"))) {
            if (m < 0 || rlt__opt_int(CMD, "--limit", v, 1, RLT_SLIDING_LOG_MAX, &s->limit))
                return 2;
        } else if ((m = OPT("--window"))) {
            if (m < 0 || rlt__opt_dec(CMD, "--window", v, NS, 1, INT64_MAX / 1024, &s->window))
                return 2;
        } else if ((m = OPT("--pattern"))) {
            if (m < 0) return 2;
            s->pattern = v;
        } else if ((m = OPT("--at"))) {
            if (m < 0) return 2;
            at = v;
        } else if ((m = OPT("--trace"))) {
            if (m < 0) return 2;
            trace = v;
        } else if ((m = OPT("--rate"))) {
            if (m < 0) return 2;
            rate = v;
        } else if ((m = OPT("--seed"))) {
            if (m < 0 || rlt__opt_int(CMD, "--seed", v, 0, INT64_MAX, &seed)) return 2;
        } else if ((m = OPT("--duration"))) {
            if (m < 0) return 2;
            duration = v;
        } else if ((m = OPT("--until"))) {
            if (m < 0 ||
                rlt__opt_dec(CMD, "--until", v, NS, INT64_MIN / 4, INT64_MAX / 4, &s->until))
                return 2;
            s->has_until = 1;
        } else if ((m = OPT("--width"))) {
            if (m < 0 || rlt__opt_int(CMD, "--width", v, 10, 1000, &s->width)) return 2;
        } else if ((m = OPT("--svg"))) {
            if (m < 0) return 2;
            s->svg = v;
        } else {
            return fail_usage("unknown option '%s'", o);
        }
#undef OPT
    }
    s->seed = (uint64_t)seed;
    if ((at != NULL) + (trace != NULL) + (s->pattern != NULL) > 1)
        return fail_usage("--pattern, --at and --trace are alternatives: give one");
    if (rate && rlt__opt_dec(CMD, "--rate", rate, NS, 1, 1000000 * NS, &s->rate_e9)) return 2;
    s->duration = 3 * s->window;
    if (duration && rlt__opt_dec(CMD, "--duration", duration, NS, 1, INT64_MAX / 4, &s->duration))
        return 2;
    int rc;
    if (at) {
        s->pattern = "at";
        rc = parse_at(s, at);
    } else if (trace) {
        s->pattern = "trace";
        rc = read_trace(s, trace);
    } else {
        if (!s->pattern) s->pattern = "boundary";
        rc = gen_pattern(s);
    }
    if (rc) return rc;
    if (s->n == 0) {
        fprintf(stderr, "ratelimit " CMD ": no requests to simulate\n");
        return 1;
    }
    qsort(s->r, s->n, sizeof *s->r, req_cmp);
    s->t_state = s->r[s->n - 1].t;
    if (s->has_until) {
        if (s->until < s->t_state) {
            char a[RLT__DEC_BUF];
            return fail_usage("--until must not be before the last request (t = %s)",
                              ticks(a, s->t_state));
        }
        s->t_state = s->until;
    }
    if ((rc = init_runs(s)) != 0) return rc;
    if ((rc = run_all(s)) != 0) return rc;
    FILE *svg = NULL; /* opened first, so a bad path fails before the table is printed */
    if (s->svg && !s->accuracy && !(svg = fopen(s->svg, "w"))) {
        fprintf(stderr, "ratelimit " CMD ": cannot write %s: %s\n", s->svg, strerror(errno));
        return 1;
    }
    if (s->accuracy) {
        print_accuracy(s);
        return 0;
    }
    for (int a = 0; a < NALGO; a++)
        describe_state(s, &s->runs[a]);
    char w[RLT__DEC_BUF], title[200];
    snprintf(title, sizeof title,
             "ratelimit sim: limit %lld per %s ticks, pattern %s, %zu requests",
             (long long)s->limit, ticks(w, s->window), s->pattern, s->n);
    printf("%s\n\n", title);
    print_table(s);
    print_timeline(s);
    if (svg && (rc = write_svg(s, svg, title)) != 0) return rc;
    return fflush(stdout) == 0 ? 0 : 1;
}

int rlt__cli_sim(int argc, char **argv)
{
    sim s;
    memset(&s, 0, sizeof s);
    s.limit = 4;
    s.window = 10 * NS;
    s.rate_e9 = NS / 2;
    s.width = 60;
    int rc = sim_main(&s, argc, argv);
    free_sim(&s);
    return rc;
}
