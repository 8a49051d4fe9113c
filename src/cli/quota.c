/* `ratelimit quota`: N Envoys' Rate Limit Quota Service streams against a real ratelimitd,
 * without Envoy.  Each stream reports its buckets every interval as Envoy's
 * rate_limit_quota filter does, enforces each assignment it receives locally
 * (quota_enforce.c) on an even demand, and the table shows per interval what each stream
 * held and admitted and what the fleet admitted against the budget.  The clock is the real
 * monotonic clock (the daemon runs on it too), read once per step; everything it decides is a
 * function of that reading. */
#include "cli/cli.h"
#include "cli/cliutil.h"
#include "cli/quota_h2.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CMD "quota"
#define NS RLT_NS_PER_S
#define MS RLT_NS_PER_MS
#define HANDSHAKE_NS (10 * NS) /* the longest wait for every stream's first answer */

static void usage(FILE *f)
{
    fputs("usage: ratelimit quota --domain D --bucket K=V[,K=V...] [--bucket ...]\n"
          "                       [--connect HOST:PORT] [--streams N] [--demand R[,R...]]\n"
          "                       [--interval I] [--seconds S] [--budget POLICY]\n"
          "                       [--no-assignment allow|deny] [--expired allow|deny]\n"
          "                       [--token T]\n"
          "Opens N Rate Limit Quota Service streams to ratelimitd as N Envoys would, each\n"
          "reporting its buckets every interval and enforcing the assignments it gets, and\n"
          "prints per interval what each stream held and admitted and what the fleet admitted.\n"
          "options:\n"
          "  --connect HOST:PORT  the daemon's gRPC port (default 127.0.0.1:8081)\n"
          "  --domain D           the domain of the reports (the daemon config's domain:)\n"
          "  --bucket K=V,...     a BucketId, its pairs; repeat for more buckets (at most 8)\n"
          "  --streams N          streams, one connection each, as N Envoys (1..64, default 3)\n"
          "  --demand R[,R...]    requests per second of each stream, spread evenly (default\n"
          "                       100); one value for every stream or one per stream\n"
          "  --interval I         the reporting interval, Envoy's reporting_interval (default\n"
          "                       1s; a unit ms s m, or seconds)\n"
          "  --seconds S          how long to run, a whole number of intervals (default 5)\n"
          "  --budget POLICY      the bucket's budget as configured (token_bucket:200/1s,\n"
          "                       burst=40), to print the budget R x T + B and the bound\n"
          "                       R x T + B + B x (1 + T / G) beside each interval; repeat\n"
          "                       for the buckets in --bucket's order\n"
          "  --no-assignment B    before a bucket's first assignment: allow (default) or deny\n"
          "  --expired B          after an assignment's time to live: deny (default) or allow\n"
          "  --token T            send 'authorization: Bearer T' (the daemon's auth tokens)\n"
          "exit status: 0 done, 1 the server is unreachable or not an RLQS server, 2 bad options\n",
          f);
}

static int fail_usage(const char *fmt, const char *a)
{
    return rlt__usage_error(CMD, fmt, a);
}

/* A duration (rlt__opt_time) in whole ms. */
static int opt_ms(const char *name, const char *v, int64_t min, int64_t max, int64_t *out)
{
    if (rlt__opt_time(CMD, name, v, min, max, out) != 0) return -1;
    if (*out % MS != 0) {
        char buf[80];
        snprintf(buf, sizeof buf, "%s '%%s': must be whole milliseconds", name);
        return rlt__usage_error(CMD, buf, v);
    }
    return 0;
}

