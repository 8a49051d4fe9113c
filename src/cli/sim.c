/* `ratelimit sim`: every algorithm over exactly the same request trace on a virtual clock, with
 * a table of end states, counts and each algorithm's own contract checked on what it did, a
 * text timeline, an optional SVG of the same picture, and the sliding-window-counter accuracy
 * report (as text or as a picture of its errors over time).  Everything is integer arithmetic
 * on ns (a tick is one second of the virtual clock), so the output is byte-identical on every
 * machine.  The concurrency limiter's requests hold their slot for --hold ticks. */
#include "cli/cli.h"
#include "cli/cliutil.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CMD "sim"
#define NALGO 7
#define CONC 6 /* index of the concurrency limiter in runs[] */
#define MAX_REQUESTS 5000000
#define NS RLT_NS_PER_S

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
} run;

typedef struct sim {
    int64_t limit;
    rlt_ns window;
    const char *pattern; /* boundary steady burst random at trace */
    const char *source;  /* the --at text or the --trace path */
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
} sim;

static void usage(FILE *f)
{
    fputs("usage: ratelimit sim [--limit L] [--window W] [--pattern NAME | --at T,T,... | --trace "
          "FILE]\n"
          "                     [--rate R] [--seed S] [--duration D] [--until T] [--width COLS]\n"
          "                     [--hold D] [--block SPEC] [--svg FILE] [--accuracy]\n"
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
          "  --accuracy      instead of the table: sliding window counter vs the exact log\n",
          f);
}

#define fail_usage(...) rlt__usage_error(CMD, __VA_ARGS__)

/* Times the simulator accepts: +-2^61 ns (73 years) keeps every window and pixel computation
 * far from int64's edge. */
#define T_LIMIT (INT64_C(1) << 61)

static int add_req(sim *s, rlt_ns t, int64_t cost)
{
    if (t < -T_LIMIT || t > T_LIMIT) {
        char a[RLT__DEC_BUF];
        rlt__dec_format(a, t, NS);
        fprintf(stderr,
                "ratelimit " CMD ": time %s is outside the simulator's range (+-%lld ticks)\n", a,
                (long long)(T_LIMIT / NS));
        return -1;
    }
    if (s->n == s->cap) {
        if (s->n >= MAX_REQUESTS) {
            fprintf(stderr,
                    "ratelimit " CMD ": more than %d requests; lower --rate or "
                    "--duration\n",
                    MAX_REQUESTS);
            return -1;
        }
        size_t nc = s->cap ? s->cap * 2 : 64;
        req *nr = realloc(s->r, nc * sizeof *nr);
        if (!nr) {
            fprintf(stderr, "ratelimit " CMD ": out of memory\n");
            return -1;
        }
        s->r = nr;
        s->cap = nc;
    }
    s->r[s->n] = (req){t, cost, s->n};
    s->n++;
    return 0;
}

/* ---- Traffic ---- */

/* splitmix64: a tiny, well-mixed, fully specified generator. */
static uint64_t next_u64(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* An Exp(1) variate as k + frac/2^64 using only integer comparisons (von Neumann, 1951): a
 * descending run of uniforms started at x has odd length with probability e^-x; accept x
 * then, else add one to k and try again.  No libm, so every machine draws the same times. */
static void exp_draw(uint64_t *x, uint64_t *k, uint64_t *frac)
{
    for (*k = 0;; (*k)++) {
        uint64_t first = next_u64(x), u = first;
        int n = 1;
        for (;;) {
            uint64_t v = next_u64(x);
            if (v >= u) break;
            u = v;
            n++;
        }
        if (n & 1) {
            *frac = first;
            return;
        }
    }
}

static rlt_ns round_ms(rlt_ns t)
{
    rlt_ns q = t / RLT_NS_PER_MS, r = t % RLT_NS_PER_MS;
    if (r < 0) {
        q--;
        r += RLT_NS_PER_MS;
    }
    return (q + (r * 2 >= RLT_NS_PER_MS)) * RLT_NS_PER_MS;
}

static int gen_pattern(sim *s)
{
    const int64_t L = s->limit;
    const rlt_ns W = s->window;
    rlt_ns gap = W / (25 * L); /* L requests fit in W/25 */
    if (gap < 1) gap = 1;
    if (strcmp(s->pattern, "boundary") == 0) {
        /* 2L requests evenly spread over a span shorter than W that straddles t = W: far
         * enough apart to be told apart on the picture, close enough that the fixed window
         * lets all 2L through within one window's length. */
        gap = W / (2 * L + 2);
        if (gap < 1) gap = 1;
        for (int64_t i = 0; i < L; i++)
            if (add_req(s, W - (L - i) * gap, 1)) return 1;
        for (int64_t i = 0; i < L; i++)
            if (add_req(s, W + i * gap, 1)) return 1;
        return 0;
    }
    if (strcmp(s->pattern, "burst") == 0) {
        for (int b = 0; b < 2; b++)
            for (int64_t i = 0; i < 2 * L; i++)
                if (add_req(s, W / 10 + b * 2 * W + i * gap, 1)) return 1;
        return 0;
    }
    /* Mean gap between requests, ns. */
    __int128 mean = (__int128)NS * NS / s->rate_e9;
    if (mean < 1) mean = 1;
    if (strcmp(s->pattern, "steady") == 0) {
        for (int64_t i = 0;; i++) {
            __int128 t = mean * i;
            if (t >= s->duration) break;
            if (add_req(s, round_ms((rlt_ns)t), 1)) return 1;
        }
        return 0;
    }
    if (strcmp(s->pattern, "random") == 0) {
        uint64_t x = s->seed;
        __int128 t = 0;
        for (;;) {
            uint64_t k, frac;
            exp_draw(&x, &k, &frac);
            t += mean * k + (((unsigned __int128)frac * (unsigned __int128)mean) >> 64);
            if (t >= s->duration) break;
            if (add_req(s, round_ms((rlt_ns)t), 1)) return 1;
        }
        return 0;
    }
    return fail_usage("unknown --pattern '%s' (boundary, steady, burst, random)", s->pattern);
}

static int parse_at(sim *s, const char *list)
{
    const char *p = list;
    for (;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        rlt_ns t;
        int rc = rlt__dec_parse(p, len, NS, &t);
        if (rc != RLT__DEC_OK)
            return fail_usage("--at: bad time '%.*s': %s", (int)len, p,
                              rc == RLT__DEC_PRECISION ? "more precise than 1 ns"
                                                       : rlt__dec_strerror(rc));
        if (add_req(s, t, 1)) return 1;
        if (!e) return 0;
        p = e + 1;
    }
}

static int read_trace(sim *s, const char *path)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (!f) {
        fprintf(stderr, "ratelimit " CMD ": cannot open %s: %s\n", path, strerror(errno));
        return 1;
    }
    char *line = NULL, err[160];
    size_t cap = 0;
    ssize_t len;
    long lineno = 0;
    int rc = 0;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (len && line[len - 1] == '\n') len--;
        rlt__trace_line tl;
        int pr = rlt__trace_parse(line, (size_t)len, NS, 1, &tl, err, sizeof err);
        if (pr < 0) {
            fprintf(stderr, "ratelimit " CMD ": %s:%ld: %s\n", path, lineno, err);
            rc = 1;
            break;
        }
        if (pr == 1 && add_req(s, tl.time, tl.cost)) {
            rc = 1;
            break;
        }
    }
    if (!rc && ferror(f)) {
        fprintf(stderr, "ratelimit " CMD ": reading %s: %s\n", path, strerror(errno));
        rc = 1;
    }
    free(line);
    if (f != stdin) fclose(f);
    return rc;
}

