/* `ratelimit sim`'s engine, shared by the command (sim.c) and the page (web/wasm/sim_export.c,
 * the same C compiled to WebAssembly): the options read into a simulation with its requests,
 * and the report printed after the run, so the page's text is the command's by construction. */
#include "cli/sim_engine.h"

#include "cli/sim_accuracy.h"
#include "cli/sim_run.h"
#include "cli/sim_svg.h"
#include "cli/sim_text.h"
#include "cli/sim_traffic.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rlt__sim_defaults(sim *s)
{
    memset(s, 0, sizeof *s);
    s->limit = 4;
    s->window = 10 * NS;
    s->rate_e9 = NS / 2;
    s->width = 60;
}

int rlt__sim_configure(sim *s, int argc, char **argv)
{
    const char *v, *at = NULL, *trace = NULL, *rate = NULL, *duration = NULL, *hold = NULL;
    int64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        int m;
        const char *o = argv[i];
        if (strcmp(o, "--help") == 0 || strcmp(o, "-h") == 0) return RLT__SIM_HELP;
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
    return 0;
}

int rlt__sim_report(sim *s, FILE *svg)
{
    int rc;
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

void rlt__sim_free(sim *s)
{
    rlt__sim_free_runs(s);
    free(s->r);
    s->r = NULL;
    s->n = s->cap = 0;
}
