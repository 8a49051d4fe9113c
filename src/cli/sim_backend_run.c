/* `ratelimit sim --backend`: one mode's run, an event loop over the arrivals and the answers
 * (a binary heap by finish time), the backend's FIFO queue, the limiter's count of requests
 * in flight, and the figures of the requests arriving from the change on.  An answer and an
 * arrival at the same instant: the answer first (its slot is free for the arrival). */
#include "cli/sim_backend_run.h"

#include <stdlib.h>
#include <string.h>

typedef struct done {
    rlt_ns t;     /* when the answer leaves the backend */
    size_t req;   /* index into the arrivals */
    int64_t seen; /* requests in flight at the limiter when it was admitted, itself included */
} done;

typedef struct heap {
    done *a;
    size_t n;
} heap;

static void push(heap *h, done d)
{
    size_t i = h->n++;
    while (i > 0 && h->a[(i - 1) / 2].t > d.t) {
        h->a[i] = h->a[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->a[i] = d;
}

static done pop(heap *h)
{
    done top = h->a[0], last = h->a[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && h->a[c + 1].t < h->a[c].t) c++;
        if (h->a[c].t >= last.t) break;
        h->a[i] = h->a[c];
        i = c;
    }
    if (h->n > 0) h->a[i] = last;
    return top;
}

static int cmp_ns(const void *a, const void *b)
{
    rlt_ns x = *(const rlt_ns *)a, y = *(const rlt_ns *)b;
    return x < y ? -1 : x > y;
}

/* The p-per-mille percentile of n sorted values (nearest rank), 0 for none. */
static rlt_ns pct(const rlt_ns *v, size_t n, int pm)
{
    if (n == 0) return 0;
    size_t k = (n * (size_t)pm + 999) / 1000;
    return v[k > 0 ? k - 1 : 0];
}

typedef struct loop {
    const bk_sim *s;
    bk_mode *m;
    heap h;
    size_t *queue, qhead, qtail; /* FIFO of admitted requests waiting for a server */
    int64_t *seen;               /* per queued request: as done.seen */
    int64_t busy, in_flight;
    rlt_adapt_state st;
    rlt_ns *lat[RLT_CLASS_COUNT];
    size_t nlat[RLT_CLASS_COUNT];
} loop;

static int64_t limit_now(const loop *l)
{
    if (l->m->kind == 0) return l->s->o.static_limit;
    if (l->m->kind < 0) return INT64_MAX;
    return rlt_adapt_limit(&l->m->ap, &l->st);
}

static int64_t servers(const loop *l, rlt_ns t)
{
    if (l->m->kind < 0) return l->s->o.cap; /* the unloaded run keeps the whole backend */
    return t < l->s->o.change_at ? l->s->o.cap : l->s->o.cap_after;
}

static void start(loop *l, size_t i, int64_t seen, rlt_ns now)
{
    l->busy++;
    push(&l->h, (done){now + l->s->r[i].svc, i, seen});
}

static void answer(loop *l, done d)
{
    const bk_opts *o = &l->s->o;
    const bk_req *r = &l->s->r[d.req];
    rlt_ns latency = d.t - r->t;
    bool in_time = latency <= o->timeout;
    l->busy--;
    l->in_flight--;
    if (l->m->kind > 0)
        (void)rlt_adapt_update(&l->m->ap, &l->st, d.t, latency, d.seen,
                               in_time ? RLT_OUTCOME_SUCCESS : RLT_OUTCOME_DROPPED);
    if (in_time && d.t >= o->change_at && d.t < o->duration) l->m->good_after++;
    if (r->t >= o->change_at || l->m->kind < 0) {
        if (in_time) l->m->good[r->cls]++;
        l->lat[r->cls][l->nlat[r->cls]++] = latency;
    }
    while (l->busy < servers(l, d.t) && l->qhead < l->qtail) {
        size_t q = l->qhead++;
        start(l, l->queue[q], l->seen[q], d.t);
    }
}

static void arrive(loop *l, size_t i)
{
    const bk_req *r = &l->s->r[i];
    bool in_window = r->t >= l->s->o.change_at || l->m->kind < 0;
    if (in_window) l->m->offered[r->cls]++;
    int64_t limit = limit_now(l);
    bool admit = l->in_flight < limit;
    if (l->m->classes)
        (void)rlt_class_admits(limit, l->s->o.reserve, (rlt_class)r->cls, l->in_flight, 1, &admit);
    if (!admit) return;
    int64_t seen = ++l->in_flight;
    if (l->busy < servers(l, r->t)) {
        start(l, i, seen, r->t);
    } else {
        l->seen[l->qtail] = seen;
        l->queue[l->qtail++] = i;
    }
}

int rlt__bk_run(const bk_sim *s, bk_mode *m)
{
    loop l = {.s = s, .m = m};
    size_t n = s->n;
    m->nsamples = (size_t)(s->o.duration / BK_SAMPLE) + 1;
    l.h.a = malloc(n * sizeof *l.h.a);
    l.queue = malloc(n * sizeof *l.queue);
    l.seen = malloc(n * sizeof *l.seen);
    m->limit_at = calloc(m->nsamples, sizeof *m->limit_at);
    bool ok = l.h.a && l.queue && l.seen && m->limit_at;
    for (int c = 0; c < RLT_CLASS_COUNT; c++)
        ok = ok && (l.lat[c] = malloc(n * sizeof(rlt_ns)));
    if (ok) {
        size_t i = 0, k = 0;
        while (i < n || l.h.n > 0) {
            bool next_is_answer = l.h.n > 0 && (i >= n || l.h.a[0].t <= s->r[i].t);
            rlt_ns t = next_is_answer ? l.h.a[0].t : s->r[i].t;
            for (; k < m->nsamples && (rlt_ns)k * BK_SAMPLE <= t; k++)
                m->limit_at[k] = m->kind < 0 ? 0 : limit_now(&l);
            if (next_is_answer) {
                answer(&l, pop(&l.h));
                continue;
            }
            if (s->r[i].cls == RLT_CLASS_CRITICAL || m->kind >= 0) arrive(&l, i);
            i++;
        }
        for (; k < m->nsamples; k++)
            m->limit_at[k] = m->kind < 0 ? 0 : limit_now(&l);
        for (int c = 0; c < RLT_CLASS_COUNT; c++) {
            qsort(l.lat[c], l.nlat[c], sizeof(rlt_ns), cmp_ns);
            m->p50[c] = pct(l.lat[c], l.nlat[c], 500);
            m->p99[c] = pct(l.lat[c], l.nlat[c], 990);
        }
    } else {
        fprintf(stderr, "ratelimit " BK_CMD ": out of memory\n");
    }
    for (int c = 0; c < RLT_CLASS_COUNT; c++)
        free(l.lat[c]);
    free(l.h.a);
    free(l.queue);
    free(l.seen);
    return ok ? 0 : 1;
}
