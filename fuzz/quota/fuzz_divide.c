/* libFuzzer target of the quota division (src/quota/): random sequences of streams opening and
 * closing, buckets opening, changing budget and closing, usage reports (zero and negative
 * time_elapsed, counts near 2^64, elapsed near 2^63) and sweeps, on a clock that mostly moves
 * forward and sometimes steps back, under small caps.  After every operation, for every open
 * bucket: the sums of its live assignments at the latest instant the module was given stay
 * within its budget, or, after the budget was lowered, do not grow; every status is one the
 * contract lists; an assignment sent has at least one token of each, or is deny-all, and
 * stays within the budget unless the budget was lowered and the ledger is still over it.
 *
 * Input: 6 header bytes (options), then 6 bytes per operation (op, two picks, two values,
 * clock step). */
#include "quota/quota.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/fuzz_trace.h" /* FUZZ_CHECK */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define I RLT_NS_PER_S
#define MAXB 8
#define MAXS 8

static const int64_t limits[] = {1, 2, 7, 100, 1000, 4294967295, INT64_MAX / 2, INT64_MAX};
static const rlt_ns big_periods[] = {
    1, 1000, RLT_NS_PER_MS, RLT_NS_PER_S, 60 * RLT_NS_PER_S, INT64_MAX / 4, INT64_MAX, 3};
static const uint64_t counts[] = {
    0, 1, 5, 1000, UINT64_C(1) << 62, UINT64_MAX / 2, UINT64_MAX - 1, UINT64_MAX};
static const rlt_ns elapsed[] = {0, -1, 1, I / 2, I, 10 * I, INT64_MAX, INT64_MIN};