static int req_cmp(const void *a, const void *b)
{
    const req *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

typedef rlt__accepted ev; /* an accepted request: its time (a send, for the shaper), its cost */

static int ev_cmp(const void *a, const void *b)
{
    rlt_ns x = ((const ev *)a)->t, y = ((const ev *)b)->t;
    return x < y ? -1 : x > y;
}

/* ---- Running ---- */

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

static const char *ticks(char *buf, rlt_ns t)
{
    rlt__dec_format(buf, t, NS);
    return buf;
}

/* The largest accepted cost inside any half-open span [x, x + W), over sorted times; *at is
 * where the first such span starts (the time of its first event). */
static int64_t worst_span(const ev *e, size_t n, rlt_ns W, rlt_ns *at)
{
    int64_t best = 0, sum = 0;
    size_t lo = 0;
    *at = n ? e[0].t : 0;
    for (size_t hi = 0; hi < n; hi++) {
        sum += e[hi].cost;
        while (e[hi].t - e[lo].t >= W)
            sum -= e[lo++].cost;
        if (sum > best) {
            best = sum;
            *at = e[lo].t;
        }
    }
    return best;
}

/* --block SPEC onto policy p, through the policy text's own grammar for block=. */
static int apply_block(const sim *s, rlt_policy *p)
{
    char text[160], err[256];
    int n = snprintf(text, sizeof text, "gcra:1/1s,block=%s", s->block);
    rlt_policy q;
    if (n < 0 || (size_t)n >= sizeof text ||
        rlt_policy_parse(&q, text, (size_t)n, err, sizeof err) != RLT_OK)
        return fail_usage("--block '%s': expected DURATION or DURATION*FACTOR..MAX, e.g. 5s or "
                          "5s*2..1m",
                          s->block);
    if (rlt_policy_set_block(p, q.block, q.block_factor, q.block_max) != RLT_OK)
        return fail_usage("--block '%s': invalid", s->block);
    return 0;
}

static int init_runs(sim *s)
{
    static const struct {
        const char *name;
        rlt_algo algo;
    } algos[NALGO] = {{"Fixed window", RLT_FIXED_WINDOW},
                      {"Sliding log", RLT_SLIDING_LOG},
                      {"Sliding counter", RLT_SLIDING_WINDOW},
                      {"Token bucket", RLT_TOKEN_BUCKET},
                      {"GCRA", RLT_GCRA},
                      {"Leaky bucket", RLT_LEAKY_BUCKET},
                      {"Concurrency", RLT_CONCURRENCY}};
    for (int a = 0; a < NALGO; a++) {
        run *r = &s->runs[a];
        r->name = algos[a].name;
        int64_t queue = algos[a].algo == RLT_LEAKY_BUCKET ? s->limit : 0;
        int rc = rlt_policy_init(&r->p, algos[a].algo, s->limit, s->window, 0, queue, 0);
        if (rc != RLT_OK) {
            char w[RLT__DEC_BUF];
            return fail_usage("%s cannot take --limit %lld --window %s: %s", r->name,
                              (long long)s->limit, ticks(w, s->window), rlt_strerror(rc));
        }
        if (s->block && (rc = apply_block(s, &r->p))) return rc;
        r->st = calloc(1, rlt_state_size(&r->p));
        r->ok = calloc(s->n ? s->n : 1, 1);
        r->delay = calloc(s->n ? s->n : 1, sizeof *r->delay);
        r->busy = calloc(s->n ? s->n : 1, sizeof *r->busy);
        if (!r->st || !r->ok || !r->delay || !r->busy) {
            fprintf(stderr, "ratelimit " CMD ": out of memory\n");
            return 1;
        }
    }
    return 0;
}

/* The concurrency limiter: each accepted request is released `hold` after it arrived (or
 * reclaimed by the lease timeout W first).  The hold is the same for every request, so
 * releases come in arrival order: a FIFO of the leases in flight, drained up to each arrival
 * (a release at the same instant as an arrival comes first). */
static int run_concurrency(sim *s, run *r)
{
    int64_t *lease = malloc((s->n ? s->n : 1) * sizeof *lease);
    size_t *who = malloc((s->n ? s->n : 1) * sizeof *who);
    if (!lease || !who) {
        free(lease);
        free(who);
        fprintf(stderr, "ratelimit " CMD ": out of memory\n");
        return 1;
    }
    size_t head = 0, tail = 0;
    rlt_ns held = s->hold < r->p.period ? s->hold : r->p.period;
    int rc = RLT_OK;
    for (size_t i = 0; i < s->n && rc == RLT_OK; i++) {
        rlt_ns t = s->r[i].t;
        while (head < tail && s->r[who[head]].t + held <= t) {
            /* RLT_ENOENT when the timeout reclaimed the lease first: nothing to release. */
            (void)rlt_release(&r->p, r->st, s->r[who[head]].t + held, lease[head]);
            head++;
        }
        rlt_decision d;
        rc = rlt_decide(&r->p, r->st, t, s->r[i].cost > 0 ? 1 : 0, &d);
        if (rc != RLT_OK) {
            char w[RLT__DEC_BUF];
            fprintf(stderr, "ratelimit " CMD ": %s at t = %s: %s\n", r->name, ticks(w, t),
                    rlt_strerror(rc));
            break;
        }
        r->ok[i] = d.allowed;
        if (d.allowed && s->r[i].cost > 0) {
            r->n_ok++;
            r->busy[i] = held;
            lease[tail] = d.lease;
            who[tail++] = i;
        } else if (!d.allowed) {
            r->n_rej++;
        } else {
            r->n_ok++; /* a cost-0 peek takes no slot */
        }
    }
    free(lease);
    free(who);
    return rc == RLT_OK ? 0 : 1;
}

/* The algorithm's own contract, checked on what it did (contract.c).  `e` holds the accepted
 * requests in time order (at send time for the shaper). */
static void check_contract(const sim *s, run *r, const ev *e, size_t m)
{
    r->held = rlt__contract_check(&r->p, e, m, r->max_delay, s->hold, NS, r->contract,
                                  sizeof r->contract);
}

static int run_all(sim *s)
{
    ev *evs = malloc((s->n ? s->n : 1) * sizeof *evs);
    if (!evs) {
        fprintf(stderr, "ratelimit " CMD ": out of memory\n");
        return 1;
    }
    for (int a = 0; a < NALGO; a++) {
        run *r = &s->runs[a];
        if (a == CONC) {
            if (run_concurrency(s, r)) {
                free(evs);
                return 1;
            }
        } else {
            for (size_t i = 0; i < s->n; i++) {
                rlt_decision d;
                int rc = rlt_decide(&r->p, r->st, s->r[i].t, s->r[i].cost, &d);
                if (rc != RLT_OK) {
                    char w[RLT__DEC_BUF];
                    fprintf(stderr, "ratelimit " CMD ": %s at t = %s: %s\n", r->name,
                            ticks(w, s->r[i].t), rlt_strerror(rc));
                    free(evs);
                    return 1;
                }
                r->ok[i] = d.allowed;
                r->delay[i] = d.allowed ? d.delay : 0;
                r->busy[i] = r->delay[i];
                if (d.allowed) {
                    r->n_ok++;
                    if (d.delay > r->max_delay) r->max_delay = d.delay;
                } else {
                    r->n_rej++;
                }
            }
        }
        /* A shaper's burst is what leaves it: count the leaky bucket at send time. */
        size_t m = 0;
        for (size_t i = 0; i < s->n; i++)
            if (r->ok[i])
                evs[m++] =
                    (ev){s->r[i].t + r->delay[i], a == CONC ? (s->r[i].cost > 0) : s->r[i].cost};
        /* Arrivals are sorted and the shaper sends FIFO, so this is a cheap check. */
        for (size_t i = 1; i < m; i++)
            if (evs[i].t < evs[i - 1].t) {
                qsort(evs, m, sizeof *evs, ev_cmp);
                break;
            }
        r->worst = worst_span(evs, m, s->window, &r->worst_t0);
        check_contract(s, r, evs, m);
    }
    free(evs);
    return 0;
}

/* ---- State column ---- */

static void describe_state(sim *s, run *r)
{
    const rlt_ns T = s->t_state, W = s->window;
    const int64_t L = s->limit;
    char a[64], b[64], c[64];
    rlt_decision d;
    size_t sz = rlt_state_size(&r->p);
    void *copy = malloc(sz);
    if (!copy || rlt_decide(&r->p, memcpy(copy, r->st, sz), T, 0, &d) != RLT_OK)
        memset(&d, 0, sizeof d);
    free(copy);
    switch (r->p.algo) {
    case RLT_FIXED_WINDOW: {
        int64_t k = floor_div(T, W);
        snprintf(r->state, sizeof r->state, "window [%s, %s): count %lld/%lld", ticks(a, k * W),
                 ticks(b, (k + 1) * W), (long long)(L - d.remaining), (long long)L);
        break;
    }
    case RLT_SLIDING_LOG: {
        size_t shown = 0, total = 0, n = 0;
        for (size_t i = 0; i < s->n; i++)
            if (r->ok[i] && s->r[i].t > T - W && s->r[i].t <= T) total++;
        n = (size_t)snprintf(r->state, sizeof r->state, "log [");
        for (size_t i = 0; i < s->n; i++) {
            if (!(r->ok[i] && s->r[i].t > T - W && s->r[i].t <= T)) continue;
            shown++;
            if (total > 4 && shown == 4) n += (size_t)snprintf(r->state + n, 16, ", ...");
            if (total > 4 && shown >= 4 && shown < total) continue;
            n += (size_t)snprintf(r->state + n, 40, "%s%s", shown > 1 ? ", " : "",
                                  ticks(a, s->r[i].t));
        }
        snprintf(r->state + n, sizeof r->state - n, "]: %lld/%lld", (long long)(L - d.remaining),
                 (long long)L);
        break;
    }
    case RLT_SLIDING_WINDOW: {
        int64_t k = floor_div(T, W), prev = 0, curr = 0;
        for (size_t i = 0; i < s->n; i++) {
            if (!r->ok[i] || s->r[i].t > T) continue;
            int64_t ki = floor_div(s->r[i].t, W);
            if (ki == k) curr += s->r[i].cost;
            if (ki == k - 1) prev += s->r[i].cost;
        }
        rlt_ns e = T - k * W;
        rlt__frac_format(a, sizeof a, W - e, W, 2, RLT__ROUND, 0);
        rlt__frac_format(b, sizeof b, (__int128)prev * (W - e) + (__int128)curr * W, W, 2,
                         RLT__ROUND, 0);
        snprintf(r->state, sizeof r->state, "%lld×%s + %lld ≈ %s of %lld", (long long)prev, a,
                 (long long)curr, b, (long long)L);
        break;
    }
    case RLT_TOKEN_BUCKET:
    case RLT_GCRA: {
        /* tokens = B - (time until full) x rate, from the library's own reset_after. */
        __int128 num = (__int128)r->p.burst * W - (__int128)d.reset_after * L;
        rlt__frac_format(a, sizeof a, num < 0 ? 0 : num, W, 2, RLT__FLOOR, 0);
        rlt__frac_format(b, sizeof b, (__int128)L * NS, W, 2, RLT__ROUND, 0);
        if (r->p.algo == RLT_GCRA)
            snprintf(r->state, sizeof r->state, "tat %s: tokens %s / %lld, +%s per tick",
                     ticks(c, T + d.reset_after), a, (long long)r->p.burst, b);
        else
            snprintf(r->state, sizeof r->state, "tokens %s / %lld, +%s per tick", a,
                     (long long)r->p.burst, b);
        break;
    }
    case RLT_LEAKY_BUCKET: {
        int64_t queued = 0;
        for (size_t i = 0; i < s->n; i++)
            if (r->ok[i] && s->r[i].t <= T && s->r[i].t + r->delay[i] > T) queued++;
        rlt__frac_format(a, sizeof a, W, (__int128)L * NS, 2, RLT__ROUND, 1);
        snprintf(r->state, sizeof r->state, "queue %lld/%lld, drains 1 per %s ticks",
                 (long long)queued, (long long)r->p.queue, a);
        break;
    }
    case RLT_CONCURRENCY: {
        int64_t live = 0;
        for (size_t i = 0; i < s->n; i++)
            if (r->ok[i] && s->r[i].t <= T && s->r[i].t + r->busy[i] > T) live++;
        snprintf(r->state, sizeof r->state, "in flight %lld/%lld, each held %s ticks",
                 (long long)live, (long long)L, ticks(a, s->hold < W ? s->hold : W));
        break;
    }
    default:
        snprintf(r->state, sizeof r->state, "?");
        break;
    }
}

/* ---- Table ---- */

/* Display width of UTF-8 text: code points (the table uses ×, ≈ and ≤, one column each). */
static size_t width_of(const char *t)
{
    size_t w = 0;
    for (; *t; t++)
        if (((unsigned char)*t & 0xC0) != 0x80) w++;
    return w;
}

#define NCOL 7
static void print_row(char cells[NCOL][300], const size_t *w)
{
    for (int c = 0; c < NCOL; c++) {
        printf("| %s", cells[c]);
        for (size_t k = width_of(cells[c]); k < w[c]; k++)
            putchar(' ');
        putchar(' ');
    }
    puts("|");
}

static void print_table(sim *s)
{
    static char cells[NALGO + 1][NCOL][300];
    char a[RLT__DEC_BUF], b[RLT__DEC_BUF];
    snprintf(cells[0][0], 300, "algorithm");
    snprintf(cells[0][1], 300, "state at t = %s", ticks(a, s->t_state));
    snprintf(cells[0][2], 300, "ok");
    snprintf(cells[0][3], 300, "rejected");
    snprintf(cells[0][4], 300, "worst %s-tick burst", ticks(b, s->window));
    snprintf(cells[0][5], 300, "max delay");
    snprintf(cells[0][6], 300, "own contract");
    for (int i = 0; i < NALGO; i++) {
        run *r = &s->runs[i];
        snprintf(cells[i + 1][0], 300, "%s", r->name);
        snprintf(cells[i + 1][1], 300, "%s", r->state);
        snprintf(cells[i + 1][2], 300, "%lld", (long long)r->n_ok);
        snprintf(cells[i + 1][3], 300, "%lld", (long long)r->n_rej);
        snprintf(cells[i + 1][4], 300, "%lld", (long long)r->worst);
        snprintf(cells[i + 1][5], 300, "%s", ticks(a, r->max_delay));
        snprintf(cells[i + 1][6], 300, "%s: %s", r->contract, r->held ? "held" : "VIOLATED");
    }
    size_t w[NCOL] = {0};
    for (int i = 0; i <= NALGO; i++)
        for (int c = 0; c < NCOL; c++)
            if (width_of(cells[i][c]) > w[c]) w[c] = width_of(cells[i][c]);
    print_row(cells[0], w);
    for (int c = 0; c < NCOL; c++) {
        fputs("|-", stdout);
        for (size_t k = 0; k < w[c]; k++)
            putchar('-');
        putchar('-');
    }
    puts("|");
    for (int i = 1; i <= NALGO; i++)
        print_row(cells[i], w);
}

/* ---- Timeline ---- */

typedef struct span {
    rlt_ns t0, t1; /* [t0, t1): whole windows covering every arrival, send, hold and the state */
} span;

static span time_span(const sim *s)
{
    rlt_ns lo = s->t_state, hi = s->t_state;
    for (size_t i = 0; i < s->n; i++) {
        if (s->r[i].t < lo) lo = s->r[i].t;
        for (int a = 0; a < NALGO; a++) {
            rlt_ns end = s->r[i].t + s->runs[a].busy[i];
            if (end > hi) hi = end;
        }
    }
    span sp = {floor_div(lo, s->window) * s->window, (floor_div(hi, s->window) + 1) * s->window};
    return sp;
}

static size_t col_of(rlt_ns t, span sp, size_t cols)
{
    __int128 c = (__int128)(t - sp.t0) * (__int128)cols / (sp.t1 - sp.t0);
    if (c < 0) c = 0;
    if (c >= (__int128)cols) c = (__int128)cols - 1;
    return (size_t)c;
}

static void print_timeline(sim *s)
{
    const size_t cols = (size_t)s->width;
    const int pad = 16;
    span sp = time_span(s);
    char a[RLT__DEC_BUF], b[RLT__DEC_BUF], per[64];
    rlt__frac_format(per, sizeof per, sp.t1 - sp.t0, (__int128)cols * NS, 3, RLT__ROUND, 1);
    printf("\ntimeline t = %s .. %s, one column = %s ticks: o accepted, x rejected, # both, "
           "= queued, - in flight\n",
           ticks(a, sp.t0), ticks(b, sp.t1), per);
    char *labels = malloc(cols + 64), *ruler = malloc(cols + 2), *row = malloc(cols + 1);
    unsigned char *flags = malloc(cols);
    if (!labels || !ruler || !row || !flags) goto out;
    memset(labels, ' ', cols + 63);
    labels[cols + 63] = '\0';
    memset(ruler, '-', cols + 1);
    ruler[cols + 1] = '\0';
    size_t free_from = 0, last_label = 0;
    for (rlt_ns t = sp.t0; t <= sp.t1; t += s->window) {
        size_t c = (size_t)((__int128)(t - sp.t0) * (__int128)cols / (sp.t1 - sp.t0));
        ruler[c] = '|';
        size_t len = rlt__dec_format(a, t, NS);
        if (c >= free_from && c + len < cols + 63) {
            memcpy(labels + c, a, len);
            free_from = c + len + 1;
            last_label = c + len;
        }
    }
    labels[last_label] = '\0';
    printf("%*s%s\n%*s%s\n", pad, "", labels, pad, "", ruler);
    for (int i = 0; i < NALGO; i++) {
        run *r = &s->runs[i];
        memset(flags, 0, cols);
        for (size_t k = 0; k < s->n; k++) {
            size_t c = col_of(s->r[k].t, sp, cols);
            flags[c] |= r->ok[k] ? 1 : 2;
            if (r->ok[k] && r->busy[k] > 0) {
                /* the end instant itself is free again: stop one ns short of it */
                size_t e = col_of(s->r[k].t + r->busy[k] - 1, sp, cols);
                for (size_t j = c + 1; j <= e; j++)
                    flags[j] |= i == CONC ? 8 : 4;
            }
        }
        for (size_t c = 0; c < cols; c++)
            row[c] = (flags[c] & 3) == 3 ? '#'
                     : flags[c] & 1      ? 'o'
                     : flags[c] & 2      ? 'x'
                     : flags[c] & 4      ? '='
                     : flags[c] & 8      ? '-'
                                         : '.';
        row[cols] = '\0';
        printf("%-*s%s\n", pad, r->name, row);
    }
out:
    free(labels);
    free(ruler);
    free(row);
    free(flags);
}

/* ---- SVG ---- */

#define SVG_LEFT 210
#define SVG_PLOT 720
#define SVG_TOP 56
#define SVG_ROW 50
#define SVG_LANES 4 /* stacked bars per row (queue waits, holds) before they share a lane */
#define SVG_LANE_DY 5

/* Colours: accepted, rejected, waiting in the shaper's queue, in flight, over-L band. */
#define C_OK "#2a9d3a"
#define C_NO "#d62828"
#define C_WAIT "#e09f00"
#define C_HOLD "#3a6ea5"
#define C_BAND "#fff1d6"

/* x of time t in hundredths of a pixel. */
static int64_t svg_x(rlt_ns t, span sp)
{
    return SVG_LEFT * 100 + (int64_t)((__int128)(t - sp.t0) * (SVG_PLOT * 100) / (sp.t1 - sp.t0));
}

static const char *px(char *buf, int64_t h)
{
    rlt__dec_format(buf, h, 100);
    return buf;
}

static void xml_text(FILE *f, const char *t)
{
    for (; *t; t++) {
        switch (*t) {
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '&':
            fputs("&amp;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        default:
            fputc(*t, f);
        }
    }
}

static void svg_head(FILE *f, int width, int height, const char *title)
{
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n",
            width, height, width, height);
    fputs("<title>", f);
    xml_text(f, title);
    fputs("</title>\n<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n"
          "<text x=\"10\" y=\"24\" font-size=\"15\" font-weight=\"bold\">",
          f);
    xml_text(f, title);
    fputs("</text>\n", f);
}

static int svg_close(const sim *s, FILE *f)
{
    fputs("</svg>\n", f);
    if (fclose(f) != 0) {
        fprintf(stderr, "ratelimit " CMD ": writing %s failed\n", s->svg);
        return 1;
    }
    return 0;
}

/* The time axis: a dashed line and a label at every window boundary, a faint line at every
 * whole tick when there are few enough to read. */
static void svg_axis(const sim *s, FILE *f, span sp, int y0, int y1)
{
    char a[RLT__DEC_BUF], b[RLT__DEC_BUF], c[RLT__DEC_BUF], d[RLT__DEC_BUF];
    if ((sp.t1 - sp.t0) / NS <= 60 && sp.t0 % NS == 0)
        for (rlt_ns t = sp.t0; t <= sp.t1; t += NS)
            fprintf(f, "<line x1=\"%s\" y1=\"%d\" x2=\"%s\" y2=\"%d\" stroke=\"#f0f0f0\"/>\n",
                    px(a, svg_x(t, sp)), y0, px(b, svg_x(t, sp)), y1);
    for (rlt_ns t = sp.t0; t <= sp.t1; t += s->window) {
        int64_t x = svg_x(t, sp);
        fprintf(f,
                "<line x1=\"%s\" y1=\"%d\" x2=\"%s\" y2=\"%d\" stroke=\"#999999\" "
                "stroke-dasharray=\"4 3\"/>\n<text x=\"%s\" y=\"%d\" text-anchor=\"middle\">%s"
                "</text>\n",
                px(a, x), y0, px(b, x), y1, px(c, x), y1 + 16, ticks(d, t));
    }
    fprintf(f,
            "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">t (ticks); dashed lines: window "
            "boundaries</text>\n",
            SVG_LEFT + SVG_PLOT / 2, y1 + 34);
}

/* Bars from each accepted request's arrival to the end of its wait or hold, each in the lowest
 * lane free at its arrival (so that bars in the queue together never overlap). */
static void svg_bars(const sim *s, FILE *f, const run *r, span sp, int y, const char *colour)
{
    rlt_ns lane_end[SVG_LANES];
    char a[RLT__DEC_BUF], b[RLT__DEC_BUF], c[RLT__DEC_BUF];
    for (int l = 0; l < SVG_LANES; l++)
        lane_end[l] = INT64_MIN;
    for (size_t k = 0; k < s->n; k++) {
        if (!r->ok[k] || r->busy[k] <= 0) continue;
        rlt_ns t = s->r[k].t, end = t + r->busy[k];
        int lane = 0;
        for (int l = 0; l < SVG_LANES; l++)
            if (lane_end[l] <= t) {
                lane = l;
                break;
            } else if (lane_end[l] < lane_end[lane]) {
                lane = l; /* all busy: share the one that frees first */
            }
        lane_end[lane] = end;
        int ly = y + 8 + lane * SVG_LANE_DY;
        fprintf(f,
                "<line x1=\"%s\" y1=\"%d\" x2=\"%s\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2.5\"/>"
                "\n",
                px(a, svg_x(t, sp)), ly, px(b, svg_x(end, sp)), ly, colour);
        if (r->p.algo == RLT_LEAKY_BUCKET) /* the send: where the request leaves the queue */
            fprintf(f, "<circle cx=\"%s\" cy=\"%d\" r=\"2.5\" fill=\"%s\"/>\n",
                    px(c, svg_x(end, sp)), ly, C_OK);
    }
}

static void svg_marks(const sim *s, FILE *f, const run *r, span sp, int y)
{
    char a[RLT__DEC_BUF], b[RLT__DEC_BUF], c[RLT__DEC_BUF], d[RLT__DEC_BUF];
    for (size_t k = 0; k < s->n; k++) {
        int64_t x = svg_x(s->r[k].t, sp);
        if (r->ok[k])
            fprintf(f,
                    "<circle cx=\"%s\" cy=\"%d\" r=\"4.5\" fill=\"%s\" stroke=\"#ffffff\" "
                    "stroke-width=\"1\"/>\n",
                    px(a, x), y, C_OK);
        else
            fprintf(
                f, "<path d=\"M%s %d L%s %d M%s %d L%s %d\" stroke=\"%s\" stroke-width=\"2.5\"/>\n",
                px(a, x - 400), y - 4, px(b, x + 400), y + 4, px(c, x - 400), y + 4, px(d, x + 400),
                y - 4, C_NO);
    }
}

/* One row: name, counts, the contract verdict; a band over the worst window-length span when
 * it holds more than L (the algorithm's right, or a violation in red); bars; marks. */
static void svg_row(const sim *s, FILE *f, const run *r, span sp, int i)
{
    char a[RLT__DEC_BUF], b[RLT__DEC_BUF], w[RLT__DEC_BUF];
    const int top = SVG_TOP + i * SVG_ROW, y = top + SVG_ROW / 2 - 6;
    fprintf(f, "<g>\n");
    if (i % 2 == 0)
        fprintf(f, "<rect x=\"0\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#f8f8f8\"/>\n", top,
                SVG_LEFT + SVG_PLOT + 20, SVG_ROW);
    fprintf(f, "<text x=\"10\" y=\"%d\" font-weight=\"bold\">%s</text>\n", top + 15, r->name);
    fprintf(f,
            "<text x=\"10\" y=\"%d\" font-size=\"10\" fill=\"#444444\">ok %lld, rejected %lld"
            "</text>\n",
            top + 28, (long long)r->n_ok, (long long)r->n_rej);
    fprintf(f, "<text x=\"10\" y=\"%d\" font-size=\"10\" fill=\"%s\">", top + 41,
            r->held ? C_OK : C_NO);
    xml_text(f, r->held ? "" : "VIOLATED ");
    xml_text(f, r->contract);
    xml_text(f, r->held ? " ✓" : "");
    fputs("</text>\n", f);
    if (r->worst > s->limit || !r->held) {
        int64_t x0 = svg_x(r->worst_t0, sp), x1 = svg_x(r->worst_t0 + s->window, sp);
        if (x1 > (SVG_LEFT + SVG_PLOT) * 100) x1 = (SVG_LEFT + SVG_PLOT) * 100;
        fprintf(f,
                "<rect x=\"%s\" y=\"%d\" width=\"%s\" height=\"%d\" fill=\"%s\" stroke=\"%s\" "
                "stroke-width=\"0.8\"/>\n",
                px(a, x0), top + 3, px(b, x1 - x0), SVG_ROW - 6, r->held ? C_BAND : "#fbd5d5",
                r->held ? "#e0b060" : C_NO);
        fprintf(f,
                "<text x=\"%s\" y=\"%d\" font-size=\"10\" fill=\"#7a5200\">%lld in %s ticks"
                "</text>\n",
                px(a, x0 + 300), top + 13, (long long)r->worst, ticks(w, s->window));
    }
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#dddddd\"/>\n", SVG_LEFT, y,
            SVG_LEFT + SVG_PLOT, y);
    if (r->p.algo == RLT_LEAKY_BUCKET) svg_bars(s, f, r, sp, y, C_WAIT);
    if (r->p.algo == RLT_CONCURRENCY) svg_bars(s, f, r, sp, y, C_HOLD);
    svg_marks(s, f, r, sp, y);
    fputs("</g>\n", f);
}

