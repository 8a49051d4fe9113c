/* The fleet simulator's run: each node's demand under the pattern, and the modes that need no
 * division: exact checks (one global limiter, asked once per request), local leases of k units
 * (as libratelimit_redis's, src/redis/lease.c) and the static split (each node a limiter of
 * R/N).  Requests are counted per node per step and arrive at the step's start; a count of c
 * requests at one instant is decided exactly as c requests of cost 1 at that instant (a peek
 * says how many fit, then they are charged at once). */
#include "cli/fleet_types.h"

#include <stdlib.h>
#include <string.h>

#define NS RLT_NS_PER_S
#define MILLI_NS (INT64_C(1000) * NS) /* demand is in requests per second x 1000 */

/* A well-mixed hash of (seed, a, b) (splitmix64's finaliser): every draw of the run is one of
 * these, so no node's draw depends on another's and the output depends on the seed alone. */
static uint64_t mix(uint64_t seed, uint64_t a, uint64_t b)
{
    uint64_t z = seed + UINT64_C(0x9E3779B97F4A7C15) * (a + 1) + UINT64_C(0xD1B54A32D192ED03) * b;
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* When the pattern's event happens (a join, a death, a flash crowd starting; the crowd ends
 * at twice this): a third of the run, on the step grid. */
static rlt_ns event_at(const fleet *f)
{
    return f->o.duration / 3 / f->o.step * f->o.step;
}

bool rlt__fleet_alive(const fleet *f, int64_t i, int64_t k)
{
    rlt_ns t = k * f->o.step;
    if (f->o.pattern == PAT_JOIN && i == f->o.nodes - 1) return t >= event_at(f);
    if (f->o.pattern == PAT_DIE && i == 0) return t < event_at(f);
    return true;
}

bool rlt__fleet_connected(const fleet *f, int64_t i, int64_t k)
{
    return !(f->o.pattern == PAT_BREAK && i == 0 && k * f->o.step >= event_at(f));
}

/* Node i's demand in step k, requests per second x 1000:
 *   steady  every node D
 *   skewed  the first tenth of the nodes (at least one) 10 D, the others D / 10
 *   join    every node 2 D (the budget twice over); the last node joins at S / 3
 *   die     every node 2 D; node 0 dies at S / 3
 *   break   every node 2 D; node 0's stream breaks at S / 3 (it lives on, unconnected)
 *   flash   every node D; node 0 100 D from S / 3 to 2 S / 3 */
static int64_t demand_of(const fleet *f, int64_t i, int64_t k)
{
    int64_t d = f->o.demand_m, n = f->o.nodes;
    rlt_ns t = k * f->o.step, ev = event_at(f);
    switch (f->o.pattern) {
    case PAT_SKEWED:
        return i < (n + 9) / 10 ? 10 * d : d / 10;
    case PAT_JOIN:
    case PAT_DIE:
    case PAT_BREAK:
        return 2 * d;
    case PAT_FLASH:
        return i == 0 && t >= ev && t < 2 * ev ? 100 * d : d;
    default:
        return d;
    }
}

int64_t rlt__fleet_arrivals(const fleet *f, int64_t i, int64_t k)
{
    if (!rlt__fleet_alive(f, i, k)) return 0;
    /* Evenly spread at the node's rate from a seeded phase: the requests that arrive in
     * [k step, (k + 1) step) are the difference of two floors. */
    __int128 r = demand_of(f, i, k), off = (__int128)(mix(f->o.seed, 1, (uint64_t)i) % MILLI_NS);
    __int128 a = ((__int128)(k + 1) * f->o.step * r + off) / MILLI_NS;
    __int128 b = ((__int128)k * f->o.step * r + off) / MILLI_NS;
    return (int64_t)(a - b);
}

int64_t rlt__fleet_requests_max(const fleet *f)
{
    /* Every pattern's node runs at most at its rate at the start or after the event (the
     * flash's node 0); from its phase it asks at most one request more than rate x S. */
    int64_t kev = event_at(f) / f->o.step;
    __int128 sum = 0;
    for (int64_t i = 0; i < f->o.nodes; i++) {
        int64_t a = demand_of(f, i, 0), b = demand_of(f, i, kev);
        sum += (__int128)(a > b ? a : b) * f->o.duration / MILLI_NS + 1;
    }
    return sum > INT64_MAX ? INT64_MAX : (int64_t)sum;
}

int64_t rlt__fleet_first(const fleet *f, int64_t k)
{
    return (int64_t)(mix(f->o.seed, 2, (uint64_t)k) % (uint64_t)f->o.nodes);
}

int64_t rlt__fleet_window_budget(const fleet *f)
{
    const rlt_policy *p = &f->o.budget;
    return (int64_t)((__int128)p->limit * f->o.window / p->period) + p->burst;
}

int64_t rlt__fleet_admit(const rlt_policy *p, void *st, rlt_ns now, int64_t n)
{
    rlt_decision d;
    if (n <= 0 || rlt_decide(p, st, now, 0, &d) != RLT_OK) return 0;
    int64_t a = d.remaining < n ? d.remaining : n;
    if (a > 0 && (rlt_decide(p, st, now, a, &d) != RLT_OK || !d.allowed)) return 0;
    return a;
}

