/* Tests of pipelined execution (cmd.h): a pipeline of commands on overlapping keys, fed
 * through rlt__pipe_exec with batched decisions, gives byte for byte the replies, in the same
 * order, and the same metrics, as the same commands executed one by one with rlt__cmd_exec on
 * a second server context.  Virtual clock, no sockets. */
#include "test.h"

#include "core/text.h"
#include "server/resp/cmd.h"
#include "server/config/config.h"
#include "server/config/load.h"
#include "server/request/decide.h"
#include "server/http/httpin.h"
#include "server/stats/metrics.h"
#include "server/net/pipe.h"
#include "server/request/request.h"
#include "server/request/srv.h"

#define S(x) ((rlt_ns)(x)*RLT_NS_PER_S)
#define MS(x) ((rlt_ns)(x)*RLT_NS_PER_MS)

static rlt__srv *open_srv(const char *yaml)
{
    rlt__config *cfg = NULL;
    char err[600];
    if (yaml) {
        if (rlt__config_parse(yaml, strlen(yaml), "test.yaml", &cfg, err, sizeof err) < 0) {
            fprintf(stderr, "%s\n", err);
            return NULL;
        }
    } else {
        cfg = rlt__config_default();
    }
    cfg->set.snapshot[0] = '\0';
    rlt__srv *s = NULL;
    if (rlt__srv_open(&s, cfg, 0, 0, err, sizeof err) < 0) fprintf(stderr, "%s\n", err);
    return s;
}

/* A deterministic generator (xorshift64*), so that a failure replays. */
static uint64_t rng_state;
static uint64_t rnd(uint64_t n)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (rng_state * 2685821657736338717ULL) % n;
}

/* One random command line over a few keys, mostly decisions, with the commands that must
 * flush a pending batch (resets, errors, other commands) mixed in. */
static void gen_command(char *buf, size_t cap, bool tenants)
{
    static const char *keys[] = {"a", "b", "c", "d", "user:42", "x"};
    static const char *policies[] = {"api",
                                     "soft",
                                     "gcra:3/1s,burst=2",
                                     "fixed_window:4/2s",
                                     "sliding_window:5/3s",
                                     "token_bucket:2/1s,burst=3",
                                     "concurrency:2/1s",
                                     "sliding_log:3/2s",
                                     "leaky_bucket:2/1s,queue=3",
                                     "nosuch",
                                     "gcra:bad"};
    const char *k = keys[rnd(sizeof keys / sizeof keys[0])];
    const char *p = policies[rnd(sizeof policies / sizeof policies[0])];
    uint64_t r = rnd(100);
    if (r < 40) {
        static const char *shapes[] = {"2 3 1", "0 1 1", "4 10 60", "1 1 2"};
        const char *sh = shapes[rnd(4)];
        uint64_t q = rnd(6);
        if (q == 5)
            snprintf(buf, cap, "CL.THROTTLE %s %s", k, sh);
        else
            snprintf(buf, cap, "CL.THROTTLE %s %s %llu", k, sh, (unsigned long long)q);
    } else if (r < 70) {
        uint64_t c = rnd(5);
        if (c == 4)
            snprintf(buf, cap, "RL.CHECK %s %s", k, p);
        else
            snprintf(buf, cap, "RL.CHECK %s %s %llu", k, p, (unsigned long long)c);
    } else if (r < 78) {
        snprintf(buf, cap, "RL.PEEK %s %s", k, p);
    } else if (r < 82) {
        snprintf(buf, cap, "RL.RESET %s %s", k, p);
    } else if (r < 85) {
        snprintf(buf, cap, "RL.CHECK %s @free", k);
    } else if (r < 87) {
        snprintf(buf, cap, "RL.TIER %s pro", k);
    } else if (r < 89) {
        snprintf(buf, cap, "PING");
    } else if (r < 91) {
        snprintf(buf, cap, "CL.THROTTLE %s 1 0 1", k); /* count 0: an error */
    } else if (r < 93) {
        snprintf(buf, cap, "CL.THROTTLE %s x 1 1", k); /* not an integer */
    } else if (r < 95) {
        snprintf(buf, cap, "RL.CHECK %s", k); /* arity */
    } else if (r < 97) {
        snprintf(buf, cap, "RL.MULTI %s api 1 %s soft 1", k, keys[rnd(6)]);
    } else if (tenants) {
        snprintf(buf, cap, rnd(2) ? "AUTH pa" : "AUTH b pb");
    } else {
        snprintf(buf, cap, "CL.THROTTLE \"\" 1 1 1"); /* empty key */
    }
}

/* Parses text (inline commands) into (argv, argc) one command at a time. */
static ssize_t parse_one(char *text, size_t len, rlt__resp_arg *argv, size_t *argc)
{
    const char *err;
    return rlt__resp_parse(text, len, NULL, argv, argc, &err);
}

