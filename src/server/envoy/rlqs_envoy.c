/* The quota state's answers in a real Envoy's terms (rlqs_envoy.h): whole-second durations,
 * the move of a bucket to the division of its real TTL, the penalty box's trigger and shadow
 * mode's would-be denials. */
#include "server/envoy/rlqs_envoy.h"

rlt_ns rlt__rlqs_fill(rlt_ns period)
{
    rlt_ns s = period / RLT_NS_PER_S + (period % RLT_NS_PER_S != 0);
    return (s > 0 ? s : 1) * RLT_NS_PER_S;
}

int rlt__rlqs_budget_of(const rlt_policy *p, rlt__quota_budget *out)
{
    rlt_ns f = rlt__rlqs_fill(p->period);
    /* F >= P, so Q >= N >= 1; N and F/1s are small enough for 128 bits */
    __int128 q = (__int128)p->limit * f / p->period;
    if (q > RLT__QUOTA_TOKENS_MAX) return RLT_ERANGE;
    *out = (rlt__quota_budget){.limit = (int64_t)q,
                               .period = f,
                               .burst = p->burst > 0 ? p->burst : p->limit,
                               .fill_interval = f};
    return RLT_OK;
}

rlt_ns rlt__rlqs_whole_ttl(rlt_ns ttl)
{
    return ttl > 0 ? ttl / RLT_NS_PER_S * RLT_NS_PER_S : 0;
}

int rlt__rlqs_move(rlt__quota *from, uint32_t fqb, uint32_t mover, rlt_ns old_ttl, rlt__quota *to,
                     const rlt__quota_budget *full, rlt_ns now, uint32_t *qb, rlt_ns *until)
{
    rlt__quota_totals t;
    if (rlt__quota_bucket_totals(from, fqb, now, &t) != RLT_OK) t = (rlt__quota_totals){0};
    rlt__quota_member_info mi;
    if (rlt__quota_member(from, mover, fqb, now, &mi) == RLT_OK && mi.live.expires_at > now) {
        t.tokens_per_fill -= mi.live.tokens_per_fill;
        t.max_tokens -= mi.live.max_tokens;
    }
    uint32_t id;
    int e = rlt__quota_bucket_open(to, full, &id);
    if (e != RLT_OK) return e;
    rlt__quota_bucket_close(from, fqb);
    *qb = id;
    *until = 0;
    if (t.tokens_per_fill == 0 && t.max_tokens == 0) return RLT_OK;
    /* The old ledger's live sums only fall from here (a closed bucket is assigned nothing), so
     * the new one dividing what was free at the move keeps the two together within Q and B;
     * every old assignment was sent at or before now with at most the old TTL. */
    rlt__quota_budget low = *full;
    low.limit = full->limit > t.tokens_per_fill ? full->limit - t.tokens_per_fill : 0;
    low.burst = full->burst > t.max_tokens ? full->burst - t.max_tokens : 0;
    rlt__quota_bucket_budget(to, id, &low);
    *until = now + old_ttl;
    return RLT_OK;
}

bool rlt__rlqs_box_due(const rlt__quota *dv, uint32_t qb, rlt_ns now)
{
    rlt__quota_totals t;
    return rlt__quota_bucket_totals(dv, qb, now, &t) == RLT_OK && t.fill_capacity > 0 &&
           t.demand >= t.fill_capacity;
}

uint64_t rlt__rlqs_shadow_denied(const rlt__quota_assignment *a, rlt_ns now, uint64_t count,
                                   rlt_ns elapsed)
{
    if (a->expires_at <= now || elapsed <= 0 || a->fill_interval <= 0) return 0;
    if (a->deny_all) return count;
    __int128 ok = (__int128)a->tokens_per_fill * elapsed / a->fill_interval;
    return (__int128)count > ok ? count - (uint64_t)ok : 0;
}
