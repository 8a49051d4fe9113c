/* Penalty box: a block of every request of a key after a denial, on any algorithm.
 *
 * State: 16 bytes after the algorithm's own (at offset rlt__algo_state_size(p), a multiple of
 * 8), so all-zero is still fresh and a policy without block= keeps its size:
 *
 *   until  int64 ns, sign bit flipped (all-zero = INT64_MIN = "never blocked"): the end of the
 *          latest block, exclusive: requests at now < until are blocked
 *   level  int64 >= 0: how many consecutive escalations the latest block carried
 *
 * Maths, with b = block, f = block_factor, M = block_max, W = the policy's period:
 *   len(k) = min(b x f^k, M)                      (f = 1: len(k) = b for every k)
 *   blocked at now  iff  now < until
 *   a breach (a request of cost >= 1 that the algorithm denies with retry_after >= 0, while not
 *   blocked) at t starts a block [t, t + len(k)) with
 *       k = level + 1 (capped where len reaches M)  if until <= t < until + W
 *       k = 0                                       otherwise (never blocked, or long ago)
 *   while blocked: denied, retry_after = max(until - now, the algorithm's own wait),
 *       remaining 0, nothing charged to the algorithm's state (a rejected request consumes
 *       nothing); a cost that can never fit still says -1.
 *   a breach: retry_after = max(len(k), the algorithm's own wait).
 * The block fields matter until until + W when f > 1 (a breach then escalates), until `until`
 * when f = 1: that is when the block part is fresh, and reset_after reaches at least there.
 * Peeks (cost 0) and rlt_when see a block and never start one.  A clock that steps back sees a
 * longer block, never a shorter one.  Every sum saturates: a block ending past INT64_MAX never
 * ends, which is what a block that long means. */
#include "algo.h"

typedef struct blk_state {
    int64_t until; /* flipped on load/store */
    int64_t level;
} blk_state;

#define BLK_LEVEL_MAX 64 /* len(64) >= b x 2^64 > INT64_MAX >= M: never reached */

static blk_state blk_load(const void *st, size_t off)
{
    blk_state s;
    memcpy(&s, (const unsigned char *)st + off, sizeof s);
    s.until = (int64_t)((uint64_t)s.until ^ (UINT64_C(1) << 63));
    return s;
}

static void blk_store(void *st, size_t off, blk_state s)
{
    s.until = (int64_t)((uint64_t)s.until ^ (UINT64_C(1) << 63));
    memcpy((unsigned char *)st + off, &s, sizeof s);
}

/* len(k), and whether k is the first level at which len reaches M (no further escalation). */
static rlt_ns block_len(const rlt_policy *p, int64_t k, bool *top)
{
    rlt_ns len = p->block;
    for (int64_t i = 0; i < k && len < p->block_max; i++) {
        rlt_ns next;
        len = __builtin_mul_overflow(len, p->block_factor, &next) || next > p->block_max
                  ? p->block_max
                  : next;
    }
    *top = len >= p->block_max;
    return len;
}

/* Until when the block fields can change a decision: the block's end, and W more when a
 * breach then would escalate. */
static rlt_ns memory_end(const rlt_policy *p, blk_state s)
{
    if (s.until == INT64_MIN) return INT64_MIN;
    return p->block_factor > 1 ? rlt__sat_add(s.until, p->period) : s.until;
}

size_t rlt__block_size(const rlt_policy *p)
{
    return p->block > 0 ? sizeof(blk_state) : 0;
}

int rlt_policy_set_block(rlt_policy *p, rlt_ns block, int64_t factor, rlt_ns block_max)
{
    if (!p || p->scale_ <= 0 || block < 0) return RLT_EINVAL;
    if (block == 0) {
        p->block = p->block_factor = p->block_max = 0;
        return RLT_OK;
    }
    if (factor < 1 || (factor > 1 && block_max < block)) return RLT_EINVAL;
    p->block = block;
    p->block_factor = factor;
    p->block_max = factor > 1 ? block_max : block;
    return RLT_OK;
}

int rlt__block_decide(const rlt_policy *p, void *st, rlt_ns now, int64_t cost, rlt_decision *d,
                      int commit)
{
    const size_t off = rlt__algo_state_size(p);
    blk_state s = blk_load(st, off);
    if (now < s.until) {
        /* Blocked: ask the algorithm without charging it, then deny. */
        int rc = rlt__algo_decide(p, st, now, cost, d, 0);
        if (rc) return rc;
        if (!d->allowed && d->retry_after < 0) return RLT_OK; /* can never fit: still -1 */
        rlt_ns left = rlt__sat_sub(s.until, now), mem = rlt__sat_sub(memory_end(p, s), now);
        d->allowed = false;
        if (left > d->retry_after) d->retry_after = left;
        if (mem > d->reset_after) d->reset_after = mem;
        d->remaining = 0;
        d->delay = 0;
        d->lease = 0;
        return RLT_OK;
    }
    int rc = rlt__algo_decide(p, st, now, cost, d, commit);
    if (rc) return rc;
    if (!d->allowed && d->retry_after >= 0 && cost > 0 && commit) {
        bool top;
        int64_t k = 0;
        if (s.until != INT64_MIN && now < rlt__sat_add(s.until, p->period)) {
            block_len(p, s.level, &top);
            k = top || s.level >= BLK_LEVEL_MAX ? s.level : s.level + 1;
        }
        rlt_ns len = block_len(p, k, &top);
        s.until = rlt__sat_add(now, len);
        s.level = k;
        blk_store(st, off, s);
        if (len > d->retry_after) d->retry_after = len;
        d->remaining = 0;
    }
    rlt_ns mem = rlt__sat_sub(memory_end(p, s), now);
    if (mem > d->reset_after) d->reset_after = mem;
    return RLT_OK;
}

bool rlt__block_fresh(const rlt_policy *p, const void *st, rlt_ns now)
{
    return now >= memory_end(p, blk_load(st, rlt__algo_state_size(p)));
}

bool rlt__block_valid(const rlt_policy *p, const void *st)
{
    blk_state s = blk_load(st, rlt__algo_state_size(p));
    return s.level >= 0 && s.level <= BLK_LEVEL_MAX && (s.until != INT64_MIN || s.level == 0);
}

/* Toward the future a block end saturates at INT64_MAX (a longer block: never mints); toward
 * the past at INT64_MIN + 1, which stays "blocked once", not "never". */
void rlt__block_shift(const rlt_policy *p, void *st, rlt_ns delta)
{
    const size_t off = rlt__algo_state_size(p);
    blk_state s = blk_load(st, off);
    if (s.until == INT64_MIN) return;
    s.until = rlt__sat_add(s.until, delta);
    if (s.until == INT64_MIN) s.until = INT64_MIN + 1;
    blk_store(st, off, s);
}