static uint64_t sum_counters(rlt__srv *s, int which)
{
    uint64_t t = 0;
    for (size_t slot = 0; slot < RLT__METRIC_SLOTS; slot++) {
        rlt__mslot *m = &s->metrics.slots[slot];
        for (size_t i = 0; i < RLT__METRIC_IDS; i++)
            t += which == 0 ? m->allowed[i] : which == 1 ? m->denied[i] : m->shadowed[i];
    }
    return t;
}

/* The commands' scratch, as a worker's (never freed: the test's lifetime). */
static rlt__scratch *test_sc(void)
{
    static rlt__scratch *sc;
    if (sc == NULL) sc = rlt__scratch_new(RLT__SCRATCH_CAP);
    return sc;
}

/* Runs `ncmd` random commands in blocks of up to `block` (a pipeline read) against two fresh
 * contexts, serially and pipelined, advancing the clock between blocks; returns 0 when every
 * reply and the decision counters agree. */
static int compare_runs(const char *yaml, uint64_t seed, size_t ncmd, size_t block, bool tenants)
{
    rlt__srv *a = open_srv(yaml), *b = open_srv(yaml);
    rlt__pipe *p = rlt__pipe_new();
    int bad = -1;
    if (a == NULL || b == NULL || p == NULL) goto out;
    rlt__session sa, sb;
    rlt__session_init(a, &sa);
    rlt__session_init(b, &sb);
    rng_state = seed;
    static char text[1 << 16];
    static rlt__resp_arg argv[64];
    rlt__obuf oa = {0}, ob = {0};
    rlt_ns now = S(100);
    size_t done = 0;
    bad = 0;
    while (done < ncmd && bad == 0) {
        /* A block of commands as one read would hold them. */
        size_t len = 0, m = 1 + rnd(block);
        for (size_t i = 0; i < m && done + i < ncmd; i++) {
            char line[256];
            gen_command(line, sizeof line, tenants);
            len += (size_t)snprintf(text + len, sizeof text - len, "%s\r\n", line);
        }
        /* Mostly one instant per block (one clock reading per read); in some blocks the
         * clock moves within the block, which the pipe must not decide at one instant. */
        static rlt_ns step[512];
        bool moving = rnd(8) == 0;
        for (size_t i = 0; i < m && i < 512; i++)
            step[i] = i == 0 || !moving ? 0 : step[i - 1] + MS(rnd(3)) * (rlt_ns)rnd(30);
        /* Serial: one command at a time, each on its own copy of its bytes. */
        static char copy[1 << 16];
        memcpy(copy, text, len);
        size_t off = 0, ci = 0;
        while (off < len) {
            size_t argc;
            ssize_t r = parse_one(copy + off, len - off, argv, &argc);
            if (r <= 0) {
                bad = 1;
                break;
            }
            if (argc > 0) rlt__cmd_exec(a, &sa, NULL, test_sc(), argv, argc, now + step[ci], &oa);
            off += (size_t)r;
            done++;
            ci++;
        }
        /* Pipelined: every command of the block, one flush at the end. */
        off = 0;
        ci = 0;
        while (off < len) {
            size_t argc;
            ssize_t r = parse_one(text + off, len - off, argv, &argc);
            if (r <= 0) {
                bad = 1;
                break;
            }
            if (argc > 0) rlt__cmd_exec(b, &sb, p, test_sc(), argv, argc, now + step[ci], &ob);
            off += (size_t)r;
            ci++;
        }
        rlt__pipe_flush(p, b);
        if (oa.len != ob.len || memcmp(oa.data, ob.data, oa.len) != 0) {
            size_t i = 0;
            while (i < oa.len && i < ob.len && oa.data[i] == ob.data[i])
                i++;
            fprintf(stderr,
                    "seed %llu: replies differ at byte %zu:\n  serial:    %.60s\n"
                    "  pipelined: %.60s\n",
                    (unsigned long long)seed, i, oa.data + (i > 20 ? i - 20 : 0),
                    ob.data + (i > 20 ? i - 20 : 0));
            bad = 1;
        }
        now += step[m - 1] + MS(rnd(700)); /* sometimes the same instant, or past a window */
    }
    for (int w = 0; w < 3 && bad == 0; w++) {
        if (sum_counters(a, w) != sum_counters(b, w)) {
            fprintf(stderr, "counter %d differs: %llu vs %llu\n", w,
                    (unsigned long long)sum_counters(a, w), (unsigned long long)sum_counters(b, w));
            bad = 1;
        }
    }
    rlt__obuf_free(&oa);
    rlt__obuf_free(&ob);
out:
    rlt__pipe_free(p);
    rlt__srv_close(a);
    rlt__srv_close(b);
    return bad;
}

static const char *config_yaml = "policies:\n"
                                 "  api:\n    policy: gcra:5/1s,burst=3\n"
                                 "  soft:\n    policy: fixed_window:2/1s\n    shadow_mode: true\n"
                                 "  free:\n    policy: fixed_window:3/1s\n"
                                 "  pro:\n    policy: gcra:10/1s\n"
                                 "tiers:\n  free: free\n  pro: pro\ndefault_tier: free\n";

