/* Snapshots: a round trip gives identical decisions; downtime is credited by the wall clock,
 * at most what really passed; a wall clock that went back mints nothing; damaged, truncated,
 * bit-flipped and unknown-version files are refused whole and leave the store unchanged. */
#define _GNU_SOURCE /* memmem */
#include <stdlib.h>
#include <unistd.h>

#include "test.h"

#include "store_test_util.h"

static char dir[64];

static void remove_dir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
}

static const char *tmp_path(const char *name)
{
    static char path[128];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/rlt-store-snap-XXXXXX");
        if (!mkdtemp(dir)) return NULL;
        atexit(remove_dir);
    }
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

static const char *policies[] = {"gcra:10/s",         "token_bucket:20/s",
                                 "fixed_window:30/s", "sliding_window:15/s",
                                 "sliding_log:12/s",  "leaky_bucket:10/s,queue=5"};
#define NP 6

/* A store with every algorithm, tiers, assignments, and random traffic up to t = 1 s. */
static rlt_store *busy_store(uint64_t seed)
{
    rlt_store *s = tu_store(0, false, 8);
    char name[8];
    for (int p = 0; p < NP; p++) {
        snprintf(name, sizeof name, "p%d", p);
        tu_add(s, name, policies[p]);
    }
    rlt_store_set_tier(s, "free", 0);
    rlt_store_set_tier(s, "pro", 1);
    rlt_store_assign_tier(s, "alice", 5, "pro");
    uint64_t rng = seed;
    rlt_decision d;
    for (int i = 0; i < 3000; i++) {
        uint32_t k = (uint32_t)tu_below(&rng, 200);
        char key[48];
        int n = snprintf(key, sizeof key, "%s%u",
                         k % 7 ? "k" : "a-rather-long-key-to-go-out-of-line-", k);
        rlt_store_decide(s, (int)tu_below(&rng, NP), key, (size_t)n,
                         (rlt_ns)i * RLT_NS_PER_S / 3000, 1 + (int64_t)tu_below(&rng, 2), &d);
    }
    return s;
}

/* Runs the same random queries on a and b (b's clock is a's + shift) and counts differences. */
static int compare_decisions(rlt_store *a, rlt_store *b, rlt_ns t0, rlt_ns shift, uint64_t seed)
{
    uint64_t rng = seed;
    int diffs = 0;
    for (int i = 0; i < 3000; i++) {
        uint32_t k = (uint32_t)tu_below(&rng, 220);
        char key[48];
        int n = snprintf(key, sizeof key, "%s%u",
                         k % 7 ? "k" : "a-rather-long-key-to-go-out-of-line-", k);
        int p = (int)tu_below(&rng, NP);
        int64_t cost = (int64_t)tu_below(&rng, 3);
        rlt_ns now = t0 + (rlt_ns)i * RLT_NS_PER_MS / 3;
        rlt_decision da, db;
        int ra = rlt_store_decide(a, p, key, (size_t)n, now, cost, &da);
        int rb = rlt_store_decide(b, p, key, (size_t)n, now + shift, cost, &db);
        if (ra != rb || da.allowed != db.allowed || da.remaining != db.remaining ||
            da.retry_after != db.retry_after)
            diffs++;
    }
    rlt_decision da, db;
    rlt_store_decide_tier(a, "free", "alice", 5, t0, 0, &da);
    rlt_store_decide_tier(b, "free", "alice", 5, t0 + shift, 0, &db);
    if (da.limit != db.limit || da.limit != 20) diffs++;
    return diffs;
}

TEST(snapshot_round_trip_gives_identical_decisions)
{
    const char *path = tmp_path("round.snap");
    rlt_store *a = busy_store(1);
    const rlt_ns save_now = RLT_NS_PER_S;
    const int64_t wall = INT64_C(1700000000) * RLT_NS_PER_S;
    ASSERT_EQ(rlt_store_save(a, path, save_now, wall), RLT_OK);
    /* Loaded with no downtime into a store on another clock origin (shifted by 1000 s). */
    rlt_store *b = tu_store(0, false, 32);
    const rlt_ns shift = 1000 * RLT_NS_PER_S;
    ASSERT_EQ(rlt_store_load(b, path, save_now + shift, wall), RLT_OK);
    rlt_store_stats sa, sb;
    rlt_store_sweep(a, save_now, SIZE_MAX); /* the load drops fresh entries: so does this */
    rlt_store_stats_get(a, &sa);
    rlt_store_stats_get(b, &sb);
    ASSERT_EQ(sa.keys, sb.keys);
    ASSERT_EQ(rlt_store_policy_id(b, "p4"), 4);
    ASSERT_EQ(compare_decisions(a, b, save_now, shift, 99), 0);
    rlt_store_close(a);
    rlt_store_close(b);
}

