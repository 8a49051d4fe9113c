/* store_layout: the store's table layout without the store's work.  1,024 shards of
 * linear-probing tables of 32-byte slots {head, key word 0, key word 1, state} at the store's
 * load (71% at 1M keys), each shard behind a spinlock on a line of its own; 16-byte keys read
 * from a pregenerated stream and hashed with the store's AES hash (store/aeshash.h); one call
 * per decision through a function that validates its arguments and returns the whole GCRA
 * decision (allowed, limit, remaining, retry_after, reset_after), as rlt_store_decide does.
 *
 * Why: at 1M keys the bare table (../shared/anchors/gcra_bench.c) keeps 16-byte slots at 48%
 * load in 32 MiB, the store 32-byte slots at 71% in 45 MB.  Run beside both, this separates
 * what the layout costs from what the store's call does on top of it (docs/performance.md,
 * round 6).  `pad=N` adds N rounds of two independent adds to each call (4 instructions a
 * round with the loop's own), to measure what one more instruction per call costs when every
 * call misses the cache.  `twochoice` puts each key in the emptier of two 2-slot lines
 * (cuckoo moves when both are full) and checks the four slots without a branch per slot;
 * `fp` probes a byte array of slot fingerprints and reads a slot only on a match, as the
 * store's big tables do since round 6 (the bytes are not counted in bytes_per_key).
 *
 * Usage: store_layout [keys=1000000] [load=0.71] [seconds=2] [pad=0] [linear|fp|twochoice]
 * The last line: layout keys=... load=... mode=... pad=... decisions_per_sec=... */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/aeshash.h"

#define NSHARDS 1024
#define STREAM (UINT64_C(1) << 22) /* 4M keys of 16 bytes, as `ratelimit bench` */

typedef struct slot {
    uint64_t head; /* 0 = empty; else the hash's top half and a nonzero low half */
    uint64_t k0, k1;
    int64_t tat;
} slot;

typedef struct shard {
    slot *t;
    uint32_t cap;  /* slots; even */
    uint32_t used; /* linear modes: occupied slots, at most cap - 1 */
    uint8_t *fp;   /* fp mode: a fingerprint byte per slot, 0 for empty */
} shard;

typedef struct {
    _Alignas(64) atomic_int v;
} spin;

typedef struct result {
    int allowed;
    int64_t limit, remaining, retry_after, reset_after;
} result;

static shard shards[NSHARDS];
static spin locks[NSHARDS];
static bool twochoice, usefp;
static long pad;
static const int64_t T = 1000000, TAU = 1000 * 1000000; /* gcra:1000/1s,burst=1000 */

