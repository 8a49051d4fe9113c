/* libFuzzer target for the top-offenders sketch (rlt_topk) against an exact model, as rax's
 * fuzzer checks its tree: the bytes are a program of adds (item, weight), copies, merges and
 * clears over three sketches of K = 1..8 counters and 24 items (keys of 1..40 bytes, two
 * policies); after every step each sketch must keep Space-Saving's bounds against the exact
 * counts it was fed (count - error <= true <= count, unlisted items <= floor; floor <= N/K
 * and the counts summing to N when fed by adds alone; floor <= (1 + c)N/K for a merge of
 * sources bounded by cN/K, as the docs derive).  A violated bound aborts. */
#include "ratelimit/topk.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NITEMS 24
#define NSK 3

typedef struct model {
    uint64_t truth[NITEMS];
    uint64_t n;
    unsigned c; /* floor <= c x N / K; 1: fed by adds alone (counts sum to N); 0: no bound
                   checked (adds after a merge: new items inherit the merged floor) */
} model;

static uint8_t keys[NITEMS][40];
static size_t klens[NITEMS];

static void make_keys(void)
{
    for (int i = 0; i < NITEMS; i++) {
        klens[i] = 1 + (size_t)(i * 7 % 40);
        memset(keys[i], 0, sizeof keys[i]);
        keys[i][klens[i] - 1] = (uint8_t)(i / 2 + 1); /* items 2j and 2j+1: two policies */
    }
}

static int item_of(const rlt_topk_entry *e)
{
    for (int i = 0; i < NITEMS; i++)
        if (e->policy == i % 2 && klens[i] == e->klen && memcmp(keys[i], e->key, e->klen) == 0)
            return i;
    return -1;
}

static void check(const rlt_topk *t, const model *m)
{
    rlt_topk_entry e[8];
    size_t got = rlt_topk_list(t, e, 8);
    bool listed[NITEMS] = {false};
    uint64_t floor = rlt_topk_floor(t), sum = 0;
    if (got != rlt_topk_size(t) || rlt_topk_total(t) != m->n) abort();
    for (size_t i = 0; i < got; i++) {
        int it = item_of(&e[i]);
        if (it < 0 || listed[it]) abort();
        listed[it] = true;
        if (e[i].error > e[i].count || e[i].count - e[i].error > m->truth[it] ||
            m->truth[it] > e[i].count)
            abort();
        if (i > 0 && e[i].count > e[i - 1].count) abort();
        sum += e[i].count;
    }
    for (int it = 0; it < NITEMS; it++)
        if (!listed[it] && m->truth[it] > floor) abort();
    if (m->c > 0 &&
        (unsigned __int128)floor * rlt_topk_capacity(t) > (unsigned __int128)m->n * m->c)
        abort();
    if (m->c == 1 && sum != m->n) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    make_keys();
    rlt_topk_options o = {.k = 1 + (data[0] & 7), .has_secret = true};
    memcpy(o.secret, "fuzz-topk-secret", 16);
    rlt_topk *sk[NSK];
    model m[NSK];
    memset(m, 0, sizeof m);
    for (int i = 0; i < NSK; i++)
        m[i].c = 1;
    for (int i = 0; i < NSK; i++)
        if (rlt_topk_open(&sk[i], &o) != RLT_OK) abort();
    for (size_t p = 1; p + 1 < size; p += 2) {
        uint8_t op = data[p], arg = data[p + 1];
        int a = op % NSK, b = (op / NSK) % NSK;
        switch ((op >> 5) & 7) {
        case 0:
        case 1:
        case 2:
        case 3: { /* add: most of the program */
            int it = arg % NITEMS;
            uint64_t w = 1 + (arg / NITEMS) % 4;
            if (rlt_topk_add(sk[a], it % 2, keys[it], klens[it], w) != RLT_OK) abort();
            m[a].truth[it] += w;
            m[a].n += w;
            if (m[a].c != 1) m[a].c = 0;
            break;
        }
        case 4: /* copy a -> b */
            if (a == b) {
                if (rlt_topk_copy(sk[b], sk[a]) != RLT_EINVAL) abort();
                break;
            }
            if (rlt_topk_copy(sk[b], sk[a]) != RLT_OK) abort();
            m[b] = m[a];
            break;
        case 5:
        case 6: { /* merge the other two (or one) into a */
            const rlt_topk *src[2];
            size_t n = 0;
            model nm;
            memset(&nm, 0, sizeof nm);
            unsigned cmax = 1;
            bool bounded = true;
            for (int i = 0; i < NSK; i++) {
                if (i == a || (arg & 1 && n == 1)) continue;
                src[n++] = sk[i];
                for (int it = 0; it < NITEMS; it++)
                    nm.truth[it] += m[i].truth[it];
                nm.n += m[i].n;
                bounded &= m[i].c > 0;
                if (m[i].c > cmax) cmax = m[i].c;
            }
            nm.c = bounded && cmax < 1000 ? 1 + cmax : 0;
            if (rlt_topk_merge(sk[a], src, n) != RLT_OK) abort();
            m[a] = nm;
            break;
        }
        default: /* clear */
            rlt_topk_clear(sk[a]);
            memset(&m[a], 0, sizeof m[a]);
            m[a].c = 1;
            break;
        }
        check(sk[a], &m[a]);
        check(sk[b], &m[b]);
    }
    for (int i = 0; i < NSK; i++)
        rlt_topk_close(sk[i]);
    return 0;
}

#ifdef RLT_FUZZ_STANDALONE
#include "../standalone.h"
#endif