TEST(snapshot_credits_downtime_from_the_wall_clock)
{
    const char *path = tmp_path("down.snap");
    rlt_store *s = tu_store(0, false, 0);
    int id = tu_add(s, "p", "token_bucket:10/10s"); /* one token per second */
    rlt_decision d;
    for (int i = 0; i < 10; i++)
        rlt_store_decide(s, id, "k", 1, 0, 1, &d);
    ASSERT_EQ(d.remaining, 0);
    const int64_t wall = INT64_C(1700000000) * RLT_NS_PER_S;
    ASSERT_EQ(rlt_store_save(s, path, 0, wall), RLT_OK);
    /* Down for 3 s of wall time; the new process's monotonic clock reads 5 s. */
    rlt_store *b = tu_store(0, false, 0);
    ASSERT_EQ(rlt_store_load(b, path, 5 * RLT_NS_PER_S, wall + 3 * RLT_NS_PER_S), RLT_OK);
    ASSERT_EQ(rlt_store_decide(b, id, "k", 1, 5 * RLT_NS_PER_S, 0, &d), RLT_OK);
    ASSERT_EQ(d.remaining, 3);
    rlt_store_close(b);
    /* A long downtime refills at most the bucket, and the key is dropped as fresh. */
    b = tu_store(0, false, 0);
    ASSERT_EQ(rlt_store_load(b, path, 0, wall + 3600 * RLT_NS_PER_S), RLT_OK);
    ASSERT_EQ(rlt_store_decide(b, id, "k", 1, 0, 0, &d), RLT_OK);
    ASSERT_EQ(d.remaining, 10);
    rlt_store_stats st;
    rlt_store_stats_get(b, &st);
    ASSERT_EQ(st.keys, 0);
    rlt_store_close(b);
    rlt_store_close(s);
}

TEST(snapshot_keeps_calendar_windows_with_their_zone_and_the_unix_time_of_now)
{
    const char *path = tmp_path("calendar.snap");
    const rlt_ns S = RLT_NS_PER_S;
    const char *text = "fixed_window:3/1mo,tz=Europe/Paris";
    rlt_policy p;
    ASSERT_EQ(rlt_policy_parse(&p, text, strlen(text), NULL, 0), RLT_OK);
    const int64_t origin = INT64_C(1733011200) * S; /* 2024-12-01 00:00 UTC: a daemon's start */
    rlt_policy_set_origin(&p, origin);
    rlt_store *s = tu_store(0, false, 0);
    int id;
    ASSERT_EQ(rlt_store_set_policy(s, "cal", &p, RLT_CHANGE_RESET, &id), RLT_OK);
    rlt_decision d;
    const rlt_ns now = 3600 * S;
    for (int i = 0; i < 3; i++)
        ASSERT_EQ(rlt_store_decide(s, id, "k", 1, now, 1, &d), RLT_OK);
    /* January 2025 starts at December 31 23:00 UTC in Paris: 30 days and 22 hours away */
    ASSERT_EQ(d.reset_after, (30 * 86400 + 22 * 3600) * S);
    ASSERT_EQ(rlt_store_save(s, path, now, origin + now), RLT_OK);
    /* Down 10 s; the new process's clock reads 5 s (another origin). */
    rlt_store *b = tu_store(0, false, 0);
    ASSERT_EQ(rlt_store_load(b, path, 5 * S, origin + now + 10 * S), RLT_OK);
    rlt_policy q;
    ASSERT_EQ(rlt_store_get_policy(b, id, &q), RLT_OK);
    ASSERT_EQ(q.months, 1);
    ASSERT(rlt_policy_calendar_equal(&p, &q));
    ASSERT_EQ(q.origin + 5 * S, origin + now + 10 * S); /* now is the same Unix time */
    ASSERT_EQ(rlt_store_decide(b, id, "k", 1, 5 * S, 1, &d), RLT_OK);
    ASSERT(!d.allowed);
    ASSERT_EQ(d.retry_after, (30 * 86400 + 22 * 3600 - 10) * S);
    rlt_store_close(b);
    rlt_store_close(s);
}

