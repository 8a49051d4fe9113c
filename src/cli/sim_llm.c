/* `ratelimit sim --llm`: an LLM workload (C concurrent streams, random prompt and output
 * lengths) against one token budget under three strategies side by side, on a virtual clock
 * and the real store (rlt_store_reserve_limits / rlt_store_settle_limits):
 *   after     charge after the response (what the peers do): admit while the budget is not
 *             used up, charge the real tokens at the end;
 *   estimate  reserve the prompt plus an estimate of the output, settle each chunk as it
 *             streams, release the rest at the end;
 *   max       reserve the prompt plus max_tokens, settle likewise.
 * Printed per strategy: requests admitted, tokens admitted against the budget, the overshoot
 * and its stated bound, and the budget left unused.  The bounds (docs/llm.md):
 *   max       admits no more than the budget: every admitted stream held its worst case;
 *   estimate  overshoots by at most the sum of the underestimates (real - estimate) of the
 *             streams in flight at the last admission (measured here as the largest such sum
 *             at any instant);
 *   after     overshoots by up to C full responses (prompt + max_tokens each). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cliutil.h"
#include "ratelimit/budget.h"

#define CMD "sim"
#define NS RLT_NS_PER_S
#define STREAMS_MAX 4096
#define TOKENS_PER_S 40 /* output speed */
#define CHUNK 20        /* tokens per streamed chunk: one every half second */

typedef struct req {
    int64_t prompt, max_out, out;
} req;

typedef struct opts {
    int64_t streams, requests, budget, max_tokens, estimate, seed;
} opts;

enum { AFTER, ESTIMATE, MAX, NSTRAT };
static const char *const names[NSTRAT] = {"charge after", "reserve estimate", "reserve max"};

typedef struct result {
    int64_t admitted, refused, tokens, charged, worst_inflight_under, errors;
} result;

typedef struct stream {
    rlt_ns next; /* the next event; INT64_MAX: idle for good */
    int64_t req; /* the request it runs, -1 between requests */
    int64_t sent;
    uint64_t id;
    int64_t under; /* its underestimate: real - reserved, when positive */
} stream;

static uint64_t rnd(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static rlt_usage usage2(int64_t in, int64_t out)
{
    rlt_usage u;
    memset(&u, 0, sizeof u);
    u.n = 2;
    strcpy(u.item[0].name, "in");
    u.item[0].count = in;
    strcpy(u.item[1].name, "out");
    u.item[1].count = out;
    return u;
}

/* Runs one strategy over the workload; fills *r.  Returns 0 or 1 (a store error). */
static int run(const opts *o, const req *w, int strat, result *r)
{
    memset(r, 0, sizeof *r);
    rlt_store *s = NULL;
    rlt_store_options so;
    memset(&so, 0, sizeof so);
    if (rlt_store_open(&s, &so) != RLT_OK) return 1;
    char text[64];
    snprintf(text, sizeof text, "fixed_window:%lld/1d", (long long)o->budget);
    rlt_policy p;
    int id = -1;
    if (rlt_policy_parse(&p, text, strlen(text), NULL, 0) != RLT_OK ||
        rlt_store_set_policy(s, "tokens", &p, RLT_CHANGE_RESET, &id) != RLT_OK) {
        rlt_store_close(s);
        return 1;
    }
    rlt_limit l;
    memset(&l, 0, sizeof l);
    l.policy = id;
    l.key = "org";
    l.klen = 3;
    (void)rlt_weights_parse("in+out", 6, &l.weights);
    rlt_check k = {id, "org", 3, 0};
    stream *st = calloc((size_t)o->streams, sizeof *st);
    if (!st) {
        rlt_store_close(s);
        return 1;
    }
    for (int64_t i = 0; i < o->streams; i++)
        st[i] = (stream){.next = i * NS / 64, .req = -1};
    int64_t nextreq = 0, inflight_under = 0;
    for (;;) {
        int64_t c = -1;
        for (int64_t i = 0; i < o->streams; i++)
            if (st[i].next != INT64_MAX && (c < 0 || st[i].next < st[c].next)) c = i;
        if (c < 0) break;
        stream *x = &st[c];
        const rlt_ns now = x->next;
        rlt_decision d;
        if (x->req < 0) { /* start the next request */
            if (nextreq == o->requests) {
                x->next = INT64_MAX;
                continue;
            }
            const req *q = &w[nextreq++];
            int64_t want = strat == AFTER ? 0 : strat == ESTIMATE ? o->estimate : q->max_out;
            rlt_usage est = strat == AFTER ? usage2(0, 0) : usage2(q->prompt, want);
            if (rlt_store_reserve_limits(s, 0, &l, 1, &est, now, 0, &d, NULL, NULL, &x->id) !=
                RLT_OK) {
                r->errors++;
                x->next = now + NS;
                continue;
            }
            if (!d.allowed) {
                r->refused++;
                x->next = now + NS; /* the client backs off a second */
                continue;
            }
            r->admitted++;
            x->req = (int64_t)(q - w);
            x->sent = 0;
            x->under = strat == AFTER ? q->prompt + q->out : (q->out > want ? q->out - want : 0);
            inflight_under += x->under;
            if (inflight_under > r->worst_inflight_under) r->worst_inflight_under = inflight_under;
            x->next = now + NS / 10; /* the first token */
            continue;
        }
        const req *q = &w[x->req];
        int64_t chunk = q->out - x->sent < CHUNK ? q->out - x->sent : CHUNK;
        bool last = x->sent + chunk >= q->out;
        if (strat == AFTER && !last) { /* charged only at the end */
            x->sent += chunk;
            x->next = now + CHUNK * NS / TOKENS_PER_S;
            continue;
        }
        rlt_usage u = strat == AFTER ? usage2(q->prompt, q->out)
                      : x->sent == 0 ? usage2(q->prompt, chunk)
                                     : usage2(0, chunk);
        if (rlt_store_settle_limits(s, x->id, &k, 1, &u, last, now, &d, NULL, NULL) != RLT_OK)
            r->errors++;
        x->sent += chunk;
        if (last) {
            r->tokens += q->prompt + q->out;
            inflight_under -= x->under;
            x->req = -1;
            x->next = now + 1;
        } else {
            x->next = now + CHUNK * NS / TOKENS_PER_S;
        }
    }
    rlt_decision d;
    if (rlt_store_decide(s, id, "org", 3, 0, 0, &d) == RLT_OK)
        r->charged = o->budget - d.remaining; /* remaining is clamped at 0: a debt shows as 0 */
    free(st);
    rlt_store_close(s);
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ratelimit sim --llm [--streams C] [--requests N] [--budget TOKENS]\n"
            "                          [--max-tokens M] [--estimate E] [--seed S]\n"
            "An LLM workload: C concurrent streams, prompts of 50..500 tokens, max_tokens\n"
            "of 64..M, real outputs uniform in 0..max_tokens streamed at %d tokens/s, against\n"
            "one token budget (cost in+out), under three strategies side by side:\n"
            "charge after the response, reserve prompt + E then settle, reserve prompt +\n"
            "max_tokens then settle.  Defaults: C 64, N 2000, budget 200000, M 1024,\n"
            "E 256, seed 1.\n",
            TOKENS_PER_S);
}

