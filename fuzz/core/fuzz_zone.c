/* libFuzzer target: the time-zone readers over arbitrary bytes, both as a TZif file
 * (rlt_zone_from_tzif) and as POSIX TZ rule text (rlt_zone_parse_rule).  Invariants: a status
 * is OK or the documented error; an accepted zone has offsets within +-25 h at every instant
 * tried, and its month starts strictly increase, each within a day and a half of its local
 * midnight (they are what calendar windows end at). */
#include "ratelimit/ratelimit.h"

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

static void check_zone(const rlt_zone *z)
{
    /* months of 1969..1972, 2024..2027 and 2261..2262: the epoch, now, the end of ns time */
    static const int64_t firsts[] = {-12, 648, 3492};
    for (size_t f = 0; f < sizeof firsts / sizeof firsts[0]; f++) {
        int64_t prev = INT64_MIN;
        for (int64_t m = firsts[f]; m < firsts[f] + 40; m++) {
            int64_t t;
            FUZZ_CHECK(rlt_zone_month_start(z, m, &t) == RLT_OK);
            FUZZ_CHECK(t > prev);
            int32_t off;
            FUZZ_CHECK(rlt_zone_offset(z, t, &off) == RLT_OK);
            FUZZ_CHECK(off >= -25 * 3600 && off <= 25 * 3600);
            FUZZ_CHECK(rlt_zone_offset(z, t - 1, &off) == RLT_OK);
            prev = t;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc(size ? size : 1); /* no slack: reading past `size` is an ASan error */
    if (!copy) abort();
    memcpy(copy, data, size);
    rlt_zone z;
    int rc = rlt_zone_from_tzif(&z, copy, size);
    FUZZ_CHECK(rc == RLT_OK || rc == RLT_ECORRUPT || rc == RLT_EPARSE);
    if (rc == RLT_OK) check_zone(&z);
    rc = rlt_zone_parse_rule(&z, (const char *)copy, size);
    FUZZ_CHECK(rc == RLT_OK || rc == RLT_EPARSE);
    if (rc == RLT_OK) {
        check_zone(&z);
        /* a zone the parser accepts runs a calendar policy */
        rlt_policy p;
        FUZZ_CHECK(rlt_policy_parse(&p, "fixed_window:3/1mo", 18, NULL, 0) == RLT_OK);
        p.zone = z;
        unsigned char st[16] = {0};
        rlt_decision d;
        FUZZ_CHECK(rlt_decide(&p, st, INT64_C(1767225600) * RLT_NS_PER_S, 1, &d) == RLT_OK);
        FUZZ_CHECK(d.allowed && d.reset_after > 0);
    }
    free(copy);
    return 0;
}

#ifdef RLT_FUZZ_STANDALONE
#include "../standalone.h"
#endif
