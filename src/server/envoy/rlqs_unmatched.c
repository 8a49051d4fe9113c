/* An RLQS stream's unmatched BucketIds (rlqs_unmatched.h): linear probing on a power-of-two
 * array at most half full, deletion by backward shift (no tombstones to sweep). */
#include "server/envoy/rlqs_unmatched.h"

#include "server/base/mem.h"
#include "server/envoy/rlqs_rule.h"

#include <stdlib.h>

struct rlt__rlqs_sent {
    uint64_t hash;   /* 0: free slot */
    rlt_ns sent_at;  /* when kind and ttl were last sent (sent) */
    rlt_ns observed; /* the first time_elapsed seen (0: none yet) */
    rlt_ns ttl;
    int kind; /* RLT__QUOTA_ALLOW_ALL or _DENY_ALL */
    bool sent;
};

static uint64_t nonzero(uint64_t h)
{
    return h == 0 ? 1 : h;
}

static rlt__rlqs_sent *find(const rlt__rlqs_unmatched *s, uint64_t h)
{
    if (s->cap == 0) return NULL;
    for (size_t i = h & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
        if (s->e[i].hash == h) return &s->e[i];
        if (s->e[i].hash == 0) return NULL;
    }
}

static void place(rlt__rlqs_sent *e, size_t cap, const rlt__rlqs_sent *x)
{
    size_t i = x->hash & (cap - 1);
    while (e[i].hash != 0)
        i = (i + 1) & (cap - 1);
    e[i] = *x;
}

/* A new entry for h, or NULL: the set is full or memory short. */
static rlt__rlqs_sent *add(rlt__rlqs_unmatched *s, uint64_t h)
{
    if (s->n >= RLT__RLQS_MAX_UNMATCHED) return NULL;
    if (2 * (s->n + 1) > s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        if (!rlt__mem_conn_take(cap * sizeof *s->e)) return NULL;
        rlt__rlqs_sent *e = calloc(cap, sizeof *e);
        if (e == NULL) {
            rlt__mem_conn_give(cap * sizeof *e);
            return NULL;
        }
        for (size_t i = 0; i < s->cap; i++)
            if (s->e[i].hash != 0) place(e, cap, &s->e[i]);
        free(s->e);
        rlt__mem_conn_give(s->cap * sizeof *s->e);
        s->e = e;
        s->cap = cap;
    }
    rlt__rlqs_sent x = {.hash = h}; /* nothing sent yet */
    place(s->e, s->cap, &x);
    s->n++;
    return find(s, h);
}

bool rlt__rlqs_unmatched_answer(rlt__rlqs_unmatched *s, const rlt__domain *d, uint64_t hash,
                                  rlt_ns elapsed, rlt_ns least, rlt_ns now, int *kind_out,
                                  rlt_ns *ttl_out)
{
    uint64_t h = nonzero(hash);
    rlt__rlqs_sent *e = find(s, h);
    if (e == NULL) e = add(s, h);
    int kind = rlt__rlqs_rule_kind(d, NULL);
    rlt_ns observed = elapsed;
    if (e != NULL) {
        if (e->observed <= 0 && elapsed > 0) e->observed = elapsed;
        observed = e->observed;
    }
    /* a function of the config in force: a reload's new TTL or default is sent at once */
    rlt_ns ttl = rlt__rlqs_default_ttl(d, NULL, observed, least);
    if (e != NULL && e->sent && e->kind == kind && e->ttl == ttl && now - e->sent_at < ttl / 3)
        return false;
    *kind_out = kind;
    *ttl_out = ttl;
    if (e != NULL) {
        e->sent = true;
        e->kind = kind;
        e->ttl = ttl;
        e->sent_at = now;
    }
    return true;
}

void rlt__rlqs_unmatched_forget(rlt__rlqs_unmatched *s, uint64_t hash)
{
    rlt__rlqs_sent *e = find(s, nonzero(hash));
    if (e == NULL) return;
    size_t mask = s->cap - 1, i = (size_t)(e - s->e);
    /* backward shift: every later entry of the run that may sit at i moves there */
    for (size_t j = (i + 1) & mask; s->e[j].hash != 0; j = (j + 1) & mask) {
        size_t home = s->e[j].hash & mask;
        /* j's entry can fill i when its home is not in (i, j] (cyclically) */
        bool between = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (between) continue;
        s->e[i] = s->e[j];
        i = j;
    }
    s->e[i].hash = 0;
    s->n--;
}

void rlt__rlqs_unmatched_free(rlt__rlqs_unmatched *s)
{
    free(s->e);
    rlt__mem_conn_give(s->cap * sizeof *s->e);
    s->e = NULL;
    s->cap = s->n = 0;
}