int rlt__cli_sim_llm(int argc, char **argv)
{
    opts o = {64, 2000, 200000, 1024, 256, 1};
    for (int i = 1; i < argc; i++) {
        const char *v;
        int m;
        if (strcmp(argv[i], "--llm") == 0) continue;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
#define NUM(name, lo, hi, dst)                                                                     \
    if ((m = rlt__opt(argc, argv, &i, CMD, name, &v)) != 0) {                                      \
        if (m < 0 || rlt__opt_int(CMD, name, v, lo, hi, dst)) return 2;                            \
        continue;                                                                                  \
    }
        NUM("--streams", 1, STREAMS_MAX, &o.streams)
        NUM("--requests", 1, 10000000, &o.requests)
        NUM("--budget", 1, INT64_C(1) << 40, &o.budget)
        NUM("--max-tokens", 64, 1 << 20, &o.max_tokens)
        NUM("--estimate", 0, 1 << 20, &o.estimate)
        NUM("--seed", 0, INT64_MAX, &o.seed)
#undef NUM
        return rlt__usage_error(CMD, "unknown option '%s' (with --llm)", argv[i]);
    }
    req *w = calloc((size_t)o.requests, sizeof *w);
    if (!w) return 1;
    uint64_t x = (uint64_t)o.seed;
    for (int64_t i = 0; i < o.requests; i++) {
        w[i].prompt = 50 + (int64_t)(rnd(&x) % 451);
        w[i].max_out = 64 + (int64_t)(rnd(&x) % (uint64_t)(o.max_tokens - 63));
        w[i].out = (int64_t)(rnd(&x) % (uint64_t)(w[i].max_out + 1));
    }
    printf("ratelimit sim --llm: %lld streams, %lld requests, budget %lld tokens "
           "(fixed_window:%lld/1d, cost in+out)\n"
           "prompts 50..500, max_tokens 64..%lld, outputs 0..max_tokens, estimate %lld, "
           "seed %lld\n\n",
           (long long)o.streams, (long long)o.requests, (long long)o.budget, (long long)o.budget,
           (long long)o.max_tokens, (long long)o.estimate, (long long)o.seed);
    printf("%-17s %9s %8s %10s %10s %10s %10s %s\n", "strategy", "admitted", "refused", "tokens",
           "overshoot", "bound", "unused", "settled exactly");
    int rc = 0;
    for (int sgy = 0; sgy < NSTRAT; sgy++) {
        result r;
        if (run(&o, w, sgy, &r) != 0) {
            rc = 1;
            break;
        }
        int64_t over = r.tokens > o.budget ? r.tokens - o.budget : 0;
        int64_t unused = r.tokens < o.budget ? o.budget - r.tokens : 0;
        int64_t bound = sgy == MAX        ? 0
                        : sgy == ESTIMATE ? r.worst_inflight_under
                                          : o.streams * (500 + o.max_tokens);
        bool exact = r.errors == 0 && r.charged == (r.tokens < o.budget ? r.tokens : o.budget);
        printf("%-17s %9lld %8lld %10lld %10lld %10lld %10lld %s%s\n", names[sgy],
               (long long)r.admitted, (long long)r.refused, (long long)r.tokens, (long long)over,
               (long long)bound, (long long)unused, exact ? "yes" : "NO",
               over <= bound ? "" : "  (BOUND BROKEN)");
        if (over > bound || !exact) rc = 1;
    }
    printf("\nbound: max 0; estimate: the largest sum of in-flight underestimates; "
           "after: C x (500 + max_tokens)\n");
    free(w);
    return rc ? 1 : (fflush(stdout) == 0 ? 0 : 1);
}
