/* libFuzzer target: random requests, reservations and settles (rlt_settle) with clock steps
 * forwards and backwards on a random policy that can settle, asserting after every step:
 * statuses (RLT_ERANGE leaves the state unchanged), rlt_state_valid, field ranges, and the
 * direction of every settle at its instant: a real cost above the estimate never raises
 * remaining, one below never lowers it, one equal changes no decision; and a settled state
 * (debt included) keeps retry_after exact.
 *
 * Input: 5 header bytes (algorithm, N, period, burst and penalty box, origin), then 4 bytes per
 * operation (op, cost, 16-bit clock step). */
#include "ratelimit/ratelimit.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const rlt_algo algos[] = {RLT_FIXED_WINDOW, RLT_SLIDING_LOG, RLT_SLIDING_WINDOW,
                                 RLT_TOKEN_BUCKET, RLT_GCRA};

static bool same_decision(const rlt_decision *a, const rlt_decision *b)
{
    return a->allowed == b->allowed && a->limit == b->limit && a->remaining == b->remaining &&
           a->retry_after == b->retry_after && a->reset_after == b->reset_after;
}

typedef struct resv {
    rlt_ns at;
    int64_t estimate;
} resv;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t op = 0;
    rlt_ns now = 0;
    if (size < 5) return 0;
    rlt_algo algo = algos[data[0] % 5];
    int64_t n = 1 + data[1] % 16;
    rlt_ns period = periods[data[2] % 8];
    rlt_policy p;
    if (rlt_policy_init(&p, algo, n, period, data[3] % 20, 0, 0) != RLT_OK) return 0;
    /* A penalty box now and then: settle works on the algorithm's part of the state. */
    if ((data[3] & 0x80) &&
        rlt_policy_set_block(&p, 5 * period, 1 + (data[3] >> 5 & 1), 20 * period) != RLT_OK)
        return 0;
    switch (data[4] % 4) {
    case 0:
        now = 0;
        break;
    case 1:
        now = -(rlt_ns)data[4] * period;
        break;
    case 2:
        now = INT64_MAX / 8;
        break;
    default:
        now = INT64_MIN + 1000 * RLT_NS_PER_S;
        break;
    }
    const size_t sz = rlt_state_size(&p);
    uint8_t *st = calloc(1, sz), *copy = malloc(sz);
    if (!st || !copy) abort();
    const int64_t limit = rlt_policy_limit(&p);
    resv open[8];
    size_t nopen = 0;
    for (size_t off = 5; off + 4 <= size; off += 4, op++) {
        const uint8_t *o = data + off;
        int kind = o[0] % 4;
        uint64_t raw = (uint64_t)o[2] | (uint64_t)o[3] << 8;
        __int128 step = (__int128)raw * period / 4096;
        if (o[0] & 0x80) step = -step / 4;
        now = sat_add(now, step > INT64_MAX ? INT64_MAX : (rlt_ns)step);
        rlt_decision d, before;
        if (kind <= 1 || nopen == 0) { /* a request, or a reservation when kind is 1 */
            int64_t cost = o[1] % (limit + 2);
            int rc = rlt_decide(&p, st, now, cost, &d);
            FUZZ_CHECK(rc == RLT_OK || rc == RLT_ERANGE);
            if (rc == RLT_OK && kind == 1 && d.allowed && cost <= limit && nopen < 8)
                open[nopen++] = (resv){now, cost};
        } else {
            size_t i = o[1] % nopen;
            resv v = open[i];
            /* real: 0..3 x the limit, and sometimes huge */
            int64_t real = (o[1] & 0x40) ? INT64_MAX - (int64_t)(o[1] & 7)
                                         : (int64_t)(o[1] >> 3) * limit / 8 + (o[1] & 1);
            if (rlt_decide(&p, st, now, 0, &before) != RLT_OK) continue;
            memcpy(copy, st, sz);
            int rc = rlt_settle(&p, st, now, v.at, v.estimate, real, &d);
            FUZZ_CHECK(rc == RLT_OK || rc == RLT_ERANGE);
            if (rc == RLT_ERANGE) {
                FUZZ_CHECK(memcmp(copy, st, sz) == 0);
                continue;
            }
            open[i] = open[--nopen];
            FUZZ_CHECK(d.limit == limit && d.remaining >= 0 && d.reset_after >= 0);
            if (real > v.estimate) FUZZ_CHECK(d.remaining <= before.remaining);
            if (real < v.estimate) FUZZ_CHECK(d.remaining >= before.remaining);
            if (real == v.estimate) FUZZ_CHECK(same_decision(&d, &before));
            /* A debt keeps retry_after exact: denied 1 ns before it, allowed at it (a wait
             * that saturated near INT64_MAX may be shorter: docs/algorithms.md, "Limits"). */
            if (!d.allowed && d.retry_after > 0 && d.retry_after < INT64_MAX / 4 &&
                now < INT64_MAX / 2) {
                rlt_decision e;
                memcpy(copy, st, sz);
                if (rlt_decide(&p, copy, now + d.retry_after - 1, 1, &e) == RLT_OK)
                    FUZZ_CHECK(!e.allowed);
                memcpy(copy, st, sz);
                if (rlt_decide(&p, copy, now + d.retry_after, 1, &e) == RLT_OK)
                    FUZZ_CHECK(e.allowed);
            }
        }
        FUZZ_CHECK(rlt_state_valid(&p, st));
    }
    free(st);
    free(copy);
    return 0;
}

#ifdef RLT_FUZZ_STANDALONE
#include "../standalone.h"
#endif
