/* store_settle: what charge after the response costs in the store.  One thread, `keys` keys
 * "user:<n>" under token_bucket:1000000/1s (nothing is ever denied), time advancing 1 us per
 * operation: first `ops` plain rlt_store_decide calls of cost 5, then `ops` pairs of
 * rlt_store_reserve(5) + rlt_store_settle(3) 0.5 us later (each reservation settled at once,
 * so the table holds one at a time per key at most); then, with the reservation bound filled by
 * reservations an hour long, ops / 100 reserves that the full bound refuses.
 * Usage: store_settle [keys=1000] [ops=2000000]. */
#include "bench_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


int main(int argc, char **argv)
{
    long nkeys = argc > 1 ? atol(argv[1]) : 1000, ops = argc > 2 ? atol(argv[2]) : 2000000;
    if (nkeys < 1 || ops < 1) {
        fprintf(stderr, "usage: store_settle [keys >= 1] [ops >= 1]\n");
        return 2;
    }
    rlt_store *s;
    int id;
    bs_key *keys;
    size_t *klen;
    if (bs_store("token_bucket:1000000/1s", &s, &id) || bs_keys(nkeys, &keys, &klen)) return 1;
    rlt_decision d;
    rlt_ns t = 0;
    long bad = 0;
    int64_t a = bs_mono_ns();
    for (long i = 0; i < ops; i++) {
        t += RLT_NS_PER_US;
        bad += rlt_store_decide(s, id, keys[i % nkeys], klen[i % nkeys], t, 5, &d) != RLT_OK;
    }
    int64_t b = bs_mono_ns();
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
    int64_t c = bs_mono_ns();
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
    int64_t e = bs_mono_ns();
    for (long i = 0; i < refused_ops; i++) {
        t += RLT_NS_PER_US;
        uint64_t r;
        bad += rlt_store_reserve(s, id, keys[i % nkeys], klen[i % nkeys], t, 1, 0, &d, &r) !=
               RLT_EFULL;
    }
    int64_t f = bs_mono_ns();
    printf("keys=%ld ops=%ld decide_ns=%.1f reserve_settle_pair_ns=%.1f held=%ld "
           "refused_reserve_ns=%.1f failures=%ld\n",
           nkeys, ops, (double)(b - a) / (double)ops, (double)(c - b) / (double)ops, held,
           (double)(f - e) / (double)refused_ops, bad);
    free(keys);
    free(klen);
    rlt_store_close(s);
    return bad != 0;
}