/* Writes the picture into `f` (opened before anything was printed) and closes it. */
static int write_svg(sim *s, FILE *f, const char *title)
{
    span sp = time_span(s);
    const int width = SVG_LEFT + SVG_PLOT + 30;
    const int y_axis = SVG_TOP + NALGO * SVG_ROW;
    const int height = y_axis + 100;
    char h[RLT__DEC_BUF], w[RLT__DEC_BUF];
    svg_head(f, width, height, title);
    fprintf(f,
            "<text x=\"10\" y=\"42\" font-size=\"11\" fill=\"#444444\">each algorithm with "
            "limit %lld per %s ticks; concurrency: %lld in flight, each request held %s "
            "ticks</text>\n",
            (long long)s->limit, ticks(w, s->window), (long long)s->limit,
            ticks(h, s->hold < s->window ? s->hold : s->window));
    for (int i = 0; i < NALGO; i++)
        svg_row(s, f, &s->runs[i], sp, i);
    svg_axis(s, f, sp, SVG_TOP, y_axis);
    int ly = height - 26, lx = 10;
    fprintf(f,
            "<circle cx=\"%d\" cy=\"%d\" r=\"4.5\" fill=\"%s\"/><text x=\"%d\" y=\"%d\">"
            "accepted</text>\n",
            lx + 5, ly - 4, C_OK, lx + 14, ly);
    lx += 84;
    fprintf(f,
            "<path d=\"M%d %d L%d %d M%d %d L%d %d\" stroke=\"%s\" stroke-width=\"2.5\"/>"
            "<text x=\"%d\" y=\"%d\">rejected</text>\n",
            lx, ly - 8, lx + 8, ly, lx, ly, lx + 8, ly - 8, C_NO, lx + 14, ly);
    lx += 80;
    fprintf(f,
            "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2.5\"/>"
            "<circle cx=\"%d\" cy=\"%d\" r=\"2.5\" fill=\"%s\"/><text x=\"%d\" y=\"%d\">"
            "waiting in the queue, then sent</text>\n",
            lx, ly - 4, lx + 22, ly - 4, C_WAIT, lx + 22, ly - 4, C_OK, lx + 30, ly);
    lx += 240;
    fprintf(f,
            "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2.5\"/>"
            "<text x=\"%d\" y=\"%d\">in flight</text>\n",
            lx, ly - 4, lx + 22, ly - 4, C_HOLD, lx + 28, ly);
    lx += 95;
    fprintf(f,
            "<rect x=\"%d\" y=\"%d\" width=\"22\" height=\"12\" fill=\"%s\" stroke=\"#e0b060\" "
            "stroke-width=\"0.8\"/><text x=\"%d\" y=\"%d\">more than %lld in %s ticks, as the "
            "algorithm allows</text>\n",
            lx, ly - 10, C_BAND, lx + 28, ly, (long long)s->limit, ticks(w, s->window));
    fprintf(f,
            "<text x=\"10\" y=\"%d\" font-size=\"10\" fill=\"#444444\">✓: the algorithm's own "
            "contract held on this run (checked on every request); a broken one would be "
            "marked VIOLATED in red</text>\n",
            height - 8);
    return svg_close(s, f);
}

