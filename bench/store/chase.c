/* store_chase: the latency of one random memory read on this machine, measured by chasing a
 * random cyclic chain of pointers through a region as big as the store's table, and the
 * throughput when K independent chains are chased at once (the overlap a batch can get).
 *
 * Why: a store call on a random key among millions costs about one such read (its home slot),
 * so 1e9 / latency is the ceiling of one-call-at-a-time decisions per second; docs/performance.md
 * quotes these figures.  Then the cost of moving one written cache line from one core to the
 * other (two threads taking turns on a counter): what a shard lock costs a decision when the
 * other thread took it last.  Usage: store_chase [MiB=64] [steps=20000000] [huge=1]. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define LINE 64
#define MAXK 32

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* Chases K chains that start K/n of the cycle apart, `steps` reads in all; returns ns per
 * read.  The sink keeps the compiler from dropping the loads. */
static double chase(void **start[MAXK], int k, uint64_t steps, uintptr_t *sink)
{
    void **p[MAXK];
    memcpy(p, start, sizeof p);
    const uint64_t rounds = steps / (uint64_t)k;
    int64_t t0 = mono_ns();
    for (uint64_t r = 0; r < rounds; r++)
        for (int j = 0; j < k; j++)
            p[j] = (void **)*p[j];
    int64_t t1 = mono_ns();
    for (int j = 0; j < k; j++)
        *sink ^= (uintptr_t)p[j];
    return (double)(t1 - t0) / (double)(rounds * (uint64_t)k);
}

/* Two threads hand a counter back and forth: each waits for its parity and increments it. */
#define HANDOFFS 200000
static _Alignas(64) unsigned long turn;

static void *pong(void *arg)
{
    const unsigned long me = (unsigned long)(uintptr_t)arg;
    for (unsigned long i = me; i < HANDOFFS; i += 2) {
        while (__atomic_load_n(&turn, __ATOMIC_ACQUIRE) != i) {
        }
        __atomic_store_n(&turn, i + 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

/* ns per hand-off (one line transfer between the cores), best of 5 tries: on a shared machine
 * a try where one thread was descheduled is much slower and is discarded. */
static double handoff_ns(void)
{
    double best = 1e18;
    for (int t = 0; t < 5; t++) {
        __atomic_store_n(&turn, 0, __ATOMIC_RELAXED);
        pthread_t a, b;
        int64_t t0 = mono_ns();
        if (pthread_create(&a, NULL, pong, (void *)(uintptr_t)0)) return -1;
        if (pthread_create(&b, NULL, pong, (void *)(uintptr_t)1)) return -1;
        pthread_join(a, NULL);
        pthread_join(b, NULL);
        double ns = (double)(mono_ns() - t0) / HANDOFFS;
        if (ns < best) best = ns;
    }
    return best;
}

int main(int argc, char **argv)
{
    const size_t mib = argc > 1 ? strtoull(argv[1], NULL, 10) : 64;
    const uint64_t steps = argc > 2 ? strtoull(argv[2], NULL, 10) : 20000000;
    const int huge = argc > 3 ? atoi(argv[3]) : 1;
    if (mib < 1 || mib > 65536 || steps < 1000) {
        fprintf(stderr, "usage: store_chase [MiB 1..65536] [steps >= 1000] [huge 0|1]\n");
        return 2;
    }
    const size_t bytes = mib << 20, n = bytes / LINE;
    uint8_t *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint32_t *perm = malloc(n * sizeof *perm);
    if (mem == MAP_FAILED || !perm) {
        fprintf(stderr, "store_chase: out of memory\n");
        return 1;
    }
#ifdef MADV_HUGEPAGE
    madvise(mem, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
#endif
    /* Sattolo's shuffle: one cycle through every line, in random order. */
    uint64_t rng = 42;
    for (size_t i = 0; i < n; i++)
        perm[i] = (uint32_t)i;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)(splitmix(&rng) % i);
        uint32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (size_t i = 0; i < n; i++)
        *(void **)(mem + (size_t)i * LINE) = mem + (size_t)perm[i] * LINE;
    free(perm);
    void **start[MAXK];
    void **q = (void **)mem;
    for (size_t i = 0, j = 0; j < MAXK; i++) { /* starts spread along the cycle */
        if (i % (n / MAXK) == 0) start[j++] = q;
        q = (void **)*q;
    }
    uintptr_t sink = 0;
    chase(start, 1, steps / 10, &sink); /* warm-up: fault every page in, settle the TLB */
    printf("region %zu MiB, %zu lines, %s pages requested\n", mib, n, huge ? "2 MiB" : "4 KiB");
    const int ks[] = {1, 2, 4, 8, 16, 32};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        double ns = chase(start, ks[i], steps, &sink);
        printf("chains=%-2d ns_per_read=%.1f reads_per_sec=%.2fM%s\n", ks[i], ns, 1e3 / ns,
               ks[i] == 1 ? "  (dependent: the latency of one random read)" : "");
    }
    munmap(mem, bytes);
    printf("line_handoff_ns=%.1f  (a written cache line moving to the other core, best of 5)\n",
           handoff_ns());
    return sink == 1; /* practically never; keeps `sink` live */
}