#if RLT__AESHASH_X86
static rlt__aeskey aes;
static bool use_aes;
#endif

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t splitmix(uint64_t x)
{
    x += UINT64_C(0x9E3779B97F4A7C15);
    x = (x ^ (x >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94D049BB133111EB);
    return x ^ (x >> 31);
}

static inline uint32_t range(uint32_t x, uint32_t n)
{
    return (uint32_t)(((uint64_t)x * n) >> 32);
}

static inline uint64_t head_of(uint64_t h)
{
    return (h >> 32 << 32) | (uint32_t)(h >> 10) | 1; /* bits 0..9 pick the shard */
}

/* A slot's fingerprint (fp mode): a byte of the head that does not pick the home slot. */
static inline uint8_t fp_of(uint64_t head)
{
    return (uint8_t)((head >> 24) | 1);
}

/* The two lines of a two-choice key: from the head's two halves, never the same line. */
static inline uint32_t line1(uint64_t head, uint32_t nl)
{
    return range((uint32_t)(head >> 32), nl);
}

static inline uint32_t line2(uint64_t head, uint32_t nl)
{
    const uint32_t a = line1(head, nl), b = range((uint32_t)head, nl);
    return b != a ? b : (a + 1 == nl ? 0 : a + 1);
}

#if RLT__AESHASH_X86
static RLT__AESHASH_TARGET uint64_t hash_aes(const void *key, size_t klen)
{
    return rlt__aeshash_inline(&aes, key, klen);
}
#endif

static inline uint64_t hash(const void *key, size_t klen)
{
#if RLT__AESHASH_X86
    if (use_aes) return hash_aes(key, klen);
#endif
    uint64_t w[2] = {0, 0};
    memcpy(w, key, klen < 16 ? klen : 16);
    return splitmix(w[0] ^ splitmix(w[1]));
}

static inline void prefetch(const void *p)
{
    __builtin_prefetch(p, 1, 3);
}

/* Inserts key (k0, k1); false when its shard is full or a two-choice walk gives up (a key is
 * then not stored, and its lookups count as missing). */
static bool insert(uint64_t k0, uint64_t k1)
{
    const uint64_t w[2] = {k0, k1};
    const uint64_t h = hash(w, 16);
    shard *sh = &shards[h & (NSHARDS - 1)];
    slot v = {head_of(h), k0, k1, 0};
    if (!twochoice) {
        if (sh->used + 1 >= sh->cap) return false; /* keep an empty slot: lookups end */
        for (uint32_t i = range((uint32_t)(v.head >> 32), sh->cap);; i = i + 1 == sh->cap ? 0 : i + 1)
            if (!sh->t[i].head) {
                sh->t[i] = v;
                sh->fp[i] = fp_of(v.head);
                sh->used++;
                return true;
            }
    }
    const uint32_t nl = sh->cap / 2;
    for (int moves = 0; moves < 500; moves++) {
        slot *a = &sh->t[2 * line1(v.head, nl)], *b = &sh->t[2 * line2(v.head, nl)];
        const int fa = !a[0].head + !a[1].head, fb = !b[0].head + !b[1].head;
        if (fa || fb) {
            slot *l = fa >= fb ? a : b;
            l[l[0].head ? 1 : 0] = v;
            return true;
        }
        /* Move a random occupant of either line out, and place it next. */
        const uint64_t pick = splitmix(k0 + (uint64_t)moves);
        slot *l = (pick & 1) ? a : b, t = l[pick >> 1 & 1];
        l[pick >> 1 & 1] = v;
        v = t;
    }
    return false;
}

static inline slot *find(const shard *sh, uint64_t head, uint64_t k0, uint64_t k1)
{
    if (!twochoice) {
        if (usefp) { /* the store's probe in big stores: the fingerprints, then the slot */
            const uint8_t f = fp_of(head);
            for (uint32_t i = range((uint32_t)(head >> 32), sh->cap);; i = i + 1 == sh->cap ? 0 : i + 1) {
                const uint8_t g = sh->fp[i];
                if (!g) return NULL;
                if (g == f) {
                    slot *e = &sh->t[i];
                    if (e->head == head && e->k0 == k0 && e->k1 == k1) return e;
                }
            }
        }
        /* Ends: insert leaves every shard an empty slot. */
        for (uint32_t i = range((uint32_t)(head >> 32), sh->cap);; i = i + 1 == sh->cap ? 0 : i + 1) {
            slot *e = &sh->t[i];
            if (!e->head) return NULL;
            if (e->head == head && e->k0 == k0 && e->k1 == k1) return e;
        }
    }
    const uint32_t nl = sh->cap / 2;
    slot *a = &sh->t[2 * line1(head, nl)], *b = &sh->t[2 * line2(head, nl)], *e = a;
    e = a[1].head == head ? &a[1] : e;
    e = b[0].head == head ? &b[0] : e;
    e = b[1].head == head ? &b[1] : e;
    return e->head == head && e->k0 == k0 && e->k1 == k1 ? e : NULL;
}

/* One decision, library style: 0, or -1 for bad arguments, -2 for a key not in the table. */
static __attribute__((noinline)) int decide(const void *key, size_t klen, int64_t now,
                                            int64_t cost, result *r)
{
    if (!r || cost < 1 || !key || klen != 16) return -1;
    const uint64_t h = hash(key, klen), head = head_of(h);
    const uint32_t si = (uint32_t)(h & (NSHARDS - 1));
    shard *sh = &shards[si];
    if (twochoice) {
        const uint32_t nl = sh->cap / 2;
        prefetch(&sh->t[2 * line1(head, nl)]);
        prefetch(&sh->t[2 * line2(head, nl)]);
    } else {
        /* The store's probe prefetch: the home slot's line and the next one or two. */
        const uint32_t i = range((uint32_t)(head >> 32), sh->cap);
        if (usefp) __builtin_prefetch(&sh->fp[i], 0, 3);
        prefetch(&sh->t[i]);
        prefetch(&sh->t[i + 1 < sh->cap ? i + 1 : 0]);
        prefetch(&sh->t[i + 3 < sh->cap ? i + 3 : 0]);
    }
    uint64_t k0, k1;
    memcpy(&k0, key, 8);
    memcpy(&k1, (const uint8_t *)key + 8, 8);
    while (atomic_exchange_explicit(&locks[si].v, 1, memory_order_acquire))
        while (atomic_load_explicit(&locks[si].v, memory_order_relaxed)) {
        }
    slot *e = find(sh, head, k0, k1);
    int rc = -2;
    if (e) {
        const int64_t tat = e->tat > now ? e->tat : now, next = tat + T * cost, at = next - TAU;
        r->limit = TAU / T;
        if (at > now) {
            r->allowed = 0;
            r->remaining = 0;
            r->retry_after = at - now;
            r->reset_after = tat - now;
        } else {
            r->allowed = 1;
            r->remaining = (now - at) / T;
            r->retry_after = 0;
            r->reset_after = next - now;
            e->tat = next;
        }
        rc = 0;
    }
    atomic_store_explicit(&locks[si].v, 0, memory_order_release);
    uint64_t x = (uint64_t)now, y = x ^ 1;
    for (long i = 0; i < pad; i++)
        __asm__ volatile("add $1, %0\n\tadd $1, %1" : "+r"(x), "+r"(y));
    if (x == y) r->limit++; /* never: keeps the adds */
    return rc;
}

int main(int argc, char **argv)
{
    const uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
    const double load = argc > 2 ? atof(argv[2]) : 0.71, secs = argc > 3 ? atof(argv[3]) : 2;
    pad = argc > 4 ? atol(argv[4]) : 0;
    twochoice = argc > 5 && strcmp(argv[5], "twochoice") == 0;
    usefp = argc > 5 && strcmp(argv[5], "fp") == 0;
    if (argc > 5 && !twochoice && !usefp && strcmp(argv[5], "linear") != 0) {
        fprintf(stderr, "store_layout: mode is linear, fp or twochoice\n");
        return 2;
    }
    if (n < NSHARDS || load <= 0 || load >= 1 || secs <= 0 || pad < 0) {
        fprintf(stderr, "usage: store_layout [keys>=1024] [0<load<1] [seconds] [pad] "
                        "[linear|fp|twochoice]\n");
        return 2;
    }
#if RLT__AESHASH_X86
    use_aes = __builtin_cpu_supports("aes") && __builtin_cpu_supports("sse4.1");
    for (int i = 0; i < 5; i++) {
        aes.k[i][0] = splitmix(2 * (uint64_t)i + 1);
        aes.k[i][1] = splitmix(2 * (uint64_t)i + 2);
    }
#endif
    uint32_t cap = (uint32_t)((double)n / NSHARDS / load);
    cap += cap & 1;
    size_t bytes = 0;
    for (int i = 0; i < NSHARDS; i++) {
        shards[i].cap = cap;
        shards[i].t = aligned_alloc(64, (size_t)cap * sizeof(slot));
        if (!shards[i].t) return 1;
        memset(shards[i].t, 0, (size_t)cap * sizeof(slot));
        shards[i].fp = calloc(cap, 1);
        if (!shards[i].fp) return 1;
        bytes += (size_t)cap * sizeof(slot);
    }
    uint64_t *stream = malloc(STREAM * 16), unstored = 0;
    if (!stream) return 1;
    for (uint64_t id = 1; id <= n; id++)
        unstored += !insert(id, ~id);
    for (uint64_t i = 0, x = 7; i < STREAM; i++) {
        const uint64_t id = (splitmix(x++) >> 11) % n + 1;
        stream[2 * i] = id;
        stream[2 * i + 1] = ~id;
    }
    uint64_t calls = 0, allowed = 0, missing = 0;
    int64_t now = mono_ns();
    const int64_t t0 = now, end = t0 + (int64_t)(secs * 1e9);
    result r;
    for (uint64_t pos = 0; now < end;) {
        for (int j = 0; j < 256; j++, pos = (pos + 1) & (STREAM - 1)) {
            const int rc = decide(&stream[2 * pos], 16, now, 1, &r);
            if (rc == 0)
                allowed += (uint64_t)r.allowed;
            else
                missing++;
        }
        calls += 256;
        now = mono_ns(); /* once per 256 decisions, as the anchor does */
    }
    const double el = (double)(now - t0) / 1e9;
    free(stream);
    for (int i = 0; i < NSHARDS; i++) {
        free(shards[i].t);
        free(shards[i].fp);
    }
    printf("layout keys=%llu load=%.2f mode=%s pad=%ld hash=%s unstored=%llu missing=%llu "
           "allowed=%.4f bytes_per_key=%.2f decisions_per_sec=%.0f\n",
           (unsigned long long)n, load, twochoice ? "twochoice" : usefp ? "fp" : "linear", pad,
#if RLT__AESHASH_X86
           use_aes ? "aes" : "splitmix",
#else
           "splitmix",
#endif
           (unsigned long long)unstored, (unsigned long long)missing,
           calls ? (double)allowed / (double)calls : 0, (double)bytes / (double)n,
           (double)calls / el);
    return 0;
}