/* ---- Accuracy ---- */

/* How one request was judged by the counter and by the exact rule on the same history. */
enum { BOTH_OK, BOTH_NO, WRONG_OK, WRONG_NO };

typedef struct accuracy {
    int64_t n[4], split;
    __int128 err_sum;   /* sum of |estimate - exact count| x W at each arrival */
    unsigned char *cls; /* per request: BOTH_OK ... WRONG_NO */
} accuracy;

static void pct(char *buf, size_t cap, int64_t part, int64_t whole)
{
    if (whole <= 0) whole = 1;
    rlt__frac_format(buf, cap, (__int128)part * 100, whole, 3, RLT__ROUND, 0);
}

/* Each request is judged by both rules on the same history, the counter's own accepted
 * requests: the counter's verdict (the library's) against the exact rule "accepted cost in
 * (t - W, t] plus this cost <= L".  Judging them on separate runs instead would count every
 * later request after their histories first part as a disagreement.  The rate error is
 * |estimate - exact count| at each arrival, both x W to stay integral. */
static void judge(const sim *s, accuracy *acc)
{
    const run *lg = &s->runs[1], *sw = &s->runs[2];
    const rlt_ns W = s->window;
    const int64_t L = s->limit;
    int64_t k = INT64_MIN, prev = 0, curr = 0, exact = 0;
    size_t lo = 0;
    for (size_t i = 0; i < s->n; i++) {
        rlt_ns t = s->r[i].t;
        int64_t ki = floor_div(t, W);
        if (k == INT64_MIN || ki > k + 1) {
            prev = 0;
            curr = 0;
        } else if (ki == k + 1) {
            prev = curr;
            curr = 0;
        }
        k = ki;
        while (lo < i && s->r[lo].t <= t - W) {
            if (sw->ok[lo]) exact -= s->r[lo].cost;
            lo++;
        }
        __int128 est = (__int128)prev * (W - (t - k * W)) + (__int128)curr * W;
        __int128 diff = est - (__int128)exact * W;
        acc->err_sum += diff < 0 ? -diff : diff;
        int exact_ok = exact + s->r[i].cost <= L;
        int c = sw->ok[i] && exact_ok     ? BOTH_OK
                : !sw->ok[i] && !exact_ok ? BOTH_NO
                : sw->ok[i]               ? WRONG_OK
                                          : WRONG_NO;
        acc->n[c]++;
        if (acc->cls) acc->cls[i] = (unsigned char)c;
        acc->split += sw->ok[i] != lg->ok[i];
        if (sw->ok[i]) {
            curr += s->r[i].cost;
            exact += s->r[i].cost;
        }
    }
}

