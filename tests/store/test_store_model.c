/* The store against a trivially correct model: an array of {policy, key, state} driven by the
 * core's rlt_decide directly.  Random operations (decide, multi, reset, sweep, policy change)
 * must give identical answers, whatever the store drops, evicts as idle or moves around. */
#include <stdlib.h>

#include "test.h"

#include "store/decision.h"
#include "store/table.h"
#include "store_test_util.h"

#define NKEYS 40
#define NPOL 4
#define MAXE (NKEYS * NPOL)

typedef struct mentry {
    int used;
    int policy;
    int key;
    uint8_t *state;
} mentry;

typedef struct model {
    rlt_policy pol[NPOL];
    mentry e[MAXE];
    rlt_ns last_now;
} model;

static uint8_t keys[NKEYS][40];
static size_t klens[NKEYS];

static void make_keys(uint64_t *rng)
{
    for (int k = 0; k < NKEYS; k++) {
        klens[k] = 1 + tu_below(rng, 39); /* short inline keys and long out-of-line ones */
        for (size_t i = 0; i < klens[k]; i++)
            keys[k][i] = (uint8_t)tu_below(rng, 4);
        keys[k][0] = (uint8_t)k; /* distinct */
    }
}

static mentry *mfind(model *m, int policy, int key)
{
    for (int i = 0; i < MAXE; i++)
        if (m->e[i].used && m->e[i].policy == policy && m->e[i].key == key) return &m->e[i];
    for (int i = 0; i < MAXE; i++) {
        if (!m->e[i].used) {
            m->e[i].used = 1;
            m->e[i].policy = policy;
            m->e[i].key = key;
            m->e[i].state = calloc(1, rlt_state_size(&m->pol[policy]));
            return &m->e[i];
        }
    }
    abort();
}

static void mdrop(mentry *e)
{
    free(e->state);
    memset(e, 0, sizeof *e);
}

static const char *plain_texts[] = {
    "gcra:5/100ms,burst=8", "token_bucket:7/50ms",
    "fixed_window:6/80ms",  "sliding_window:5/70ms",
    "sliding_log:4/60ms",   "leaky_bucket:5/100ms,queue=3,delay=1",
    "gcra:9/200ms",         "fixed_window:3/30ms",
    "sliding_log:4/90ms",   "token_bucket:3/20ms,burst=6",
    "gcra:5/100ms",         "fixed_window:4/40ms",
    "sliding_log:3/50ms",   "token_bucket:4/30ms,burst=6",
};

/* The options every algorithm takes (penalty box, jitter), with a plain policy or two to
 * change to and from. */
static const char *option_texts[] = {
    "gcra:5/100ms,block=30ms*2..200ms", "fixed_window:4/40ms,block=25ms,jitter=20%",
    "sliding_log:3/50ms,jitter=100%",   "token_bucket:4/30ms,burst=6,block=10ms*3..1s,jitter=5%",
    "sliding_window:5/70ms,block=50ms", "leaky_bucket:5/100ms,queue=3,block=40ms*2..1s,jitter=10%",
    "gcra:9/200ms,block=1s,jitter=50%", "fixed_window:3/30ms",
};

static const char **texts = plain_texts;
static size_t NTEXTS = sizeof plain_texts / sizeof plain_texts[0];

static int same_decision(const rlt_decision *a, const rlt_decision *b)
{
    return a->allowed == b->allowed && a->limit == b->limit && a->remaining == b->remaining &&
           a->retry_after == b->retry_after && a->reset_after == b->reset_after &&
           a->delay == b->delay;
}

/* The store's jitter: rlt_jitter over the key's FNV-1a at the caller's instant. */
static rlt_ns jitter_of(const rlt_policy *p, int k, rlt_ns now, rlt_ns exact)
{
    return rlt_jitter(p, rlt_hash_fnv1a(keys[k], klens[k]), now, exact);
}