TEST(pipelined_decisions_match_serial_ones_on_overlapping_keys)
{
    for (uint64_t seed = 1; seed <= 40; seed++)
        ASSERT_EQ(compare_runs(config_yaml, seed, 600, 40, false), 0);
}

TEST(pipelines_longer_than_a_batch_flush_in_order)
{
    /* Blocks up to 300 commands: past RLT__PIPE_MAX, the pipe flushes by itself. */
    for (uint64_t seed = 100; seed <= 110; seed++)
        ASSERT_EQ(compare_runs(config_yaml, seed, 3000, 300, false), 0);
}

TEST(pipelined_tenant_keys_and_auth_changes_match_serial)
{
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "%stenants:\n  - name: a\n    password: pa\n  - name: b\n"
             "    password: pb\n",
             config_yaml);
    for (uint64_t seed = 200; seed <= 220; seed++)
        ASSERT_EQ(compare_runs(yaml, seed, 600, 40, true), 0);
}

TEST(global_shadow_mode_applies_to_pipelined_decisions)
{
    char yaml[1024];
    snprintf(yaml, sizeof yaml, "server:\n  shadow_mode: true\n%s", config_yaml);
    for (uint64_t seed = 300; seed <= 310; seed++)
        ASSERT_EQ(compare_runs(yaml, seed, 600, 40, false), 0);
}

TEST(decisions_are_deferred_until_the_flush)
{
    /* Without the deferral the test above would compare two serial runs: check that a block
     * of decisions writes nothing before the flush, and everything after it. */
    rlt__srv *s = open_srv(NULL);
    rlt__pipe *p = rlt__pipe_new();
    ASSERT(s != NULL && p != NULL);
    rlt__session ss;
    rlt__session_init(s, &ss);
    char text[] = "CL.THROTTLE k 1 1 60\r\nCL.THROTTLE k 1 1 60\r\nCL.THROTTLE k 1 1 60\r\n"
                  "RL.CHECK k gcra:1/1m\r\n";
    rlt__resp_arg argv[8];
    rlt__obuf o = {0};
    size_t off = 0, len = strlen(text);
    while (off < len) {
        size_t argc;
        ssize_t r = parse_one(text + off, len - off, argv, &argc);
        ASSERT(r > 0);
        rlt__cmd_exec(s, &ss, p, test_sc(), argv, argc, S(5), &o);
        off += (size_t)r;
    }
    ASSERT_EQ(o.len, 0);
    rlt__pipe_flush(p, s);
    rlt__obuf_put(&o, "", 1);
    ASSERT_STR_EQ(o.data, "*5\r\n:0\r\n:2\r\n:1\r\n:-1\r\n:60\r\n"
                          "*5\r\n:0\r\n:2\r\n:0\r\n:-1\r\n:120\r\n"
                          "*5\r\n:1\r\n:2\r\n:0\r\n:60\r\n:120\r\n"
                          "*6\r\n:1\r\n:1\r\n:0\r\n:0\r\n:60000\r\n:0\r\n");
    /* A command that cannot be deferred flushes what waits first. */
    o.len = 0;
    char t2[] = "CL.THROTTLE j 0 1 60\r\nPING\r\n";
    off = 0;
    len = strlen(t2);
    while (off < len) {
        size_t argc;
        ssize_t r = parse_one(t2 + off, len - off, argv, &argc);
        ASSERT(r > 0);
        rlt__cmd_exec(s, &ss, p, test_sc(), argv, argc, S(5), &o);
        off += (size_t)r;
    }
    rlt__obuf_put(&o, "", 1);
    ASSERT_STR_EQ(o.data, "*5\r\n:0\r\n:1\r\n:0\r\n:-1\r\n:60\r\n+PONG\r\n");
    rlt__obuf_free(&o);
    rlt__pipe_free(p);
    rlt__srv_close(s);
}

TEST(integer_replies_format_every_magnitude)
{
    char buf[32];
    int64_t vals[] = {0,     1,  9,   10,  99,   100,        101,       999,       1000,
                      12345, -1, -10, -99, -100, 1000000007, INT64_MAX, INT64_MIN, INT64_MIN + 1};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        char want[32];
        snprintf(want, sizeof want, "%" PRId64, vals[i]);
        size_t n = rlt__format_i64(buf, vals[i]);
        buf[n] = '\0';
        ASSERT_STR_EQ(buf, want);
    }
    /* Every power of ten and its neighbours, both signs. */
    for (int64_t v = 1; v <= INT64_MAX / 10; v *= 10) {
        for (int64_t d = -1; d <= 1; d++) {
            for (int sign = -1; sign <= 1; sign += 2) {
                int64_t x = sign * (v + d);
                char want[32];
                snprintf(want, sizeof want, "%" PRId64, x);
                size_t n = rlt__format_i64(buf, x);
                buf[n] = '\0';
                ASSERT_STR_EQ(buf, want);
            }
        }
    }
}
