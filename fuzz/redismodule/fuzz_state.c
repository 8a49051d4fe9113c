/* libFuzzer target: the Redis module's state layer (src/redismodule/state.c) over arbitrary
 * values, as a key could hold after any client's SET: the scripts' string values, sliding log
 * lists and concurrency hashes.  Invariants: the status is OK, ECORRUPT, ERANGE or ENOENT
 * (never a crash, never an out-of-range decision); an accepted value's decision has remaining
 * within [0, limit] and retry_after -1, 0 or positive, 0 exactly when allowed; a value written
 * is accepted again and decides as the state it encodes.
 *
 * Input: byte 0 picks a policy, byte 1 the cost, bytes 2..9 the instant; the rest is the value
 * (lists and hashes: items separated by '\n').  A policy with block= takes the penalty box's
 * companion value first, up to the first '\n' (none: no companion key): a block it writes
 * was started by a denied cost >= 1, parses again, and denies a peek to its end. */
#include "redismodule/state.h"

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

static const char *const texts[] = {"fixed_window:5/1s",
                                    "sliding_window:7/3s",
                                    "token_bucket:10/7s,burst=25",
                                    "gcra:7/3s,burst=2",
                                    "gcra:13/997us,burst=4",
                                    "leaky_bucket:3/1s,queue=5,delay=2",
                                    "sliding_log:5/1s",
                                    "concurrency:3/2s",
                                    "gcra:1000000/1s",
                                    "token_bucket:3/1s",
                                    "fixed_window:5/1s,block=2s*2..1m",
                                    "gcra:7/3s,burst=2,block=1s",
                                    "sliding_log:5/1s,block=3s*3..1h",
                                    "concurrency:3/2s,block=1s*2..8s",
                                    "token_bucket:10/7s,burst=25,block=500ms*10..1d",
                                    "gcra:999999/1s,block=9000d*2..13000d"};
#define NT (sizeof texts / sizeof texts[0])

static void check_decision(const rlt__mpol *m, const rlt_decision *d)
{
    FUZZ_CHECK(d->remaining >= 0 && d->remaining <= rlt_policy_limit(&m->p));
    FUZZ_CHECK(d->allowed == (d->retry_after == 0));
    FUZZ_CHECK(d->retry_after >= -1 && d->reset_after >= 0 && d->delay >= 0);
}

/* A block written: started by a denied cost >= 1 at now, for at least the first length; its
 * value parses back; a peek at now on a fresh algorithm state is denied to its end. */
