/* Compact sliding logs (src/store/logs.h): the store keeps a log of S slots, S between the
 * entries its window holds and four times them, instead of N.  The decisions are the core's
 * on a full state, field for field, on random traces that make logs grow and shrink (costs
 * up to past N, decide, multi-limit, reserve/settle with extra charges and refunds, reset, a
 * snapshot reloaded midway); and the store's bytes follow the entries held. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "test.h"

#include "store_test_util.h"

#define MS RLT_NS_PER_MS

static bool same_decision(const rlt_decision *a, const rlt_decision *b)
{
    return a->allowed == b->allowed && a->limit == b->limit && a->remaining == b->remaining &&
           a->retry_after == b->retry_after && a->reset_after == b->reset_after &&
           a->delay == b->delay;
}

static const char *const texts[] = {"sliding_log:40/1s", "sliding_log:300/5s", "sliding_log:1/1s"};
#define NPOL 3
#define NKEY 4

typedef struct open_resv {
    uint64_t id;
    int pol, key;
    rlt_ns at;
    int64_t estimate;
} open_resv;

static uint64_t store_bytes(rlt_store *s)
{
    rlt_store_stats st;
    rlt_store_stats_get(s, &st);
    return st.bytes;
}

TEST(compact_logs_decide_as_the_core_does_on_full_logs)
{
    char snap[64];
    snprintf(snap, sizeof snap, "/tmp/rlt-test-logs-%d.snap", (int)getpid());
    for (uint64_t trace = 0; trace < 60; trace++) {
        uint64_t x = 0x106 + trace;
        rlt_store *s = tu_store(0, false, 2);
        ASSERT(s != NULL);
        rlt_policy p[NPOL];
        int ids[NPOL];
        uint8_t *model[NPOL][NKEY];
        for (int i = 0; i < NPOL; i++) {
            char name[4] = {'p', (char)('0' + i), 0};
            ids[i] = tu_add(s, name, texts[i]);
            ASSERT(ids[i] >= 0);
            p[i] = tu_policy(texts[i]);
            for (int k = 0; k < NKEY; k++)
                model[i][k] = calloc(1, rlt_state_size(&p[i]));
        }
        open_resv open[32];
        int nopen = 0;
        rlt_ns now = 1000 * MS;
        for (int step = 0; step < 1500; step++) {
            /* Bursts at one instant (logs grow) and gaps past the window (they empty). */
            uint64_t gap = tu_below(&x, 100);
            now += gap < 60   ? 0
                   : gap < 97 ? (rlt_ns)tu_below(&x, 200) * MS
                              : (rlt_ns)tu_below(&x, 6000) * MS;
            int i = (int)tu_below(&x, NPOL), k = (int)tu_below(&x, NKEY);
            char key[4] = {'k', (char)('0' + k), 0};
            const int64_t lim = rlt_policy_limit(&p[i]);
            rlt_decision ds, dm;
            uint64_t op = tu_below(&x, 100);
            if (op < 60) {
                int64_t c = tu_below(&x, 8) ? (int64_t)tu_below(&x, 4)
                                            : (int64_t)tu_below(&x, (uint64_t)lim + 3);
                ASSERT_EQ(rlt_store_decide(s, ids[i], key, 2, now, c, &ds), RLT_OK);
                ASSERT_EQ(rlt_decide(&p[i], model[i][k], now, c, &dm), RLT_OK);
                ASSERT(same_decision(&ds, &dm));
            } else if (op < 75) { /* all or nothing over two keys of two policies */
                int j = (int)tu_below(&x, NPOL), l = (k + 1) % NKEY;
                char key2[4] = {'k', (char)('0' + l), 0};
                int64_t c1 = (int64_t)tu_below(&x, 6), c2 = (int64_t)tu_below(&x, 6);
                rlt_check c[2] = {{ids[i], key, 2, c1}, {ids[j], key2, 2, c2}};
                int refused;
                ASSERT_EQ(rlt_store_decide_multi(s, c, 2, now, &ds, &refused), RLT_OK);
                size_t n1 = rlt_state_size(&p[i]), n2 = rlt_state_size(&p[j]);
                uint8_t *a = malloc(n1), *b = malloc(n2);
                memcpy(a, model[i][k], n1);
                memcpy(b, model[j][l], n2);
                rlt_decision d1, d2;
                ASSERT_EQ(rlt_decide(&p[i], a, now, c1, &d1), RLT_OK);
                ASSERT_EQ(rlt_decide(&p[j], b, now, c2, &d2), RLT_OK);
                bool all = d1.allowed && d2.allowed;
                ASSERT_EQ(ds.allowed, all);
                if (all) {
                    memcpy(model[i][k], a, n1);
                    memcpy(model[j][l], b, n2);
                }
                free(a);
                free(b);
            } else if (op < 88 && nopen < 32) {
                int64_t e = (int64_t)tu_below(&x, (uint64_t)lim + 1);
                uint64_t rid;
                ASSERT_EQ(
                    rlt_store_reserve(s, ids[i], key, 2, now, e, 60 * RLT_NS_PER_S, &ds, &rid),
                    RLT_OK);
                ASSERT_EQ(rlt_decide(&p[i], model[i][k], now, e, &dm), RLT_OK);
                ASSERT(same_decision(&ds, &dm));
                if (rid) open[nopen++] = (open_resv){rid, i, k, now, e};
            } else if (op < 97 && nopen > 0) {
                int j = (int)tu_below(&x, (uint64_t)nopen);
                open_resv v = open[j];
                char vkey[4] = {'k', (char)('0' + v.key), 0};
                int64_t real = (int64_t)tu_below(&x, 2 * (uint64_t)rlt_policy_limit(&p[v.pol]) + 1);
                ASSERT_EQ(rlt_store_settle(s, ids[v.pol], vkey, 2, now, v.id, real, &ds), RLT_OK);
                ASSERT_EQ(
                    rlt_settle(&p[v.pol], model[v.pol][v.key], now, v.at, v.estimate, real, &dm),
                    RLT_OK);
                ASSERT(same_decision(&ds, &dm));
                open[j] = open[--nopen];
            } else if (op < 99) {
                /* A reset drops the entry; the reservations on this shard refund nothing more
                 * (reserve.c's epoch): settle them at their estimates first. */
                for (int j = 0; j < nopen; j++) {
                    char vkey[4] = {'k', (char)('0' + open[j].key), 0};
                    ASSERT_EQ(rlt_store_settle(s, ids[open[j].pol], vkey, 2, now, open[j].id,
                                               open[j].estimate, &ds),
                              RLT_OK);
                }
                nopen = 0;
                int rc = rlt_store_reset(s, ids[i], key, 2);
                ASSERT(rc == RLT_OK || rc == RLT_ENOENT);
                memset(model[i][k], 0, rlt_state_size(&p[i]));
            } else { /* a snapshot, reloaded into a new store (reservations end with it) */
                ASSERT_EQ(rlt_store_save(s, snap, now, 0), RLT_OK);
                rlt_store_close(s);
                s = tu_store(0, false, 2);
                ASSERT_EQ(rlt_store_load(s, snap, now, 0), RLT_OK);
                nopen = 0;
            }
            for (int a = 0; a < NPOL; a++)
                for (int b = 0; b < NKEY; b++) {
                    char kk[4] = {'k', (char)('0' + b), 0};
                    ASSERT_EQ(rlt_store_decide(s, ids[a], kk, 2, now, 0, &ds), RLT_OK);
                    ASSERT_EQ(rlt_decide(&p[a], model[a][b], now, 0, &dm), RLT_OK);
                    if (!same_decision(&ds, &dm))
                        fprintf(stderr, "trace %llu step %d: policy %d key %d\n",
                                (unsigned long long)trace, step, a, b);
                    ASSERT(same_decision(&ds, &dm));
                }
        }
        for (int i = 0; i < NPOL; i++)
            for (int k = 0; k < NKEY; k++)
                free(model[i][k]);
        rlt_store_close(s);
    }
    unlink(snap);
}