typedef struct bstate {
    bool open;
    uint32_t id;
    int64_t q, b;           /* the budget's Q and B */
    int64_t last_q, last_b; /* the sums at the previous check */
} bstate;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t op = 0;
    rlt_ns now = 0, latest;
    if (size < 6) return 0;
    rlt__quota_options o = {.report_interval = I};
    o.ttl = (data[0] & 15) * I;
    if (o.ttl && o.ttl < 3 * I) o.ttl = 0;
    o.max_streams = 1 + data[1] % MAXS;
    o.max_buckets = 1 + data[2] % MAXB;
    o.max_buckets_per_stream = 1 + data[3] % 4;
    o.max_members = 1 + data[4] % 32;
    o.headroom_permille = (uint32_t)data[5] * 4;
    o.reserve_permille = data[5] % 7 == 0 ? 500 : 0;
    o.change_permille = data[0] >> 4 ? (uint32_t)(data[0] >> 4) * 60 : 0;
    rlt__quota *q;
    if (rlt__quota_open(&q, &o) != RLT_OK) abort();
    now = (rlt_ns)(data[1] >> 3) * (INT64_MAX / 32) - INT64_MAX / 2;
    latest = INT64_MIN;
    bstate b[MAXB] = {0};
    uint32_t streams[MAXS];
    int ns = 0;
    for (size_t off = 6; off + 6 <= size; off += 6, op++) {
        const uint8_t *d = data + off;
        rlt_ns step = (rlt_ns)d[5] * (I / 32);
        now = (d[0] & 0x80) ? now - step / 8 : (now > INT64_MAX - step ? INT64_MAX : now + step);
        bstate *k = &b[d[1] % MAXB];
        int rc;
        switch (d[0] & 7) {
        case 0: {
            uint32_t id;
            rc = rlt__quota_stream_open(q, &id);
            FUZZ_CHECK(rc == RLT_OK || rc == RLT_EFULL);
            FUZZ_CHECK(rc != RLT_EFULL || ns == (int)o.max_streams);
            if (rc == RLT_OK) streams[ns++] = id;
            break;
        }
        case 1:
            if (ns == 0) break;
            rc = rlt__quota_stream_close(q, streams[d[2] % ns]);
            FUZZ_CHECK(rc == RLT_OK);
            streams[d[2] % ns] = streams[ns - 1];
            ns--;
            break;
        case 2:
        case 3: {
            rlt__quota_budget bu = {limits[d[2] & 7], big_periods[d[2] >> 3 & 7],
                                    (int64_t)counts[d[3] & 7] % 5000 + (d[3] >> 7), 0};
            if (d[3] & 0x40) bu.fill_interval = periods[d[3] >> 3 & 7]; /* fuzz_trace.h's */
            bool opening = !k->open && (d[0] & 7) == 2;
            if (opening) {
                rc = rlt__quota_bucket_open(q, &bu, &k->id);
                FUZZ_CHECK(rc == RLT_OK || rc == RLT_EINVAL || rc == RLT_ERANGE || rc == RLT_EFULL);
                k->open = rc == RLT_OK;
                k->last_q = k->last_b = 0;
            } else if (k->open) {
                rc = rlt__quota_bucket_budget(q, k->id, &bu);
                FUZZ_CHECK(rc == RLT_OK || rc == RLT_EINVAL || rc == RLT_ERANGE);
            } else {
                break;
            }
            if (rc == RLT_OK) {
                rlt__quota_totals t;
                FUZZ_CHECK(rlt__quota_bucket_totals(q, k->id, latest, &t) == RLT_OK);
                k->q = t.fill_capacity;
                k->b = t.burst;
                /* a new budget may be zero (Redis mode: no claim), an opening one not */
                int64_t least = opening ? 1 : 0;
                FUZZ_CHECK(k->q >= least && k->q <= RLT__QUOTA_TOKENS_MAX && k->b >= least);
            }
            break;
        }
        case 4:
            if (!k->open) break;
            FUZZ_CHECK(rlt__quota_bucket_close(q, k->id) == RLT_OK);
            k->open = false; /* its id may come back after a sweep: never use it again */
            break;
        case 5:
            rlt__quota_sweep(q, now);
            if (now > latest) latest = now; /* the module's clock: the latest `now` it took */
            break;
        default: {
            if (ns == 0 || !k->open) break;
            rlt__quota_usage u = {counts[d[2] & 7], counts[d[2] >> 3 & 7], elapsed[d[3] & 7]};
            rlt__quota_answer a;
            rc = rlt__quota_report(q, streams[d[4] % ns], k->id, &u, now, &a);
            if (u.elapsed < 0) {
                FUZZ_CHECK(rc == RLT_EINVAL);
                break;
            }
            FUZZ_CHECK(rc == RLT_OK || rc == RLT_EFULL);
            if (rc == RLT_OK && now > latest) latest = now;
            if (rc || a.reason == RLT__QUOTA_KEEP) break;
            const rlt__quota_assignment *x = &a.assignment;
            FUZZ_CHECK(x->deny_all ? x->tokens_per_fill == 0 && x->max_tokens == 0
                                   : x->tokens_per_fill >= 1 && x->max_tokens >= 1);
            /* never more than the budget, unless it was lowered and is still over */
            FUZZ_CHECK(x->deny_all || (x->tokens_per_fill <= k->q && x->max_tokens <= k->b) ||
                       k->last_q > k->q || k->last_b > k->b);
            break;
        }
        }
        for (int i = 0; i < MAXB; i++) {
            if (!b[i].open) continue;
            rlt__quota_totals t;
            FUZZ_CHECK(rlt__quota_bucket_totals(q, b[i].id, latest, &t) == RLT_OK);
            /* within the budget, or (after a decrease) not growing */
            FUZZ_CHECK(t.tokens_per_fill <= b[i].q || t.tokens_per_fill <= b[i].last_q);
            FUZZ_CHECK(t.max_tokens <= b[i].b || t.max_tokens <= b[i].last_b);
            FUZZ_CHECK(t.active <= t.members && t.members <= o.max_members);
            b[i].last_q = t.tokens_per_fill;
            b[i].last_b = t.max_tokens;
        }
    }
    rlt__quota_close(q);
    return 0;
}

#ifdef RLT_FUZZ_STANDALONE
#include "../standalone.h"
#endif
