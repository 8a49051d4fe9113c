/* `ratelimit sim --fleet`: the fleet simulator's options and the order of its run (fleet.h has
 * the model).  `ratelimit sim` hands its argv here when it holds --fleet. */
#include "cli/fleet_types.h"
#include "cli/svg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NS RLT_NS_PER_S
#define MS RLT_NS_PER_MS
#define fail_usage(...) rlt__usage_error(FLEET_CMD, __VA_ARGS__)
#define STEPS_MAX INT64_C(1000000)
/* The run's work, capped before it starts so that no run takes hours: a node-step costs the
 * four modes about 0.23 us of CPU together (release build, the test VM, 100,000 nodes), so 5e8
 * of them take about two minutes; a lease call about 20 ns, so 4e9 of them under two. */
#define NODE_STEPS_MAX INT64_C(500000000)
#define LEASE_CALLS_MAX INT64_C(4000000000)

static void usage(FILE *f)
{
    fputs("usage: ratelimit sim --fleet N [--pattern NAME] [--budget POLICY] [--demand D]\n"
          "                     [--seconds S] [--step DT] [--window T] [--interval I] [--ttl L]\n"
          "                     [--latency D] [--no-assignment B] [--expired-assignment B]\n"
          "                     [--lease K] [--lease-ttl L] [--seed X] [--svg FILE]\n"
          "Simulates N nodes (1 to 100000) sharing one budget, four ways on the same demand:\n"
          "exact checks (every request asks one global limiter: RLS, Redis), local leases of K\n"
          "units (libratelimit_redis's leases), quota division (Envoy's RLQS, src/quota) and a\n"
          "static split (each node a limiter of R/N); prints for each what it admitted, its\n"
          "worst window against R x T + B (over-admission), what it refused that the exact\n"
          "limiter admitted (under-admission) and its messages to the limiter per admitted\n"
          "request.  Durations are decimals in seconds (0.01) or have a unit (10ms, 2s, 1m).\n"
          "A run is refused before it starts when nodes x steps passes 5e8 or its leases could\n"
          "call the global limiter more than 4e9 times (minutes of work, not hours).\n"
          "  --fleet N        nodes, 1..100000\n"
          "  --pattern NAME   steady (default: every node D), skewed (a tenth of the nodes 10 D,\n"
          "                   the others D/10), join (every node 2 D, the last one joining at\n"
          "                   S/3), die (every node 2 D, node 0 dying at S/3), flash (every\n"
          "                   node D, node 0 100 D from S/3 to 2S/3), break (every node 2 D,\n"
          "                   node 0's stream breaking at S/3: it lives on, unconnected)\n"
          "  --budget POLICY  the shared budget, a gcra or token_bucket policy (default\n"
          "                   gcra:R/1s,burst=R/10 with R = N x D, at least 1)\n"
          "  --demand D       requests per second per node (default 100)\n"
          "  --seconds S      the run's length (default 10)\n"
          "  --step DT        the clock's step; requests are counted per node per step and\n"
          "                   arrive at its start (default 10ms)\n"
          "  --window T       the over-admission window (default: the budget's period)\n"
          "  --interval I     quota division: the reporting interval (default 1s)\n"
          "  --ttl L          quota division: the assignments' time to live (default 8 I, at\n"
          "                   least 3 I)\n"
          "  --latency D      quota division: how late each answer reaches its node (default 0,\n"
          "                   below I)\n"
          "  --no-assignment B  quota division: what a node does before its first assignment\n"
          "                   arrives (Envoy's no_assignment_behavior): split (default: a token\n"
          "                   bucket of R/N, burst B/N, at least 1), allow-all, deny-all, or a\n"
          "                   token_bucket policy (token_bucket:50/1s,burst=5)\n"
          "  --expired-assignment B  quota division: what a node does once its assignment\n"
          "                   expired (expired_assignment_behavior): the same choices, or\n"
          "                   reuse-last (default split)\n"
          "  --lease K        leases: units taken from the global limiter at once (default 10)\n"
          "  --lease-ttl L    leases: what is left of a lease is dropped this long after its\n"
          "                   grant (default 100ms)\n"
          "  --seed X         the nodes' phases and order (default 1)\n"
          "  --svg FILE       also draw the admissions in every window of T, per mode\n",
          f);
}

