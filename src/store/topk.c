/* Top offenders: the Space-Saving sketch of include/ratelimit/topk.h.
 *
 * Layout (one allocation each, made by rlt_topk_open):
 *
 *   ent[0..K)      the counters: count, error, hash, policy, key length, heap position;
 *   keys[K][512]   entry i's key bytes (RLT_KEY_MAX each: keys are copied whole);
 *   heap[0..size)  entry indices, a binary min-heap by count: heap[0] is the victim;
 *   idx[0..M)      M = the power of two >= 2K: open addressing with linear probing from
 *                  hash & (M-1), entry index + 1 per slot (0 = empty), deleted by backward
 *                  shift (no tombstones, so probes stay short after millions of evictions).
 *
 * The maths (Space-Saving).  A monitored item's count only grows; a new item, when the K
 * counters are in use, replaces the one with the smallest count m and starts at m + c with
 * error m: it may have been seen up to m times while not monitored, because no unmonitored
 * item was ever seen more than m times.  `floor` holds that bound for every unmonitored item:
 * the largest count ever evicted (counts of evicted items only grow with time, so it is the
 * last victim's), or what a merge says.  A new item while the sketch has room starts at
 * floor + c with error floor (floor is 0 until a merge sets it), so count - error <= true <=
 * count is kept by every step.  Fed by adds alone the counts sum to N (each add raises the
 * sum by its c), so the smallest of K is at most N/K, and so is floor.
 *
 * The index hashes (policy, key) with SipHash-1-3 under a secret, so that keys an attacker
 * picks cannot pile up on one probe chain. */
#include "ratelimit/topk.h"

#include "store/secret.h"
#include "store/siphash.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

typedef struct topk_ent {
    uint64_t count;
    uint64_t error;
    uint64_t hash;
    int policy;
    uint32_t heap_pos;
    uint16_t klen;
} topk_ent;

struct rlt_topk {
    size_t k;
    size_t size;
    uint64_t total;
    uint64_t floor;
    size_t mask; /* M - 1 */
    uint8_t secret[16];
    rlt__sipkey sip;
    topk_ent *ent;
    uint8_t *keys;
    uint32_t *heap;
    uint32_t *idx;
};

static uint8_t *key_of(const rlt_topk *t, size_t i)
{
    return t->keys + i * RLT_KEY_MAX;
}

static uint64_t hash_item(const rlt_topk *t, int policy, const void *key, size_t klen)
{
    /* The policy id is mixed in after the keyed hash: finding two items with one hash still
     * needs a SipHash collision under the secret. */
    return rlt__siphash(&t->sip, key, klen, 1, 3) ^
           ((uint64_t)(uint32_t)policy * UINT64_C(0x9e3779b97f4a7c15));
}

int rlt_topk_open(rlt_topk **out, const rlt_topk_options *opt)
{
    if (out == NULL || opt == NULL) return RLT_EINVAL;
    *out = NULL;
    if (opt->k < 1 || opt->k > RLT_TOPK_MAX) return RLT_EINVAL;
    uint8_t secret[16];
    if (rlt__secret_init(secret, opt->has_secret, opt->secret)) return RLT_EIO;
    size_t m = 1;
    while (m < 2 * opt->k)
        m <<= 1;
    rlt_topk *t = calloc(1, sizeof *t);
    if (t == NULL) return RLT_ENOMEM;
    t->k = opt->k;
    t->mask = m - 1;
    memcpy(t->secret, secret, 16);
    rlt__sipkey_init(&t->sip, secret);
    t->ent = calloc(opt->k, sizeof *t->ent);
    t->keys = malloc(opt->k * RLT_KEY_MAX);
    t->heap = calloc(opt->k, sizeof *t->heap);
    t->idx = calloc(m, sizeof *t->idx);
    if (t->ent == NULL || t->keys == NULL || t->heap == NULL || t->idx == NULL) {
        rlt_topk_close(t);
        return RLT_ENOMEM;
    }
    *out = t;
    return RLT_OK;
}

void rlt_topk_close(rlt_topk *t)
{
    if (t == NULL) return;
    free(t->ent);
    free(t->keys);
    free(t->heap);
    free(t->idx);
    free(t);
}