static void run_model(uint64_t seed, size_t max_keys_unused, int steps)
{
    (void)max_keys_unused;
    uint64_t rng = seed;
    make_keys(&rng);
    rlt_store *s = tu_store(0, false, 4);
    ASSERT(s);
    model *m = calloc(1, sizeof *m);
    char name[8];
    for (int p = 0; p < NPOL; p++) {
        m->pol[p] = tu_policy(texts[tu_below(&rng, NTEXTS)]);
        snprintf(name, sizeof name, "p%d", p);
        int id;
        ASSERT_EQ(rlt_store_set_policy(s, name, &m->pol[p], RLT_CHANGE_RESET, &id), RLT_OK);
        ASSERT_EQ(id, p);
    }
    rlt_ns now = 0;
    m->last_now = INT64_MIN;
    int failed = 0;
    for (int step = 0; step < steps && !failed; step++) {
        /* Every slot's fingerprint is its tag's, through inserts, evictions, deletes' shifts,
         * growth and policy changes. */
        if (step % 64 == 0 && !rlt__store_fps_consistent(s)) {
            fprintf(stderr, "seed %llu step %d: a fingerprint disagrees with its slot\n",
                    (unsigned long long)seed, step);
            failed = 1;
        }
        now += (rlt_ns)tu_below(&rng, 4) * (rlt_ns)tu_below(&rng, 5 * RLT_NS_PER_MS);
        uint64_t op = tu_below(&rng, 100);
        if (op < 60) { /* decide */
            int p = (int)tu_below(&rng, NPOL), k = (int)tu_below(&rng, NKEYS);
            int64_t cost = (int64_t)tu_below(&rng, 4);
            rlt_decision got, want;
            int rc = rlt_store_decide(s, p, keys[k], klens[k], now, cost, &got);
            mentry *e = mfind(m, p, k);
            int wrc = rlt_decide(&m->pol[p], e->state, now, cost, &want);
            want.retry_after = jitter_of(&m->pol[p], k, now, want.retry_after);
            if (now > m->last_now) m->last_now = now;
            if (rc != wrc || (rc == RLT_OK && !same_decision(&got, &want))) {
                fprintf(stderr,
                        "seed %llu step %d: decide p%d k%d cost %lld: rc %d/%d allowed "
                        "%d/%d remaining %lld/%lld retry %lld/%lld\n",
                        (unsigned long long)seed, step, p, k, (long long)cost, rc, wrc, got.allowed,
                        want.allowed, (long long)got.remaining, (long long)want.remaining,
                        (long long)got.retry_after, (long long)want.retry_after);
                failed = 1;
            }
        } else if (op < 80) { /* multi */
            size_t n = 1 + tu_below(&rng, 3);
            rlt_check c[3];
            int ps[3], ks[3];
            for (size_t i = 0; i < n; i++) {
                ps[i] = (int)tu_below(&rng, NPOL);
                ks[i] = (int)tu_below(&rng, NKEYS);
                if (tu_below(&rng, 4) == 0 && i > 0) ks[i] = ks[0]; /* same key, maybe twice */
                c[i] = (rlt_check){ps[i], keys[ks[i]], klens[ks[i]], (int64_t)tu_below(&rng, 3)};
            }
            rlt_decision got;
            int refused = -2;
            int rc = rlt_store_decide_multi(s, c, n, now, &got, &refused);
            if (now > m->last_now) m->last_now = now;
            /* The model: decide on copies in order, commit all or none. */
            uint8_t *copy[3];
            rlt_decision ds[3];
            int all = 1, wref = -1;
            for (size_t i = 0; i < n; i++) {
                copy[i] = NULL;
                for (size_t j = 0; j < i; j++)
                    if (ps[j] == ps[i] && ks[j] == ks[i] && !copy[i]) copy[i] = copy[j];
                if (!copy[i]) {
                    mentry *e = mfind(m, ps[i], ks[i]);
                    size_t sz = rlt_state_size(&m->pol[ps[i]]);
                    copy[i] = malloc(sz);
                    memcpy(copy[i], e->state, sz);
                }
                rlt_decide(&m->pol[ps[i]], copy[i], now, c[i].cost, &ds[i]);
                if (!ds[i].allowed) {
                    all = 0;
                    if (wref < 0) wref = (int)i;
                }
            }
            int64_t minrem = 0, retry = 0;
            int never = 0;
            for (size_t i = 0; i < n; i++) {
                if (!all && ds[i].allowed) {
                    rlt_decision pk;
                    mentry *e = mfind(m, ps[i], ks[i]);
                    size_t sz = rlt_state_size(&m->pol[ps[i]]);
                    uint8_t *tmp = malloc(sz);
                    memcpy(tmp, e->state, sz);
                    rlt_decide(&m->pol[ps[i]], tmp, now, 0, &pk);
                    free(tmp);
                    ds[i].remaining = pk.remaining;
                    ds[i].retry_after = 0;
                }
            }
            /* A denied check charges nothing, but a limit with a penalty box that denies on
             * the table's state keeps its block. */
            for (size_t i = 0; i < n && !all; i++) {
                if (ds[i].allowed || m->pol[ps[i]].block <= 0 || c[i].cost <= 0) continue;
                mentry *e = mfind(m, ps[i], ks[i]);
                size_t sz = rlt_state_size(&m->pol[ps[i]]);
                uint8_t *tmp = malloc(sz);
                memcpy(tmp, e->state, sz);
                rlt_decision bd;
                rlt_decide(&m->pol[ps[i]], tmp, now, c[i].cost, &bd);
                if (!bd.allowed) {
                    memcpy(e->state, tmp, sz);
                    ds[i] = bd;
                }
                free(tmp);
            }
            for (size_t i = 0; i < n; i++) {
                ds[i].retry_after = jitter_of(&m->pol[ps[i]], ks[i], now, ds[i].retry_after);
                if (i == 0 || ds[i].remaining < minrem) minrem = ds[i].remaining;
                if (ds[i].retry_after < 0) never = 1;
                if (ds[i].retry_after > retry) retry = ds[i].retry_after;
            }
            if (never) retry = -1;
            for (size_t i = 0; i < n; i++) {
                int first = 1;
                for (size_t j = 0; j < i; j++)
                    if (copy[j] == copy[i]) first = 0;
                if (!first) continue;
                if (all) {
                    mentry *e = mfind(m, ps[i], ks[i]);
                    memcpy(e->state, copy[i], rlt_state_size(&m->pol[ps[i]]));
                }
                free(copy[i]);
            }
            if (rc != RLT_OK || got.allowed != all || refused != wref || got.remaining != minrem ||
                got.retry_after != retry) {
                fprintf(stderr,
                        "seed %llu step %d: multi n=%zu rc %d allowed %d/%d refused %d/%d "
                        "remaining %lld/%lld retry %lld/%lld\n",
                        (unsigned long long)seed, step, n, rc, got.allowed, all, refused, wref,
                        (long long)got.remaining, (long long)minrem, (long long)got.retry_after,
                        (long long)retry);
                failed = 1;
            }
        } else if (op < 88) { /* reset */
            int p = (int)tu_below(&rng, NPOL), k = (int)tu_below(&rng, NKEYS);
            ASSERT_EQ(rlt_store_reset(s, p, keys[k], klens[k]), RLT_OK);
            mentry *e = mfind(m, p, k);
            mdrop(e);
        } else if (op < 96) { /* sweep: drops only fresh entries, the model does nothing */
            size_t budget = tu_below(&rng, 64);
            rlt_store_sweep(s, now, budget);
            if (budget && now > m->last_now) m->last_now = now; /* it saw `now` */
        } else {                                                /* policy change */
            int p = (int)tu_below(&rng, NPOL);
            rlt_policy np = tu_policy(texts[tu_below(&rng, NTEXTS)]);
            rlt_change how = (rlt_change)tu_below(&rng, 3);
            snprintf(name, sizeof name, "p%d", p);
            ASSERT_EQ(rlt_store_set_policy(s, name, &np, how, NULL), RLT_OK);
            rlt_policy old = m->pol[p];
            int reset = how == RLT_CHANGE_RESET || old.algo != np.algo ||
                        rlt_state_size(&old) != rlt_state_size(&np);
            for (int i = 0; i < MAXE; i++) {
                mentry *e = &m->e[i];
                if (!e->used || e->policy != p) continue;
                if (reset || rlt_is_fresh(&old, e->state, m->last_now) ||
                    rlt_state_convert(&old, &np, e->state, m->last_now,
                                      how == RLT_CHANGE_SCALE ? RLT_CONVERT_SCALE
                                                              : RLT_CONVERT_KEEP) != RLT_OK)
                    mdrop(e);
            }
            m->pol[p] = np;
        }
    }
    ASSERT(rlt__store_fps_consistent(s));
    for (int i = 0; i < MAXE; i++)
        if (m->e[i].used) mdrop(&m->e[i]);
    free(m);
    rlt_store_close(s);
    ASSERT(!failed);
}