TEST(snapshot_with_wall_clock_gone_backwards_mints_nothing)
{
    const char *path = tmp_path("back.snap");
    rlt_store *s = tu_store(0, false, 0);
    int id = tu_add(s, "p", "gcra:10/10s");
    rlt_decision d;
    for (int i = 0; i < 10; i++)
        rlt_store_decide(s, id, "k", 1, 0, 1, &d);
    const int64_t wall = INT64_C(1700000000) * RLT_NS_PER_S;
    ASSERT_EQ(rlt_store_save(s, path, 0, wall), RLT_OK);
    rlt_store *b = tu_store(0, false, 0);
    ASSERT_EQ(rlt_store_load(b, path, 7 * RLT_NS_PER_S, wall - 3600 * RLT_NS_PER_S), RLT_OK);
    ASSERT_EQ(rlt_store_decide(b, id, "k", 1, 7 * RLT_NS_PER_S, 0, &d), RLT_OK);
    ASSERT_EQ(d.remaining, 0);
    ASSERT(!d.allowed);
    rlt_store_close(b);
    rlt_store_close(s);
}

static long file_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

static unsigned char *slurp(const char *path, long *n)
{
    *n = file_size(path);
    FILE *f = fopen(path, "rb");
    unsigned char *b = malloc((size_t)*n);
    if (fread(b, 1, (size_t)*n, f) != (size_t)*n) *n = -1;
    fclose(f);
    return b;
}

static void spit(const char *path, const unsigned char *b, long n)
{
    FILE *f = fopen(path, "wb");
    fwrite(b, 1, (size_t)n, f);
    fclose(f);
}

/* The target store holds one known key; a refused load must leave it exactly so. */
static int load_refused_and_unchanged(const char *path)
{
    rlt_store *t = tu_store(0, false, 0);
    int id = tu_add(t, "mine", "fixed_window:9/h");
    rlt_decision d;
    rlt_store_decide(t, id, "x", 1, 0, 4, &d);
    int rc = rlt_store_load(t, path, 0, 0);
    int ok = rc == RLT_ECORRUPT && rlt_store_policy_id(t, "mine") == 0 &&
             rlt_store_policy_id(t, "p0") == RLT_ENOENT &&
             rlt_store_decide(t, id, "x", 1, 0, 0, &d) == RLT_OK && d.remaining == 5;
    if (!ok) fprintf(stderr, "load of %s: rc %d\n", path, rc);
    rlt_store_close(t);
    return ok;
}

TEST(corrupt_truncated_and_wrong_version_snapshots_are_refused_whole)
{
    const char *p = tmp_path("good.snap");
    char good[128];
    snprintf(good, sizeof good, "%s", p);
    rlt_store *s = busy_store(3);
    ASSERT_EQ(rlt_store_save(s, good, RLT_NS_PER_S, 0), RLT_OK);
    rlt_store_close(s);
    long n;
    unsigned char *b = slurp(good, &n);
    ASSERT(n > 100);
    const char *bad = tmp_path("bad.snap");
    /* Truncated at many lengths, including inside the trailer and just the header. */
    for (long cut = 0; cut < n; cut += (cut < 64 || cut > n - 16) ? 1 : 97) {
        spit(bad, b, cut);
        ASSERT(load_refused_and_unchanged(bad));
    }
    /* One flipped bit anywhere. */
    uint64_t rng = 5;
    for (int i = 0; i < 200; i++) {
        long at = (long)tu_below(&rng, (uint64_t)n);
        unsigned char bit = (unsigned char)(1u << tu_below(&rng, 8));
        b[at] ^= bit;
        spit(bad, b, n);
        b[at] ^= bit;
        ASSERT(load_refused_and_unchanged(bad));
    }
    /* Trailing garbage. */
    unsigned char *longer = malloc((size_t)n + 1);
    memcpy(longer, b, (size_t)n);
    longer[n] = 0;
    spit(bad, longer, n + 1);
    free(longer);
    ASSERT(load_refused_and_unchanged(bad));
    /* Another version (bytes 8..11). */
    b[8] = 2;
    spit(bad, b, n);
    ASSERT(load_refused_and_unchanged(bad));
    b[8] = 1;
    /* The untouched file still loads. */
    spit(bad, b, n);
    rlt_store *t = tu_store(0, false, 0);
    ASSERT_EQ(rlt_store_load(t, bad, RLT_NS_PER_S, 0), RLT_OK);
    rlt_store_close(t);
    free(b);
}

