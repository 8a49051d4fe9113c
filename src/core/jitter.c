/* Jitter: a deterministic per-key spread of retry_after, so that clients told the same wait
 * do not all come back in the same instant.
 *
 * Maths: with exact > 0 and P = p->jitter percent, span = floor(exact x P / 100) (in __int128:
 * exact x 100 cannot overflow there) and
 *     r = splitmix64(key_hash ^ splitmix64(now))      (a stable 64-bit mix of key and instant)
 *     jitter(exact) = exact + floor(r x (span + 1) / 2^64)
 * which lies in [exact, exact + span]: never below the exact wait, so a client that waits what
 * it is told succeeds.  The multiply-shift maps r onto 0..span with a bias below
 * (span + 1) / 2^64, nothing at any span a duration reaches.  The same (key_hash, now, exact)
 * gives the same value on every backend and in every test. */
#include "internal.h"

static uint64_t splitmix64(uint64_t x)
{
    x += UINT64_C(0x9e3779b97f4a7c15);
    x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
    return x ^ (x >> 31);
}

int rlt_policy_set_jitter(rlt_policy *p, int64_t percent)
{
    if (!p || p->scale_ <= 0 || percent < 0 || percent > 100) return RLT_EINVAL;
    p->jitter = percent;
    return RLT_OK;
}

rlt_ns rlt_jitter(const rlt_policy *p, uint64_t key_hash, rlt_ns now, rlt_ns exact)
{
    if (!p || exact <= 0 || p->jitter <= 0 || p->jitter > 100) return exact;
    unsigned __int128 span = (unsigned __int128)exact * (uint64_t)p->jitter / 100;
    uint64_t r = splitmix64(key_hash ^ splitmix64((uint64_t)now));
    uint64_t add = (uint64_t)(((unsigned __int128)r * (span + 1)) >> 64);
    return rlt__sat_add(exact, (int64_t)add); /* add <= span <= exact: fits int64 */
}
