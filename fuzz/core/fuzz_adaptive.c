/* libFuzzer target: adaptive concurrency limits and priority classes.  Random policies (valid
 * or not: rlt_adapt_policy_check must refuse the bad ones and leave them as they were) and
 * random releases (any latency, in-flight count, outcome, clock stepping either way),
 * asserting after every step: a refused release leaves the state as it was, the limit never
 * leaves floor..ceiling; and random class decisions on a concurrency limit whose ceiling is
 * the adaptive limit: what is in flight never exceeds the class's ceiling when it was
 * admitted, and a refused request holds nothing.
 *
 * Input: 12 header bytes (algorithm, floor, span, initial, slow, backoff, probe, reserve, 4
 * spare), then 8 bytes per operation (op and class, in-flight, 16-bit latency scale, 16-bit
 * latency, 16-bit clock step). */
#include "ratelimit/adaptive.h"
#include "ratelimit/ratelimit.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MS RLT_NS_PER_MS

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t op = 0; /* FUZZ_CHECK names the operation and the clock */
    rlt_ns now = 0;
    if (size < 12) return 0;
    rlt_adapt_policy ap = {
        .algo = (rlt_adapt_algo)(data[0] % 4), /* 0 and 3 are not algorithms */
        .floor = (int64_t)data[1] - 2,
        .ceiling = (int64_t)data[1] - 2 + (int64_t)data[2] * 3 - 40,
        .initial = (int64_t)data[1] + data[3] / 4 - 2,
        .slow_ns = (rlt_ns)data[4] * MS - 10 * MS,
        .backoff_pm = data[5] < 200 ? 400 + data[5] * 3 : 0,
        .probe_ns = data[6] < 250 ? (rlt_ns)data[6] * 50 * MS : 0,
    };
    int reserve = (int)data[7] - 10;
    rlt_adapt_policy before = ap;
    int rc = rlt_adapt_policy_check(&ap);
    if (rc != RLT_OK) {
        FUZZ_CHECK(rc == RLT_EINVAL);
        FUZZ_CHECK(memcmp(&before, &ap, sizeof ap) == 0);
        return 0;
    }
    FUZZ_CHECK(ap.floor >= 1 && ap.floor <= ap.initial && ap.initial <= ap.ceiling);
    char text[64];
    snprintf(text, sizeof text, "concurrency:%lld/1s", (long long)ap.ceiling);
    rlt_policy p;
    FUZZ_CHECK(rlt_policy_parse(&p, text, strlen(text), NULL, 0) == RLT_OK);
    void *st = calloc(1, rlt_state_size(&p));
    int64_t *leases = calloc((size_t)ap.ceiling + 1, sizeof *leases);
    FUZZ_CHECK(st && leases);
    size_t nl = 0;
    rlt_adapt_state as = {0};
    for (size_t at = 12; at + 8 <= size; at += 8, op++) {
        const uint8_t *o = data + at;
        int64_t step = (int64_t)(o[6] | o[7] << 8) - 4096;
        now = now + step * 100000 < 0 ? 0 : now + step * 100000;
        rlt_class c = (rlt_class)((o[0] >> 2) % 4); /* 3: not a class */
        if ((o[0] & 3) == 0) {                      /* a release that reports */
            rlt_ns lat = (rlt_ns)(o[4] | o[5] << 8) * ((rlt_ns)1 << (o[2] % 48)) - (o[3] & 1);
            int64_t inflight = (int64_t)o[1] - 3;
            rlt_outcome out = (rlt_outcome)(o[3] % 4);
            rlt_adapt_state keep = as;
            rc = rlt_adapt_update(&ap, &as, now, lat, inflight, out);
            if (rc != RLT_OK) {
                FUZZ_CHECK(rc == RLT_EINVAL || rc == RLT_ERANGE);
                FUZZ_CHECK(memcmp(&keep, &as, sizeof as) == 0);
            }
            int64_t l = rlt_adapt_limit(&ap, &as);
            FUZZ_CHECK(l >= ap.floor && l <= ap.ceiling);
            if (nl > 0) {
                nl--;
                FUZZ_CHECK(rlt_release(&p, st, now, leases[nl]) != RLT_EINVAL);
            }
            continue;
        }
        /* a class decision under the adaptive limit's share: the policy's N is the ceiling,
         * so the reserve is taken of the ceiling here; what matters is the bound */
        rlt_decision d, peek;
        FUZZ_CHECK(rlt_decide(&p, st, now, 0, &peek) == RLT_OK);
        int64_t in_use = p.limit - peek.remaining, top = 0;
        rc = rlt_decide_class(&p, st, now, 1, c, reserve, &d);
        int eff = reserve == -1 ? p.reserve : reserve; /* -1: the policy's reserve= */
        if (rc != RLT_OK) {
            FUZZ_CHECK(rc == RLT_EINVAL && (c > RLT_CLASS_SHEDDABLE || eff < 0 || eff > 100));
            continue;
        }
        FUZZ_CHECK(rlt_class_ceiling(p.limit, eff, c, &top) == RLT_OK);
        if (d.allowed) {
            FUZZ_CHECK(in_use + 1 <= top && d.lease > 0);
            if (nl > (size_t)ap.ceiling) nl = 0; /* the forgotten ones time out */
            leases[nl++] = d.lease;
        } else {
            FUZZ_CHECK(d.lease == 0);
            FUZZ_CHECK(rlt_decide(&p, st, now, 0, &d) == RLT_OK && d.remaining == peek.remaining);
        }
    }
    free(st);
    free(leases);
    return 0;
}

#ifdef RLT_FUZZ_STANDALONE
#include "../standalone.h"
#endif
