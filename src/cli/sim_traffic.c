/* The simulator's requests: the generated patterns (boundary, steady, burst, random), the
 * --at list and the --trace file, each time checked against the simulator's range. */
#include "cli/sim_traffic.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_REQUESTS 5000000

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
        size_t max = s->max_requests ? s->max_requests : MAX_REQUESTS;
        if (s->n >= max) {
            fprintf(stderr,
                    "ratelimit " CMD ": more than %zu requests; lower --rate or "
                    "--duration%s\n",
                    max, s->max_note ? s->max_note : "");
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

int rlt__sim_pattern(sim *s)
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

int rlt__sim_at(sim *s, const char *list)
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

int rlt__sim_trace(sim *s, const char *path)
{
    /* The page hands the trace over in memory (fmemopen refuses 0 bytes: a lone newline is
     * the same empty trace). */
    FILE *f;
    if (s->trace_text)
        f = fmemopen((void *)(s->trace_len ? s->trace_text : "\n"), s->trace_len ? s->trace_len : 1,
                     "r");
    else
        f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
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

void rlt__sim_sort(sim *s)
{
    qsort(s->r, s->n, sizeof *s->r, req_cmp);
}
