/* `ratelimit sim --backend C`: the options and the traffic (seeded, per class, the sheddable
 * class surging at the change); the model (sim_backend_run.c) is an event loop on a virtual
 * clock in ns.
 *
 * The backend has C servers and a FIFO queue: a request admitted by the limiter is served at
 * once when a server is free, else waits, so its latency is its wait plus its service time and
 * rises as the backend saturates.  At the change the servers become C' (those at work finish
 * what they hold).  The limiter in front counts the requests it admitted and that have not
 * answered; its limit is static or moved by rlt_adapt_update at every answer (latency, and a
 * drop when the answer came later than the client's timeout), and with classes it admits by
 * rlt_class_admits under the reserve.  Every mode sees the same arrivals and service times. */
#include "cli/cli.h"
#include "cli/sim_backend.h"
#include "cli/sim_backend_out.h"
#include "cli/sim_backend_run.h"
#include "cli/svg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NS RLT_NS_PER_S
#define MS RLT_NS_PER_MS
#define fail_usage(...) rlt__usage_error(BK_CMD, __VA_ARGS__)
/* At most about 90 bytes per arrival at once (the arrivals, one run's heap, queue and
 * latencies), so 5 M arrivals stay under 500 MB and a few seconds a mode. */
#define ARRIVALS_MAX INT64_C(5000000)

static void usage(FILE *f)
{
    fputs("usage: ratelimit sim --backend C [--after C2] [--service D] [--timeout D]\n"
          "                     [--seconds S] [--change-at T] [--critical R] [--default R]\n"
          "                     [--sheddable R] [--surge X] [--reserve P] [--static L]\n"
          "                     [--ceiling L] [--aimd-slow D] [--seed X] [--svg FILE]\n"
          "Models a backend of C servers with a queue behind a concurrency limit and runs the\n"
          "same traffic of three classes (critical, default, sheddable) through a static limit,\n"
          "AIMD and Vegas, each without and with a critical reserve; at --change-at the backend\n"
          "drops to C2 servers and sheddable traffic surges.  Prints, for the requests arriving\n"
          "from the change on, the goodput (answers within the timeout per second, and its\n"
          "share of C2's capacity), each class's availability (answered in time / offered) and\n"
          "latency percentiles, critical traffic's p99 alone on the whole backend (unloaded),\n"
          "and the limit over time.  Durations are decimals in seconds or have a unit (10ms).\n"
          "  --backend C     servers before the change, 1..65536 (the default scenario: 100)\n"
          "  --after C2      servers from the change on (default C/2, at least 1)\n"
          "  --service D     mean service time, each request's within +-5 % (default 10ms)\n"
          "  --timeout D     an answer later than this is a failure (default 5 x service)\n"
          "  --seconds S     the run's length (default 20)\n"
          "  --change-at T   the instant of the change (default S/2)\n"
          "  --critical R    critical requests per second (default a tenth of what C servers\n"
          "                  serve: C / service / 10)\n"
          "  --default R     default requests per second (default twice critical)\n"
          "  --sheddable R   sheddable requests per second before the change (default critical)\n"
          "  --surge X       the sheddable rate's multiplier from the change on (default 12)\n"
          "  --reserve P     percent of the limit kept from each lower class (default 20)\n"
          "  --static L      the static mode's limit (default C)\n"
          "  --ceiling L     the adaptive limits' ceiling (default 10 C, at most 65536)\n"
          "  --aimd-slow D   AIMD: an answer slower than this counts as a drop (default 1.5 x\n"
          "                  service)\n"
          "  --seed X        the traffic's seed (default 1)\n"
          "  --svg FILE      also write the limit over time as an SVG picture\n",
          f);
}

/* splitmix64 */
static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static int by_time(const void *a, const void *b)
{
    const bk_req *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    if (x->cls != y->cls) return x->cls < y->cls ? -1 : 1;
    return x->svc < y->svc ? -1 : x->svc > y->svc;
}

/* Arrivals of each class with gaps uniform in [1, 2 x mean - 1] (mean 1/rate), the rate of
 * sheddable multiplied from the change on. */