/* A duration option: a decimal in seconds or a number with a unit (ns us ms s m). */
static int opt_time(const char *name, const char *v, rlt_ns min, rlt_ns max, rlt_ns *out)
{
    return rlt__opt_time(FLEET_CMD, name, v, min, max, out);
}

static int parse_pattern(const char *v)
{
    for (int p = 0; p < NPAT; p++)
        if (strcmp(v, rlt__fleet_pattern_name(p)) == 0) return p;
    return -1;
}

/* --no-assignment / --expired-assignment: a fallback; `split` is resolved by check(). */
static int parse_fallback(fleet_fallback *fb, const char *name, const char *v, bool reuse_ok)
{
    snprintf(fb->text, sizeof fb->text, "%s", v);
    fb->kind = -1;
    if (strcmp(v, "split") == 0) fb->kind = FB_SPLIT;
    if (strcmp(v, "allow-all") == 0) fb->kind = FB_ALLOW;
    if (strcmp(v, "deny-all") == 0) fb->kind = FB_DENY;
    if (reuse_ok && strcmp(v, "reuse-last") == 0) fb->kind = FB_REUSE;
    if (fb->kind >= 0) return 0;
    if (strncmp(v, "token_bucket:", 13) != 0)
        return fail_usage("%s '%s': split, allow-all, deny-all%s or a token_bucket policy", name, v,
                          reuse_ok ? ", reuse-last" : "");
    char err[256] = "";
    int rc = rlt_policy_parse(&fb->bucket, v, strlen(v), err, sizeof err);
    if (rc != RLT_OK) return fail_usage("%s '%s': %s", name, v, err[0] ? err : rlt_strerror(rc));
    if (fb->bucket.block || fb->bucket.jitter)
        return fail_usage("%s '%s': block= and jitter= are not simulated", name, v);
    fb->kind = FB_BUCKET;
    return 0;
}

/* The static split of the budget as a token bucket: R / N (N per P x nodes), burst B / N, at
 * least 1: the fallback an operator who knows the fleet's size would configure. */
static int split_fallback(fleet_opts *o, fleet_fallback *fb)
{
    if (fb->kind != FB_SPLIT) return 0;
    int64_t burst = o->budget.burst / o->nodes;
    if (rlt_policy_init(&fb->bucket, RLT_TOKEN_BUCKET, o->budget.limit, o->budget.period * o->nodes,
                        burst ? burst : 1, 0, 0) != RLT_OK)
        return fail_usage("the static split of --budget is out of range for a fallback");
    return 0;
}

static int parse_budget(fleet_opts *o, const char *v)
{
    char err[256] = "";
    int rc = rlt_policy_parse(&o->budget, v, strlen(v), err, sizeof err);
    if (rc != RLT_OK) return fail_usage("--budget '%s': %s", v, err[0] ? err : rlt_strerror(rc));
    if (o->budget.algo != RLT_GCRA && o->budget.algo != RLT_TOKEN_BUCKET)
        return fail_usage("--budget '%s': must be a gcra or token_bucket policy", v);
    if (o->budget.block || o->budget.jitter)
        return fail_usage("--budget '%s': block= and jitter= are not simulated", v);
    if (o->budget.period > 3600 * NS)
        return fail_usage("--budget '%s': the period must be at most 1h", v);
    if (v != o->budget_text) snprintf(o->budget_text, sizeof o->budget_text, "%s", v);
    return 0;
}

/* The default budget: R = N x D per second, a burst of R / 10 (100 ms of it). */
static int default_budget(fleet_opts *o)
{
    int64_t r = o->nodes * o->demand_m / 1000, b = r / 10;
    if (r < 1) r = 1;
    if (b < 1) b = 1;
    snprintf(o->budget_text, sizeof o->budget_text, "gcra:%lld/1s,burst=%lld", (long long)r,
             (long long)b);
    return parse_budget(o, o->budget_text);
}

/* An upper bound of the leases' calls to the global limiter beyond the two a node-step that
 * end a node's requests on a denial (counted in nodes x steps): a granted lease takes k of
 * the at most G = R x S + B units the limiter hands out and admits a request, so there are at
 * most min(requests, G / k); a request taken alone when the lease does not fit costs two
 * calls and one unit, and at one instant (a step) the limiter has fewer than k units left for
 * them, so at most min(requests, G, (k - 1) x steps) of them. */