static void print_accuracy(sim *s, const accuracy *acc)
{
    const run *lg = &s->runs[1], *sw = &s->runs[2];
    const rlt_ns W = s->window;
    const int64_t n = (int64_t)s->n, L = s->limit;
    const int64_t both_ok = acc->n[BOTH_OK], both_no = acc->n[BOTH_NO];
    const int64_t wrong_ok = acc->n[WRONG_OK], wrong_no = acc->n[WRONG_NO];
    char a[64], b[64], w[RLT__DEC_BUF];
    printf("accuracy: sliding window counter vs the exact sliding log, limit %lld per %s ticks\n",
           (long long)L, ticks(w, W));
    printf("trace: %s, %lld requests", s->pattern, (long long)n);
    if (n) printf(", t = %s .. %s", ticks(a, s->r[0].t), ticks(b, s->r[s->n - 1].t));
    printf("\n\neach request judged by both rules on the same history (what the counter let "
           "through):\n");
    printf("                   requests    share\n");
    pct(a, sizeof a, both_ok, n);
    printf("both allow       %10lld  %7s%%\n", (long long)both_ok, a);
    pct(a, sizeof a, both_no, n);
    printf("both reject      %10lld  %7s%%\n", (long long)both_no, a);
    pct(a, sizeof a, wrong_ok, n);
    printf("wrongly allowed  %10lld  %7s%%  (the exact count of the last %s ticks was full)\n",
           (long long)wrong_ok, a, w);
    pct(a, sizeof a, wrong_no, n);
    printf("wrongly rejected %10lld  %7s%%  (the exact count had room)\n", (long long)wrong_no, a);
    pct(a, sizeof a, wrong_ok + wrong_no, n);
    printf("disagree         %10lld  %7s%%\n\n", (long long)(wrong_ok + wrong_no), a);
    __int128 den = (__int128)(n ? n : 1) * W;
    rlt__frac_format(a, sizeof a, acc->err_sum, den, 4, RLT__ROUND, 0);
    rlt__frac_format(b, sizeof b, acc->err_sum * 100, den * L, 2, RLT__ROUND, 0);
    printf("mean rate error: |estimate - exact count| = %s requests on average at each\n"
           "                 arrival (%s%% of the limit)\n",
           a, b);
    pct(a, sizeof a, acc->split, n);
    printf("run separately:  counter accepted %lld, log accepted %lld; their verdicts differ\n"
           "                 on %lld requests (%s%%), later ones because their histories part\n",
           (long long)sw->n_ok, (long long)lg->n_ok, (long long)acc->split, a);
    printf("(Cloudflare measured 0.003%% of 400M requests wrongly allowed or rejected and a\n"
           " 6%% average difference between the real and the estimated rate.)\n");
}

