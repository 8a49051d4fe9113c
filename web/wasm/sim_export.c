/* `ratelimit sim` in the page: the command's own engine (src/cli/sim_engine.c and the parts it
 * runs: traffic, runs, contracts, state column, table, timeline, accuracy report) compiled to
 * WebAssembly beside the core, with the calls web/ratelimit.js's Sim needs to draw it.  The
 * options are `sim`'s own argv, so the page's numbers, texts and messages are the command's by
 * construction; the page adds only a row's own policy (--rowN TEXT), a clock that may stop
 * before the last request (the requests up to it are run), and its cap on requests.  The text
 * the engine prints goes to stdout and stderr, which ratelimit.js collects from fd_write. */
#include "cli/sim_engine.h"
#include "cli/sim_run.h"
#include "cli/sim_text.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef __wasm__
#define EXPORT(name) __attribute__((export_name(name)))
#else
#define EXPORT(name)
#endif

/* The page draws every request, so it stops well before the command's 5 000 000. */
#define PAGE_MAX_REQUESTS 200000

/* One simulation of the page: the engine's state, the options it points into, and what the
 * page reads back. */
typedef struct page_sim {
    sim s;
    size_t total; /* the requests configured; s.n is how many the last run covered */
    char *args;   /* argv's bytes, owned */
    char **argv;
    char *trace;              /* --trace's content, owned */
    int64_t *reqs;            /* time and cost of each request, in order, for the page to draw */
    char text[NALGO][200];    /* each row's policy text, for its input */
    char deftext[NALGO][200]; /* the text sim runs in each row */
    unsigned gen;             /* counts the runs and states, for the cells' cache */
} page_sim;

/* The exported calls, declared once with their contracts; JavaScript calls them. */

/* Reads `sim`'s options: `args` holds `len` bytes of NUL-terminated strings, argv[1..] (led by
 * the page's own --row1..--row7 TEXT pairs, row N's policy, if any), and `trace` `tlen` bytes of
 * --trace's content (or NULL); both come from rlt_wasm_alloc and are owned by the result.  Returns
 * a simulation (close it with rlt_wasm_sim_close) or 0, the status in rlt_wasm_sim_status() and
 * sim's message on stderr. */
EXPORT("rlt_wasm_sim_open")
page_sim *rlt_wasm_sim_open(char *args, int32_t len, char *trace, int32_t tlen);
/* The last status of rlt_wasm_sim_open or rlt_wasm_sim_ticks: 0, 1 or 2 as `sim` exits. */
EXPORT("rlt_wasm_sim_status") int32_t rlt_wasm_sim_status(void);
/* Runs every algorithm, from fresh states, over every request (`upto` 0) or the requests at
 * or before `T` (`upto` 1), with the state column at T.  Returns 0, or sim's exit status with
 * its message on stderr. */
EXPORT("rlt_wasm_sim_run") int32_t rlt_wasm_sim_run(page_sim *h, int64_t T, int32_t upto);
/* The state column again at T, over the same run (the clock moved, no request crossed). */
EXPORT("rlt_wasm_sim_states") void rlt_wasm_sim_states(page_sim *h, int64_t T);
/* A number of the simulation: 0 requests run, 1 requests configured, 2 L, 3 W (ns), 4 the
 * hold (ns), 5 the last request's time, 6 --until (INT64_MIN when not given), 7 and 8 the
 * timeline's span t0 and t1 after a run; 0 for another field. */
EXPORT("rlt_wasm_sim_num") int64_t rlt_wasm_sim_num(const page_sim *h, int32_t field);
/* A text of the simulation: 0 the pattern, 1 --block ("" when not given). */
EXPORT("rlt_wasm_sim_str") const char *rlt_wasm_sim_str(const page_sim *h, int32_t field);
/* Every request as two int64, time (ns) and cost, in time order. */
EXPORT("rlt_wasm_sim_requests") const int64_t *rlt_wasm_sim_requests(const page_sim *h);
/* A number of row `row` (0..6) after a run: 0 ok, 1 rejected, 2 worst burst, 3 its start,
 * 4 max delay, 5 its contract held, 6 the policy's algorithm, 7 a row of its own. */
EXPORT("rlt_wasm_sim_row") int64_t rlt_wasm_sim_row(const page_sim *h, int32_t row, int32_t field);
/* A text of row `row`: 0 its name, 1 its state, 2 its contract, 3 the parser's message for
 * its own policy ("" when none), 4 its policy text (its own, or the one `sim` runs), 5 the
 * text `sim` runs in it. */
EXPORT("rlt_wasm_sim_row_text")
const char *rlt_wasm_sim_row_text(page_sim *h, int32_t row, int32_t field);
/* Row `row`'s record per request run: 0 accepted (bytes), 1 delay, 2 busy (int64 ns). */
EXPORT("rlt_wasm_sim_row_array")
const void *rlt_wasm_sim_row_array(const page_sim *h, int32_t row, int32_t which);
/* The table's cells (rlt__sim_cells) after a run: row 0 the header, 1..7 the rows; col 0..6
 * ("" outside).  Valid until the next call of this module. */