static int64_t lease_calls_max(const fleet_opts *o)
{
    fleet probe = {.o = *o};
    __int128 req = rlt__fleet_requests_max(&probe), k = o->lease_units;
    __int128 g = (__int128)o->budget.limit * o->duration / o->budget.period + o->budget.burst;
    __int128 alone = (k - 1) * (o->duration / o->step);
    if (alone > g) alone = g;
    if (alone > req) alone = req;
    __int128 granted = g / k < req ? g / k : req, n = granted + 2 * alone;
    return n > INT64_MAX ? INT64_MAX : (int64_t)n;
}

static int check(fleet_opts *o, bool has_window)
{
    if (!has_window) o->window = o->budget.period;
    if (o->ttl == 0) o->ttl = 8 * o->interval;
    char a[RLT__DEC_BUF];
    if (o->duration % o->step || o->interval % o->step || o->window % o->step ||
        o->lease_ttl % o->step || o->latency % o->step || o->ttl % o->step)
        return fail_usage("--seconds, --window, --interval, --ttl, --latency and --lease-ttl "
                          "must be whole multiples of --step (%s s)",
                          (rlt__dec_format(a, o->step, NS), a));
    if (o->window > o->duration) return fail_usage("--window must not be longer than --seconds");
    if (o->ttl < 3 * o->interval)
        return fail_usage("--ttl must be at least 3 x --interval (the renewal margin of 2 I and "
                          "the resend gap of I)");
    if (o->latency >= o->interval) return fail_usage("--latency must be below --interval");
    if (split_fallback(o, &o->no_assignment) || split_fallback(o, &o->expired)) return 2;
    if (o->duration / o->step > STEPS_MAX)
        return fail_usage("--seconds / --step is %lld steps, more than %lld: raise --step",
                          (long long)(o->duration / o->step), (long long)STEPS_MAX);
    if (o->nodes * (o->duration / o->step) > NODE_STEPS_MAX)
        return fail_usage("--fleet %lld for %lld steps is too much work (nodes x steps at most "
                          "%lld): lower --fleet or --seconds, or raise --step",
                          (long long)o->nodes, (long long)(o->duration / o->step),
                          (long long)NODE_STEPS_MAX);
    int64_t calls = lease_calls_max(o);
    if (calls > LEASE_CALLS_MAX) {
        char d[RLT__DEC_BUF];
        rlt__dec_format(d, o->demand_m, 1000);
        rlt__dec_format(a, o->duration, NS);
        return fail_usage("--fleet %lld at --demand %s for %s s is too much work: the leases "
                          "may call the global limiter %lld times (at most %lld): lower "
                          "--demand, --fleet or --seconds, or raise --lease",
                          (long long)o->nodes, d, a, (long long)calls, (long long)LEASE_CALLS_MAX);
    }
    return 0;
}

