/* The store with the options every algorithm takes: a penalty box survives the sweep and a
 * snapshot and is cleared by a reset; jitter is rlt_jitter of the key at the caller's instant
 * on every decision path (single, batch, tier, multi).  test_store_model.c checks both on
 * random operations against the naive map. */
#include <stdlib.h>
#include <unistd.h>

#include "test.h"

#include "store_test_util.h"

#define S RLT_NS_PER_S

TEST(store_penalty_box_outlives_the_sweep_and_a_reset_clears_it)
{
    rlt_store *s = tu_store(0, false, 4);
    ASSERT(s);
    int id = tu_add(s, "login", "fixed_window:1/1s,block=10m");
    ASSERT(id >= 0);
    rlt_decision d;
    ASSERT_EQ(rlt_store_decide(s, id, "ip:1", 4, 0, 1, &d), RLT_OK);
    ASSERT_EQ(rlt_store_decide(s, id, "ip:1", 4, 1, 1, &d), RLT_OK);
    ASSERT(!d.allowed);
    ASSERT_EQ(d.retry_after, 600 * S);
    /* Long after the window, still blocked: the sweep must not drop the key as fresh. */
    ASSERT_EQ(rlt_store_sweep(s, 300 * S, 1000), 0);
    ASSERT_EQ(rlt_store_decide(s, id, "ip:1", 4, 300 * S, 1, &d), RLT_OK);
    ASSERT(!d.allowed);
    ASSERT_EQ(d.retry_after, 300 * S + 1);
    ASSERT_EQ(rlt_store_reset(s, id, "ip:1", 4), RLT_OK);
    ASSERT_EQ(rlt_store_decide(s, id, "ip:1", 4, 300 * S + 1, 1, &d), RLT_OK);
    ASSERT(d.allowed);
    /* After the block's end the key is fresh and swept. */
    ASSERT_EQ(rlt_store_decide(s, id, "ip:2", 4, 0, 1, &d), RLT_OK);
    ASSERT_EQ(rlt_store_decide(s, id, "ip:2", 4, 0, 1, &d), RLT_OK);
    ASSERT(rlt_store_sweep(s, 601 * S, 1000) >= 1);
    rlt_store_close(s);
}