/* CRC32C (Castagnoli, reflected 0x82F63B78), bit by bit: the trailer the format documents. */
static uint32_t crc32c(const unsigned char *p, size_t n)
{
    uint32_t c = ~UINT32_C(0);
    while (n--) {
        c ^= *p++;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ UINT32_C(0x82F63B78) : c >> 1;
    }
    return ~c;
}

static uint32_t get_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Makes `st` (size bytes, valid under p) invalid by the first of a few edits that
 * rlt_state_valid rejects: all bits set, then one 64-bit field at a time set to -1 or to
 * INT64_MAX.  The test needs no knowledge of the state layout: the core's validator is the
 * judge.  Returns false when no edit makes it invalid (e.g. GCRA: every instant is valid). */
static bool make_invalid(const rlt_policy *p, unsigned char *st, size_t size)
{
    unsigned char *orig = malloc(size);
    memcpy(orig, st, size);
    memset(st, 0xff, size);
    if (!rlt_state_valid(p, st)) goto found;
    for (size_t off = 0; off + 8 <= size; off += 8) {
        const int64_t vals[2] = {-1, INT64_MAX};
        for (int v = 0; v < 2; v++) {
            memcpy(st, orig, size);
            memcpy(st + off, &vals[v], 8);
            if (!rlt_state_valid(p, st)) goto found;
        }
    }
    memcpy(st, orig, size);
    free(orig);
    return false;
found:
    free(orig);
    return true;
}

TEST(snapshot_with_valid_checksum_but_invalid_state_is_refused_whole)
{
    /* The previous crash: a sliding-log state whose bytes were changed and the checksum
     * recomputed.  Every algorithm that has invalid states is tried. */
    static const char *algos[] = {
        "sliding_log:8/h",   "concurrency:4/h", "fixed_window:10/h",        "sliding_window:10/h",
        "token_bucket:10/h", "gcra:10/h",       "leaky_bucket:10/h,queue=5"};
    static const char key[] = "the-victim-key-0123456789";
    int crafted = 0;
    for (size_t a = 0; a < sizeof algos / sizeof algos[0]; a++) {
        const char *p = tmp_path("crafted-src.snap");
        char good[128];
        snprintf(good, sizeof good, "%s", p);
        rlt_store *s = tu_store(0, false, 0);
        int id = tu_add(s, "p0", algos[a]);
        rlt_decision d;
        for (int i = 0; i < 3; i++)
            ASSERT_EQ(rlt_store_decide(s, id, key, sizeof key - 1, (rlt_ns)i, 1, &d), RLT_OK);
        ASSERT_EQ(rlt_store_save(s, good, 10, 0), RLT_OK);
        rlt_store_close(s);
        long n;
        unsigned char *b = slurp(good, &n);
        ASSERT(n > 4);
        ASSERT_EQ(crc32c(b, (size_t)n - 4), get_le32(b + n - 4)); /* our CRC is the file's */
        /* The entry record is "... key, state": the state follows the (unique) key bytes. */
        unsigned char *at = memmem(b, (size_t)n, key, sizeof key - 1);
        ASSERT(at);
        unsigned char *st = at + sizeof key - 1;
        rlt_policy pol = tu_policy(algos[a]);
        size_t size = rlt_state_size(&pol);
        ASSERT(st + size + 4 <= b + n);
        ASSERT(rlt_state_valid(&pol, st)); /* we found the state */
        if (!make_invalid(&pol, st, size)) {
            free(b);
            continue;
        }
        crafted++;
        uint32_t crc = crc32c(b, (size_t)n - 4);
        for (int i = 0; i < 4; i++)
            b[n - 4 + i] = (unsigned char)(crc >> (8 * i));
        const char *bad = tmp_path("crafted.snap");
        spit(bad, b, n);
        free(b);
        if (!load_refused_and_unchanged(bad)) {
            fprintf(stderr, "crafted %s state was not refused\n", algos[a]);
            ASSERT(0);
        }
        /* Control: the unpatched file loads. */
        rlt_store *t = tu_store(0, false, 0);
        ASSERT_EQ(rlt_store_load(t, good, 10, 0), RLT_OK);
        rlt_store_close(t);
    }
    ASSERT(crafted >= 5); /* sliding log, concurrency, both windows, token bucket */
}

