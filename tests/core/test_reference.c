/* Every algorithm against a simple exact reference model written independently here (brute
 * force with __int128 and exact fractions, no scaled units): token bucket with tokens x W as
 * an integer, sliding log as a plain list, fixed window as a map of window -> count, sliding
 * counter as per-window counts with a searched retry time, leaky bucket as an exact rational
 * drain time.  All decision fields are compared on seeded random traces (clock never stepping
 * back, from t >= 0); every retry_after is verified by re-deciding on a copy of the state at
 * now + retry_after - 1 (denied) and now + retry_after (allowed), and rlt_when must agree. */
#include "core_util.h"

#define TRACES 150
#define STEPS 250
#define MAXE 4096

typedef struct model {
    rlt_policy p;
    /* token bucket / GCRA: tokens x W (exact), refill N per ns in these units */
    i128 tok;
    rlt_ns last;
    /* sliding log: one timestamp per unit of admitted cost */
    rlt_ns log[MAXE];
    int nlog;
    /* fixed window and sliding counter: admitted cost per aligned window */
    int64_t win[MAXE];
    int64_t cnt[MAXE];
    int nwin;
    /* leaky bucket: the queue drains at tat_n / N ns (exact rational) */
    i128 tat_n;
    bool leaky_used;
} model;

static i128 ceil_div128(i128 a, i128 b) /* b > 0 */
{
    i128 q = a / b;
    return (a % b != 0 && a > 0) ? q + 1 : q;
}
static i128 floor_div128(i128 a, i128 b) /* b > 0 */
{
    i128 q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

static int64_t *count_of(model *m, int64_t k)
{
    for (int i = 0; i < m->nwin; i++)
        if (m->win[i] == k) return &m->cnt[i];
    if (m->nwin == MAXE) abort();
    m->win[m->nwin] = k;
    m->cnt[m->nwin] = 0;
    return &m->cnt[m->nwin++];
}

static void model_init(model *m, const rlt_policy *p, rlt_ns start)
{
    memset(m, 0, sizeof *m);
    m->p = *p;
    m->tok = (i128)p->burst * p->period;
    m->last = start;
}

/* ---- token bucket ------------------------------------------------------------------------ */
static rlt_decision tb_decide(model *m, rlt_ns now, int64_t cost, int commit)
{
    const rlt_policy *p = &m->p;
    const i128 W = p->period, cap = (i128)p->burst * W;
    i128 tok = m->tok + (i128)(now - m->last) * p->limit;
    if (tok > cap) tok = cap;
    int64_t need = cost > 0 ? cost : 1;
    rlt_decision d = {.limit = p->burst};
    if (need > p->burst) {
        d.retry_after = -1;
    } else if (tok >= need * W) {
        d.allowed = true;
        if (cost > 0) tok -= cost * W;
    } else {
        d.retry_after = (rlt_ns)ceil_div128(need * W - tok, p->limit);
    }
    d.remaining = (int64_t)(tok / W);
    d.reset_after = (rlt_ns)ceil_div128(cap - tok, p->limit);
    if (commit) {
        m->tok = tok;
        m->last = now;
    }
    return d;
}

/* ---- sliding log ------------------------------------------------------------------------- */
static int cmp_ns(const void *a, const void *b)
{
    rlt_ns x = *(const rlt_ns *)a, y = *(const rlt_ns *)b;
    return (x > y) - (x < y);
}

static rlt_decision log_decide(model *m, rlt_ns now, int64_t cost, int commit)
{
    const rlt_policy *p = &m->p;
    rlt_ns live[MAXE];
    int n = 0;
    for (int i = 0; i < m->nlog; i++)
        if (now - m->log[i] < p->period) live[n++] = m->log[i];
    qsort(live, (size_t)n, sizeof live[0], cmp_ns);
    int64_t need = cost > 0 ? cost : 1;
    rlt_decision d = {.limit = p->limit};
    if (need > p->limit) {
        d.retry_after = -1;
    } else if (n + need <= p->limit) {
        d.allowed = true;
    } else {
        /* the (n + need - N)-th oldest live entry must leave */
        d.retry_after = live[n + need - p->limit - 1] + p->period - now;
    }
    if (d.allowed && cost > 0)
        for (int64_t i = 0; i < cost; i++)
            live[n++] = now;
    d.remaining = p->limit - n;
    for (int i = 0; i < n; i++)
        if (live[i] + p->period - now > d.reset_after) d.reset_after = live[i] + p->period - now;
    if (commit) {
        memcpy(m->log, live, sizeof live[0] * (size_t)n);
        m->nlog = n;
    }
    return d;
}

/* ---- fixed window ------------------------------------------------------------------------ */
static rlt_decision fw_decide(model *m, rlt_ns now, int64_t cost, int commit)
{
    const rlt_policy *p = &m->p;
    int64_t k = (int64_t)floor_div128(now, p->period);
    int64_t *c = count_of(m, k), count = *c;
    rlt_ns end = (k + 1) * p->period - now;
    int64_t need = cost > 0 ? cost : 1;
    rlt_decision d = {.limit = p->limit};
    if (need > p->limit)
        d.retry_after = -1;
    else if (count + need <= p->limit)
        d.allowed = true;
    else
        d.retry_after = end;
    if (d.allowed && cost > 0) count += cost;
    d.remaining = p->limit - count;
    d.reset_after = count > 0 ? end : 0;
    if (commit) *c = count;
    return d;
}

/* ---- sliding window counter -------------------------------------------------------------- */
/* Would `need` fit at t with the counts as they are?  prev x (W - e) + (curr + need) x W <= NW */
static bool sw_fits(model *m, rlt_ns t, int64_t need)
{
    const rlt_policy *p = &m->p;
    int64_t k = (int64_t)floor_div128(t, p->period);
    i128 e = (i128)t - (i128)k * p->period;
    i128 prev = *count_of(m, k - 1), curr = *count_of(m, k);
    return prev * (p->period - e) + (curr + need) * p->period <= (i128)p->limit * p->period;
}

static rlt_decision sw_decide(model *m, rlt_ns now, int64_t cost, int commit)
{
    const rlt_policy *p = &m->p;
    const i128 W = p->period;
    int64_t k = (int64_t)floor_div128(now, p->period);
    int64_t need = cost > 0 ? cost : 1;
    rlt_decision d = {.limit = p->limit};
    if (need > p->limit) {
        d.retry_after = -1;
    } else if (sw_fits(m, now, need)) {
        d.allowed = true;
    } else {
        /* the estimate never grows with time: binary search the first t that fits */
        rlt_ns lo = now, hi = now + 2 * p->period; /* fits at hi: both counts gone */
        while (hi - lo > 1) {
            rlt_ns mid = lo + (hi - lo) / 2;
            if (sw_fits(m, mid, need))
                hi = mid;
            else
                lo = mid;
        }
        d.retry_after = hi - now;
    }
    int64_t *curr = count_of(m, k), prev = *count_of(m, k - 1);
    int64_t after = *curr + (d.allowed && cost > 0 ? cost : 0);
    i128 e = (i128)now - (i128)k * W;
    i128 left = (i128)p->limit * W - prev * (W - e) - (i128)after * W;
    d.remaining = left <= 0 ? 0 : (int64_t)(left / W);
    if (after > 0)
        d.reset_after = (k + 2) * p->period - now;
    else if (prev > 0)
        d.reset_after = (k + 1) * p->period - now;
    if (commit) *curr = after;
    return d;
}

/* ---- leaky bucket ------------------------------------------------------------------------ */
static rlt_decision lb_decide(model *m, rlt_ns now, int64_t cost, int commit)
{
    const rlt_policy *p = &m->p;
    const i128 N = p->limit, W = p->period;
    /* backlog x N, in ns x N */
    i128 b = m->leaky_used && m->tat_n > (i128)now * N ? m->tat_n - (i128)now * N : 0;
    int64_t need = cost > 0 ? cost : 1;
    rlt_decision d = {.limit = p->queue + 1};
    i128 after = b;
    if (need > p->queue + 1) {
        d.retry_after = -1;
    } else if (b <= (p->queue - need + 1) * W) {
        d.allowed = true;
        i128 free_n = (i128)p->delay * W;
        if (b > free_n) d.delay = (rlt_ns)ceil_div128(b - free_n, N);
        if (cost > 0) after = b + cost * W;
    } else {
        d.retry_after = (rlt_ns)ceil_div128(b - (p->queue - need + 1) * W, N);
    }
    d.remaining = after > (i128)p->queue * W ? 0 : (int64_t)(((i128)p->queue * W - after) / W) + 1;
    d.reset_after = (rlt_ns)ceil_div128(after, N);
    if (commit && d.allowed && cost > 0) {
        m->tat_n = (i128)now * N + after;
        m->leaky_used = true;
    }
    return d;
}

static rlt_decision model_decide(model *m, rlt_ns now, int64_t cost, int commit)
{
    switch (m->p.algo) {
    case RLT_TOKEN_BUCKET:
    case RLT_GCRA:
        return tb_decide(m, now, cost, commit);
    case RLT_SLIDING_LOG:
        return log_decide(m, now, cost, commit);
    case RLT_FIXED_WINDOW:
        return fw_decide(m, now, cost, commit);
    case RLT_SLIDING_WINDOW:
        return sw_decide(m, now, cost, commit);
    case RLT_LEAKY_BUCKET:
        return lb_decide(m, now, cost, commit);
    default:
        abort();
    }
}

/* retry_after is exact: on copies of the state, denied 1 ns earlier, allowed at it; and
 * rlt_when agrees. */
static void check_retry(uint64_t seed, const rlt_policy *p, const void *st, rlt_ns now,
                        int64_t cost, const rlt_decision *d)
{
    if (cost == 0) return;
    rlt_ns at = 0;
    int rc = rlt_when(p, st, now, cost, &at);
    if (d->allowed) {
        CHECK_EQ(seed, rc, RLT_OK);
        CHECK_EQ(seed, at, now);
        return;
    }
    if (d->retry_after < 0) {
        CHECK_EQ(seed, rc, RLT_ENEVER);
        return;
    }
    CHECK(seed, d->retry_after > 0);
    CHECK_EQ(seed, rc, RLT_OK);
    CHECK_EQ(seed, at, now + d->retry_after);
    void *c = dup_state(p, st);
    rlt_decision e;
    CHECK_EQ(seed, rlt_decide(p, c, now + d->retry_after - 1, cost, &e), RLT_OK);
    bool early = e.allowed;
    memcpy(c, st, rlt_state_size(p));
    CHECK_EQ(seed, rlt_decide(p, c, now + d->retry_after, cost, &e), RLT_OK);
    bool ontime = e.allowed;
    free(c);
    CHECK(seed, !early);
    CHECK(seed, ontime);
}

static void run_against_model(rlt_algo algo, uint64_t base)
{
    static model m;
    int64_t denied = 0, allowed = 0;
    for (int tr = 0; tr < TRACES; tr++) {
        uint64_t seed = base + (uint64_t)tr;
        rng r = {seed};
        rlt_policy p = random_policy(&r, algo);
        void *st = new_state(&p);
        rlt_ns now = rng_range(&r, 0, 4 * p.period);
        model_init(&m, &p, now);
        for (int i = 0; i < STEPS; i++) {
            now += random_step(&r, &p);
            int64_t cost = random_cost(&r, &p);
            rlt_decision want = model_decide(&m, now, cost, 0), got;
            check_retry(seed, &p, st, now, cost, &want);
            if (rlt_test_failed_now) break;
            CHECK_EQ(seed, rlt_decide(&p, st, now, cost, &got), RLT_OK);
            model_decide(&m, now, cost, 1);
            denied += !got.allowed && got.retry_after > 0;
            allowed += got.allowed;
            if (got.allowed != want.allowed || got.limit != want.limit ||
                got.remaining != want.remaining || got.retry_after != want.retry_after ||
                got.reset_after != want.reset_after || got.delay != want.delay) {
                char text[128];
                rlt_policy_format(&p, text, sizeof text);
                FAIL_SEED(seed,
                          "%s step %d now=%lld cost=%lld: got allowed=%d limit=%lld "
                          "remaining=%lld retry=%lld reset=%lld delay=%lld; model allowed=%d "
                          "limit=%lld remaining=%lld retry=%lld reset=%lld delay=%lld",
                          text, i, (long long)now, (long long)cost, got.allowed,
                          (long long)got.limit, (long long)got.remaining,
                          (long long)got.retry_after, (long long)got.reset_after,
                          (long long)got.delay, want.allowed, (long long)want.limit,
                          (long long)want.remaining, (long long)want.retry_after,
                          (long long)want.reset_after, (long long)want.delay);
            }
        }
        free(st);
        if (rlt_test_failed_now) return;
    }
    /* the traces must exercise both outcomes, or the comparison proves little */
    ASSERT(denied > TRACES * STEPS / 10);
    ASSERT(allowed > TRACES * STEPS / 10);
}

TEST(token_bucket_matches_exact_fraction_model)
{
    run_against_model(RLT_TOKEN_BUCKET, test_seed(0xa100));
}

TEST(gcra_matches_exact_fraction_model)
{
    run_against_model(RLT_GCRA, test_seed(0xa200));
}

TEST(sliding_log_matches_plain_list_model)
{
    run_against_model(RLT_SLIDING_LOG, test_seed(0xa300));
}

TEST(fixed_window_matches_window_map_model)
{
    run_against_model(RLT_FIXED_WINDOW, test_seed(0xa400));
}

TEST(sliding_window_matches_weighted_count_model)
{
    run_against_model(RLT_SLIDING_WINDOW, test_seed(0xa500));
}

TEST(leaky_bucket_matches_exact_drain_model)
{
    run_against_model(RLT_LEAKY_BUCKET, test_seed(0xa600));
}