void rlt_topk_clear(rlt_topk *t)
{
    if (t == NULL) return;
    t->size = 0;
    t->total = 0;
    t->floor = 0;
    memset(t->idx, 0, (t->mask + 1) * sizeof *t->idx);
}

size_t rlt_topk_size(const rlt_topk *t)
{
    return t ? t->size : 0;
}

size_t rlt_topk_capacity(const rlt_topk *t)
{
    return t ? t->k : 0;
}

uint64_t rlt_topk_total(const rlt_topk *t)
{
    return t ? t->total : 0;
}

uint64_t rlt_topk_floor(const rlt_topk *t)
{
    return t ? t->floor : 0;
}

/* ---- the index ------------------------------------------------------------------------- */

/* The index slot holding item (h, policy, key), or the empty slot where it would go. */
static size_t idx_find(const rlt_topk *t, uint64_t h, int policy, const void *key, size_t klen,
                       bool *found)
{
    size_t i = (size_t)h & t->mask;
    for (;;) {
        uint32_t v = t->idx[i];
        if (v == 0) {
            *found = false;
            return i;
        }
        const topk_ent *e = &t->ent[v - 1];
        if (e->hash == h && e->policy == policy && e->klen == klen &&
            memcmp(key_of(t, v - 1), key, klen) == 0) {
            *found = true;
            return i;
        }
        i = (i + 1) & t->mask;
    }
}

/* The entry index of an item, or -1. */
static long lookup(const rlt_topk *t, uint64_t h, int policy, const void *key, size_t klen)
{
    bool found;
    size_t i = idx_find(t, h, policy, key, klen, &found);
    return found ? (long)t->idx[i] - 1 : -1;
}

/* Empties index slot i and shifts the rest of its cluster back so no probe chain breaks. */
static void idx_delete(rlt_topk *t, size_t i)
{
    size_t j = i;
    for (;;) {
        t->idx[i] = 0;
        for (;;) {
            j = (j + 1) & t->mask;
            uint32_t v = t->idx[j];
            if (v == 0) return;
            size_t home = (size_t)t->ent[v - 1].hash & t->mask;
            /* v may move to i unless its home lies cyclically in (i, j]. */
            bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
            if (!stays) {
                t->idx[i] = v;
                i = j;
                break;
            }
        }
    }
}

/* ---- the heap -------------------------------------------------------------------------- */

static void heap_set(rlt_topk *t, size_t pos, uint32_t e)
{
    t->heap[pos] = e;
    t->ent[e].heap_pos = (uint32_t)pos;
}

static void sift_up(rlt_topk *t, size_t pos)
{
    uint32_t e = t->heap[pos];
    while (pos > 0) {
        size_t parent = (pos - 1) / 2;
        if (t->ent[t->heap[parent]].count <= t->ent[e].count) break;
        heap_set(t, pos, t->heap[parent]);
        pos = parent;
    }
    heap_set(t, pos, e);
}

static void sift_down(rlt_topk *t, size_t pos)
{
    uint32_t e = t->heap[pos];
    for (;;) {
        size_t c = 2 * pos + 1;
        if (c >= t->size) break;
        if (c + 1 < t->size && t->ent[t->heap[c + 1]].count < t->ent[t->heap[c]].count) c++;
        if (t->ent[e].count <= t->ent[t->heap[c]].count) break;
        heap_set(t, pos, t->heap[c]);
        pos = c;
    }
    heap_set(t, pos, e);
}

/* ---- updates --------------------------------------------------------------------------- */

/* Puts a new item with (count, error) into entry e, at index slot `slot` (empty). */
static void fill(rlt_topk *t, uint32_t e, size_t slot, uint64_t h, int policy, const void *key,
                 size_t klen, uint64_t count, uint64_t error)
{
    topk_ent *x = &t->ent[e];
    x->count = count;
    x->error = error;
    x->hash = h;
    x->policy = policy;
    x->klen = (uint16_t)klen;
    memcpy(key_of(t, e), key, klen);
    t->idx[slot] = e + 1;
}