TEST(store_snapshot_keeps_block_and_jitter_policies_and_the_block_state)
{
    char dir[] = "/tmp/rlt-store-block-XXXXXX", path[64];
    ASSERT(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/snap", dir);
    rlt_store *a = tu_store(0, false, 4), *b = tu_store(0, false, 4);
    ASSERT(a && b);
    int id = tu_add(a, "api", "gcra:2/1s,block=1m*2..1h,jitter=10%");
    ASSERT(id >= 0);
    ASSERT(tu_add(a, "plain", "gcra:2/1s") >= 0);
    rlt_decision d, e;
    for (int i = 0; i < 3; i++)
        ASSERT_EQ(rlt_store_decide(a, id, "k", 1, 0, 1, &d), RLT_OK);
    ASSERT(!d.allowed);
    ASSERT_EQ(rlt_store_save(a, path, 5 * S, 0), RLT_OK);
    ASSERT_EQ(rlt_store_load(b, path, 5 * S, 0), RLT_OK);
    rlt_policy p;
    ASSERT_EQ(rlt_store_get_policy(b, id, &p), RLT_OK);
    char text[96];
    ASSERT(rlt_policy_format(&p, text, sizeof text) > 0);
    ASSERT(strcmp(text, "gcra:2/1s,block=1m*2..1h,jitter=10%") == 0);
    ASSERT_EQ(rlt_store_decide(a, id, "k", 1, 6 * S, 1, &d), RLT_OK);
    ASSERT_EQ(rlt_store_decide(b, id, "k", 1, 6 * S, 1, &e), RLT_OK);
    ASSERT(!d.allowed && !e.allowed);
    ASSERT_EQ(d.retry_after, e.retry_after);
    ASSERT(e.retry_after >= 54 * S && e.retry_after <= 54 * S + 54 * S / 10);
    rlt_store_close(a);
    rlt_store_close(b);
    unlink(path);
    rmdir(dir);
}

TEST(store_jitter_is_rlt_jitter_of_the_key_on_single_batch_and_multi_paths)
{
    rlt_store *s = tu_store(0, false, 4);
    ASSERT(s);
    int id = tu_add(s, "j", "gcra:1/42s,jitter=10%");
    ASSERT(id >= 0);
    rlt_policy p;
    ASSERT_EQ(rlt_store_get_policy(s, id, &p), RLT_OK);
    char key[16][8];
    rlt_key keys[16];
    for (int k = 0; k < 16; k++) {
        int n = snprintf(key[k], sizeof key[k], "c%d", k);
        keys[k] = (rlt_key){key[k], (size_t)n};
        rlt_decision d;
        ASSERT_EQ(rlt_store_decide(s, id, key[k], (size_t)n, 0, 1, &d), RLT_OK);
        ASSERT(d.allowed);
    }
    rlt_decision out[16];
    ASSERT_EQ(rlt_store_decide_batch(s, id, keys, 16, 1, NULL, out, NULL), RLT_OK);
    int distinct = 0;
    for (int k = 0; k < 16; k++) {
        rlt_ns want = rlt_jitter(&p, rlt_hash_fnv1a(keys[k].key, keys[k].klen), 1, 42 * S - 1);
        ASSERT(!out[k].allowed);
        ASSERT_EQ(out[k].retry_after, want);
        if (k && out[k].retry_after != out[k - 1].retry_after) distinct++;
        rlt_decision d;
        ASSERT_EQ(rlt_store_decide(s, id, keys[k].key, keys[k].klen, 2, 1, &d), RLT_OK);
        ASSERT_EQ(d.retry_after,
                  rlt_jitter(&p, rlt_hash_fnv1a(keys[k].key, keys[k].klen), 2, 42 * S - 2));
        rlt_check c = {id, keys[k].key, keys[k].klen, 1};
        int refused;
        ASSERT_EQ(rlt_store_decide_multi(s, &c, 1, 3, &d, &refused), RLT_OK);
        ASSERT_EQ(d.retry_after,
                  rlt_jitter(&p, rlt_hash_fnv1a(keys[k].key, keys[k].klen), 3, 42 * S - 3));
    }
    ASSERT(distinct >= 12);
    rlt_store_close(s);
}

TEST(store_multi_limit_denial_starts_the_box_of_the_limit_that_denied_only)
{
    rlt_store *s = tu_store(0, false, 4);
    ASSERT(s);
    int boxed = tu_add(s, "boxed", "fixed_window:1/1s,block=1m");
    int other = tu_add(s, "other", "fixed_window:5/1s,block=1m");
    ASSERT(boxed >= 0 && other >= 0);
    rlt_check c[2] = {{boxed, "u", 1, 1}, {other, "u", 1, 1}};
    rlt_decision d;
    int refused;
    ASSERT_EQ(rlt_store_decide_multi(s, c, 2, 0, &d, &refused), RLT_OK);
    ASSERT(d.allowed);
    ASSERT_EQ(rlt_store_decide_multi(s, c, 2, 1, &d, &refused), RLT_OK);
    ASSERT(!d.allowed);
    ASSERT_EQ(refused, 0);
    ASSERT_EQ(d.retry_after, 60 * S);
    /* "other" allowed and charged nothing: 4 left, no block. */
    ASSERT_EQ(rlt_store_decide(s, other, "u", 1, 2, 0, &d), RLT_OK);
    ASSERT(d.allowed);
    ASSERT_EQ(d.remaining, 4);
    ASSERT_EQ(rlt_store_decide(s, boxed, "u", 1, 30 * S, 1, &d), RLT_OK);
    ASSERT(!d.allowed);
    ASSERT_EQ(d.retry_after, 30 * S + 1);
    rlt_store_close(s);
}