/* Like a fuzzer, deterministically: random byte edits anywhere before the trailer, with the
 * CRC recomputed so the parser and the state validation (not the checksum) must cope.  Every
 * file is either refused with RLT_ECORRUPT or loads into a store whose every key then decides
 * normally (under ASan: no out-of-bounds read on a state that slipped through). */
TEST(edited_snapshots_with_recomputed_checksums_load_safely_or_are_refused)
{
    const char *p = tmp_path("edit-src.snap");
    char good[128];
    snprintf(good, sizeof good, "%s", p);
    rlt_store *s = busy_store(7);
    ASSERT_EQ(rlt_store_save(s, good, RLT_NS_PER_S, 0), RLT_OK);
    rlt_store_close(s);
    long n;
    unsigned char *b = slurp(good, &n);
    ASSERT(n > 64);
    unsigned char *e = malloc((size_t)n);
    const char *bad = tmp_path("edit.snap");
    uint64_t rng = 11;
    int loaded = 0, refused = 0;
    for (int iter = 0; iter < 1500; iter++) {
        memcpy(e, b, (size_t)n);
        int edits = 1 + (int)tu_below(&rng, 4);
        for (int k = 0; k < edits; k++) {
            long at = 32 + (long)tu_below(&rng, (uint64_t)(n - 36)); /* past the header */
            uint64_t how = tu_below(&rng, 3);
            unsigned v = how == 0            ? (unsigned)(tu_rand(&rng) & 0xff)
                         : how == 1          ? e[at] ^ (1u << tu_below(&rng, 8))
                         : tu_below(&rng, 2) ? 0xffu
                                             : 0u;
            e[at] = (unsigned char)v;
        }
        uint32_t crc = crc32c(e, (size_t)n - 4);
        for (int i = 0; i < 4; i++)
            e[n - 4 + i] = (unsigned char)(crc >> (8 * i));
        spit(bad, e, n);
        rlt_store *t = tu_store(0, false, 0);
        int rc = rlt_store_load(t, bad, RLT_NS_PER_S, 0);
        if (rc != RLT_OK && rc != RLT_ECORRUPT) {
            fprintf(stderr, "iteration %d: load returned %d\n", iter, rc);
            ASSERT(0);
        }
        if (rc == RLT_OK) {
            loaded++;
            /* Decide on every key the busy store used, under every policy the file defined. */
            rlt_decision d;
            for (int pid = 0; pid < NP; pid++) {
                for (uint32_t k = 0; k < 200; k++) {
                    char key[48];
                    int kl = snprintf(key, sizeof key, "%s%u",
                                      k % 7 ? "k" : "a-rather-long-key-to-go-out-of-line-", k);
                    rlt_store_decide(t, pid, key, (size_t)kl, 2 * RLT_NS_PER_S, 1, &d);
                }
            }
        } else {
            refused++;
        }
        rlt_store_close(t);
    }
    free(e);
    free(b);
    ASSERT(loaded > 50 && refused > 50); /* both outcomes were exercised */
}

TEST(missing_snapshot_is_an_io_error)
{
    rlt_store *s = tu_store(0, false, 0);
    ASSERT_EQ(rlt_store_load(s, "/nonexistent/dir/x.snap", 0, 0), RLT_EIO);
    ASSERT_EQ(rlt_store_save(s, "/nonexistent/dir/x.snap", 0, 0), RLT_EIO);
    rlt_store_close(s);
}

TEST(save_replaces_the_file_atomically_and_leaves_no_temp_files)
{
    const char *p = tmp_path("atomic.snap");
    char path[128];
    snprintf(path, sizeof path, "%s", p);
    rlt_store *s = busy_store(4);
    ASSERT_EQ(rlt_store_save(s, path, RLT_NS_PER_S, 0), RLT_OK);
    long first = file_size(path);
    rlt_decision d;
    for (uint32_t k = 0; k < 500; k++)
        rlt_store_decide(s, 0, &k, sizeof k, RLT_NS_PER_S, 1, &d);
    ASSERT_EQ(rlt_store_save(s, path, RLT_NS_PER_S, 0), RLT_OK);
    ASSERT(file_size(path) > first);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "ls %s | grep -c tmp >/dev/null", dir);
    ASSERT(system(cmd) != 0); /* grep found no temp file */
    rlt_store_close(s);
}
