/* The module's pure state layer (src/redismodule/state.c), without Redis and under the
 * sanitizers: the scripts' value formats read and written exactly, every value that is no
 * state refused, and the numeric traps of the command arguments. */
#include "test.h"

#include "redismodule/state.h"

static rlt__mpol mpol(const char *text)
{
    rlt_policy p;
    rlt__mpol m;
    memset(&m, 0, sizeof m);
    if (rlt_policy_parse(&p, text, strlen(text), NULL, 0) != RLT_OK) abort();
    if (rlt__mpol_init(&m, &p) != RLT_OK) abort();
    return m;
}

static int dec(const char *text, const char *val, int64_t now_us, int64_t cost, rlt_decision *d,
               char *out, size_t *olen)
{
    rlt__mpol m = mpol(text);
    int rc = rlt__mstr_decide(&m, val, val ? strlen(val) : 0, now_us, cost, d, out, olen);
    if (*olen < RLT__MVAL_MAX) out[*olen] = '\0';
    return rc;
}

TEST(gcra_values_are_written_as_the_gcra_script_writes_them)
{
    rlt_decision d;
    char out[RLT__MVAL_MAX];
    size_t ol;
    /* scale 1 (100 per 1 s: 10 ms per request): "t" */
    ASSERT_EQ(dec("gcra:100/1s", NULL, 1000000, 1, &d, out, &ol), RLT_OK);
    ASSERT(d.allowed);
    ASSERT_STR_EQ(out, "1010000");
    /* scale 7 (7 per 3 s): "t:f" with 0 <= f < 7 */
    ASSERT_EQ(dec("gcra:7/3s,burst=2", NULL, 1000000, 1, &d, out, &ol), RLT_OK);
    ASSERT_STR_EQ(out, "1428571:3");
    ASSERT_EQ(dec("gcra:7/3s,burst=2", "1428571:3", 1000000, 1, &d, out, &ol), RLT_OK);
    ASSERT_STR_EQ(out, "1857142:6");
    ASSERT_EQ(dec("gcra:7/3s,burst=2", "1857142:6", 1000000, 1, &d, out, &ol), RLT_OK);
    ASSERT(!d.allowed);
    ASSERT_EQ(ol, 0); /* denied: nothing written */
}

TEST(token_bucket_and_window_values_round_trip)
{
    rlt_decision d;
    char out[RLT__MVAL_MAX];
    size_t ol;
    ASSERT_EQ(dec("token_bucket:3/1s", NULL, 5000000, 1, &d, out, &ol), RLT_OK);
    ASSERT_STR_EQ(out, "1000000:5000000"); /* used: one unit = 10^6 (scale 3), last charge */
    ASSERT_EQ(dec("token_bucket:3/1s", "1000000:5000000", 5000000, 2, &d, out, &ol), RLT_OK);
    ASSERT_STR_EQ(out, "3000000:5000000");
    ASSERT_EQ(dec("fixed_window:5/1s", "4:2", 4500000, 1, &d, out, &ol), RLT_OK);
    ASSERT_STR_EQ(out, "4:3");
    ASSERT_EQ(d.reset_after, 500 * RLT_NS_PER_MS);
    ASSERT_EQ(dec("sliding_window:5/1s", "4:0:2", 5250000, 1, &d, out, &ol), RLT_OK);
    ASSERT_STR_EQ(out, "5:2:1"); /* rolled: the old current window is now the previous */
    ASSERT_EQ(rlt__mttl_ms(&d, 0), 1750);
    ASSERT_EQ(rlt__mttl_ms(&d, 60000), 60000);
}

TEST(values_that_are_no_state_of_the_policy_are_refused)
{
    rlt_decision d;
    char out[RLT__MVAL_MAX];
    size_t ol;
    const char *gcra_bad[] = {"", "x", "1:", ":1", "1:2:3", "1:7", "1:-1", "-0", "1.5"};
    for (size_t i = 0; i < sizeof gcra_bad / sizeof gcra_bad[0]; i++)
        ASSERT_EQ(dec("gcra:7/3s", gcra_bad[i], 1000, 1, &d, out, &ol), RLT_ECORRUPT);
    /* A count above N is a settle's debt (rlt_settle), a state; a negative one is none. */
    ASSERT_EQ(dec("fixed_window:5/1s", "1:6", 1000, 1, &d, out, &ol), RLT_OK);
    ASSERT(!d.allowed);
    ASSERT_EQ(dec("fixed_window:5/1s", "1:-1", 1000, 1, &d, out, &ol), RLT_ECORRUPT);
    ASSERT_EQ(dec("sliding_window:5/1s", "1:2", 1000, 1, &d, out, &ol), RLT_ECORRUPT);
    /* a window whose instants pass 2^53 us (found by fuzz_state) */
    ASSERT_EQ(dec("fixed_window:5/1s", "100001500000:2", 1000, 1, &d, out, &ol), RLT_ECORRUPT);
    ASSERT_EQ(dec("sliding_window:5/1s", "-100001500000:0:2", 1000, 1, &d, out, &ol), RLT_ECORRUPT);
    ASSERT_EQ(dec("token_bucket:3/1s", "3000001:0", 1000, 1, &d, out, &ol), RLT_OK); /* a debt */
    ASSERT(!d.allowed);
    ASSERT_EQ(dec("token_bucket:3/1s", "-1:0", 1000, 1, &d, out, &ol), RLT_ECORRUPT);
    ASSERT_EQ(dec("token_bucket:3/1s", "1:99999999999999999", 1000, 1, &d, out, &ol), RLT_ECORRUPT);
}