/* Exact: every request asks the global limiter, one message each. */
void rlt__fleet_exact(fleet *f)
{
    fleet_mode *m = &f->m[M_EXACT];
    uint64_t st[4] = {0};
    for (int64_t k = 0; k < f->steps; k++) {
        int64_t n = 0;
        for (int64_t i = 0; i < f->o.nodes; i++)
            n += rlt__fleet_arrivals(f, i, k);
        f->demand += n;
        m->messages += n;
        m->adm[k] = rlt__fleet_admit(&f->o.budget, st, k * f->o.step, n);
    }
}

/* Static split: node i is a limiter of the budget's algorithm at R / N (N per P x nodes) with
 * a burst of B / N, at least 1 (each node must be able to admit a request). */
int rlt__fleet_static(fleet *f)
{
    fleet_mode *m = &f->m[M_STATIC];
    const rlt_policy *b = &f->o.budget;
    rlt_policy p;
    int64_t burst = b->burst / f->o.nodes;
    if (rlt_policy_init(&p, b->algo, b->limit, b->period * f->o.nodes, burst ? burst : 1, 0, 0) !=
        RLT_OK) {
        fprintf(stderr, "ratelimit " FLEET_CMD ": the static split of --budget is out of range\n");
        return 1;
    }
    uint64_t(*st)[4] = calloc((size_t)f->o.nodes, sizeof *st);
    if (!st) {
        fprintf(stderr, "ratelimit " FLEET_CMD ": out of memory\n");
        return 1;
    }
    for (int64_t k = 0; k < f->steps; k++)
        for (int64_t i = 0; i < f->o.nodes; i++)
            m->adm[k] += rlt__fleet_admit(&p, st[i], k * f->o.step, rlt__fleet_arrivals(f, i, k));
    free(st);
    return 0;
}

/* One node's lease, as src/redis/lease.c keeps it per key. */
typedef struct lease {
    int64_t units;       /* left of the lease */
    rlt_ns expires;      /* the lease is dropped then */
    rlt_ns denied_until; /* a cost-1 denial stands until then */
} lease;

/* n requests of node e at `now`, as rlt__lease_decide takes them one by one: spend the lease
 * while it lasts; else take max(k, 1) units in one call; if that does not fit, ask for the one
 * request alone; a denial of it stands until its retry_after (other nodes can only take more).
 * What is left of an expired lease is dropped, never returned. */
static int64_t lease_requests(fleet *f, uint64_t *gst, lease *e, rlt_ns now, int64_t n)
{
    fleet_mode *m = &f->m[M_LEASE];
    const rlt_policy *p = &f->o.budget;
    int64_t k = f->o.lease_units, adm = 0;
    while (n > 0) {
        if (now < e->denied_until && e->units < 1) break;
        if (now < e->expires && e->units >= 1) {
            int64_t a = e->units < n ? e->units : n;
            e->units -= a;
            adm += a;
            n -= a;
            continue;
        }
        rlt_decision d;
        m->messages++;
        if (rlt_decide(p, gst, now, k, &d) == RLT_OK && d.allowed) {
            e->units = k - 1;
            e->expires = now + f->o.lease_ttl;
            e->denied_until = INT64_MIN;
            adm++;
            n--;
            continue;
        }
        if (k > 1) {
            m->messages++;
            if (rlt_decide(p, gst, now, 1, &d) == RLT_OK && d.allowed) {
                adm++; /* the cache is left as it was: no lease, no denial */
                n--;
                continue;
            }
        }
        e->units = 0;
        e->denied_until = d.retry_after > 0 ? now + d.retry_after : INT64_MIN;
        break;
    }
    return adm;
}

int rlt__fleet_leases(fleet *f)
{
    fleet_mode *m = &f->m[M_LEASE];
    uint64_t gst[4] = {0};
    lease *ls = calloc((size_t)f->o.nodes, sizeof *ls);
    if (!ls) {
        fprintf(stderr, "ratelimit " FLEET_CMD ": out of memory\n");
        return 1;
    }
    for (int64_t i = 0; i < f->o.nodes; i++)
        ls[i].expires = ls[i].denied_until = INT64_MIN;
    for (int64_t k = 0; k < f->steps; k++) {
        rlt_ns now = k * f->o.step;
        int64_t first = rlt__fleet_first(f, k);
        for (int64_t j = 0; j < f->o.nodes; j++) {
            int64_t i = (first + j) % f->o.nodes;
            int64_t n = rlt__fleet_arrivals(f, i, k);
            if (n > 0) m->adm[k] += lease_requests(f, gst, &ls[i], now, n);
        }
    }
    free(ls);
    return 0;
}

/* The most admitted in any w consecutive steps (all of them when the run is shorter). */
static void worst_window(fleet *f, fleet_mode *m)
{
    int64_t w = f->o.window / f->o.step, sum = 0;
    m->worst = -1;
    for (int64_t k = 0; k < f->steps; k++) {
        sum += m->adm[k];
        if (k >= w) sum -= m->adm[k - w];
        if (k < w - 1 && k < f->steps - 1) continue;
        if (sum > m->worst) {
            m->worst = sum;
            m->worst_step = k >= w - 1 ? k - w + 1 : 0;
        }
    }
}

void rlt__fleet_totals(fleet *f)
{
    for (int i = 0; i < NMODE; i++) {
        fleet_mode *m = &f->m[i];
        for (int64_t k = 0; k < f->steps; k++)
            m->admitted += m->adm[k];
        worst_window(f, m);
    }
}

const char *rlt__fleet_pattern_name(int pattern)
{
    static const char *names[NPAT] = {"steady", "skewed", "join", "die", "flash", "break"};
    return pattern >= 0 && pattern < NPAT ? names[pattern] : "?";
}