TEST(store_with_block_and_jitter_policies_matches_naive_map_on_random_operations)
{
    texts = option_texts;
    NTEXTS = sizeof option_texts / sizeof option_texts[0];
    for (uint64_t seed = 1; seed <= 30; seed++) {
        run_model(seed, 0, 4000);
        if (rlt_test_failed_now) break;
    }
    texts = plain_texts;
    NTEXTS = sizeof plain_texts / sizeof plain_texts[0];
}

TEST(store_matches_naive_map_on_random_operations)
{
    for (uint64_t seed = 1; seed <= 30; seed++) {
        run_model(seed, 0, 4000);
        if (rlt_test_failed_now) return;
    }
}

/* The store's GCRA hot path (rlt__gcra_hot) gives rlt_decide's decision, padding bytes
 * included, and leaves the same state, for every request it is allowed to take: costs 1..burst
 * at 0 <= now < rlt__gcra_hot_end, on states from fresh to far in the future (a clock that
 * stepped back, a policy change that kept more than the new burst), at the ends of the range. */
TEST(gcra_hot_path_gives_rlt_decides_answers)
{
    static const char *const gcra[] = {
        "gcra:1000/1s,burst=1000", "gcra:5/100ms,burst=8", "gcra:9/200ms",
        "gcra:3/7ns,burst=1",      "gcra:1/1d,burst=5",    "gcra:999999937/1h,burst=3"};
    uint64_t rng = 11;
    for (size_t t = 0; t < sizeof gcra / sizeof gcra[0]; t++) {
        rlt_policy p = tu_policy(gcra[t]);
        const uint64_t end = rlt__gcra_hot_end(&p);
        ASSERT(end > 0);
        for (int k = 0; k < 20000; k++) {
            rlt_ns now;
            switch (tu_below(&rng, 4)) {
            case 0:
                now = (rlt_ns)tu_below(&rng, 1000);
                break;
            case 1:
                now = (rlt_ns)(end - 1 - tu_below(&rng, 1000));
                break;
            default:
                now = (rlt_ns)tu_below(&rng, end);
                break;
            }
            const int64_t cost = 1 + (int64_t)tu_below(&rng, (uint64_t)p.burst);
            /* A state from a past decision: tat x scale around now x scale, or fresh. */
            uint8_t st[8] = {0}, ref[8];
            if (tu_below(&rng, 8)) {
                rlt_decision warm;
                rlt_ns past = now - (rlt_ns)tu_below(&rng, (uint64_t)p.period * 2 + 1);
                for (int j = (int)tu_below(&rng, (uint64_t)p.burst + 3); j >= 0; j--)
                    rlt_decide(&p, st, past, 1 + (int64_t)tu_below(&rng, (uint64_t)p.burst), &warm);
            }
            memcpy(ref, st, sizeof st);
            rlt_decision got, want;
            memset(&got, 0xa5, sizeof got);
            memset(&want, 0x5a, sizeof want);
            rlt__gcra_hot(&p, st, now, cost, &got);
            ASSERT_EQ(rlt_decide(&p, ref, now, cost, &want), RLT_OK);
            if (memcmp(&got, &want, sizeof got) != 0 || memcmp(st, ref, sizeof st) != 0)
                RLT_FAIL_("%s now %lld cost %lld: allowed %d/%d remaining %lld/%lld retry "
                          "%lld/%lld reset %lld/%lld",
                          gcra[t], (long long)now, (long long)cost, got.allowed, want.allowed,
                          (long long)got.remaining, (long long)want.remaining,
                          (long long)got.retry_after, (long long)want.retry_after,
                          (long long)got.reset_after, (long long)want.reset_after);
        }
    }
    /* Other algorithms never take it. */
    rlt_policy tb = tu_policy("token_bucket:7/50ms");
    ASSERT_EQ(rlt__gcra_hot_end(&tb), 0);
}