TEST(sliding_log_edits_are_the_scripts_list_edits)
{
    rlt__mpol m = mpol("sliding_log:5/1s");
    void *scratch = calloc(1, rlt__mpol_scratch(&m));
    rlt_decision d;
    rlt__mlog_edit e;
    bool w;
    /* empty: delete + push */
    ASSERT_EQ(rlt__mlog_decide(&m, NULL, NULL, 0, 2000000, 2, scratch, &d, &e, &w), RLT_OK);
    ASSERT(w && e.del);
    ASSERT_STR_EQ(e.item, "2000000:2");
    /* same instant: LSET the last run */
    const char *items[] = {"1000000:1", "2000000:2"};
    size_t lens[] = {9, 9};
    ASSERT_EQ(rlt__mlog_decide(&m, items, lens, 2, 2000000, 1, scratch, &d, &e, &w), RLT_OK);
    ASSERT(w && !e.del && e.lset && e.trim == 1); /* the run at 1 s expired exactly now */
    ASSERT_STR_EQ(e.item, "2000000:3");
    ASSERT_EQ(d.remaining, 2);
    /* full: denied, nothing written */
    const char *full[] = {"2000000:5"};
    size_t fl[] = {9};
    ASSERT_EQ(rlt__mlog_decide(&m, full, fl, 1, 2100000, 1, scratch, &d, &e, &w), RLT_OK);
    ASSERT(!d.allowed && !w);
    ASSERT_EQ(d.retry_after, 900 * RLT_NS_PER_MS);
    const char *unsorted[] = {"2000000:1", "1000000:1"};
    ASSERT_EQ(rlt__mlog_decide(&m, unsorted, lens, 2, 2100000, 1, scratch, &d, &e, &w),
              RLT_ECORRUPT);
    const char *toomany[] = {"2000000:6"};
    ASSERT_EQ(rlt__mlog_decide(&m, toomany, fl, 1, 2100000, 1, scratch, &d, &e, &w), RLT_ECORRUPT);
    free(scratch);
}

TEST(concurrency_hash_leases_and_releases)
{
    rlt__mpol m = mpol("concurrency:2/2s");
    void *scratch = calloc(1, rlt__mpol_scratch(&m));
    rlt_decision d;
    int64_t slot;
    char val[48];
    size_t vl;
    ASSERT_EQ(rlt__mcc_decide(&m, NULL, NULL, 0, 1000000, 1, scratch, &d, &slot, val, &vl), RLT_OK);
    ASSERT(d.allowed && slot == 0 && d.lease == 1000000);
    val[vl] = '\0';
    ASSERT_STR_EQ(val, "1000000:3000000");
    const char *kv[] = {"n", "1000000", "s0", "1000000:3000000"};
    size_t kl[] = {1, 7, 2, 15};
    ASSERT_EQ(rlt__mcc_decide(&m, kv, kl, 2, 1000000, 1, scratch, &d, &slot, val, &vl), RLT_OK);
    ASSERT(d.allowed && slot == 1 && d.lease == 1000001); /* ids grow past the last one */
    ASSERT_EQ(rlt__mcc_release(&m, kv, kl, 2, 1500000, 1000000, scratch, &slot), RLT_OK);
    ASSERT_EQ(slot, 0);
    ASSERT_EQ(rlt__mcc_release(&m, kv, kl, 2, 3500000, 1000000, scratch, &slot), RLT_ENOENT);
    ASSERT_EQ(slot, 0); /* expired: still deleted, but not live */
    ASSERT_EQ(rlt__mcc_release(&m, kv, kl, 2, 1500000, 42, scratch, &slot), RLT_ENOENT);
    const char *bad[] = {"s9", "1:2"};
    size_t bl[] = {2, 3};
    ASSERT_EQ(rlt__mcc_decide(&m, bad, bl, 1, 1000000, 1, scratch, &d, &slot, val, &vl),
              RLT_ECORRUPT);
    free(scratch);
}

TEST(policies_beyond_the_scripts_bounds_are_refused)
{
    rlt_policy p;
    rlt__mpol m;
    ASSERT_EQ(rlt_policy_parse(&p, "gcra:3/1500ns", 13, NULL, 0), RLT_OK);
    ASSERT_EQ(rlt__mpol_init(&m, &p), RLT_EINVAL);
    ASSERT_EQ(rlt_policy_parse(&p, "token_bucket:1/1000s,burst=2000000", 34, NULL, 0), RLT_OK);
    ASSERT_EQ(rlt__mpol_init(&m, &p), RLT_ERANGE);
}

