/* store_beside: one thread deciding beside another that reserves and settles, or sweeps.
 * The deciding thread runs rlt_store_decide on `keys` keys "user:<n>" under
 * token_bucket:1000000000/1s for `seconds`: alone, then beside a thread that reserves and
 * settles on other keys as fast as it can, then beside one that sweeps in small steps (a
 * daemon's main thread between turns, here without pause).  What the other thread writes and
 * the decider reads nothing of (reservation counters, the sweep's mutex and cursor) must not
 * sit on a line the decider reads: the decider's rate beside it shows whether it does.  The
 * two threads' keys fall in the same shards, so some slowdown is the shard locks' own.
 * Usage: store_beside [keys=1000] [seconds=2]. */
#include "bench_store.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


typedef struct other {
    rlt_store *s;
    int id;
    int kind; /* 1: reserve and settle, 2: sweep */
    volatile int stop;
    long ops, bad;
} other;

static void *other_run(void *arg)
{
    other *o = arg;
    rlt_decision d;
    rlt_ns t = 0;
    char k[24];
    while (!o->stop) {
        t += RLT_NS_PER_US;
        if (o->kind == 1) {
            int kl = snprintf(k, sizeof k, "other:%ld", o->ops % 1000);
            uint64_t r;
            if (rlt_store_reserve(o->s, o->id, k, (size_t)kl, t, 1, 0, &d, &r) != RLT_OK || !r ||
                rlt_store_settle(o->s, o->id, k, (size_t)kl, t, r, 1, &d) != RLT_OK)
                o->bad++;
        } else {
            (void)rlt_store_sweep(o->s, t, 64);
        }
        o->ops++;
    }
    return NULL;
}

/* Decisions per second of the calling thread for `ns`, keys cycled with a stride. */
static double decide_rate(rlt_store *s, int id, bs_key *keys, const size_t *klen, long n,
                          int64_t ns, rlt_ns *now, long *bad)
{
    rlt_decision d;
    long done = 0;
    const int64_t t0 = bs_mono_ns();
    int64_t el = 0;
    while (el < ns) {
        for (int j = 0; j < 1024; j++) {
            const long i = (done + j * 7) % n;
            *now += 10;
            *bad += rlt_store_decide(s, id, keys[i], klen[i], *now, 1, &d) != RLT_OK;
        }
        done += 1024;
        el = bs_mono_ns() - t0;
    }
    return (double)done / ((double)el / 1e9);
}

int main(int argc, char **argv)
{
    long nkeys = argc > 1 ? atol(argv[1]) : 1000;
    double secs = argc > 2 ? atof(argv[2]) : 2;
    if (nkeys < 1 || !(secs > 0)) {
        fprintf(stderr, "usage: store_beside [keys >= 1] [seconds > 0]\n");
        return 2;
    }
    rlt_store *s;
    int id;
    bs_key *keys;
    size_t *klen;
    if (bs_store("token_bucket:1000000000/1s", &s, &id) || bs_keys(nkeys, &keys, &klen)) return 1;
    const int64_t ns = (int64_t)(secs * 1e9);
    rlt_ns now = 0;
    long bad = 0;
    double rate[3];
    long other_ops[3] = {0, 0, 0};
    for (int kind = 0; kind < 3; kind++) {
        other o = {.s = s, .id = id, .kind = kind};
        pthread_t th;
        if (kind && pthread_create(&th, NULL, other_run, &o)) return 1;
        rate[kind] = decide_rate(s, id, keys, klen, nkeys, ns, &now, &bad);
        if (kind) {
            o.stop = 1;
            pthread_join(th, NULL);
            other_ops[kind] = o.ops;
            bad += o.bad;
        }
    }
    printf("keys=%ld decide_alone=%.2fM/s decide_beside_reserve_settle=%.2fM/s "
           "reserve_settle_pairs=%.2fM/s decide_beside_sweep=%.2fM/s sweeps=%.2fM/s "
           "failures=%ld\n",
           nkeys, rate[0] / 1e6, rate[1] / 1e6, (double)other_ops[1] / secs / 1e6,
           rate[2] / 1e6, (double)other_ops[2] / secs / 1e6, bad);
    free(keys);
    free(klen);
    rlt_store_close(s);
    return bad != 0;
}
