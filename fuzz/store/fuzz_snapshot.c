/* libFuzzer target for snapshot loading: any bytes given to rlt_store_load must be refused
 * (RLT_ECORRUPT) or loaded into a store that then decides, sweeps and saves without fault.
 * A refused load must leave the store as it was (one key decided before the load keeps its
 * state).  The bytes go through a file because that is the only way in. */
#include "ratelimit/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/rlt-fuzz-snap-%ld", (long)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    if (size && fwrite(data, 1, size, f) != size) {
        fclose(f);
        return 0;
    }
    fclose(f);

    rlt_store *s;
    if (rlt_store_open(&s, NULL) != RLT_OK) abort();
    rlt_policy p;
    const char *text = "gcra:3/1s";
    if (rlt_policy_parse(&p, text, strlen(text), NULL, 0) != RLT_OK) abort();
    int id;
    if (rlt_store_set_policy(s, "p", &p, RLT_CHANGE_KEEP, &id) != RLT_OK) abort();
    rlt_decision before, after;
    if (rlt_store_decide(s, id, "victim", 6, 0, 3, &before) != RLT_OK || !before.allowed) abort();

    int rc = rlt_store_load(s, path, 0, 0);
    if (rc == RLT_OK) {
        /* Whatever was loaded must be usable: decide on every policy id the file may hold. */
        for (int pid = 0; pid < 8; pid++) {
            rlt_decision d;
            (void)rlt_store_decide(s, pid, "k", 1, 1, 1, &d);
            (void)rlt_store_decide(s, pid, "victim", 6, 1, 1, &d);
        }
        (void)rlt_store_sweep(s, INT64_MAX / 4, 1u << 20);
        (void)rlt_store_save(s, path, 0, 0);
    } else {
        if (rc != RLT_ECORRUPT && rc != RLT_EIO && rc != RLT_ENOMEM) abort();
        /* Refused whole: the victim is still spent (3 of 3 used at t = 0). */
        if (rlt_store_decide(s, id, "victim", 6, 0, 1, &after) != RLT_OK || after.allowed) abort();
    }
    rlt_store_close(s);
    unlink(path);
    return 0;
}

#ifdef RLT_FUZZ_STANDALONE
#include "../standalone.h"
#endif