/* Monitors a new item (not in the index; `slot` is where idx_find said it goes) with
 * (count, error): in a free counter, else in the victim's.  Returns the victim's count, or 0
 * when a counter was free. */
static uint64_t insert(rlt_topk *t, size_t slot, uint64_t h, int policy, const void *key,
                       size_t klen, uint64_t count, uint64_t error)
{
    if (t->size < t->k) {
        uint32_t e = (uint32_t)t->size++;
        fill(t, e, slot, h, policy, key, klen, count, error);
        t->heap[t->size - 1] = e;
        sift_up(t, t->size - 1);
        return 0;
    }
    uint32_t v = t->heap[0];
    uint64_t vcount = t->ent[v].count;
    bool found;
    size_t vslot =
        idx_find(t, t->ent[v].hash, t->ent[v].policy, key_of(t, v), t->ent[v].klen, &found);
    assert(found);
    idx_delete(t, vslot);
    /* The deletion may have moved entries of the new item's probe chain: look again. */
    slot = idx_find(t, h, policy, key, klen, &found);
    assert(!found);
    fill(t, v, slot, h, policy, key, klen, count, error);
    sift_down(t, 0);
    return vcount;
}

int rlt_topk_add(rlt_topk *t, int policy, const void *key, size_t klen, uint64_t count)
{
    if (t == NULL || key == NULL || count == 0) return RLT_EINVAL;
    if (klen == 0 || klen > RLT_KEY_MAX) return RLT_EKEYLEN;
    uint64_t total;
    if (__builtin_add_overflow(t->total, count, &total)) return RLT_ERANGE;
    uint64_t h = hash_item(t, policy, key, klen);
    bool found;
    size_t slot = idx_find(t, h, policy, key, klen, &found);
    if (found) {
        uint32_t e = t->idx[slot] - 1;
        uint64_t c;
        if (__builtin_add_overflow(t->ent[e].count, count, &c)) return RLT_ERANGE;
        t->ent[e].count = c;
        sift_down(t, t->ent[e].heap_pos);
    } else {
        /* The new item's floor: the victim's count when full, else the sketch's floor. */
        uint64_t base = t->size < t->k ? t->floor : t->ent[t->heap[0]].count;
        uint64_t c;
        if (__builtin_add_overflow(base, count, &c)) return RLT_ERANGE;
        uint64_t victim = insert(t, slot, h, policy, key, klen, c, base);
        if (victim > t->floor) t->floor = victim;
    }
    t->total = total;
    return RLT_OK;
}

/* ---- reading --------------------------------------------------------------------------- */

/* Whether entry a ranks before entry b in a listing. */
static bool ranks_before(const rlt_topk *t, uint32_t a, uint32_t b)
{
    const topk_ent *x = &t->ent[a], *y = &t->ent[b];
    if (x->count != y->count) return x->count > y->count;
    if (x->error != y->error) return x->error < y->error;
    if (x->policy != y->policy) return x->policy < y->policy;
    size_t n = x->klen < y->klen ? x->klen : y->klen;
    int c = memcmp(key_of(t, a), key_of(t, b), n);
    if (c != 0) return c < 0;
    return x->klen < y->klen;
}

/* The listing's bounded selection works on entry indices kept in out[].klen while it runs
 * (a heap whose root ranks last), and fills the entries in at the end. */
static void sel_down(const rlt_topk *t, rlt_topk_entry *h, size_t n, size_t pos)
{
    for (;;) {
        size_t c = 2 * pos + 1, worst = pos;
        if (c < n && ranks_before(t, (uint32_t)h[worst].klen, (uint32_t)h[c].klen)) worst = c;
        if (c + 1 < n && ranks_before(t, (uint32_t)h[worst].klen, (uint32_t)h[c + 1].klen))
            worst = c + 1;
        if (worst == pos) return;
        size_t tmp = h[pos].klen;
        h[pos].klen = h[worst].klen;
        h[worst].klen = tmp;
        pos = worst;
    }
}

