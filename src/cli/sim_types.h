/* The simulator's data (`ratelimit sim`, sim.c): the requests, one run per algorithm over
 * them, the whole simulation, and the tick helpers its parts print with.  The parts, each
 * with its header: sim_engine.c (the options read, the report printed), sim_traffic.c (the
 * requests), sim_run.c (every algorithm over them), sim_text.c (the table and the timeline),
 * sim_svg.c (the picture), sim_accuracy.c (the counter against the exact log).  The page runs
 * the same files compiled to WebAssembly (web/CMakeLists.txt lists them; web/wasm/sim_export.c),
 * so none of them may use more than libc and the core.  Everything is integer arithmetic on
 * ns, a tick being one second of the virtual clock, so the output is byte-identical on every
 * machine. */
#ifndef RLT_CLI_SIM_TYPES_H
#define RLT_CLI_SIM_TYPES_H

#include "cli/cliutil.h"

#define CMD "sim"
#define NALGO 7
#define CONC 6 /* index of the concurrency limiter in runs[] */
#define NS RLT_NS_PER_S
#define NCOL 7 /* the table's columns */

#define fail_usage(...) rlt__usage_error(CMD, __VA_ARGS__)

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
    rlt_ns *delay;     /* per request: the leaky bucket's wait before the send */
    rlt_ns *busy;      /* per request: how long it occupies the limiter after it arrives (the
                          leaky bucket's wait, the concurrency limiter's hold); 0 for the rest */
    int64_t n_ok, n_rej, worst;
    rlt_ns worst_t0; /* where the worst span of one window starts */
    rlt_ns max_delay;
    int held;           /* the algorithm's own contract held on this run */
    char contract[160]; /* that contract, in words */
    char state[256];
    char label[200]; /* the name, when it is built (a row with its own policy) */
    char error[256]; /* a row's own policy the parser refused (the page's rows only) */
} run;

typedef struct sim {
    int64_t limit;
    rlt_ns window;
    const char *pattern; /* boundary steady burst random at trace */
    int64_t rate_e9;     /* requests per tick x 1e9 */
    uint64_t seed;
    rlt_ns duration;
    rlt_ns until;
    int has_until;
    int64_t width;
    const char *svg;
    int accuracy;
    rlt_ns hold;       /* how long a concurrency-limited request stays in flight */
    const char *block; /* --block: a penalty box on every algorithm (policy text's block=) */
    req *r;
    size_t n, cap;
    run runs[NALGO];
    rlt_ns t_state; /* the instant of the state column */
    /* The page's (web/wasm/sim_export.c): zero for the command. */
    const char *policy_text[NALGO]; /* a row's own policy text instead of the algorithm's */
    const char *trace_text;         /* --trace's content, in memory (the path only names it) */
    size_t trace_len;
    size_t max_requests;  /* 0: the command's cap */
    const char *max_note; /* appended to the message past that cap */
} sim;

typedef struct span {
    rlt_ns t0, t1; /* [t0, t1): whole windows covering every arrival, send, hold and the state */
} span;

/* t in ticks as an exact decimal ("2.5"), written into buf (RLT__DEC_BUF bytes); buf. */
static inline const char *ticks(char *buf, rlt_ns t)
{
    rlt__dec_format(buf, t, NS);
    return buf;
}

#endif
