/* libFuzzer target: the policy text parser and the duration parser over arbitrary bytes.
 * Invariants: a status is OK, EPARSE or ERANGE; an error leaves a non-empty NUL-terminated
 * message; an accepted policy has a state size, formats to canonical text that parses back
 * to the same policy, and formats identically again (a fixed point). */
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

static int same(const rlt_policy *a, const rlt_policy *b)
{
    return a->algo == b->algo && a->limit == b->limit && a->period == b->period &&
           a->burst == b->burst && a->queue == b->queue && a->delay == b->delay &&
           a->scale_ == b->scale_ && a->unit_ == b->unit_ && a->cap_ == b->cap_ &&
           a->free_ == b->free_ && a->months == b->months && rlt_policy_calendar_equal(a, b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a private copy without a NUL, so reading past `size` is an ASan error */
    char *text = malloc(size ? size : 1);
    if (!text) abort();
    memcpy(text, data, size);

    rlt_policy p, q;
    char err[160];
    memset(err, 0x55, sizeof err);
    int rc = rlt_policy_parse(&p, text, size, err, sizeof err);
    FUZZ_CHECK(rc == RLT_OK || rc == RLT_EPARSE || rc == RLT_ERANGE);
    FUZZ_CHECK(memchr(err, '\0', sizeof err) != NULL);
    if (rc != RLT_OK) {
        FUZZ_CHECK(err[0] != '\0');
    } else {
        FUZZ_CHECK(err[0] == '\0');
        FUZZ_CHECK(rlt_state_size(&p) > 0);
        FUZZ_CHECK(p.limit > 0 && p.period > 0 && p.scale_ > 0 && p.unit_ > 0);
        char canon[128], again[128];
        int n = rlt_policy_format(&p, canon, sizeof canon);
        FUZZ_CHECK(n > 0 && (size_t)n < sizeof canon);
        FUZZ_CHECK(rlt_policy_parse(&q, canon, (size_t)n, err, sizeof err) == RLT_OK);
        FUZZ_CHECK(same(&p, &q));
        int m = rlt_policy_format(&q, again, sizeof again);
        FUZZ_CHECK(m == n && memcmp(canon, again, (size_t)n) == 0);
        /* a short buffer is refused, never overrun */
        char small[8];
        if ((size_t)n >= sizeof small)
            FUZZ_CHECK(rlt_policy_format(&p, small, sizeof small) == RLT_ENOSPC);
    }
    /* and without a message buffer: same status */
    FUZZ_CHECK(rlt_policy_parse(&q, text, size, NULL, 0) == rc);

    rlt_ns d = 0;
    rc = rlt_duration_parse(text, size, RLT_NS_PER_S, &d);
    FUZZ_CHECK(rc == RLT_OK || rc == RLT_EPARSE || rc == RLT_ERANGE);
    if (rc == RLT_OK) FUZZ_CHECK(d >= 0);
    free(text);
    return 0;
}

#ifdef RLT_FUZZ_STANDALONE
#include "../standalone.h"
#endif
