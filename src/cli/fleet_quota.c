/* The fleet simulator's quota-division mode: the real division of src/quota (Envoy's Rate Limit
 * Quota Service) with one stream per node.  Each node is an Envoy: it reports its usage on
 * its first request and then every reporting interval (from a seeded phase, as Envoys started
 * at different times do), applies each answer `latency` after it was sent, enforces its
 * assignment as a token bucket (the core's) that starts full on every new assignment, and
 * with no live assignment follows --no-assignment (before its first one arrives) or
 * --expired-assignment (after its last one's TTL): Envoy's no_assignment_behavior and
 * expired_assignment_behavior, a fallback token bucket (started full on entering) by default. */
#include "cli/fleet_types.h"

#include "quota/quota.h"

#include <stdlib.h>
#include <string.h>

#define PENDING 4 /* answers in flight to one node (--latency < --interval keeps it at 2) */

typedef struct pending {
    rlt_ns at; /* when it reaches the node */
    rlt__quota_assignment a;
} pending;

typedef struct qnode {
    bool up;     /* its stream is open */
    bool joined; /* it opened one */
    bool has;    /* it enforces an assignment */
    bool ever;   /* it received one (so without one, its assignment expired) */
    bool in_fb;  /* it is in its fallback token bucket (fb_st is its state) */
    bool deny;   /* that assignment is a deny-all */
    uint32_t stream;
    rlt_ns expires; /* the assignment's TTL runs out then (from when it arrived) */
    rlt_ns phase;   /* its reporting timer fires at phase + m x I */
    rlt_ns next_report, last_report;
    uint64_t allowed, denied; /* since the last report */
    rlt_policy pol;           /* the assignment's token bucket */
    uint64_t st[4];           /* its state: all-zero is full */
    uint64_t fb_st[4];        /* the fallback token bucket's */
    pending pend[PENDING];
    int npend;
} qnode;

typedef struct qrun {
    fleet *f;
    rlt__quota *q;
    uint32_t bucket;
    qnode *nodes;
} qrun;

static void install(qnode *e, const pending *p)
{
    e->has = e->ever = true;
    e->in_fb = false;
    e->deny = p->a.deny_all;
    e->expires = p->at + p->a.ttl;
    memset(e->st, 0, sizeof e->st); /* Envoy may start every new assignment full */
    if (!e->deny && rlt_policy_init(&e->pol, RLT_TOKEN_BUCKET, p->a.tokens_per_fill,
                                    p->a.fill_interval, p->a.max_tokens, 0, 0) != RLT_OK)
        e->deny = true; /* cannot happen: the division hands out valid buckets */
}

/* The first firing of node e's reporting timer after `now`. */
static rlt_ns next_firing(const qrun *r, const qnode *e, rlt_ns now)
{
    rlt_ns iv = r->f->o.interval;
    if (now < e->phase) return e->phase;
    return e->phase + ((now - e->phase) / iv + 1) * iv;
}

/* What node e admits of n requests at `now` with no live assignment: its no-assignment
 * behaviour before its first assignment, its expired-assignment behaviour after. */
static int64_t fallback(const qrun *r, qnode *e, rlt_ns now, int64_t n)
{
    const fleet_fallback *fb = e->ever ? &r->f->o.expired : &r->f->o.no_assignment;
    switch (fb->kind) {
    case FB_ALLOW:
        return n;
    case FB_REUSE: /* the last assignment's bucket runs on as it was */
        return e->deny ? 0 : rlt__fleet_admit(&e->pol, e->st, now, n);
    case FB_SPLIT:
    case FB_BUCKET:
        if (!e->in_fb) { /* Envoy builds the fallback's bucket on entering it: full */
            memset(e->fb_st, 0, sizeof e->fb_st);
            e->in_fb = true;
        }
        return rlt__fleet_admit(&fb->bucket, e->fb_st, now, n);
    default:
        return 0;
    }
}

static int report(qrun *r, qnode *e, rlt_ns now)
{
    rlt__quota_usage u = {e->allowed, e->denied, now - e->last_report};
    rlt__quota_answer a;
    int rc = rlt__quota_report(r->q, e->stream, r->bucket, &u, now, &a);
    if (rc != RLT_OK) {
        fprintf(stderr, "ratelimit " FLEET_CMD ": the quota division refused a report: %s\n",
                rlt_strerror(rc));
        return 1;
    }
    r->f->m[M_QUOTA].messages++;
    if (a.reason != RLT__QUOTA_KEEP) {
        if (e->npend == PENDING) { /* the oldest is superseded by what follows it */
            memmove(e->pend, e->pend + 1, (PENDING - 1) * sizeof *e->pend);
            e->npend--;
        }
        e->pend[e->npend++] = (pending){now + r->f->o.latency, a.assignment};
    }
    e->allowed = e->denied = 0;
    e->last_report = now;
    e->next_report = next_firing(r, e, now);
    return 0;
}

/* Node i comes up at step k: it opens its stream and reports at once.  Every node coming up
 * in a step opens its stream before any of that step's reports (they come up at one instant),
 * so the division sees the whole wave of streams when it answers their first reports. */
