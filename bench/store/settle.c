/* store_settle: what charge after the response costs in the store.  One thread, `keys` keys
 * "user:<n>" under token_bucket:1000000/1s (nothing is ever denied), time advancing 1 us per
 * operation: first `ops` plain rlt_store_decide calls of cost 5, then `ops` pairs of
 * rlt_store_reserve(5) + rlt_store_settle(3) 0.5 us later (each reservation settled at once,
 * so the table holds one at a time per key at most); then, with the reservation bound filled by
 * reservations an hour long, ops / 100 reserves that the full bound refuses.
 * Usage: store_settle [keys=1000] [ops=2000000]. */
#include "ratelimit/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    long nkeys = argc > 1 ? atol(argv[1]) : 1000, ops = argc > 2 ? atol(argv[2]) : 2000000;
    if (nkeys < 1 || ops < 1) {
        fprintf(stderr, "usage: store_settle [keys >= 1] [ops >= 1]\n");
        return 2;
    }
    rlt_store *s;
    rlt_policy p;
    int id;
    const char *text = "token_bucket:1000000/1s";
    if (rlt_store_open(&s, NULL) || rlt_policy_parse(&p, text, strlen(text), NULL, 0) ||
        rlt_store_set_policy(s, "p", &p, RLT_CHANGE_RESET, &id))
        return 1;
    char(*keys)[24] = malloc((size_t)nkeys * sizeof *keys);
    size_t *klen = malloc((size_t)nkeys * sizeof *klen);
    if (!keys || !klen) return 1;
    for (long i = 0; i < nkeys; i++)
        klen[i] = (size_t)snprintf(keys[i], sizeof keys[i], "user:%ld", i);
    rlt_decision d;
    rlt_ns t = 0;
    long bad = 0;
    int64_t a = mono_ns();
    for (long i = 0; i < ops; i++) {
        t += RLT_NS_PER_US;
        bad += rlt_store_decide(s, id, keys[i % nkeys], klen[i % nkeys], t, 5, &d) != RLT_OK;
    }
    int64_t b = mono_ns();
    for (long i = 0; i < ops; i++) {
        t += RLT_NS_PER_US;
        uint64_t r;
        const char *k = keys[i % nkeys];
        size_t kl = klen[i % nkeys];
        if (rlt_store_reserve(s, id, k, kl, t, 5, 0, &d, &r) != RLT_OK || r == 0) {
            bad++;
            continue;
        }
        bad += rlt_store_settle(s, id, k, kl, t + RLT_NS_PER_US / 2, r, 3, &d) != RLT_OK;
    }
    int64_t c = mono_ns();
    /* The bound full: max_reservations (the default) outstanding for an hour, then refused
     * reserves (what a client holding the bound costs everyone else). */
    long held = 0;
    for (long i = 0;; i++) {
        uint64_t r;
        const char *k = keys[i % nkeys];
        t += RLT_NS_PER_US; /* refills what each reservation takes: none is denied */
        int rc = rlt_store_reserve(s, id, k, klen[i % nkeys], t, 1, 3600 * RLT_NS_PER_S, &d, &r);
        if (rc == RLT_EFULL) break;
        if (rc != RLT_OK || r == 0) { /* an error, or denied: the bound cannot be filled */
            bad++;
            break;
        }
        held++;
    }
    const long refused_ops = ops / 100 > 0 ? ops / 100 : 1;
    int64_t e = mono_ns();
    for (long i = 0; i < refused_ops; i++) {
        t += RLT_NS_PER_US;
        uint64_t r;
        bad += rlt_store_reserve(s, id, keys[i % nkeys], klen[i % nkeys], t, 1, 0, &d, &r) !=
               RLT_EFULL;
    }
    int64_t f = mono_ns();
    printf("keys=%ld ops=%ld decide_ns=%.1f reserve_settle_pair_ns=%.1f held=%ld "
           "refused_reserve_ns=%.1f failures=%ld\n",
           nkeys, ops, (double)(b - a) / (double)ops, (double)(c - b) / (double)ops, held,
           (double)(f - e) / (double)refused_ops, bad);
    free(keys);
    free(klen);
    rlt_store_close(s);
    return bad != 0;
}