TEST(calendar_windows_are_refused_inside_redis)
{
    rlt_policy p;
    rlt__mpol m;
    const char *text = "fixed_window:10/1mo,tz=Europe/Paris";
    ASSERT_EQ(rlt_policy_parse(&p, text, strlen(text), NULL, 0), RLT_OK);
    ASSERT_EQ(rlt__mpol_init(&m, &p), RLT_EINVAL);
    ASSERT_EQ(rlt_policy_parse(&p, "fixed_window:10/30d", 19, NULL, 0), RLT_OK);
    ASSERT_EQ(rlt__mpol_init(&m, &p), RLT_OK); /* envoy's 30-day MONTH runs there */
    /* (libratelimit_redis runs calendar windows as scripts, on the same keys and values) */
}

/* block=: the companion value is "until:level" and nothing else; the string algorithms carry
 * it through the core in their own time bases (GCRA at origin now, token bucket in ns, fixed
 * window in us): a breach at t starts [t, t + len) and escalates within W of its end, for each
 * of them alike; the key lives to the block's end (+ W when it escalates). */
TEST(penalty_box_values_round_trip_through_the_core_in_every_time_base)
{
    rlt__mblk b;
    const char *bad[] = {"x", "1", "-1:0", "5:65", "5:-1", "5:1:2", "05:1", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ASSERT_EQ(rlt__mblk_parse(bad[i], strlen(bad[i]), &b), RLT_ECORRUPT);
    ASSERT_EQ(rlt__mblk_parse(NULL, 0, &b), RLT_OK);
    ASSERT(!b.set);
    ASSERT_EQ(rlt__mblk_parse("7000000:3", 9, &b), RLT_OK);
    ASSERT(b.set && b.until == 7000000 && b.level == 3);
    char v[48];
    ASSERT_EQ(rlt__mblk_format(&b, v), 9);
    ASSERT_STR_EQ(v, "7000000:3");
    const char *texts[] = {"gcra:1/1s,block=2s*3..1m", "token_bucket:1/1s,block=2s*3..1m",
                           "fixed_window:1/1s,block=2s*3..1m",
                           "sliding_window:1/1s,block=2s*3..1m"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        rlt__mpol m = mpol(texts[i]);
        ASSERT(m.btl > 0);
        rlt__mblk k = {false, 0, 0};
        rlt_decision d;
        char out[RLT__MVAL_MAX], val[RLT__MVAL_MAX];
        size_t ol = 0, vl = 0;
        bool ch;
        int64_t t = 10000000; /* 10 s, in us */
        ASSERT_EQ(rlt__mstr_decide_blk(&m, NULL, 0, t, 1, &d, out, &ol, &k, &ch), RLT_OK);
        ASSERT(d.allowed && ol > 0 && !ch && !k.set);
        memcpy(val, out, ol), vl = ol;
        ASSERT_EQ(rlt__mstr_decide_blk(&m, val, vl, t + 1, 1, &d, out, &ol, &k, &ch), RLT_OK);
        ASSERT(!d.allowed && ol == 0 && ch);
        ASSERT(k.set && k.until == t + 1 + 2000000 && k.level == 0);
        ASSERT_EQ(d.retry_after, 2 * RLT_NS_PER_S);
        ASSERT_EQ(rlt__mblk_ttl_ms(&m, &k, t + 1, 0), 3000); /* end + W - now, in ms */
        /* blocked: denied with the block's wait, nothing changes */
        ASSERT_EQ(rlt__mstr_decide_blk(&m, val, vl, t + 1000000, 1, &d, out, &ol, &k, &ch), RLT_OK);
        ASSERT(!d.allowed && ol == 0 && !ch);
        ASSERT_EQ(d.retry_after, (2000000 - 999999) * RLT_NS_PER_US);
        /* after its end, a breach within W escalates: 6 s */
        int64_t e = k.until;
        ASSERT_EQ(rlt__mstr_decide_blk(&m, val, vl, e, 1, &d, out, &ol, &k, &ch), RLT_OK);
        ASSERT(d.allowed && !ch);
        memcpy(val, out, ol), vl = ol;
        ASSERT_EQ(rlt__mstr_decide_blk(&m, val, vl, e, 1, &d, out, &ol, &k, &ch), RLT_OK);
        ASSERT(!d.allowed && ch && k.level == 1 && k.until == e + 6000000);
        ASSERT_EQ(d.retry_after, 6 * RLT_NS_PER_S);
    }
    rlt_policy p;
    ASSERT_EQ(rlt_policy_parse(&p, "gcra:1/1s,block=1500ns", 22, NULL, 0), RLT_OK);
    rlt__mpol m;
    ASSERT_EQ(rlt__mpol_init(&m, &p), RLT_EINVAL); /* not whole microseconds */
}