static int node_up(qrun *r, int64_t i, int64_t k)
{
    qnode *e = &r->nodes[i];
    if (e->joined || !rlt__fleet_alive(r->f, i, k)) return 0;
    if (rlt__quota_stream_open(r->q, &e->stream) != RLT_OK) {
        fprintf(stderr, "ratelimit " FLEET_CMD ": the quota division refused a stream\n");
        return 1;
    }
    rlt_ns now = k * r->f->o.step;
    e->up = e->joined = true;
    e->last_report = now;
    e->next_report = now;
    return 0;
}

/* Node i at step k: its life, its report, the answers reaching it, then its requests. */
static int node_step(qrun *r, int64_t i, int64_t k)
{
    fleet *f = r->f;
    qnode *e = &r->nodes[i];
    rlt_ns now = k * f->o.step;
    if (!rlt__fleet_alive(f, i, k)) {
        if (e->up) { /* it died: its connection breaks; its share stays until its TTL */
            rlt__quota_stream_close(r->q, e->stream);
            e->up = false;
        }
        return 0;
    }
    if (e->up && !rlt__fleet_connected(f, i, k)) { /* its stream broke: it lives on, enforcing
                                                      its assignment, then its expired behaviour */
        rlt__quota_stream_close(r->q, e->stream);
        e->up = false;
    }
    if (e->up && now >= e->next_report && report(r, e, now)) return 1;
    int used = 0;
    while (used < e->npend && e->pend[used].at <= now)
        install(e, &e->pend[used++]);
    if (used) {
        memmove(e->pend, e->pend + used, (size_t)(e->npend - used) * sizeof *e->pend);
        e->npend -= used;
    }
    if (e->has && now >= e->expires) e->has = false;
    int64_t n = rlt__fleet_arrivals(f, i, k);
    if (n <= 0) return 0;
    int64_t adm = !e->has   ? fallback(r, e, now, n)
                  : e->deny ? 0
                            : rlt__fleet_admit(&e->pol, e->st, now, n);
    e->allowed += (uint64_t)adm;
    e->denied += (uint64_t)(n - adm);
    f->m[M_QUOTA].adm[k] += adm;
    return 0;
}

static int quota_open(qrun *r)
{
    fleet *f = r->f;
    rlt__quota_options qo = {.report_interval = f->o.interval,
                             .ttl = f->o.ttl,
                             .max_streams = (size_t)f->o.nodes + 16,
                             .max_members = 2 * (size_t)f->o.nodes + 16};
    int rc = rlt__quota_open(&r->q, &qo);
    if (rc != RLT_OK) {
        fprintf(stderr, "ratelimit " FLEET_CMD ": the quota division refused its options: %s\n",
                rlt_strerror(rc));
        return 1;
    }
    const rlt_policy *p = &f->o.budget;
    rlt__quota_budget b = {p->limit, p->period, p->burst, 0};
    if ((rc = rlt__quota_bucket_open(r->q, &b, &r->bucket)) != RLT_OK) {
        fprintf(stderr,
                "ratelimit " FLEET_CMD ": --budget '%s': the quota division cannot divide it "
                "(%s): its rate per period and its burst must be 1..%lld tokens\n",
                f->o.budget_text, rlt_strerror(rc), (long long)RLT__QUOTA_TOKENS_MAX);
        return 1;
    }
    return 0;
}

int rlt__fleet_quota(fleet *f)
{
    qrun r = {.f = f};
    r.nodes = calloc((size_t)f->o.nodes, sizeof *r.nodes);
    if (!r.nodes) {
        fprintf(stderr, "ratelimit " FLEET_CMD ": out of memory\n");
        return 1;
    }
    int rc = quota_open(&r);
    /* Each node's reporting timer: a seeded phase in [0, I) on the step grid. */
    uint64_t x = f->o.seed ^ UINT64_C(0x5157a7e);
    int64_t slots = f->o.interval / f->o.step;
    for (int64_t i = 0; i < f->o.nodes; i++) {
        x = x * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
        r.nodes[i].phase = (rlt_ns)((x >> 33) % (uint64_t)slots) * f->o.step;
    }
    rlt_ns ttl = f->o.ttl, next_sweep = ttl;
    for (int64_t k = 0; rc == 0 && k < f->steps; k++) {
        rlt_ns now = k * f->o.step;
        if (now >= next_sweep) { /* frees departed members' expired entries, once per TTL */
            rlt__quota_sweep(r.q, now);
            next_sweep = now + ttl;
        }
        int64_t first = rlt__fleet_first(f, k);
        for (int64_t j = 0; rc == 0 && j < f->o.nodes; j++)
            rc = node_up(&r, (first + j) % f->o.nodes, k);
        for (int64_t j = 0; rc == 0 && j < f->o.nodes; j++)
            rc = node_step(&r, (first + j) % f->o.nodes, k);
    }
    rlt__quota_close(r.q);
    free(r.nodes);
    return rc;
}
