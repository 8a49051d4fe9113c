/* libFuzzer target: random operations (decide, peek, when, release, shift, clock steps
 * forwards and backwards) on a random valid policy, asserting the invariants of ratelimit.h
 * after every step: statuses, field ranges, "denied consumes nothing", "RLT_ERANGE leaves the
 * state unchanged", exact retry_after (denied 1 ns before, allowed at it), rlt_when agreeing
 * with rlt_decide, fresh meaning "decides like zero", lease ids increasing, and GCRA making
 * the same decisions as a token bucket while the clock has not stepped back.
 *
 * Input: 7 header bytes (algorithm, N, period, burst, queue, delay, origin), then 4 bytes per
 * operation (op, cost, 16-bit clock step). */
#include "ratelimit/ratelimit.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool same_decision(const rlt_decision *a, const rlt_decision *b)
{
    return a->allowed == b->allowed && a->limit == b->limit && a->remaining == b->remaining &&
           a->retry_after == b->retry_after && a->reset_after == b->reset_after &&
           a->delay == b->delay;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t op = 0;
    rlt_ns now = 0;
    if (size < 7) return 0;
    rlt_algo algo = (rlt_algo)(1 + data[0] % 7);
    int64_t n = 1 + data[1] % 16;
    rlt_ns period = periods[data[2] % 8];
    int64_t burst = data[3] % 20, queue = data[4] % 10, delay = data[5] % (queue + 1);
    rlt_policy p, tb;
    if (rlt_policy_init(&p, algo, n, period, burst, queue, delay) != RLT_OK) return 0;
    bool shadow = algo == RLT_GCRA &&
                  rlt_policy_init(&tb, RLT_TOKEN_BUCKET, n, period, burst, 0, 0) == RLT_OK;
    switch (data[6] % 8) {
    case 0:
        now = 0;
        break;
    case 1:
        now = -(rlt_ns)data[6] * period;
        break;
    case 2:
        now = INT64_MAX / 8;
        break; /* near the GCRA range limit for scale 8 */
    case 3:
        now = INT64_MAX - 1000 * RLT_NS_PER_S;
        break; /* ERANGE territory for GCRA */
    case 4:
        now = INT64_MIN + 1000 * RLT_NS_PER_S;
        break;
    default:
        now = (rlt_ns)data[6] * 1000003;
        break;
    }
    const size_t sz = rlt_state_size(&p);
    uint8_t *st = calloc(1, sz), *copy = malloc(sz), *zero = calloc(1, sz);
    uint8_t tb_st[16] = {0};
    if (!st || !copy || !zero) abort();
    bool monotone = true;
    int64_t last_lease = 0, leases[8] = {0};
    int64_t limit = algo == RLT_TOKEN_BUCKET || algo == RLT_GCRA ? p.burst
                    : algo == RLT_LEAKY_BUCKET                   ? p.queue + 1
                                                                 : p.limit;

    for (size_t off = 7; off + 4 <= size; off += 4, op++) {
        const uint8_t *o = data + off;
        int kind = o[0] % 8;
        uint64_t raw = (uint64_t)o[2] | (uint64_t)o[3] << 8;
        /* clock step: up to 16 periods forwards, or a quarter of that backwards */
        __int128 step = (__int128)raw * period / 4096;
        if (o[0] & 0x80) {
            step = -step / 4;
            if (step != 0) monotone = false;
        }
        now = sat_add(now, step > INT64_MAX ? INT64_MAX : (rlt_ns)step);
        int64_t cost = algo == RLT_CONCURRENCY ? o[1] % 2 : o[1] % (limit + 3);
        if (kind == 4) cost = 0;
        rlt_decision d, e;

        if (kind <= 4) {
            memcpy(copy, st, sz);
            int rc = rlt_decide(&p, st, now, cost, &d);
            FUZZ_CHECK(rc == RLT_OK || rc == RLT_ERANGE);
            if (rc == RLT_ERANGE) {
                FUZZ_CHECK(memcmp(copy, st, sz) == 0);
                continue;
            }
            FUZZ_CHECK(d.limit == limit);
            FUZZ_CHECK(d.remaining >= 0 && d.remaining <= limit);
            FUZZ_CHECK(d.reset_after >= 0 && d.delay >= 0 && d.retry_after >= -1);
            /* (a denial at the very end of int64 time, where the wait saturates to 0, is
             * documented by test_extremes.c) */
            FUZZ_CHECK(d.allowed ? d.retry_after == 0
                                 : d.retry_after != 0 || now > INT64_MAX - 64 * period);
            /* -1 means the cost never fits, or (at the end of int64 time) a wait that would
             * end past INT64_MAX */
            FUZZ_CHECK(d.retry_after != -1 || (cost > limit && algo != RLT_CONCURRENCY) ||
                       now > INT64_MAX / 2);
            if (!d.allowed || cost == 0) FUZZ_CHECK(memcmp(copy, st, sz) == 0);
            if (algo == RLT_CONCURRENCY) {
                FUZZ_CHECK((d.lease > 0) == (d.allowed && cost == 1));
                if (d.lease > 0) {
                    /* (ids saturate at INT64_MAX: the end of int64 time, see the docs) */
                    FUZZ_CHECK(d.lease > last_lease || last_lease == INT64_MAX);
                    last_lease = d.lease;
                    leases[op % 8] = d.lease;
                }
            } else {
                FUZZ_CHECK(d.lease == 0);
            }
            if (algo != RLT_LEAKY_BUCKET) FUZZ_CHECK(d.delay == 0);
            /* retry_after is exact (on the state as it was) */
            /* (waits that end near INT64_MAX saturate: see test_extremes.c) */
            if (!d.allowed && d.retry_after > 0 && cost > 0 &&
                now < INT64_MAX - d.retry_after - 64 * period) {
                uint8_t *c2 = malloc(sz);
                if (!c2) abort();
                memcpy(c2, copy, sz);
                if (rlt_decide(&p, c2, now + d.retry_after - 1, cost, &e) == RLT_OK)
                    FUZZ_CHECK(!e.allowed);
                memcpy(c2, copy, sz);
                if (rlt_decide(&p, c2, now + d.retry_after, cost, &e) == RLT_OK)
                    FUZZ_CHECK(e.allowed);
                free(c2);
            }
            if (shadow) {
                rlt_decision dt;
                FUZZ_CHECK(rlt_decide(&tb, tb_st, now, cost, &dt) == RLT_OK);
                if (monotone) FUZZ_CHECK(same_decision(&d, &dt));
            }
        } else if (kind == 5 && algo != RLT_CONCURRENCY) {
            rlt_ns at = 0;
            int64_t c = cost ? cost : 1;
            memcpy(copy, st, sz);
            int rc = rlt_when(&p, st, now, c, &at);
            FUZZ_CHECK(memcmp(copy, st, sz) == 0);
            FUZZ_CHECK(rc == RLT_OK || rc == RLT_ERANGE || rc == RLT_ENEVER);
            /* (at the int64 edge rlt_decide may still fail to *charge* with RLT_ERANGE where
             * rlt_when, which charges nothing, answers: see test_boundaries.c) */
            if (rc != RLT_ERANGE && rlt_decide(&p, copy, now, c, &e) == RLT_OK) {
                if (rc == RLT_ENEVER) FUZZ_CHECK(!e.allowed && e.retry_after == -1);
                if (rc == RLT_OK) FUZZ_CHECK(at == (e.allowed ? now : sat_add(now, e.retry_after)));
            }
        } else if (kind == 5 || kind == 6) {
            if (algo == RLT_CONCURRENCY) {
                int64_t lease = sat_add(leases[o[1] % 8], o[1] & 0x80 ? 1 : 0);
                int rc = rlt_release(&p, st, now, lease);
                FUZZ_CHECK(rc == RLT_OK || rc == RLT_ENOENT);
                if (rc == RLT_OK && lease != INT64_MAX) /* saturated ids repeat */
                    FUZZ_CHECK(rlt_release(&p, st, now, lease) == RLT_ENOENT);
            } else {
                FUZZ_CHECK(rlt_release(&p, st, now, 1) == RLT_EINVAL);
            }
        } else {
            /* move the state and the clock together by whole periods: decisions unchanged */
            rlt_ns delta = ((rlt_ns)o[1] - 128) * period;
            /* near the int64 edge a GCRA/leaky tat + delta x scale_ saturates, which the
             * header allows but which loses the clipped part of the backlog: stay clear */
            if (now > INT64_MAX / 64 || now < INT64_MIN / 64) continue;
            memcpy(copy, st, sz);
            FUZZ_CHECK(rlt_state_shift(&p, st, delta) == RLT_OK);
            rlt_decision before, after;
            int r1 = rlt_decide(&p, copy, now, 0, &before);
            int r2 = rlt_decide(&p, st, now + delta, 0, &after);
            if (r1 == RLT_OK && r2 == RLT_OK) FUZZ_CHECK(same_decision(&before, &after));
            now += delta;
            if (shadow) FUZZ_CHECK(rlt_state_shift(&tb, tb_st, delta) == RLT_OK);
        }
        /* fresh means: a zeroed state decides the same (peek) */
        if (rlt_is_fresh(&p, st, now)) {
            memset(zero, 0, sz);
            if (rlt_decide(&p, st, now, 0, &d) == RLT_OK) {
                FUZZ_CHECK(rlt_decide(&p, zero, now, 0, &e) == RLT_OK);
                FUZZ_CHECK(same_decision(&d, &e));
            }
        }
    }
    free(st);
    free(copy);
    free(zero);
    return 0;
}

#ifdef RLT_FUZZ_STANDALONE
#include "../standalone.h"
#endif