static void check_block(const rlt__mpol *m, const rlt_decision *d, int64_t cost, int64_t now,
                        const rlt__mblk *b, bool changed)
{
    if (!changed) return;
    FUZZ_CHECK(!d->allowed && cost > 0 && b->set && b->level >= 0 && b->level <= 64);
    FUZZ_CHECK(b->until >= now + m->rp.blk && b->until <= now + m->rp.bmax);
    FUZZ_CHECK(d->retry_after >= (b->until - now) * RLT_NS_PER_US);
    char v[48];
    size_t vl = rlt__mblk_format(b, v);
    rlt__mblk b2;
    FUZZ_CHECK(rlt__mblk_parse(v, vl, &b2) == RLT_OK && b2.until == b->until &&
               b2.level == b->level);
    FUZZ_CHECK(rlt__mblk_ttl_ms(m, b, now, 0) >= (b->until - now + 999) / 1000);
    if (!rlt__mpol_is_string(m)) return;
    rlt_decision p;
    char out[RLT__MVAL_MAX];
    size_t ol;
    bool ch;
    FUZZ_CHECK(rlt__mstr_decide_blk(m, NULL, 0, now, 0, &p, out, &ol, &b2, &ch) == RLT_OK);
    FUZZ_CHECK(!p.allowed && !ch && ol == 0 && p.retry_after == (b->until - now) * RLT_NS_PER_US);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 10) return 0;
    const char *t = texts[data[0] % NT];
    rlt_policy p;
    rlt__mpol m;
    if (rlt_policy_parse(&p, t, strlen(t), NULL, 0) != RLT_OK || rlt__mpol_init(&m, &p) != RLT_OK)
        abort();
    int64_t cost = data[1] % 8;
    if (p.algo == RLT_CONCURRENCY) cost %= 2;
    uint64_t u;
    memcpy(&u, data + 2, 8);
    int64_t now = (int64_t)(u % ((uint64_t)RLT__NOW_MAX + 2));
    const char *val = (const char *)data + 10;
    size_t vlen = size - 10;
    rlt__mblk b = {false, 0, 0};
    bool bch = false;
    if (m.btl > 0) {
        const char *nl = memchr(val, '\n', vlen);
        if (nl && rlt__mblk_parse(val, (size_t)(nl - val), &b) != RLT_OK) return 0;
        if (nl) vlen -= (size_t)(nl + 1 - val), val = nl + 1;
    }
    rlt_decision d;
    if (rlt__mpol_is_string(&m)) {
        char out[RLT__MVAL_MAX];
        size_t ol;
        int rc = rlt__mstr_decide_blk(&m, val, vlen, now, cost, &d, out, &ol, &b, &bch);
        FUZZ_CHECK(rc == RLT_OK || rc == RLT_ECORRUPT || rc == RLT_ERANGE);
        if (rc) return 0;
        check_decision(&m, &d);
        check_block(&m, &d, cost, now, &b, bch);
        FUZZ_CHECK(ol == 0 || (d.allowed && cost > 0));
        if (ol > 0) {
            rlt_decision d2;
            char out2[RLT__MVAL_MAX];
            size_t ol2;
            FUZZ_CHECK(rlt__mstr_decide(&m, out, ol, now, 0, &d2, out2, &ol2) == RLT_OK);
            FUZZ_CHECK(ol2 == 0);
            FUZZ_CHECK(d2.remaining == d.remaining);
        }
        return 0;
    }
    /* items split at '\n' */
    const char *items[64];
    size_t lens[64], n = 0, start = 0;
    for (size_t i = 0; i <= vlen && n < 64; i++)
        if (i == vlen || val[i] == '\n') {
            items[n] = val + start;
            lens[n++] = i - start;
            start = i + 1;
        }
    void *scratch = calloc(1, rlt__mpol_scratch(&m));
    int rc;
    if (p.algo == RLT_SLIDING_LOG) {
        rlt__mlog_edit e;
        bool w;
        rc = rlt__mlog_decide_blk(&m, items, lens, n, now, cost, scratch, &d, &e, &w, &b, &bch);
        FUZZ_CHECK(rc == RLT_OK || rc == RLT_ECORRUPT || rc == RLT_ERANGE);
        if (!rc) {
            check_decision(&m, &d);
            check_block(&m, &d, cost, now, &b, bch);
            FUZZ_CHECK(!w || (d.allowed && cost > 0 && e.ilen > 0 && e.trim >= 0));
        }
    } else {
        int64_t slot;
        char v[48];
        size_t vl;
        rc = rlt__mcc_decide_blk(&m, items, lens, n / 2, now, cost, scratch, &d, &slot, v, &vl, &b,
                                 &bch);
        FUZZ_CHECK(rc == RLT_OK || rc == RLT_ECORRUPT || rc == RLT_ERANGE);
        if (!rc) {
            check_decision(&m, &d);
            check_block(&m, &d, cost, now, &b, bch);
            FUZZ_CHECK(slot < m.p.limit && (slot >= 0) == (d.lease > 0));
        }
        rc = rlt__mcc_release(&m, items, lens, n / 2, now, (int64_t)(u >> 8), scratch, &slot);
        FUZZ_CHECK(rc == RLT_OK || rc == RLT_ECORRUPT || rc == RLT_ENOENT);
    }
    free(scratch);
    return 0;
}

#ifdef RLT_FUZZ_STANDALONE
#include "../standalone.h"
#endif
