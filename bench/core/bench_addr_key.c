/* Micro-benchmark of rlt_addr_key (never run as a test): the cost a key made from an address
 * adds to a decision, beside a GCRA decision on a hot state (bench_core's figure) in the same
 * run.  1M distinct IPv6 addresses in text, every call's output used; median of 5 passes.
 * Also the same calls over a hot set (the first 1,024 addresses, in cache: the parse and
 * format alone) and over 1,024 IPv4 texts. */
#include "ratelimit/ratelimit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N 1000000

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* CPU time: a busy machine does not inflate it */
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(void)
{
    char(*addrs)[48] = malloc((size_t)N * 48);
    if (addrs == NULL) return 1;
    unsigned long long s = 40;
    for (int i = 0; i < N; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        snprintf(addrs[i], 48, "2001:db8:%x:%x:%x::%x", (unsigned)(s >> 48),
                 (unsigned)(s >> 32) & 0xffff, (unsigned)(s >> 16) & 0xffff, (unsigned)i & 0xffff);
    }
    rlt_policy p;
    rlt_policy_parse(&p, "gcra:1000000/1s", 15, NULL, 0);
    unsigned char state[64] = {0};
    static char v4[1024][16];
    for (int i = 0; i < 1024; i++)
        snprintf(v4[i], sizeof v4[i], "%u.%u.%u.%u", 10 + (unsigned)i % 200, (unsigned)i % 256,
                 (unsigned)i * 7 % 256, (unsigned)i * 13 % 256);
    double key_ns[5], gcra_ns[5], hot_ns[5], v4_ns[5];
    unsigned long sink = 0;
    for (int r = 0; r < 5; r++) {
        char out[RLT_ADDR_KEY_MAX];
        double t0 = now_s();
        for (int i = 0; i < N; i++)
            sink += (unsigned long)rlt_addr_key(addrs[i], strlen(addrs[i]), 56, out, sizeof out) +
                    (unsigned char)out[5];
        double t1 = now_s();
        rlt_decision d;
        for (int i = 0; i < N; i++) {
            rlt_decide(&p, state, (rlt_ns)i * 1000, 1, &d);
            sink += (unsigned long)d.remaining;
        }
        double t2 = now_s();
        for (int i = 0; i < N; i++) {
            const char *a = addrs[i & 1023];
            sink += (unsigned long)rlt_addr_key(a, strlen(a), 56, out, sizeof out) +
                    (unsigned char)out[5];
        }
        double t3 = now_s();
        for (int i = 0; i < N; i++) {
            const char *a = v4[i & 1023];
            sink += (unsigned long)rlt_addr_key(a, strlen(a), 56, out, sizeof out) +
                    (unsigned char)out[5];
        }
        double t4 = now_s();
        hot_ns[r] = (t3 - t2) * 1e9 / N;
        v4_ns[r] = (t4 - t3) * 1e9 / N;
        key_ns[r] = (t1 - t0) * 1e9 / N;
        gcra_ns[r] = (t2 - t1) * 1e9 / N;
    }
    qsort(key_ns, 5, sizeof key_ns[0], cmp);
    qsort(gcra_ns, 5, sizeof gcra_ns[0], cmp);
    qsort(hot_ns, 5, sizeof hot_ns[0], cmp);
    qsort(v4_ns, 5, sizeof v4_ns[0], cmp);
    printf("rlt_addr_key (IPv6 text, /56): %.1f ns a call over 1M distinct, %.1f ns over 1,024 "
           "in cache; IPv4: %.1f ns; GCRA decision on a hot state: %.1f ns "
           "(medians of 5 x 1M; sink %lu)\n",
           key_ns[2], hot_ns[2], v4_ns[2], gcra_ns[2], sink & 1);
    free(addrs);
    return 0;
}
