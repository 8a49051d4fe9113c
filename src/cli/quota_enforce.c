/* Local enforcement of an RLQS assignment (quota_enforce.h): the token bucket in exact integer
 * units of 1 / fill_interval_ns token, so that a refill of elapsed x tokens_per_fill units
 * loses nothing to rounding.  max_tokens < 2^32 and fill_interval_ns < 2^63 keep a full
 * bucket under 2^95; the refill is clamped to a full bucket before it is added. */
#include "cli/quota_enforce.h"

#include <assert.h>
#include <stddef.h>

typedef unsigned __int128 u128;

static u128 full(const rlt__qe_assignment *a)
{
    return (u128)a->max_tokens * (u128)a->fill_interval_ns;
}

static bool live(const rlt__qe_bucket *b, int64_t now)
{
    return b->a.kind != RLT__QE_NONE && now < b->expires_ns;
}

bool rlt__qe_assign(rlt__qe_bucket *b, const rlt__qe_assignment *a, int64_t now)
{
    if (a->ttl_ns < 0) return false;
    if (a->kind == RLT__QE_TOKEN_BUCKET &&
        (a->max_tokens == 0 || a->tokens_per_fill == 0 || a->fill_interval_ns <= 0))
        return false;
    if (a->kind == RLT__QE_NONE) {
        b->a = (rlt__qe_assignment){.kind = RLT__QE_NONE};
        b->expires_ns = 0;
        b->units = 0;
        return true;
    }
    bool same = live(b, now) && a->kind == RLT__QE_TOKEN_BUCKET &&
                b->a.kind == RLT__QE_TOKEN_BUCKET && b->a.max_tokens == a->max_tokens &&
                b->a.tokens_per_fill == a->tokens_per_fill &&
                b->a.fill_interval_ns == a->fill_interval_ns;
    if (!same && a->kind == RLT__QE_TOKEN_BUCKET) {
        b->units = full(a);
        b->last_ns = now;
    }
    b->a = *a;
    if (__builtin_add_overflow(now, a->ttl_ns, &b->expires_ns)) b->expires_ns = INT64_MAX;
    return true;
}

rlt__qe_kind rlt__qe_state(const rlt__qe_bucket *b, int64_t now, bool *expired)
{
    *expired = false;
    if (b->a.kind == RLT__QE_NONE) return RLT__QE_NONE;
    if (live(b, now)) return b->a.kind;
    *expired = true;
    return b->expired_allow ? RLT__QE_ALLOW_ALL : RLT__QE_DENY_ALL;
}

/* The units after refilling up to `now` (never beyond a full bucket; nothing when the clock
 * stepped back). */
static u128 refilled(const rlt__qe_bucket *b, int64_t now)
{
    u128 cap = full(&b->a), u = b->units;
    if (now <= b->last_ns || u >= cap) return u < cap ? u : cap;
    u128 add = (u128)(uint64_t)(now - b->last_ns) * b->a.tokens_per_fill;
    return add >= cap - u ? cap : u + add;
}

int64_t rlt__qe_tokens(const rlt__qe_bucket *b, int64_t now)
{
    if (!live(b, now) || b->a.kind != RLT__QE_TOKEN_BUCKET) return 0;
    return (int64_t)(refilled(b, now) / (u128)b->a.fill_interval_ns);
}

bool rlt__qe_admit(rlt__qe_bucket *b, int64_t now)
{
    bool expired;
    switch (rlt__qe_state(b, now, &expired)) {
    case RLT__QE_NONE:
        return !b->no_assignment_deny;
    case RLT__QE_ALLOW_ALL:
        return true;
    case RLT__QE_DENY_ALL:
        return false;
    case RLT__QE_TOKEN_BUCKET:
        break;
    }
    assert(b->a.fill_interval_ns > 0);
    b->units = refilled(b, now);
    if (now > b->last_ns) b->last_ns = now;
    u128 one = (u128)b->a.fill_interval_ns;
    if (b->units < one) return false;
    b->units -= one;
    return true;
}
