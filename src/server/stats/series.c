/* Decisions per second per policy over the last five minutes (series.h): the main thread's
 * sample of the running totals once a second, a fixed ring per policy. */
#include "server/stats/series.h"

#include <stdlib.h>
#include <string.h>

int rlt__series_open(rlt__series *s)
{
    memset(s, 0, sizeof *s);
    s->rows = calloc(RLT__SERIES_POLICIES, sizeof *s->rows);
    if (s->rows == NULL) return RLT_ENOMEM;
    pthread_mutex_init(&s->lock, NULL);
    s->last = -1;
    return RLT_OK;
}

void rlt__series_close(rlt__series *s)
{
    if (s->rows == NULL) return;
    free(s->rows);
    pthread_mutex_destroy(&s->lock);
    memset(s, 0, sizeof *s);
}

static uint64_t ld(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

void rlt__metrics_policy(const rlt__metrics *m, size_t id, uint64_t *allowed, uint64_t *denied,
                         uint64_t *shadowed)
{
    *allowed = *denied = *shadowed = 0;
    if (id >= RLT__METRIC_IDS) return;
    for (size_t k = 0; k < RLT__METRIC_SLOTS; k++) {
        *allowed += ld(&m->slots[k].allowed[id]);
        *denied += ld(&m->slots[k].denied[id]);
        *shadowed += ld(&m->slots[k].shadowed[id]);
    }
}

static uint32_t clamp32(uint64_t v)
{
    return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

/* The ring's index of second t (t may be negative before the daemon's first 300 s). */
static size_t at_of(int64_t t)
{
    return (size_t)(((t % RLT__SERIES_LEN) + RLT__SERIES_LEN) % RLT__SERIES_LEN);
}

static rlt__series_row *row_of(rlt__series *s, uint32_t id)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->rows[i].id == id) return &s->rows[i];
    if (s->n == RLT__SERIES_POLICIES) return NULL;
    rlt__series_row *r = &s->rows[s->n++];
    memset(r, 0, sizeof *r);
    r->id = id;
    return r;
}

void rlt__series_sample(rlt__series *s, const rlt__metrics *m, size_t nids, int64_t sec)
{
    if (s->rows == NULL || sec <= s->last) return;
    pthread_mutex_lock(&s->lock);
    /* The seconds between the previous sample and this one read 0 in every row. */
    int64_t from =
        s->last < 0 || sec - s->last > RLT__SERIES_LEN ? sec - RLT__SERIES_LEN + 1 : s->last + 1;
    for (size_t i = 0; i < s->n; i++)
        for (int64_t t = from; t <= sec; t++) {
            s->rows[i].a[at_of(t)] = 0;
            s->rows[i].d[at_of(t)] = 0;
        }
    size_t slot = at_of(sec);
    uint64_t untracked = 0;
    for (size_t id = 0; id < RLT__METRIC_IDS; id++) {
        if (id >= nids && id != RLT__METRIC_IDS - 1) continue;
        uint64_t a, d, sh;
        rlt__metrics_policy(m, id, &a, &d, &sh);
        if (a + d == 0) continue;
        rlt__series_row *r = row_of(s, (uint32_t)id);
        if (r == NULL) {
            untracked += a + d;
            continue;
        }
        /* A row added now starts from zero totals: the daemon's counters did too. */
        r->a[slot] = clamp32(a - r->allowed);
        r->d[slot] = clamp32(d - r->denied);
        r->allowed = a;
        r->denied = d;
    }
    s->untracked = untracked;
    s->last = sec;
    pthread_mutex_unlock(&s->lock);
}

size_t rlt__series_read(rlt__series *s, rlt__series_view *out, size_t cap, int64_t *last,
                        uint64_t *untracked)
{
    *last = -1;
    *untracked = 0;
    if (s->rows == NULL) return 0;
    pthread_mutex_lock(&s->lock);
    size_t n = s->n < cap ? s->n : cap;
    *last = s->last;
    *untracked = s->untracked;
    for (size_t i = 0; i < n; i++) {
        const rlt__series_row *r = &s->rows[i];
        out[i].id = r->id;
        out[i].allowed = r->allowed;
        out[i].denied = r->denied;
        for (size_t k = 0; k < RLT__SERIES_LEN; k++) {
            size_t at = at_of(s->last - RLT__SERIES_LEN + 1 + (int64_t)k); /* oldest first */
            out[i].a[k] = r->a[at];
            out[i].d[k] = r->d[at];
        }
    }
    pthread_mutex_unlock(&s->lock);
    return n;
}