static int parse(fleet_opts *o, int argc, char **argv)
{
    const char *v;
    bool has_budget = false, has_window = false;
    for (int i = 1; i < argc; i++) /* first, so that `sim --fleet --help` is help */
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return -1;
        }
    for (int i = 1; i < argc; i++) {
        int m;
        const char *a = argv[i];
#define OPT(name) (m = rlt__opt(argc, argv, &i, FLEET_CMD, name, &v)) < 0 ? -1 : m
        if ((m = OPT("--fleet"))) {
            if (m < 0 || rlt__opt_int(FLEET_CMD, "--fleet", v, 1, FLEET_NODES_MAX, &o->nodes))
                return 2;
        } else if ((m = OPT("--pattern"))) {
            if (m < 0) return 2;
            if ((o->pattern = parse_pattern(v)) < 0)
                return fail_usage(
                    "unknown --pattern '%s' (steady, skewed, join, die, flash, break)", v);
        } else if ((m = OPT("--budget"))) {
            if (m < 0 || parse_budget(o, v)) return 2;
            has_budget = true;
        } else if ((m = OPT("--demand"))) {
            if (m < 0 || rlt__opt_dec(FLEET_CMD, "--demand", v, 1000, 1, 1000000000, &o->demand_m))
                return 2;
        } else if ((m = OPT("--seconds"))) {
            if (m < 0 || opt_time("--seconds", v, MS, 86400 * NS, &o->duration)) return 2;
        } else if ((m = OPT("--step"))) {
            if (m < 0 || opt_time("--step", v, RLT_NS_PER_US, NS, &o->step)) return 2;
        } else if ((m = OPT("--window"))) {
            if (m < 0 || opt_time("--window", v, RLT_NS_PER_US, 86400 * NS, &o->window)) return 2;
            has_window = true;
        } else if ((m = OPT("--interval"))) {
            if (m < 0 || opt_time("--interval", v, RLT_NS_PER_US, 3600 * NS, &o->interval))
                return 2;
        } else if ((m = OPT("--ttl"))) {
            if (m < 0 || opt_time("--ttl", v, RLT_NS_PER_US, 86400 * NS, &o->ttl)) return 2;
        } else if ((m = OPT("--latency"))) {
            if (m < 0 || opt_time("--latency", v, 0, 3600 * NS, &o->latency)) return 2;
        } else if ((m = OPT("--no-assignment"))) {
            if (m < 0 || parse_fallback(&o->no_assignment, "--no-assignment", v, false)) return 2;
        } else if ((m = OPT("--expired-assignment"))) {
            if (m < 0 || parse_fallback(&o->expired, "--expired-assignment", v, true)) return 2;
        } else if ((m = OPT("--lease"))) {
            if (m < 0 ||
                rlt__opt_int(FLEET_CMD, "--lease", v, 1, INT64_C(1) << 40, &o->lease_units))
                return 2;
        } else if ((m = OPT("--lease-ttl"))) {
            if (m < 0 || opt_time("--lease-ttl", v, RLT_NS_PER_US, 3600 * NS, &o->lease_ttl))
                return 2;
        } else if ((m = OPT("--seed"))) {
            int64_t s;
            if (m < 0 || rlt__opt_int(FLEET_CMD, "--seed", v, 0, INT64_MAX, &s)) return 2;
            o->seed = (uint64_t)s;
        } else if ((m = OPT("--svg"))) {
            if (m < 0) return 2;
            o->svg = v;
        } else {
            return fail_usage("unknown option '%s'", a);
        }
#undef OPT
    }
    if (o->nodes == 0) return fail_usage("--fleet N is required");
    if (!has_budget && default_budget(o)) return 2;
    return check(o, has_window);
}

static int fleet_main(fleet *f, int argc, char **argv)
{
    fleet_opts *o = &f->o;
    *o = (fleet_opts){.demand_m = 100000,
                      .duration = 10 * NS,
                      .step = 10 * MS,
                      .interval = NS,
                      .lease_units = 10,
                      .lease_ttl = 100 * MS,
                      .seed = 1,
                      .no_assignment = {.kind = FB_SPLIT, .text = "split"},
                      .expired = {.kind = FB_SPLIT, .text = "split"}};
    int rc = parse(o, argc, argv);
    if (rc) return rc < 0 ? 0 : rc;
    f->steps = o->duration / o->step;
    static const char *names[NMODE] = {"exact (RLS, Redis)", "leases", "quota division",
                                       "static split R/N"};
    for (int i = 0; i < NMODE; i++) {
        f->m[i].name = names[i];
        if (!(f->m[i].adm = calloc((size_t)f->steps, sizeof *f->m[i].adm))) {
            fprintf(stderr, "ratelimit " FLEET_CMD ": out of memory\n");
            return 1;
        }
    }
    FILE *svg;
    if (rlt__svg_open(FLEET_CMD, o->svg, &svg)) return 1;
    rlt__fleet_exact(f);
    if (rlt__fleet_leases(f) || rlt__fleet_quota(f) || rlt__fleet_static(f)) {
        if (svg) fclose(svg);
        return 1;
    }
    rlt__fleet_totals(f);
    rlt__fleet_table(f);
    if (svg && rlt__fleet_svg(f, svg)) return 1;
    return fflush(stdout) == 0 ? 0 : 1;
}

int rlt__cli_fleet(int argc, char **argv)
{
    fleet f;
    memset(&f, 0, sizeof f);
    int rc = fleet_main(&f, argc, argv);
    for (int i = 0; i < NMODE; i++)
        free(f.m[i].adm);
    return rc;
}