#define ACC_BINS 120
#define ACC_H 90 /* pixels of the tallest bar, above and below the axis */

/* The accuracy result as a picture: over time (ACC_BINS bins of the trace), the requests the
 * counter wrongly allowed (red, up) and wrongly rejected (blue, down), each bin's bar scaled
 * to the fullest bin; the disagreements are rare, so every one is drawn at least 1 px. */
static int write_accuracy_svg(sim *s, FILE *f, const accuracy *acc, const char *title)
{
    const int width = SVG_LEFT + SVG_PLOT + 30, top = 70, mid = top + ACC_H + 10;
    const int height = mid + ACC_H + 50;
    rlt_ns t0 = s->r[0].t, t1 = s->r[s->n - 1].t + 1;
    int64_t up[ACC_BINS] = {0}, down[ACC_BINS] = {0}, peak = 1;
    for (size_t i = 0; i < s->n; i++) {
        size_t b = (size_t)((__int128)(s->r[i].t - t0) * ACC_BINS / (t1 - t0));
        if (acc->cls[i] == WRONG_OK) up[b]++;
        if (acc->cls[i] == WRONG_NO) down[b]++;
    }
    for (int b = 0; b < ACC_BINS; b++) {
        if (up[b] > peak) peak = up[b];
        if (down[b] > peak) peak = down[b];
    }
    char a[RLT__DEC_BUF], c[RLT__DEC_BUF], w[RLT__DEC_BUF], p1[64], p2[64];
    svg_head(f, width, height, title);
    pct(p1, sizeof p1, acc->n[WRONG_OK], (int64_t)s->n);
    pct(p2, sizeof p2, acc->n[WRONG_NO], (int64_t)s->n);
    fprintf(
        f,
        "<text x=\"10\" y=\"44\" font-size=\"12\">%zu requests, limit %lld per %s ticks: wrongly "
        "allowed <tspan fill=\"%s\" font-weight=\"bold\">%lld (%s%%)</tspan>, wrongly "
        "rejected <tspan fill=\"%s\" font-weight=\"bold\">%lld (%s%%)</tspan></text>\n",
        s->n, (long long)s->limit, ticks(w, s->window), C_NO, (long long)acc->n[WRONG_OK], p1,
        C_HOLD, (long long)acc->n[WRONG_NO], p2);
    fprintf(f, "<text x=\"10\" y=\"%d\">wrongly allowed</text>\n", top + ACC_H / 2);
    fprintf(f, "<text x=\"10\" y=\"%d\">(per bin, up)</text>\n", top + ACC_H / 2 + 14);
    fprintf(f, "<text x=\"10\" y=\"%d\">wrongly rejected</text>\n", mid + ACC_H / 2);
    fprintf(f, "<text x=\"10\" y=\"%d\">(per bin, down)</text>\n", mid + ACC_H / 2 + 14);
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"10\" text-anchor=\"end\">%lld</text>\n",
            SVG_LEFT - 6, top + 4, (long long)peak);
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"10\" text-anchor=\"end\">%lld</text>\n",
            SVG_LEFT - 6, mid + ACC_H, (long long)peak);
    const int bw = SVG_PLOT / ACC_BINS;
    for (int b = 0; b < ACC_BINS; b++) {
        int x = SVG_LEFT + b * bw;
        if (up[b]) {
            int h = (int)(up[b] * ACC_H / peak);
            if (h < 1) h = 1;
            fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"/>\n", x,
                    mid - h, bw - 1, h, C_NO);
        }
        if (down[b]) {
            int h = (int)(down[b] * ACC_H / peak);
            if (h < 1) h = 1;
            fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"/>\n", x, mid,
                    bw - 1, h, C_HOLD);
        }
    }
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#555555\"/>\n", SVG_LEFT,
            mid, SVG_LEFT + SVG_PLOT, mid);
    for (int k = 0; k <= 4; k++) {
        /* labels at whole ticks near the quarters of the trace */
        rlt_ns t = floor_div(t0 + (rlt_ns)((__int128)(t1 - t0) * k / 4), NS) * NS;
        if (t < t0) t = t0;
        int x = SVG_LEFT + (int)((__int128)(t - t0) * SVG_PLOT / (t1 - t0));
        fprintf(f,
                "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#bbbbbb\" "
                "stroke-dasharray=\"4 3\"/><text x=\"%d\" y=\"%d\" text-anchor=\"%s\">%s"
                "</text>\n",
                x, top, x, mid + ACC_H, x, mid + ACC_H + 16, k == 4 ? "end" : "middle",
                ticks(a, t));
    }
    rlt__frac_format(c, sizeof c, (__int128)(t1 - t0), (__int128)ACC_BINS * NS, 2, RLT__ROUND, 1);
    fprintf(f,
            "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">t (ticks); one bar = %s ticks; each "
            "request judged by both rules on the counter's history</text>\n",
            SVG_LEFT + SVG_PLOT / 2, mid + ACC_H + 34, c);
    if (acc->n[WRONG_OK] + acc->n[WRONG_NO] == 0)
        fprintf(f,
                "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#444444\">no "
                "disagreement: the counter decided every request as the exact log would"
                "</text>\n",
                SVG_LEFT + SVG_PLOT / 2, mid - 20);
    return svg_close(s, f);
}