static int traffic(bk_sim *s)
{
    const bk_opts *o = &s->o;
    int64_t total = 0;
    for (int c = 0; c < RLT_CLASS_COUNT; c++) {
        int64_t after = c == RLT_CLASS_SHEDDABLE ? o->rate[c] * o->surge : o->rate[c];
        total += (int64_t)((__int128)o->rate[c] * o->change_at / NS +
                           (__int128)after * (o->duration - o->change_at) / NS) +
                 2;
    }
    if (total > ARRIVALS_MAX)
        return fail_usage("about %lld arrivals: at most %lld (fewer seconds or lower rates)",
                          (long long)total, (long long)ARRIVALS_MAX);
    /* uniform gaps: a class's count strays from its mean by about its square root */
    size_t cap = (size_t)(total + total / 16 + 64);
    s->r = malloc(cap * sizeof *s->r);
    if (!s->r) {
        fprintf(stderr, "ratelimit " BK_CMD ": out of memory\n");
        return 1;
    }
    uint64_t g = o->seed;
    for (int c = 0; c < RLT_CLASS_COUNT; c++) {
        rlt_ns t = 0;
        for (;;) {
            int64_t rate = o->rate[c];
            if (c == RLT_CLASS_SHEDDABLE && t >= o->change_at) rate *= o->surge;
            if (rate == 0) {
                if (t >= o->change_at || c != RLT_CLASS_SHEDDABLE || o->surge == 0) break;
                t = o->change_at;
                continue;
            }
            rlt_ns mean = NS / rate > 1 ? NS / rate : 1;
            t += mean > 1 ? 1 + (rlt_ns)(next(&g) % (uint64_t)(2 * mean - 1)) : 1;
            if (t >= o->duration) break;
            rlt_ns svc = o->service * (950 + (int64_t)(next(&g) % 101)) / 1000;
            if (s->n >= cap) break;
            s->r[s->n++] = (bk_req){t, svc > 0 ? svc : 1, c};
        }
    }
    qsort(s->r, s->n, sizeof *s->r, by_time);
    return 0;
}

static void name_modes(bk_sim *s)
{
    const bk_opts *o = &s->o;
    for (int i = 0; i < BK_MODES; i++) {
        bk_mode *m = &s->m[i];
        m->kind = i < 2 ? 0 : i < 4 ? RLT_ADAPT_AIMD : RLT_ADAPT_VEGAS;
        m->classes = i % 2;
        const char *base = m->kind == 0 ? "static" : m->kind == RLT_ADAPT_AIMD ? "aimd" : "vegas";
        if (m->kind == 0)
            snprintf(m->name, sizeof m->name, "static %lld%s", (long long)o->static_limit,
                     m->classes ? " +reserve" : "");
        else
            snprintf(m->name, sizeof m->name, "%s%s", base, m->classes ? " +reserve" : "");
        m->ap = (rlt_adapt_policy){.algo = m->kind == 0 ? RLT_ADAPT_AIMD : (rlt_adapt_algo)m->kind,
                                   .floor = 1,
                                   .ceiling = o->ceiling,
                                   .initial =
                                       o->static_limit < o->ceiling ? o->static_limit : o->ceiling,
                                   .slow_ns = m->kind == RLT_ADAPT_AIMD ? o->aimd_slow : 0};
        (void)rlt_adapt_policy_check(&m->ap); /* the options' bounds make it valid */
    }
    s->unloaded.kind = -1;
    snprintf(s->unloaded.name, sizeof s->unloaded.name, "critical alone, unlimited");
}

static void free_sim(bk_sim *s)
{
    for (int i = 0; i < BK_MODES; i++)
        free(s->m[i].limit_at);
    free(s->unloaded.limit_at);
    free(s->r);
}

static int opt_rate(const char *name, const char *v, int64_t *out)
{
    return rlt__opt_int(BK_CMD, name, v, 0, 10000000, out);
}