EXPORT("rlt_wasm_sim_cell")
const char *rlt_wasm_sim_cell(const page_sim *h, int32_t row, int32_t col);
/* Prints sim's standard output for the last run on stdout: the title, table and timeline, or
 * (`accuracy` 1) the accuracy report (-1: as the options said).  Returns 0 or 1. */
EXPORT("rlt_wasm_sim_report") int32_t rlt_wasm_sim_report(page_sim *h, int32_t accuracy);
/* Reads `text` (NUL-terminated) as sim reads --until: returns the ns, with status 0, or 0
 * with status 2 and sim's message on stderr. */
EXPORT("rlt_wasm_sim_ticks") int64_t rlt_wasm_sim_ticks(const char *text);
/* Frees the simulation and everything it owns. */
EXPORT("rlt_wasm_sim_close") void rlt_wasm_sim_close(page_sim *h);

static int32_t status;

/* Debian's compiler-rt for wasm32 is built with the stack protector (its __umodti3, which the
 * engine's 128-bit decimals call) and wasi-libc has none: its two symbols, defined once here. */
uintptr_t __stack_chk_guard = 0x2f8a91c3u;
void __stack_chk_fail(void);
void __stack_chk_fail(void)
{
    abort();
}

int32_t rlt_wasm_sim_status(void)
{
    return status;
}

/* The policy text `sim` runs in row a for L and W: its duration in the largest unit that
 * divides it ("10s", "2500ms"), the leaky bucket's queue L. */
static void default_text(const sim *s, int a, char *buf, size_t cap)
{
    static const char *const algo[NALGO] = {"fixed_window", "sliding_log", "sliding_window",
                                            "token_bucket", "gcra",        "leaky_bucket",
                                            "concurrency"};
    static const struct {
        int64_t ns;
        const char *unit;
    } units[] = {{3600 * NS, "h"}, {60 * NS, "m"}, {NS, "s"},
                 {1000000, "ms"},  {1000, "us"},   {1, "ns"}};
    size_t u = 0;
    while (s->window % units[u].ns != 0)
        u++;
    snprintf(buf, cap, "%s:%lld/%lld%s", algo[a], (long long)s->limit,
             (long long)(s->window / units[u].ns), units[u].unit);
    if (a == 5) snprintf(buf + strlen(buf), cap - strlen(buf), ",queue=%lld", (long long)s->limit);
}

static void finish(void)
{
    fflush(stdout);
    fflush(stderr);
}

page_sim *rlt_wasm_sim_open(char *args, int32_t len, char *trace, int32_t tlen)
{
    page_sim *h = len > 0 && args[len - 1] != '\0' ? NULL : calloc(1, sizeof *h);
    int argc = 1;
    for (int32_t i = 0; i < len; i++)
        argc += args[i] == '\0';
    if (h) h->argv = calloc((size_t)argc + 1, sizeof *h->argv);
    if (!h || !h->argv) {
        int unterminated = len > 0 && args[len - 1] != '\0';
        free(h);
        free(args);
        free(trace);
        fprintf(stderr, "ratelimit sim: %s\n",
                unterminated ? "the arguments' last one is not NUL-terminated" : "out of memory");
        status = unterminated ? 2 : 1;
        finish();
        return NULL;
    }
    rlt__sim_defaults(&h->s);
    h->args = args;
    h->trace = trace;
    h->argv[0] = "sim";
    argc = 1;
    int rows = 1; /* --rowN TEXT pairs, the page's own, come first: a value is never one */
    for (int32_t i = 0; i < len; i += (int32_t)strlen(args + i) + 1) {
        if (rows && strncmp(args + i, "--row", 5) == 0 && args[i + 5] >= '1' &&
            args[i + 5] <= '7' && args[i + 6] == '\0' && i + 7 < len) {
            int a = args[i + 5] - '1';
            i += 7;
            h->s.policy_text[a] = args + i;
            continue;
        }
        rows = 0;
        h->argv[argc++] = args + i;
    }
    if (trace) {
        h->s.trace_text = trace;
        h->s.trace_len = (size_t)tlen;
    }
    h->s.max_requests = PAGE_MAX_REQUESTS;
    h->s.max_note = " (the page draws every request, so it stops at 200000; ratelimit sim takes "
                    "up to 5000000)";
    status = rlt__sim_configure(&h->s, argc, h->argv);
    if (status == RLT__SIM_HELP) status = fail_usage("--help: the page's controls are its options");
    if (status == 0 && h->s.svg) status = fail_usage("--svg: the page draws its own picture");
    if (status == 0 && !(h->reqs = malloc(2 * h->s.n * sizeof *h->reqs))) {
        fprintf(stderr, "ratelimit sim: out of memory\n");
        status = 1;
    }
    if (status != 0) {
        finish();
        rlt_wasm_sim_close(h);
        return NULL;
    }
    h->total = h->s.n;
    for (size_t i = 0; i < h->s.n; i++) {
        h->reqs[2 * i] = h->s.r[i].t;
        h->reqs[2 * i + 1] = h->s.r[i].cost;
    }
    for (int a = 0; a < NALGO; a++) {
        default_text(&h->s, a, h->deftext[a], sizeof h->deftext[a]);
        snprintf(h->text[a], sizeof h->text[a], "%s",
                 h->s.policy_text[a] ? h->s.policy_text[a] : h->deftext[a]);
    }
    finish();
    return h;
}