/* --bucket k=v,k=v: pairs with non-empty keys and values, each key once. */
static int parse_bucket(rlt__q_bucket *b, const char *v)
{
    if (strlen(v) >= sizeof b->store) return fail_usage("--bucket '%s': too long", v);
    snprintf(b->text, sizeof b->text, "%s", v);
    snprintf(b->store, sizeof b->store, "%s", v);
    b->n = 0;
    for (char *p = b->store, *next; p != NULL; p = next) {
        next = strchr(p, ',');
        if (next) *next++ = '\0';
        char *eq = strchr(p, '=');
        if (eq == NULL || eq == p || eq[1] == '\0')
            return fail_usage("--bucket '%s': expected KEY=VALUE pairs separated by commas", v);
        *eq = '\0';
        if (b->n == RLT__RLQSC_MAX_PAIRS) return fail_usage("--bucket '%s': over 16 pairs", v);
        for (size_t i = 0; i < b->n; i++)
            if (strcmp(b->pairs[i].key, p) == 0)
                return fail_usage("--bucket '%s': a key is repeated", v);
        b->pairs[b->n++] = (rlt__rlqsc_pair){p, strlen(p), eq + 1, strlen(eq + 1)};
    }
    return 0;
}

static int parse_behaviour(const char *name, const char *v, bool *deny_or_allow, bool deny)
{
    if (strcmp(v, "allow") != 0 && strcmp(v, "deny") != 0) {
        char buf[80];
        snprintf(buf, sizeof buf, "%s '%%s': expected allow or deny", name);
        return rlt__usage_error(CMD, buf, v);
    }
    *deny_or_allow = (strcmp(v, "deny") == 0) == deny;
    return 0;
}

static int parse_args(int argc, char **argv, rlt__q_opts *o)
{
    *o = (rlt__q_opts){
        .connect = "127.0.0.1:8081", .streams = 3, .interval_ns = NS, .seconds_ns = 5 * NS};
    const char *demand = "100";
    for (int i = 1; i < argc; i++) {
        const char *v;
        int m;
#define OPT(name) rlt__opt(argc, argv, &i, CMD, name, &v)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 1;
        } else if ((m = OPT("--connect"))) {
            if (m < 0) return 2;
            o->connect = v;
        } else if ((m = OPT("--domain"))) {
            if (m < 0) return 2;
            if (v[0] == '\0' || strlen(v) > 255)
                return fail_usage("--domain '%s': 1 to 255 bytes", v);
            o->domain = v;
        } else if ((m = OPT("--bucket"))) {
            if (m < 0) return 2;
            if (o->nb == RLT__Q_MAX_BUCKETS) return fail_usage("--bucket '%s': at most 8", v);
            if (parse_bucket(&o->bucket[o->nb], v) != 0) return 2;
            o->nb++;
        } else if ((m = OPT("--streams"))) {
            int64_t x;
            if (m < 0 || rlt__opt_int(CMD, "--streams", v, 1, RLT__Q_MAX_STREAMS, &x)) return 2;
            o->streams = (int)x;
        } else if ((m = OPT("--demand"))) {
            if (m < 0) return 2;
            demand = v;
        } else if ((m = OPT("--interval"))) {
            if (m < 0 || opt_ms("--interval", v, 100 * MS, 3600 * NS, &o->interval_ns)) return 2;
        } else if ((m = OPT("--seconds"))) {
            if (m < 0 || opt_ms("--seconds", v, 100 * MS, 86400 * NS, &o->seconds_ns)) return 2;
        } else if ((m = OPT("--budget"))) {
            char err[200] = "";
            if (m < 0) return 2;
            if (o->nbudget == RLT__Q_MAX_BUCKETS) return fail_usage("--budget '%s': at most 8", v);
            rlt_policy *bp = &o->budget[o->nbudget];
            if (rlt_policy_parse(bp, v, strlen(v), err, sizeof err) != RLT_OK) {
                fprintf(stderr, "ratelimit " CMD ": --budget '%s': %s\n", v, err);
                return 2;
            }
            if (bp->algo != RLT_TOKEN_BUCKET && bp->algo != RLT_GCRA)
                return fail_usage("--budget '%s': must be a token_bucket or gcra policy", v);
            o->nbudget++;
        } else if ((m = OPT("--no-assignment"))) {
            if (m < 0 || parse_behaviour("--no-assignment", v, &o->no_assignment_deny, true))
                return 2;
        } else if ((m = OPT("--expired"))) {
            if (m < 0 || parse_behaviour("--expired", v, &o->expired_allow, false)) return 2;
        } else if ((m = OPT("--token"))) {
            if (m < 0) return 2;
            if (strpbrk(v, "\r\n") || strlen(v) > 256)
                return fail_usage("--token: %s", "at most 256 bytes on one line");
            o->token = v;
        } else {
            return fail_usage("unknown option '%s'", argv[i]);
        }
#undef OPT
    }
    if (o->domain == NULL) return fail_usage("%s", "--domain is required");
    if (o->nb == 0) return fail_usage("%s", "--bucket is required (e.g. --bucket name=web)");
    if (o->nbudget > o->nb)
        return fail_usage("%s", "--budget: one per --bucket at most, in the same order");
    if (o->seconds_ns % o->interval_ns != 0)
        return fail_usage("%s", "--seconds must be a whole number of --interval");
    /* --demand: one value, or one per stream. */
    const char *p = demand;
    int k = 0;
    while (k < RLT__Q_MAX_STREAMS) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        int64_t x;
        if (rlt__dec_parse(p, len, 1, &x) != RLT__DEC_OK || x < 0 || x > 1000000)
            return fail_usage("--demand '%s': whole requests per second, 0 to 1000000, "
                              "separated by commas",
                              demand);
        o->demand[k++] = x;
        if (c == NULL) break;
        p = c + 1;
    }
    if (k == 1)
        for (int i = 1; i < o->streams; i++)
            o->demand[i] = o->demand[0];
    else if (k != o->streams)
        return fail_usage("--demand '%s': one value, or one per stream (--streams)", demand);
    return 0;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * NS + ts.tv_nsec;
}