static int sim_backend(bk_sim *s, int argc, char **argv)
{
    bk_opts *o = &s->o;
    const char *v, *after = NULL, *service = NULL, *timeout = NULL, *seconds = NULL, *change = NULL,
                   *rate[RLT_CLASS_COUNT] = {0}, *st = NULL, *ceil = NULL, *slow = NULL,
                   *reserve = NULL, *surge = NULL;
    int64_t seed = 1, x;
    int have_cap = 0;
    for (int i = 1; i < argc; i++) {
        int m;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return -1;
        }
#define OPT(name) (m = rlt__opt(argc, argv, &i, BK_CMD, name, &v)) < 0 ? -1 : m
#define TAKE(name, var)                                                                            \
    if ((m = OPT(name))) {                                                                         \
        if (m < 0) return 2;                                                                       \
        var = v;                                                                                   \
        continue;                                                                                  \
    }
        if ((m = OPT("--backend"))) {
            if (m < 0 || rlt__opt_int(BK_CMD, "--backend", v, 1, RLT_CONCURRENCY_MAX, &o->cap))
                return 2;
            have_cap = 1;
            continue;
        }
        TAKE("--after", after)
        TAKE("--service", service)
        TAKE("--timeout", timeout)
        TAKE("--seconds", seconds)
        TAKE("--change-at", change)
        TAKE("--critical", rate[RLT_CLASS_CRITICAL])
        TAKE("--default", rate[RLT_CLASS_DEFAULT])
        TAKE("--sheddable", rate[RLT_CLASS_SHEDDABLE])
        TAKE("--surge", surge)
        TAKE("--reserve", reserve)
        TAKE("--static", st)
        TAKE("--ceiling", ceil)
        TAKE("--aimd-slow", slow)
        if ((m = OPT("--seed"))) {
            if (m < 0 || rlt__opt_int(BK_CMD, "--seed", v, 0, INT64_MAX, &seed)) return 2;
            continue;
        }
        TAKE("--svg", o->svg)
#undef TAKE
#undef OPT
        return fail_usage("unknown option '%s'", argv[i]);
    }
    if (!have_cap) return fail_usage("--backend needs the number of servers");
    o->seed = (uint64_t)seed;
    o->cap_after = o->cap / 2 > 0 ? o->cap / 2 : 1;
    if (after && rlt__opt_int(BK_CMD, "--after", after, 1, RLT_CONCURRENCY_MAX, &o->cap_after))
        return 2;
    o->service = 10 * MS;
    if (service && rlt__opt_time(BK_CMD, "--service", service, RLT_NS_PER_US, 60 * NS, &o->service))
        return 2;
    o->timeout = 5 * o->service;
    if (timeout &&
        rlt__opt_time(BK_CMD, "--timeout", timeout, 1, RLT_ADAPT_LATENCY_MAX, &o->timeout))
        return 2;
    o->duration = 20 * NS;
    if (seconds && rlt__opt_time(BK_CMD, "--seconds", seconds, 10 * MS, 3600 * NS, &o->duration))
        return 2;
    o->change_at = o->duration / 2;
    if (change && rlt__opt_time(BK_CMD, "--change-at", change, 0, o->duration - 1, &o->change_at))
        return 2;
    /* default traffic: critical a tenth of the backend's capacity in requests per second */
    int64_t per_s = (int64_t)((__int128)o->cap * NS / o->service);
    o->rate[RLT_CLASS_CRITICAL] = per_s / 10;
    if (rate[0] && opt_rate("--critical", rate[0], &o->rate[0])) return 2;
    o->rate[RLT_CLASS_DEFAULT] = 2 * o->rate[RLT_CLASS_CRITICAL];
    o->rate[RLT_CLASS_SHEDDABLE] = o->rate[RLT_CLASS_CRITICAL];
    if (rate[1] && opt_rate("--default", rate[1], &o->rate[1])) return 2;
    if (rate[2] && opt_rate("--sheddable", rate[2], &o->rate[2])) return 2;
    o->surge = 12;
    if (surge && rlt__opt_int(BK_CMD, "--surge", surge, 0, 1000, &o->surge)) return 2;
    o->reserve = 20;
    if (reserve) {
        if (rlt__opt_int(BK_CMD, "--reserve", reserve, 0, 100, &x)) return 2;
        o->reserve = (int)x;
    }
    o->static_limit = o->cap;
    if (st && rlt__opt_int(BK_CMD, "--static", st, 1, RLT_CONCURRENCY_MAX, &o->static_limit))
        return 2;
    o->ceiling = o->cap * 10 < RLT_CONCURRENCY_MAX ? o->cap * 10 : RLT_CONCURRENCY_MAX;
    if (ceil && rlt__opt_int(BK_CMD, "--ceiling", ceil, 1, RLT_CONCURRENCY_MAX, &o->ceiling))
        return 2;
    o->aimd_slow = o->service * 3 / 2;
    if (slow && rlt__opt_time(BK_CMD, "--aimd-slow", slow, 1, RLT_ADAPT_LATENCY_MAX, &o->aimd_slow))
        return 2;
    int rc = traffic(s);
    if (rc) return rc;
    if (s->n == 0) {
        fprintf(stderr, "ratelimit " BK_CMD ": no requests to simulate (every rate is 0)\n");
        return 1;
    }
    FILE *svg;
    if (rlt__svg_open(BK_CMD, o->svg, &svg)) return 1;
    name_modes(s);
    for (int i = 0; i < BK_MODES && rc == 0; i++)
        rc = rlt__bk_run(s, &s->m[i]);
    if (rc == 0) rc = rlt__bk_run(s, &s->unloaded);
    if (rc) {
        if (svg) fclose(svg);
        return rc;
    }
    return rlt__bk_print(s, svg);
}

int rlt__cli_sim_backend(int argc, char **argv)
{
    bk_sim s;
    memset(&s, 0, sizeof s);
    int rc = sim_backend(&s, argc, argv);
    free_sim(&s);
    return rc < 0 ? 0 : rc;
}
