/* `ratelimit sim`: every algorithm over exactly the same request trace on a virtual clock, with
 * a table of end states, counts and each algorithm's own contract checked on what it did, a
 * text timeline, an optional SVG of the same picture, and the sliding-window-counter accuracy
 * report (as text or as a picture of its errors over time).  Everything is integer arithmetic
 * on ns (a tick is one second of the virtual clock), so the output is byte-identical on every
 * machine.  The concurrency limiter's requests hold their slot for --hold ticks.  This file
 * adds the usage, --serve and --fleet to the engine (sim_engine.c), which the page runs too. */
#include "cli/cli.h"
#include "cli/fleet_types.h"
#include "cli/sim_backend.h"
#include "cli/sim_engine.h"
#include "cli/sim_run.h"
#include "cli/sim_serve.h"
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

static int sim_main(sim *s, int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "--serve") == 0) {
        if (argc > 3 || (argc == 3 && argv[2][0] == '-'))
            return fail_usage("--serve takes an address (HOST:PORT or PORT) and no other option");
        return rlt__sim_serve(argc == 3 ? argv[2] : NULL);
    }
    int rc = rlt__sim_configure(s, argc, argv);
    if (rc == RLT__SIM_HELP) {
        usage(stdout);
        return 0;
    }
    if (rc) return rc;
    if ((rc = rlt__sim_run(s)) != 0) return rc;
    FILE *svg;
    if (rlt__svg_open(CMD, s->svg, &svg)) return 1;
    return rlt__sim_report(s, svg);
}

int rlt__cli_sim(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--fleet") == 0 || strncmp(argv[i], "--fleet=", 8) == 0)
            return rlt__cli_fleet(argc, argv);
        else if (strcmp(argv[i], "--backend") == 0 || strncmp(argv[i], "--backend=", 10) == 0)
            return rlt__cli_sim_backend(argc, argv);
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--llm") == 0) return rlt__cli_sim_llm(argc, argv);
    sim s;
    rlt__sim_defaults(&s);
    int rc = sim_main(&s, argc, argv);
    rlt__sim_free(&s);
    return rc;
}
