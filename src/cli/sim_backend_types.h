/* The data of `ratelimit sim --backend C` (sim_backend.c): the options, the arrivals, one run
 * per mode with its figures.  The parts, each with its header: sim_backend.c (the options and
 * the traffic), sim_backend_run.c (the model), sim_backend_out.c (the table, the limit over
 * time, the SVG).  Integer ns throughout, a seeded generator: the same options print the same
 * bytes. */
#ifndef RLT_CLI_SIM_BACKEND_TYPES_H
#define RLT_CLI_SIM_BACKEND_TYPES_H

#include "cli/cliutil.h"

#include "ratelimit/adaptive.h"

#include <stdio.h>

#define BK_CMD "sim --backend"
#define BK_MODES 6
#define BK_SAMPLE (10 * RLT_NS_PER_MS) /* the limit is sampled this often */

typedef struct bk_opts {
    int64_t cap, cap_after;        /* servers (requests served at once) before and after */
    rlt_ns service;                /* mean service time; each request's is within +-5 % */
    rlt_ns timeout;                /* a request answered later than this failed (the client left) */
    rlt_ns duration, change_at;    /* the run, and the instant capacity and traffic change */
    int64_t rate[RLT_CLASS_COUNT]; /* requests per second per class before the change */
    int64_t surge;                 /* the sheddable rate's multiplier after the change */
    int reserve;                   /* percent, for the modes with classes */
    int64_t static_limit;          /* the static mode's limit (default cap) */
    int64_t ceiling;               /* the adaptive modes' ceiling (default 10 cap) */
    rlt_ns aimd_slow;              /* AIMD: a latency above this is a drop (default 1.5 service) */
    uint64_t seed;
    const char *svg;
} bk_opts;

typedef struct bk_req {
    rlt_ns t, svc;
    int cls;
} bk_req;

/* One mode's run and its figures; arrays owned, freed by rlt__bk_free. */
typedef struct bk_mode {
    char name[48];
    int kind; /* 0 static, RLT_ADAPT_AIMD, RLT_ADAPT_VEGAS, -1 no limit (the unloaded run) */
    int classes;
    rlt_adapt_policy ap;
    /* Of the requests arriving at or after the change: */
    int64_t offered[RLT_CLASS_COUNT], good[RLT_CLASS_COUNT];
    rlt_ns p50[RLT_CLASS_COUNT], p99[RLT_CLASS_COUNT];
    int64_t good_after; /* answers in time, completed in [change_at, duration) */
    int64_t *limit_at;  /* the limit every BK_SAMPLE from 0 to the duration */
    size_t nsamples;
} bk_mode;

typedef struct bk_sim {
    bk_opts o;
    bk_req *r;
    size_t n;
    bk_mode m[BK_MODES];
    bk_mode unloaded; /* critical traffic alone on the whole backend, unlimited */
} bk_sim;

#endif