/* ---- the table ---------------------------------------------------------------------------- */

/* What a stream holds for a bucket at `now`, in words. */
static void held(rlt__q_stream *s, size_t b, int64_t now, char *out, size_t cap)
{
    const rlt__qe_bucket *q = rlt__q_qe(s, b);
    bool expired;
    char ttl[RLT__DEC_BUF], fill[RLT__DEC_BUF];
    rlt__dec_format(ttl, q->a.ttl_ns / MS, 1000);
    switch (rlt__qe_state(q, now, &expired)) {
    case RLT__QE_NONE:
        snprintf(out, cap, "none (%s)", q->no_assignment_deny ? "deny" : "allow");
        return;
    case RLT__QE_TOKEN_BUCKET:
        rlt__dec_format(fill, q->a.fill_interval_ns / MS, 1000);
        snprintf(out, cap, "%u/%ss max %u ttl %ss", q->a.tokens_per_fill, fill, q->a.max_tokens,
                 ttl);
        return;
    case RLT__QE_ALLOW_ALL:
        snprintf(out, cap, expired ? "expired (allow)" : "allow_all ttl %ss", ttl);
        return;
    case RLT__QE_DENY_ALL:
        snprintf(out, cap, expired ? "expired (deny)" : "deny_all ttl %ss", ttl);
        return;
    }
}

/* Per bucket over the run. */
typedef struct total {
    uint64_t allowed, denied, worst; /* worst: the most the fleet admitted in one interval */
    int64_t worst_bound;             /* the bound of that interval (with --budget) */
    bool over;                       /* an interval over its bound */
} total;

/* R x T + B of the --budget for an interval of T ns, rounded up; and the bound with G. */
static int64_t budget_of(const rlt_policy *p, int64_t t, int64_t g, int64_t *bound)
{
    __int128 rt = ((__int128)p->limit * t + p->period - 1) / p->period;
    int64_t b = p->burst;
    int64_t base = (int64_t)rt + b;
    *bound = g > 0 ? base + b + (int64_t)(((__int128)b * t + g - 1) / g) : 0;
    return base;
}

