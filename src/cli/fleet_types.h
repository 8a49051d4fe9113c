/* `ratelimit sim --fleet` (fleet.c) and its parts' shared types and calls: a fleet of N nodes
 * sharing one budget, run four ways on the same demand: exact checks against one global limiter
 * (RLS, Redis), local leases of k units (libratelimit_redis's leases), quota division (src/quota,
 * Envoy's RLQS) and a static split (each node R/N).  Its parts: fleet.c (options, the run's order),
 * fleet_run.c (the demand and the four modes), fleet_quota.c (the quota-division mode), fleet_out.c
 * (the table and the picture).  Integer time in ns on a virtual clock, a seeded generator, no clock
 * read: the same options give byte-identical output. */
#ifndef RLT_CLI_FLEET_TYPES_H
#define RLT_CLI_FLEET_TYPES_H

#include "cli/cliutil.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define FLEET_CMD "sim --fleet"
#define FLEET_NODES_MAX 100000

/* The demand patterns (fleet_run.c's demand_of says what each one asks). */
enum { PAT_STEADY, PAT_SKEWED, PAT_JOIN, PAT_DIE, PAT_FLASH, PAT_BREAK, NPAT };

/* The modes, in the table's order. */
enum { M_EXACT, M_LEASE, M_QUOTA, M_STATIC, NMODE };

/* What a quota-division node does with no live assignment: Envoy's no_assignment_behavior
 * (before its first assignment arrives) and expired_assignment_behavior (after its last one's
 * TTL ran out), each a fallback_rate_limit (a blanket rule or a token bucket) or, when expired,
 * reuse_last_assignment. */
enum { FB_SPLIT, FB_ALLOW, FB_DENY, FB_BUCKET, FB_REUSE };

typedef struct fleet_fallback {
    int kind;          /* FB_*; FB_SPLIT is FB_BUCKET at the static split (R / N, B / N) */
    rlt_policy bucket; /* FB_SPLIT, FB_BUCKET: a token bucket, started full on entering */
    char text[96];     /* as given */
} fleet_fallback;

typedef struct fleet_opts {
    int64_t nodes;     /* N */
    int pattern;       /* PAT_* */
    rlt_policy budget; /* gcra or token_bucket: R = limit / period, burst B */
    char budget_text[128];
    int64_t demand_m;             /* D: requests per second per node, x 1000 */
    rlt_ns duration;              /* S */
    rlt_ns step;                  /* the clock's step: arrivals are counted per node per step */
    rlt_ns window;                /* T: the over-admission window */
    rlt_ns interval;              /* quota: I, the reporting interval */
    rlt_ns ttl;                   /* quota: the assignments' TTL */
    rlt_ns latency;               /* quota: how late each answer reaches its node */
    fleet_fallback no_assignment; /* quota: before a node's first assignment */
    fleet_fallback expired;       /* quota: after its assignment expired */
    int64_t lease_units;          /* leases: k */
    rlt_ns lease_ttl;             /* leases: a lease is dropped this long after its grant */
    uint64_t seed;
    const char *svg;
} fleet_opts;

/* What one mode did over the run. */
typedef struct fleet_mode {
    const char *name;
    int64_t *adm;       /* admitted per step */
    int64_t admitted;   /* in all */
    int64_t messages;   /* messages to the limiter: checks, lease requests, usage reports */
    int64_t worst;      /* the most admitted in any window of T */
    int64_t worst_step; /* the step that window starts at */
} fleet_mode;

typedef struct fleet {
    fleet_opts o;
    int64_t steps;  /* duration / step */
    int64_t demand; /* requests that arrived, in all (the same for every mode) */
    fleet_mode m[NMODE];
} fleet;

/* The modes, each filling its f->m[...].adm (allocated by the caller, f->steps entries,
 * zeroed) and messages.  The exact one (fleet_run.c, run first) also counts f->demand.  Those
 * returning int return 0, or 1 with a message on stderr (out of memory, a budget the mode
 * cannot take). */
void rlt__fleet_exact(fleet *f);
int rlt__fleet_leases(fleet *f);
int rlt__fleet_static(fleet *f);
int rlt__fleet_quota(fleet *f); /* fleet_quota.c */

/* After the modes: each one's admitted total and its worst window of T. */
void rlt__fleet_totals(fleet *f);

/* Admits up to n requests of cost 1 at `now` under p with state st, as n requests at one
 * instant would be: a peek says how many fit, and they are charged at once.  Returns how many. */
int64_t rlt__fleet_admit(const rlt_policy *p, void *st, rlt_ns now, int64_t n);

/* Requests node i asks for in step k (0 while it is absent or dead), and whether it is alive
 * (joined and not dead) then. */
int64_t rlt__fleet_arrivals(const fleet *f, int64_t i, int64_t k);
bool rlt__fleet_alive(const fleet *f, int64_t i, int64_t k);

/* Whether node i, alive in step k, can reach the limiter then (false for node 0 from S / 3
 * under the break pattern: its stream breaks and it does not reconnect). */
bool rlt__fleet_connected(const fleet *f, int64_t i, int64_t k);

/* An upper bound, read from the options alone (f->o), of the requests the run's nodes ask in
 * all: no more than every node at its highest rate for the whole run.  Saturates at INT64_MAX. */
int64_t rlt__fleet_requests_max(const fleet *f);

/* The node order of step k: nodes are visited from this one on, wrapping (seeded, so that no
 * node always comes first to a shared limiter). */
int64_t rlt__fleet_first(const fleet *f, int64_t k);

/* R x T + B: what one exact limiter can admit in a window of T. */
int64_t rlt__fleet_window_budget(const fleet *f);

/* Prints the table to stdout. */
void rlt__fleet_table(const fleet *f);

/* Writes the picture into `out` (opened before the run) and closes it: 0, or 1 with a message
 * on stderr when writing failed. */
int rlt__fleet_svg(const fleet *f, FILE *out);

/* The pattern's name ("steady"). */
const char *rlt__fleet_pattern_name(int pattern);

/* `ratelimit sim --fleet ...`: argv as `ratelimit sim` received it.  Returns the exit code. */
int rlt__cli_fleet(int argc, char **argv);

#endif
