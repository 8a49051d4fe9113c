/* libFuzzer target: the typed-cost texts (include/ratelimit/usage.h) over arbitrary bytes.  The
 * input is split at its first NUL: a weighting text, then a usage text.  Invariants: a status is
 * OK, EINVAL or ERANGE; an accepted weighting formats to text that parses back to the same
 * weights; an accepted usage has distinct valid names and counts in range; the cost is exact
 * (against 128-bit arithmetic) or refused with ERANGE. */
#include "ratelimit/ratelimit.h"
#include "ratelimit/usage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(c)                                                                              \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #c);              \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t wl = nul ? (size_t)(nul - data) : size, ul = nul ? size - wl - 1 : 0;
    /* private copies without a NUL, so reading past the end is an ASan error */
    char *wt = malloc(wl ? wl : 1), *ut = malloc(ul ? ul : 1);
    if (!wt || !ut) abort();
    memcpy(wt, data, wl);
    if (ul) memcpy(ut, nul + 1, ul);
    rlt_weights w;
    rlt_usage u;
    int rw = rlt_weights_parse(wt, wl, &w), ru = rlt_usage_parse(ut, ul, &u);
    FUZZ_CHECK(rw == RLT_OK || rw == RLT_EINVAL || rw == RLT_ERANGE);
    FUZZ_CHECK(ru == RLT_OK || ru == RLT_EINVAL || ru == RLT_ERANGE);
    if (rw == RLT_OK) {
        FUZZ_CHECK(w.n <= RLT_USAGE_NAMES && w.base >= 0 && w.base <= RLT_USAGE_VALUE_MAX);
        char buf[512];
        size_t n = rlt_weights_format(&w, buf, sizeof buf);
        FUZZ_CHECK(n > 0);
        rlt_weights w2;
        FUZZ_CHECK(rlt_weights_parse(buf, n, &w2) == RLT_OK);
        FUZZ_CHECK(w2.n == w.n && w2.base == w.base);
        for (uint32_t j = 0; j < w.n; j++)
            FUZZ_CHECK(strcmp(w.term[j].name, w2.term[j].name) == 0 &&
                       w.term[j].weight == w2.term[j].weight);
    }
    if (ru == RLT_OK) {
        FUZZ_CHECK(u.n >= 1 && u.n <= RLT_USAGE_NAMES);
        for (uint32_t i = 0; i < u.n; i++) {
            FUZZ_CHECK(u.item[i].count >= 0 && u.item[i].count <= RLT_USAGE_VALUE_MAX);
            for (uint32_t j = 0; j < i; j++)
                FUZZ_CHECK(strcmp(u.item[i].name, u.item[j].name) != 0);
        }
    }
    if (rw == RLT_OK && ru == RLT_OK) {
        __int128 want = w.base;
        for (uint32_t i = 0; i < u.n; i++)
            for (uint32_t j = 0; j < w.n; j++)
                if (strcmp(u.item[i].name, w.term[j].name) == 0)
                    want += (__int128)u.item[i].count * w.term[j].weight;
        int64_t c = -1;
        int rc = rlt_weights_cost(&w, &u, &c);
        if (want > INT64_MAX)
            FUZZ_CHECK(rc == RLT_ERANGE && c == -1);
        else
            FUZZ_CHECK(rc == RLT_OK && c == (int64_t)want);
    }
    free(wt);
    free(ut);
    return 0;
}

#ifdef RLT_FUZZ_STANDALONE
#include "../standalone.h"
#endif