static void rows(const rlt__q_opts *o, rlt__q_stream **st, int64_t t, int64_t el, int64_t now,
                 total *tot)
{
    char ts[RLT__DEC_BUF], a[96];
    rlt__dec_format(ts, t / MS, 1000);
    int64_t g = 0;
    for (int i = 0; i < o->streams; i++) {
        int64_t m = rlt__q_min_ttl(st[i]);
        if (m > 0 && (g == 0 || m < g)) g = m;
    }
    g /= 3; /* G = TTL / 3, docs/envoy.md's bound */
    for (size_t b = 0; b < o->nb; b++) {
        uint64_t al = 0, de = 0, tpf_per_s = 0, max = 0;
        for (int i = 0; i < o->streams; i++) {
            const rlt__q_count *c = rlt__q_counts(st[i], b);
            held(st[i], b, now, a, sizeof a);
            printf("%8s  %-24s  %6d  %-34s  %8llu  %7llu  %7llu\n", ts, o->bucket[b].text, i + 1, a,
                   (unsigned long long)c->allowed, (unsigned long long)c->denied,
                   (unsigned long long)c->answers);
            al += c->allowed;
            de += c->denied;
            bool expired;
            const rlt__qe_bucket *q = rlt__q_qe(st[i], b);
            if (rlt__qe_state(q, now, &expired) == RLT__QE_TOKEN_BUCKET) {
                tpf_per_s +=
                    (uint64_t)((__int128)q->a.tokens_per_fill * NS / q->a.fill_interval_ns);
                max += q->a.max_tokens;
            }
        }
        snprintf(a, sizeof a, "sum %llu/s max %llu", (unsigned long long)tpf_per_s,
                 (unsigned long long)max);
        printf("%8s  %-24s  %6s  %-34s  %8llu  %7llu", ts, o->bucket[b].text, "fleet", a,
               (unsigned long long)al, (unsigned long long)de);
        total *tt = &tot[b];
        tt->allowed += al;
        tt->denied += de;
        if (b < o->nbudget) {
            int64_t bound, budget = budget_of(&o->budget[b], el, g, &bound);
            printf("  budget %lld", (long long)budget);
            if (bound > 0) printf(" bound %lld", (long long)bound);
            if (bound > 0 && (int64_t)al > bound) {
                printf(" OVER");
                tt->over = true;
            }
            if (al >= tt->worst) tt->worst_bound = bound;
        }
        if (al >= tt->worst) tt->worst = al;
        printf("\n");
    }
}

/* ---- the run ------------------------------------------------------------------------------ */