size_t rlt_topk_list(const rlt_topk *t, rlt_topk_entry *out, size_t n)
{
    if (t == NULL || out == NULL) return 0;
    if (n > t->size) n = t->size;
    if (n == 0) return 0;
    for (size_t i = 0; i < n; i++)
        out[i].klen = i;
    for (size_t i = n / 2; i-- > 0;)
        sel_down(t, out, n, i);
    for (size_t i = n; i < t->size; i++) {
        if (ranks_before(t, (uint32_t)i, (uint32_t)out[0].klen)) {
            out[0].klen = i;
            sel_down(t, out, n, 0);
        }
    }
    /* Heap sort: the root (ranking last) goes to the end. */
    for (size_t m = n; m > 1; m--) {
        size_t tmp = out[0].klen;
        out[0].klen = out[m - 1].klen;
        out[m - 1].klen = tmp;
        sel_down(t, out, m - 1, 0);
    }
    for (size_t i = 0; i < n; i++) {
        size_t e = out[i].klen;
        out[i] = (rlt_topk_entry){t->ent[e].policy, key_of(t, e), t->ent[e].klen, t->ent[e].count,
                                  t->ent[e].error};
    }
    return n;
}

/* ---- copy and merge -------------------------------------------------------------------- */

int rlt_topk_copy(rlt_topk *dst, const rlt_topk *src)
{
    if (dst == NULL || src == NULL || dst == src || dst->k != src->k ||
        memcmp(dst->secret, src->secret, 16) != 0)
        return RLT_EINVAL;
    dst->size = src->size;
    dst->total = src->total;
    dst->floor = src->floor;
    memcpy(dst->ent, src->ent, src->size * sizeof *src->ent);
    memcpy(dst->heap, src->heap, src->size * sizeof *src->heap);
    memcpy(dst->idx, src->idx, (src->mask + 1) * sizeof *src->idx);
    for (size_t i = 0; i < src->size; i++)
        memcpy(key_of(dst, i), key_of(src, i), src->ent[i].klen);
    return RLT_OK;
}

int rlt_topk_merge(rlt_topk *dst, const rlt_topk *const *src, size_t n)
{
    if (dst == NULL || (src == NULL && n > 0)) return RLT_EINVAL;
    uint64_t floors = 0, total = 0;
    for (size_t i = 0; i < n; i++) {
        if (src[i] == NULL || src[i] == dst || memcmp(src[i]->secret, dst->secret, 16) != 0)
            return RLT_EINVAL;
    }
    rlt_topk_clear(dst);
    for (size_t i = 0; i < n; i++) {
        if (__builtin_add_overflow(floors, src[i]->floor, &floors) ||
            __builtin_add_overflow(total, src[i]->total, &total))
            goto range;
    }
    uint64_t dropped = 0;
    for (size_t j = 0; j < n; j++) {
        const rlt_topk *s = src[j];
        for (size_t e = 0; e < s->size; e++) {
            const topk_ent *x = &s->ent[e];
            const uint8_t *key = key_of(s, e);
            /* Each item once: from the first source that monitors it. */
            bool seen = false;
            for (size_t i = 0; i < j && !seen; i++)
                seen = lookup(src[i], x->hash, x->policy, key, x->klen) >= 0;
            if (seen) continue;
            uint64_t count = 0, error = 0;
            for (size_t i = 0; i < n; i++) {
                long at = i == j ? (long)e : lookup(src[i], x->hash, x->policy, key, x->klen);
                uint64_t c = at >= 0 ? src[i]->ent[at].count : src[i]->floor;
                uint64_t r = at >= 0 ? src[i]->ent[at].error : src[i]->floor;
                if (__builtin_add_overflow(count, c, &count) ||
                    __builtin_add_overflow(error, r, &error))
                    goto range;
            }
            if (dst->size == dst->k && count <= dst->ent[dst->heap[0]].count) {
                if (count > dropped) dropped = count;
                continue;
            }
            bool found;
            size_t slot = idx_find(dst, x->hash, x->policy, key, x->klen, &found);
            assert(!found);
            uint64_t victim = insert(dst, slot, x->hash, x->policy, key, x->klen, count, error);
            if (victim > dropped) dropped = victim;
        }
    }
    dst->floor = floors > dropped ? floors : dropped;
    dst->total = total;
    return RLT_OK;
range:
    rlt_topk_clear(dst);
    return RLT_ERANGE;
}