/* ---- Main ---- */

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
        rc = parse_at(s, at);
    } else if (trace) {
        s->pattern = "trace";
        rc = read_trace(s, trace);
    } else {
        if (!s->pattern) s->pattern = "boundary";
        rc = gen_pattern(s);
    }
    if (rc) return rc;
    if (s->n == 0) {
        fprintf(stderr, "ratelimit " CMD ": no requests to simulate\n");
        return 1;
    }
    qsort(s->r, s->n, sizeof *s->r, req_cmp);
    s->t_state = s->r[s->n - 1].t;
    if (s->has_until) {
        if (s->until < s->t_state) {
            char a[RLT__DEC_BUF];
            return fail_usage("--until must not be before the last request (t = %s)",
                              ticks(a, s->t_state));
        }
        s->t_state = s->until;
    }
    if ((rc = init_runs(s)) != 0) return rc;
    if ((rc = run_all(s)) != 0) return rc;
    FILE *svg = NULL; /* opened first, so a bad path fails before the table is printed */
    if (s->svg && !(svg = fopen(s->svg, "w"))) {
        fprintf(stderr, "ratelimit " CMD ": cannot write %s: %s\n", s->svg, strerror(errno));
        return 1;
    }
    char w[RLT__DEC_BUF], title[200];
    if (s->accuracy) {
        accuracy acc;
        memset(&acc, 0, sizeof acc);
        if (svg && !(acc.cls = malloc(s->n))) {
            fclose(svg);
            fprintf(stderr, "ratelimit " CMD ": out of memory\n");
            return 1;
        }
        judge(s, &acc);
        print_accuracy(s, &acc);
        snprintf(title, sizeof title,
                 "ratelimit sim --accuracy: sliding window counter vs the exact log, pattern %s",
                 s->pattern);
        rc = svg ? write_accuracy_svg(s, svg, &acc, title) : 0;
        free(acc.cls);
        if (rc) return rc;
        return fflush(stdout) == 0 ? 0 : 1;
    }
    for (int a = 0; a < NALGO; a++)
        describe_state(s, &s->runs[a]);
    snprintf(title, sizeof title,
             "ratelimit sim: limit %lld per %s ticks, pattern %s, %zu requests",
             (long long)s->limit, ticks(w, s->window), s->pattern, s->n);
    printf("%s\n\n", title);
    print_table(s);
    print_timeline(s);
    if (svg && (rc = write_svg(s, svg, title)) != 0) return rc;
    return fflush(stdout) == 0 ? 0 : 1;
}

int rlt__cli_sim(int argc, char **argv)
{
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
