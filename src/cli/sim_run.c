/* The simulator's runs: every algorithm over the same requests, from a fresh state each, with
 * what it accepted, delayed and rejected, its worst window-length burst and its own contract
 * checked on the record (contract.c). */
#include "cli/sim_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef rlt__accepted ev; /* an accepted request: its time (a send, for the shaper), its cost */

static int ev_cmp(const void *a, const void *b)
{
    rlt_ns x = ((const ev *)a)->t, y = ((const ev *)b)->t;
    return x < y ? -1 : x > y;
}

/* --block SPEC read into q's penalty box through the policy text's own grammar for block=:
 * 0, or 2 after its usage error. */
static int block_spec(const sim *s, rlt_policy *q)
{
    char text[160], err[256];
    int n = snprintf(text, sizeof text, "gcra:1/1s,block=%s", s->block);
    if (n < 0 || (size_t)n >= sizeof text ||
        rlt_policy_parse(q, text, (size_t)n, err, sizeof err) != RLT_OK)
        return fail_usage("--block '%s': expected DURATION or DURATION*FACTOR..MAX, e.g. 5s or "
                          "5s*2..1m",
                          s->block);
    return 0;
}

/* --block SPEC onto policy p. */
static int apply_block(const sim *s, rlt_policy *p)
{
    rlt_policy q;
    if (block_spec(s, &q)) return 2;
    if (rlt_policy_set_block(p, q.block, q.block_factor, q.block_max) != RLT_OK)
        return fail_usage("--block '%s': invalid", s->block);
    return 0;
}

/* Row a's own policy text (the page's), with --block added through the text: the parser's
 * message in r->error when it refuses it.  Its name is its algorithm's.  0, or 1 out of memory. */
static int own_policy(const sim *s, int a, run *r)
{
    static const char *const names[] = {
        "?",    "Fixed window", "Sliding log", "Sliding counter", "Token bucket",
        "GCRA", "Leaky bucket", "Concurrency"};
    size_t n = strlen(s->policy_text[a]) + (s->block ? strlen(s->block) + 8 : 0) + 1;
    char *text = malloc(n);
    if (!text) {
        fprintf(stderr, "ratelimit " CMD ": out of memory\n");
        return 1;
    }
    snprintf(text, n, "%s%s%s", s->policy_text[a], s->block ? ",block=" : "",
             s->block ? s->block : "");
    memset(&r->p, 0, sizeof r->p);
    int rc = rlt_policy_parse(&r->p, text, strlen(text), r->error, sizeof r->error);
    free(text);
    if (rc != RLT_OK) {
        if (!r->error[0]) snprintf(r->error, sizeof r->error, "%s", rlt_strerror(rc));
        return 0;
    }
    r->error[0] = '\0';
    if ((size_t)r->p.algo < sizeof names / sizeof *names) r->name = names[r->p.algo];
    return 0;
}

/* Two rows of one algorithm (tiers: token_bucket:2/10s and :8/10s) are told apart by their
 * policies' parameters, the text after the colon. */
static void name_rows(sim *s)
{
    for (int a = 0; a < NALGO; a++) {
        run *r = &s->runs[a];
        if (!s->policy_text[a]) continue;
        for (int b = 0; b < NALGO; b++) {
            if (b == a || strcmp(s->runs[b].name, r->name) != 0) continue;
            const char *colon = strchr(s->policy_text[a], ':');
            snprintf(r->label, sizeof r->label, "%s %s", r->name,
                     colon ? colon + 1 : s->policy_text[a]);
            break;
        }
    }
    for (int a = 0; a < NALGO; a++)
        if (s->runs[a].label[0]) s->runs[a].name = s->runs[a].label;
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
    int own = 0;
    for (int a = 0; a < NALGO; a++)
        own |= s->policy_text[a] != NULL;
    /* A bad --block is one message for all the rows, before any row's own policy. */
    if (own && s->block) {
        rlt_policy q;
        if (block_spec(s, &q)) return 2;
    }
    for (int a = 0; a < NALGO; a++) {
        run *r = &s->runs[a];
        r->name = algos[a].name;
        int64_t queue = algos[a].algo == RLT_LEAKY_BUCKET ? s->limit : 0;
        int rc = rlt_policy_init(&r->p, algos[a].algo, s->limit, s->window, 0, queue, 0);
        if (s->policy_text[a] && (rc = own_policy(s, a, r)) != 0) return rc;
        if (s->policy_text[a] || r->error[0]) {
            /* a row of its own: no --block added, its arrays all zero if it was refused */
        } else if (rc != RLT_OK) {
            char w[RLT__DEC_BUF];
            return fail_usage("%s cannot take --limit %lld --window %s: %s", r->name,
                              (long long)s->limit, ticks(w, s->window), rlt_strerror(rc));
        }
        if (s->block && !s->policy_text[a] && (rc = apply_block(s, &r->p))) return rc;
        r->st = calloc(1, rlt_state_size(&r->p));
        r->ok = calloc(s->n ? s->n : 1, 1);
        r->delay = calloc(s->n ? s->n : 1, sizeof *r->delay);
        r->busy = calloc(s->n ? s->n : 1, sizeof *r->busy);
        if (!r->st || !r->ok || !r->delay || !r->busy) {
            fprintf(stderr, "ratelimit " CMD ": out of memory\n");
            return 1;
        }
    }
    name_rows(s);
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
        if (r->error[0]) continue;
        if (r->p.algo == RLT_CONCURRENCY) {
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
                evs[m++] = (ev){s->r[i].t + r->delay[i],
                                r->p.algo == RLT_CONCURRENCY ? (s->r[i].cost > 0) : s->r[i].cost};
        /* Arrivals are sorted and the shaper sends FIFO, so this is a cheap check. */
        for (size_t i = 1; i < m; i++)
            if (evs[i].t < evs[i - 1].t) {
                qsort(evs, m, sizeof *evs, ev_cmp);
                break;
            }
        r->worst = rlt__worst_span(evs, m, s->window, &r->worst_t0);
        check_contract(s, r, evs, m);
    }
    free(evs);
    return 0;
}

void rlt__sim_free_runs(sim *s)
{
    for (int a = 0; a < NALGO; a++) {
        free(s->runs[a].st);
        free(s->runs[a].ok);
        free(s->runs[a].delay);
        free(s->runs[a].busy);
    }
    memset(s->runs, 0, sizeof s->runs);
}

int rlt__sim_run(sim *s)
{
    int rc = init_runs(s);
    return rc ? rc : run_all(s);
}

span rlt__sim_span(const sim *s)
{
    rlt_ns lo = s->t_state, hi = s->t_state;
    for (size_t i = 0; i < s->n; i++) {
        if (s->r[i].t < lo) lo = s->r[i].t;
        for (int a = 0; a < NALGO; a++) {
            rlt_ns end = s->r[i].t + s->runs[a].busy[i];
            if (end > hi) hi = end;
        }
    }
    span sp = {rlt__window_of(lo, s->window) * s->window,
               (rlt__window_of(hi, s->window) + 1) * s->window};
    return sp;
}