TEST(a_compact_log_holds_what_its_window_holds)
{
    rlt_store *s = tu_store(0, false, 1);
    int id = tu_add(s, "p", "sliding_log:1000/1s");
    rlt_decision d;
    /* The table first (one key of another name), so the deltas below are the key's alone. */
    ASSERT_EQ(rlt_store_decide(s, id, "other", 5, 0, 1, &d), RLT_OK);
    const uint64_t base = store_bytes(s);
    ASSERT_EQ(rlt_store_decide(s, id, "user:1", 6, 0, 1, &d), RLT_OK);
    const uint64_t one = store_bytes(s) - base;
    ASSERT_LE(one, 8 + 16 + 8 * 1); /* key padded to 8, header, one slot */
    for (int i = 1; i < 1000; i++)
        ASSERT_EQ(rlt_store_decide(s, id, "user:1", 6, i, 1, &d), RLT_OK);
    ASSERT(d.allowed && d.remaining == 0);
    const uint64_t full = store_bytes(s) - base;
    ASSERT_EQ(full, 8 + 16 + 8 * 1000); /* a full window: N slots, no more */
    /* The window passes; one more hit leaves one live entry, and the log shrinks to it. */
    ASSERT_EQ(rlt_store_decide(s, id, "user:1", 6, 2 * RLT_NS_PER_S, 1, &d), RLT_OK);
    ASSERT(d.allowed && d.remaining == 999);
    ASSERT_LE(store_bytes(s) - base, 8 + 16 + 8 * 2);
    /* Half a window: between the live entries and four times them. */
    for (int i = 1; i < 100; i++)
        ASSERT_EQ(rlt_store_decide(s, id, "user:1", 6, 2 * RLT_NS_PER_S + i, 1, &d), RLT_OK);
    uint64_t held = store_bytes(s) - base - 8 - 16;
    ASSERT(held >= 8 * 100 && held <= 8 * 400);
    rlt_store_close(s);
}