int32_t rlt_wasm_sim_run(page_sim *h, int64_t T, int32_t upto)
{
    rlt__sim_free_runs(&h->s);
    size_t n = h->total;
    if (upto)
        while (n > 0 && h->s.r[n - 1].t > T)
            n--;
    h->s.n = n;
    h->s.t_state = T;
    h->gen++;
    int rc = rlt__sim_run(&h->s);
    if (rc == 0) rlt__sim_states(&h->s);
    finish();
    return rc;
}

void rlt_wasm_sim_states(page_sim *h, int64_t T)
{
    h->s.t_state = T;
    h->gen++;
    rlt__sim_states(&h->s);
}

int64_t rlt_wasm_sim_num(const page_sim *h, int32_t field)
{
    const sim *s = &h->s;
    switch (field) {
    case 0:
        return (int64_t)s->n;
    case 1:
        return (int64_t)h->total;
    case 2:
        return s->limit;
    case 3:
        return s->window;
    case 4:
        return s->hold;
    case 5:
        return h->total ? h->reqs[2 * (h->total - 1)] : 0;
    case 6:
        return s->has_until ? s->until : INT64_MIN;
    case 7:
        return rlt__sim_span(s).t0;
    case 8:
        return rlt__sim_span(s).t1;
    default:
        return 0;
    }
}

const char *rlt_wasm_sim_str(const page_sim *h, int32_t field)
{
    if (field == 0) return h->s.pattern;
    if (field == 1) return h->s.block ? h->s.block : "";
    return "";
}

const int64_t *rlt_wasm_sim_requests(const page_sim *h)
{
    return h->reqs;
}

int64_t rlt_wasm_sim_row(const page_sim *h, int32_t row, int32_t field)
{
    const run *r = &h->s.runs[row];
    switch (field) {
    case 0:
        return r->n_ok;
    case 1:
        return r->n_rej;
    case 2:
        return r->worst;
    case 3:
        return r->worst_t0;
    case 4:
        return r->max_delay;
    case 5:
        return r->held;
    case 6:
        return r->p.algo;
    case 7:
        return h->s.policy_text[row] != NULL;
    default:
        return 0;
    }
}

const char *rlt_wasm_sim_row_text(page_sim *h, int32_t row, int32_t field)
{
    const run *r = &h->s.runs[row];
    switch (field) {
    case 0:
        return r->name ? r->name : "";
    case 1:
        return r->state;
    case 2:
        return r->contract;
    case 3:
        return r->error;
    case 4:
        return h->text[row];
    case 5:
        return h->deftext[row];
    default:
        return "";
    }
}

const void *rlt_wasm_sim_row_array(const page_sim *h, int32_t row, int32_t which)
{
    const run *r = &h->s.runs[row];
    return which == 0 ? (const void *)r->ok : which == 1 ? (const void *)r->delay : r->busy;
}

/* The cells of one simulation at one run or clock, built once for the 56 reads. */
static char cells[NALGO + 1][NCOL][300];
static const page_sim *cells_of;
static unsigned cells_gen;

const char *rlt_wasm_sim_cell(const page_sim *h, int32_t row, int32_t col)
{
    if (row < 0 || row > NALGO || col < 0 || col >= NCOL) return "";
    if (cells_of != h || cells_gen != h->gen) {
        rlt__sim_cells(&h->s, cells);
        cells_of = h;
        cells_gen = h->gen;
    }
    return cells[row][col];
}

int32_t rlt_wasm_sim_report(page_sim *h, int32_t accuracy)
{
    if (accuracy >= 0) h->s.accuracy = accuracy;
    int rc = rlt__sim_report(&h->s, NULL);
    finish();
    return rc;
}

int64_t rlt_wasm_sim_ticks(const char *text)
{
    int64_t v = 0;
    status = rlt__opt_dec(CMD, "--until", text, NS, INT64_MIN / 4, INT64_MAX / 4, &v) ? 2 : 0;
    finish();
    return status ? 0 : v;
}

void rlt_wasm_sim_close(page_sim *h)
{
    if (!h) return;
    if (cells_of == h) cells_of = NULL;
    rlt__sim_free(&h->s);
    free(h->reqs);
    free(h->argv);
    free(h->args);
    free(h->trace);
    free(h);
}
