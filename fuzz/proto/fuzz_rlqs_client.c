/* libFuzzer target for `ratelimit quota`'s reader of RateLimitQuotaResponse
 * (src/proto/rlqs_client.c): any bytes are read action by action until the end or a refusal.
 * Invariants: the reader never reads past `size` (the input is copied to an exact-size heap
 * buffer for ASan), every pair it returns lies inside the input, it moves forward on every
 * action, a refusal has a reason, and a BucketId read is the same as itself (same_id). */
#include "proto/rlqs_client.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int inside(const char *p, size_t n, const uint8_t *m, size_t size)
{
    return n == 0 || ((const uint8_t *)p >= m && (const uint8_t *)p + n <= m + size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *m = malloc(size ? size : 1);
    if (m == NULL) return 0;
    memcpy(m, data, size);
    rlt__rlqsc_reader r;
    rlt__rlqsc_action a;
    const char *why;
    rlt__rlqsc_reader_init(&r, m, size);
    int rc;
    const uint8_t *before = r.p;
    while ((rc = rlt__rlqsc_next_action(&r, &a, &why)) == 1) {
        if (r.p <= before || r.p > m + size) abort();
        before = r.p;
        if (a.n == 0 || a.n > RLT__RLQSC_MAX_PAIRS || a.kind > RLT__RLQSC_ABANDON) abort();
        for (size_t i = 0; i < a.n; i++)
            if (!inside(a.pairs[i].key, a.pairs[i].klen, m, size) ||
                !inside(a.pairs[i].value, a.pairs[i].vlen, m, size))
                abort();
        /* Each key once: then the id read is the same as its own pairs. */
        int unique = 1;
        for (size_t i = 0; i < a.n; i++)
            for (size_t j = i + 1; j < a.n; j++)
                if (a.pairs[i].klen == a.pairs[j].klen &&
                    memcmp(a.pairs[i].key, a.pairs[j].key, a.pairs[i].klen) == 0)
                    unique = 0;
        if (unique && !rlt__rlqsc_same_id(&a, a.pairs, a.n)) abort();
    }
    if (rc == -1 && why == NULL) abort();
    free(m);
    return 0;
}

#ifdef RLT_FUZZ_STANDALONE
#include "../standalone.h"
#endif
