/* `ratelimit sim`: every algorithm over exactly the same request trace on a virtual clock, with
 * a table of end states, counts and each algorithm's own contract checked on what it did, a
 * text timeline, an optional SVG of the same picture, and the sliding-window-counter accuracy
 * report (as text or as a picture of its errors over time).  Everything is integer arithmetic
 * on ns (a tick is one second of the virtual clock), so the output is byte-identical on every
 * machine.  The concurrency limiter's requests hold their slot for --hold ticks.  This file
 * reads the options and runs the parts in order (sim_types.h lists them). */
#include "cli/cli.h"
#include "cli/fleet_types.h"
#include "cli/sim_accuracy.h"
#include "cli/sim_backend.h"
#include "cli/sim_run.h"
#include "cli/sim_serve.h"
#include "cli/sim_svg.h"
#include "cli/sim_text.h"
#include "cli/sim_traffic.h"
#include "cli/svg.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fputs("usage: ratelimit sim [--limit L] [--window W] [--pattern NAME | --at T,T,... | --trace "
          "FILE]\n"
          "                     [--rate R] [--seed S] [--duration D] [--until T] [--width COLS]\n"
          "                     [--hold D] [--block SPEC] [--svg FILE] [--accuracy]\n"
          "       ratelimit sim --serve [ADDR]\n"
          "Runs fixed window, sliding log, sliding window counter, token bucket, GCRA, leaky\n"
          "bucket and concurrency limiter over the same requests on a virtual clock (a tick is\n"
          "one second) and prints a table of their end states, with each algorithm's own\n"
          "contract checked on what it did, and a timeline.\n"
          "  --limit L       requests per window (default 4); token bucket and GCRA: capacity L,\n"
          "                  rate L/W; leaky bucket: queue L, draining one request every W/L;\n"
          "                  concurrency: L in flight, leases timing out after W\n"
          "  --window W      window in ticks, a decimal (default 10)\n"
          "  --pattern NAME  boundary (default: L requests before t = W and L after, W/(2L+2)\n"
          "                  apart),\n"
          "                  steady (one every 1/R ticks), burst (2L requests, idle, 2L again),\n"
          "                  random (Poisson arrivals at R per tick from --seed, times in ms)\n"
          "  --at LIST       explicit request times in ticks: --at 1,2,9.5\n"
          "  --trace FILE    lines 'TIME [KEY [COST]]' (KEY ignored; '-' reads stdin)\n"
          "  --rate R        requests per tick for steady and random (default 0.5)\n"
          "  --seed S        seed for random (default 1)\n"
          "  --duration D    ticks of traffic for steady and random (default 3W)\n"
          "  --until T       show the state at tick T (default: the last request's time)\n"
          "  --width COLS    timeline columns (default 60)\n"
          "  --hold D        ticks each request holds a concurrency slot (default W/2)\n"
          "  --block SPEC    a penalty box on every algorithm, as the policy text's block=:\n"
          "                  5s (every denial blocks the key 5 ticks) or 5s*2..1m (doubled on\n"
          "                  each breach within W of the last block's end, at most 60)\n"
          "  --svg FILE      also write the timeline as an SVG picture (with --accuracy: the\n"
          "                  counter's errors over time)\n"
          "  --accuracy      instead of the table: sliding window counter vs the exact log\n"
          "  --serve [ADDR]  serve the playground (this simulator in the browser) on ADDR,\n"
          "                  HOST:PORT or PORT (default " RLT__SERVE_DEFAULT "), until Ctrl-C\n"
          "  --fleet N       instead: N nodes sharing one budget, exact checks, leases, quota\n"
          "                  division and a static split side by side (ratelimit sim --fleet 1\n"
          "                  --help lists its options)\n"
          "  --backend C     instead: a modelled backend of C servers behind a static, an\n"
          "                  AIMD and a Vegas concurrency limit, with priority classes\n"
          "                  (ratelimit sim --backend 1 --help lists its options)\n",
          f);
}

#define fail_usage(...) rlt__usage_error(CMD, __VA_ARGS__)

static void free_sim(sim *s)
{
    for (int a = 0; a < NALGO; a++) {
        free(s->runs[a].st);
        free(s->runs[a].ok);
        free(s->runs[a].delay);
        free(s->runs[a].busy);
    }
    free(s->r);
}

static int sim_main(sim *s, int argc, char **argv)
{
    const char *v, *at = NULL, *trace = NULL, *rate = NULL, *duration = NULL, *hold = NULL;
    int64_t seed = 1;
    if (argc >= 2 && strcmp(argv[1], "--serve") == 0) {
        if (argc > 3 || (argc == 3 && argv[2][0] == '-'))
            return fail_usage("--serve takes an address (HOST:PORT or PORT) and no other option");
        return rlt__sim_serve(argc == 3 ? argv[2] : NULL);
    }
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
        } else if ((m = OPT("--hold"))) {
            if (m < 0) return 2;
            hold = v;
        } else if ((m = OPT("--svg"))) {
            if (m < 0) return 2;
            s->svg = v;
        } else if ((m = OPT("--block"))) {
            if (m < 0) return 2;
            s->block = v;
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
    s->hold = s->window / 2;
    if (hold && rlt__opt_dec(CMD, "--hold", hold, NS, 1, INT64_MAX / 4, &s->hold)) return 2;
    int rc;
    if (at) {
        s->pattern = "at";
        rc = rlt__sim_at(s, at);
    } else if (trace) {
        s->pattern = "trace";
        rc = rlt__sim_trace(s, trace);
    } else {
        if (!s->pattern) s->pattern = "boundary";
        rc = rlt__sim_pattern(s);
    }
    if (rc) return rc;
    if (s->n == 0) {
        fprintf(stderr, "ratelimit " CMD ": no requests to simulate\n");
        return 1;
    }
    rlt__sim_sort(s);
    s->t_state = s->r[s->n - 1].t;
    if (s->has_until) {
        if (s->until < s->t_state) {
            char a[RLT__DEC_BUF];
            return fail_usage("--until must not be before the last request (t = %s)",
                              ticks(a, s->t_state));
        }
        s->t_state = s->until;
    }
    if ((rc = rlt__sim_run(s)) != 0) return rc;
    FILE *svg;
    if (rlt__svg_open(CMD, s->svg, &svg)) return 1;
    if (s->accuracy) {
        if ((rc = rlt__sim_accuracy(s, svg)) != 0) return rc;
        return fflush(stdout) == 0 ? 0 : 1;
    }
    char w[RLT__DEC_BUF], title[200];
    snprintf(title, sizeof title,
             "ratelimit sim: limit %lld per %s ticks, pattern %s, %zu requests",
             (long long)s->limit, ticks(w, s->window), s->pattern, s->n);
    printf("%s\n\n", title);
    rlt__sim_table(s);
    rlt__sim_timeline(s);
    if (svg && (rc = rlt__sim_svg(s, svg, title)) != 0) return rc;
    return fflush(stdout) == 0 ? 0 : 1;
}

int rlt__cli_sim(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--fleet") == 0 || strncmp(argv[i], "--fleet=", 8) == 0)
            return rlt__cli_fleet(argc, argv);
        else if (strcmp(argv[i], "--backend") == 0 || strncmp(argv[i], "--backend=", 10) == 0)
            return rlt__cli_sim_backend(argc, argv);
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