static int run(const rlt__q_opts *o, rlt__q_stream **st)
{
    char err[400];
    struct pollfd pfd[RLT__Q_MAX_STREAMS];
    /* Every stream's first report (at its bucket's first request, as Envoy), then wait for
     * the call to be answered on each. */
    int64_t t0 = now_ns(), now = t0;
    for (int i = 0; i < o->streams; i++)
        if (rlt__q_report(st[i], 0, err, sizeof err) != 0) goto failed;
    for (;;) {
        int ready = 0;
        for (int i = 0; i < o->streams; i++) {
            if (rlt__q_pump(st[i], now, err, sizeof err) != 0) goto failed;
            ready += rlt__q_ready(st[i]);
        }
        if (ready == o->streams) break;
        if (now - t0 > HANDSHAKE_NS) {
            snprintf(err, sizeof err,
                     "no answer to the RLQS call within 10 s: not an RLQS "
                     "server?");
            goto failed;
        }
        for (int i = 0; i < o->streams; i++)
            pfd[i] = (struct pollfd){rlt__q_fd(st[i]), rlt__q_events(st[i]), 0};
        poll(pfd, (nfds_t)o->streams, 100);
        now = now_ns();
    }
    char d[RLT__DEC_BUF];
    rlt__dec_format(d, o->interval_ns / MS, 1000);
    printf("ratelimit quota: %d streams to %s, domain %s, %zu bucket%s, a report every %s s\n",
           o->streams, o->connect, o->domain, o->nb, o->nb == 1 ? "" : "s", d);
    printf("%8s  %-24s  %6s  %-34s  %8s  %7s  %7s\n", "t (s)", "bucket", "stream", "assignment",
           "admitted", "denied", "answers");
    int64_t done[RLT__Q_MAX_STREAMS] = {0}; /* requests decided per stream */
    total tot[RLT__Q_MAX_BUCKETS] = {{0}};
    int64_t start = now, last = now, next = now + o->interval_ns;
    int64_t intervals = o->seconds_ns / o->interval_ns, reported = 0;
    while (reported < intervals) {
        now = now_ns(); /* the step's one clock read */
        for (int i = 0; i < o->streams; i++)
            if (rlt__q_pump(st[i], now, err, sizeof err) != 0) goto failed;
        /* The requests due by now, demand x elapsed, each decided on every bucket. */
        int64_t upto = now < start + o->seconds_ns ? now : start + o->seconds_ns;
        for (int i = 0; i < o->streams; i++) {
            int64_t due = (int64_t)((__int128)(upto - start) * o->demand[i] / NS);
            for (; done[i] < due; done[i]++)
                for (size_t b = 0; b < o->nb; b++) {
                    rlt__q_count *c = rlt__q_counts(st[i], b);
                    if (rlt__qe_admit(rlt__q_qe(st[i], b), now))
                        c->allowed++;
                    else
                        c->denied++;
                }
        }
        if (now >= next) {
            rows(o, st, now - start, now - last, now, tot);
            fflush(stdout);
            for (int i = 0; i < o->streams; i++)
                if (rlt__q_report(st[i], (now - last) / NS * NS, err, sizeof err) != 0 ||
                    rlt__q_pump(st[i], now, err, sizeof err) != 0)
                    goto failed;
            last = now;
            next += o->interval_ns;
            if (next <= now) next = now + o->interval_ns; /* late: keep the interval's length */
            reported++;
        }
        /* Sleep until the next request due on any stream or the next report. */
        int64_t wake = next;
        for (int i = 0; i < o->streams; i++)
            if (o->demand[i] > 0) {
                int64_t at = start + (int64_t)(((__int128)(done[i] + 1) * NS + o->demand[i] - 1) /
                                               o->demand[i]);
                if (at < wake) wake = at;
            }
        for (int i = 0; i < o->streams; i++)
            pfd[i] = (struct pollfd){rlt__q_fd(st[i]), rlt__q_events(st[i]), 0};
        int64_t ms = wake > now ? (wake - now + MS - 1) / MS : 0;
        poll(pfd, (nfds_t)o->streams, (int)(ms > 1000 ? 1000 : ms));
    }
    /* The summary. */
    for (size_t b = 0; b < o->nb; b++) {
        int got = 0;
        for (int i = 0; i < o->streams; i++)
            got += rlt__q_assignments(st[i], b) > 0;
        uint64_t req = tot[b].allowed + tot[b].denied;
        printf("ratelimit quota: %s: %lld intervals, %d streams, %d with an assignment; the fleet "
               "admitted %llu of %llu requests, at most %llu in one interval",
               o->bucket[b].text, (long long)intervals, o->streams, got,
               (unsigned long long)tot[b].allowed, (unsigned long long)req,
               (unsigned long long)tot[b].worst);
        if (b < o->nbudget && tot[b].worst_bound > 0)
            printf(" (bound %lld)%s", (long long)tot[b].worst_bound,
                   tot[b].over ? ": OVER THE BOUND" : ": within the bound");
        printf("\n");
    }
    return 0;
failed:
    fprintf(stderr, "ratelimit " CMD ": %s: %s\n", o->connect, err);
    return 1;
}

int rlt__cli_quota(int argc, char **argv)
{
    static rlt__q_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc != 0) return rc == 1 ? 0 : rc;
    rlt__q_stream *st[RLT__Q_MAX_STREAMS] = {0};
    char err[400];
    for (int i = 0; i < o.streams; i++)
        if ((st[i] = rlt__q_open(&o, i, err, sizeof err)) == NULL) {
            fprintf(stderr, "ratelimit " CMD ": %s\n", err);
            rc = 1;
            goto out;
        }
    rc = run(&o, st);
out:
    for (int i = 0; i < o.streams; i++)
        rlt__q_close(st[i]);
    return rc;
}
