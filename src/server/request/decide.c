/* The decision seam: every decision ratelimitd makes goes through these functions, which call
 * the backend chosen at start (backend.h: the local store, or Redis) through its table of
 * operations, and count the outcome per policy.  Shadow mode is applied here, the same for
 * both. */
#include "server/request/decide.h"

#include "server/backend/backend.h"
#include "server/base/log.h"
#include "server/request/srv.h"
#include "server/stats/top.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void count(rlt__srv *s, int id, bool allowed, bool shadowed)
{
    rlt__mslot *m = rlt__mslot_get(&s->metrics);
    size_t i = id >= 0 && id < RLT__METRIC_IDS ? (size_t)id : RLT__METRIC_IDS - 1;
    if (shadowed) rlt__mcount(&m->shadowed[i], 1);
    if (allowed)
        rlt__mcount(&m->allowed[i], 1);
    else
        rlt__mcount(&m->denied[i], 1);
}

/* Shadow-mode log lines: at most RLT__SHADOW_LOG_PER_S per second per thread (a worker), the
 * rest counted and summed up in one line when the next second's first line is written.
 * Per-thread state, not scratch (tests/docs/thread_state.sh): 24 bytes a thread that outlive
 * requests. */
typedef struct shadow_log {
    int64_t second; /* the daemon clock's second of the lines counted in `lines` */
    unsigned lines;
    uint64_t suppressed;
} shadow_log;
static __thread shadow_log tl_log;

/* Escapes a key for one log line: printable ASCII as is (backslash and quote escaped), other
 * bytes as \xHH, at most 64 key bytes (then "..."). */
static void escape_key(const unsigned char *k, size_t n, char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0, max = n > 64 ? 64 : n;
    for (size_t i = 0; i < max && o + 5 < cap; i++) {
        unsigned char c = k[i];
        if (c == '\\' || c == '"') {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c >= 32 && c < 127) {
            out[o++] = (char)c;
        } else {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    if (max < n && o + 4 < cap) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
}

static void log_shadow(rlt__srv *s, int id, const void *key, size_t klen, int64_t cost,
                       rlt_ns retry_after, rlt_ns now)
{
    shadow_log *l = &tl_log;
    int64_t sec = now / RLT_NS_PER_S;
    if (sec != l->second) {
        if (l->suppressed > 0) {
            rlt__log(RLT__LOG_NOTICE, "shadow: suppressed %llu lines (more than %d per second)",
                     (unsigned long long)l->suppressed, RLT__SHADOW_LOG_PER_S);
        }
        l->second = sec;
        l->lines = 0;
        l->suppressed = 0;
    }
    if (l->lines >= RLT__SHADOW_LOG_PER_S) {
        l->suppressed++;
        return;
    }
    l->lines++;
    char name[RLT__STR_MAX], esc[64 * 4 + 8];
    if (id >= 0)
        rlt__srv_policy_name(s, id, name, sizeof name);
    else
        snprintf(name, sizeof name, "(tier)");
    escape_key(key, klen, esc, sizeof esc);
    long long retry_ms = (long long)rlt_retry_after_ms(retry_after);
    rlt__log(RLT__LOG_NOTICE,
             "shadow: would deny policy=%s key=\"%s\" cost=%lld retry_after_ms=%lld", name, esc,
             (long long)cost, retry_ms);
}

/* Applies shadow mode to decision d of item (id, key, cost) and counts it. */
static void settle(rlt__srv *s, const rlt__config *c, int id, bool shadow, const void *key,
                   size_t klen, int64_t cost, rlt_ns now, rlt_decision *d)
{
    bool shadowed = false;
    if (!d->allowed && cost > 0) rlt__top_denied(s->top, id, key, klen);
    if (!d->allowed && cost > 0 && (shadow || c->set.shadow_mode)) {
        /* Would have been denied: report allowed, charge nothing (the store charged nothing
         * for the denial either), and say so in the log. */
        shadowed = true;
        log_shadow(s, id, key, klen, cost, d->retry_after, now);
        d->allowed = true;
        d->retry_after = 0;
    }
    count(s, id, d->allowed, shadowed);
}

const char *rlt__decide_backend_name(const rlt__srv *s)
{
    return s->be ? s->be->ops->name : "none";
}

int rlt__decide(rlt__srv *s, int policy_id, bool shadow, const void *key, size_t klen, rlt_ns now,
                int64_t cost, rlt_decision *d)
{
    int st = s->be->ops->decide(s->be, policy_id, key, klen, now, cost, d);
    if (st != RLT_OK) return st;
    settle(s, rlt__srv_config(s), policy_id, shadow, key, klen, cost, now, d);
    return RLT_OK;
}

int rlt__decide_class(rlt__srv *s, int policy_id, bool shadow, const void *key, size_t klen,
                      rlt_ns now, int64_t cost, rlt_class c, int reserve_pct, rlt_decision *d)
{
    rlt_policy p;
    if (c != RLT_CLASS_CRITICAL && reserve_pct < 0) /* the policy's reserve= (0: none) */
        reserve_pct = rlt__registry_policy(&s->reg, policy_id, &p) == RLT_OK ? p.reserve : 0;
    if (c == RLT_CLASS_CRITICAL || reserve_pct == 0)
        return rlt__decide(s, policy_id, shadow, key, klen, now, cost, d);
    if (s->be->ops->decide_class == NULL) return RLT_EBACKEND;
    int st = s->be->ops->decide_class(s->be, policy_id, key, klen, now, cost, c, reserve_pct, d);
    if (st != RLT_OK) return st;
    settle(s, rlt__srv_config(s), policy_id, shadow, key, klen, cost, now, d);
    return RLT_OK;
}

void rlt__decide_batch(rlt__srv *s, const int *policy, const bool *shadow, const rlt_key *keys,
                       size_t n, rlt_ns now, const int64_t *costs, rlt_decision *out, int *status)
{
    if (n == 0) return;
    s->be->ops->decide_batch(s->be, policy, keys, n, now, costs, out, status);
    const rlt__config *c = rlt__srv_config(s);
    for (size_t i = 0; i < n; i++)
        if (status[i] == RLT_OK)
            settle(s, c, policy[i], shadow[i], keys[i].key, keys[i].klen, costs[i], now, &out[i]);
}

int rlt__decide_tier(rlt__srv *s, const char *default_tier, const void *key, size_t klen,
                     rlt_ns now, int64_t cost, rlt_decision *d)
{
    int id;
    int st = rlt__srv_tier_policy(s, default_tier, key, klen, &id);
    if (st != RLT_OK) return st;
    return rlt__decide(s, id, false, key, klen, now, cost, d);
}

int rlt__decide_multi(rlt__srv *s, const rlt_check *checks, size_t n, rlt_ns now,
                      rlt_decision *combined, int *refused)
{
    int st = s->be->ops->decide_multi(s->be, checks, n, now, combined, refused);
    if (st != RLT_OK) return st;
    /* Allowed: every limit was charged.  Denied: only the refusing limit denied; the others
     * were neither charged nor refused. */
    if (combined->allowed) {
        for (size_t i = 0; i < n; i++)
            count(s, checks[i].policy, true, false);
    } else if (refused != NULL && *refused >= 0 && (size_t)*refused < n) {
        count(s, checks[*refused].policy, false, false);
        const rlt_check *r = &checks[*refused];
        if (r->cost > 0) rlt__top_denied(s->top, r->policy, r->key, r->klen);
    }
    return RLT_OK;
}

int rlt__decide_reset(rlt__srv *s, int policy_id, const void *key, size_t klen)
{
    return s->be->ops->reset(s->be, policy_id, key, klen);
}

int rlt__decide_release(rlt__srv *s, int policy_id, const void *key, size_t klen, rlt_ns now,
                        int64_t lease, rlt_ns latency_ns, int outcome)
{
    return s->be->ops->release(s->be, policy_id, key, klen, now, lease, latency_ns, outcome);
}

int rlt__decide_peek(rlt__srv *s, int policy_id, const void *key, size_t klen, rlt_ns now,
                     rlt_decision *d)
{
    return s->be->ops->decide(s->be, policy_id, key, klen, now, 0, d);
}

bool rlt__decide_can_reserve(const rlt__srv *s)
{
    return s->be->ops->reserve != NULL && s->be->ops->settle != NULL;
}

rlt_ns rlt__decide_reserve_timeout(rlt__srv *s, int64_t ms, char *err, size_t errlen)
{
    const rlt_ns max = rlt__srv_config(s)->set.max_reservation_timeout;
    if (ms <= 0) return RLT_RESERVE_DEFAULT_TIMEOUT < max ? RLT_RESERVE_DEFAULT_TIMEOUT : max;
    if (ms > max / RLT_NS_PER_MS) {
        snprintf(err, errlen, "timeout %lld ms is over max_reservation_timeout (%lld ms)",
                 (long long)ms, (long long)(max / RLT_NS_PER_MS));
        return -1;
    }
    return ms * RLT_NS_PER_MS;
}

int rlt__decide_reserve(rlt__srv *s, uint64_t holder, int policy_id, bool shadow, const void *key,
                        size_t klen, rlt_ns now, int64_t estimate, rlt_ns timeout, rlt_decision *d,
                        uint64_t *reservation)
{
    *reservation = 0;
    if (!rlt__decide_can_reserve(s)) return RLT_EINVAL;
    int st = s->be->ops->reserve(s->be, holder, policy_id, key, klen, now, estimate, timeout, d,
                                 reservation);
    if (st != RLT_OK) return st;
    settle(s, rlt__srv_config(s), policy_id, shadow, key, klen, estimate, now, d);
    return RLT_OK;
}

int rlt__decide_settle(rlt__srv *s, int policy_id, const void *key, size_t klen, rlt_ns now,
                       uint64_t reservation, int64_t real_cost, rlt_decision *d)
{
    if (!rlt__decide_can_reserve(s)) return RLT_EINVAL;
    return s->be->ops->settle(s->be, policy_id, key, klen, now, reservation, real_cost, d);
}

/* Whether policy `id` cannot decide at all at `now`: its time scale times the clock leaves
 * int64 (GCRA, leaky bucket with a fine rate), whatever the cost. */
static bool rate_out_of_range(rlt__srv *s, int id, rlt_ns now)
{
    rlt_policy p;
    if (rlt__registry_policy(&s->reg, id, &p) != RLT_OK) return false;
    void *state = calloc(1, rlt_state_size(&p));
    if (state == NULL) return false;
    rlt_decision d;
    int st = rlt_decide(&p, state, now, 0, &d);
    free(state);
    return st == RLT_ERANGE;
}

const char *rlt__decide_strerror(rlt__srv *s, int id, rlt_ns now, int st, char *buf, size_t cap)
{
    rlt_policy p;
    switch (st) {
    case RLT_EKEYLEN:
        return "invalid key: empty or longer than 512 bytes (tenant prefix included)";
    case RLT_EFULL:
        return "store is full (fail-closed): new key refused";
    case RLT_ENOENT:
        return "unknown policy";
    case RLT_ERANGE:
        if (s->be->ops->daemon_clock && id >= 0 && rate_out_of_range(s, id, now))
            return "rate (count/period) out of range: the policy's arithmetic overflows on "
                   "the server's clock (use a smaller count or a longer period)";
        return "cost out of range for this policy";
    case RLT_EINVAL:
        if (id >= 0 && rlt__registry_policy(&s->reg, id, &p) == RLT_OK && p.algo == RLT_CONCURRENCY)
            return "cost must be 0 or 1 for a concurrency policy (RL.ACQUIRE takes one slot)";
        break;
    default:
        break;
    }
    snprintf(buf, cap, "%s", rlt_strerror(st));
    return buf;
}

const char *rlt__decide_reserve_strerror(rlt__srv *s, int id, rlt_ns now, int st, bool settle,
                                         char *buf, size_t cap)
{
    rlt_policy p;
    if (!rlt__decide_can_reserve(s))
        return settle ? "settling needs the local backend: reservations are not kept in Redis "
                        "(docs/distributed.md)"
                      : "reserving needs the local backend: reservations are not kept in Redis "
                        "(docs/distributed.md)";
    if (st == RLT_EINVAL && rlt__registry_policy(&s->reg, id, &p) == RLT_OK &&
        !rlt_settle_supported(&p))
        return "reservations need a fixed_window, sliding_window, sliding_log, token_bucket or "
               "gcra policy (not leaky_bucket nor concurrency)";
    if (st == RLT_ENOENT && settle)
        return "unknown reservation: never made for this key and policy, already settled, or "
               "expired (charged as estimated)";
    if (st == RLT_EFULL)
        return settle ? "store is full (fail-closed): the debt needs a new key; the reservation "
                        "is still outstanding"
                      : "reservation refused: too many outstanding reservations, or the store "
                        "is full (fail-closed); nothing was charged";
    if (st == RLT_ERANGE && settle) return "real cost out of range: the debt would overflow";
    if ((st == RLT_EBACKEND || st == RLT_ETIMEDOUT) && settle)
        return "Redis could not answer: not settled (the reservation, if still there, can be "
               "settled again, or expires charged as estimated)";
    return rlt__decide_strerror(s, id, now, st, buf, cap);
}

bool rlt__decide_can_reserve_limits(const rlt__srv *s)
{
    return s->be->ops->reserve_limits != NULL && s->be->ops->settle_limits != NULL;
}

int rlt__decide_reserve_limits(rlt__srv *s, uint64_t holder, const rlt_limit *limits, size_t n,
                               const rlt_usage *estimate, rlt_ns now, rlt_ns timeout,
                               rlt_decision *combined, rlt_decision *each, int *refused,
                               uint64_t *reservation)
{
    *reservation = 0;
    if (!s->be->ops->reserve_limits) return RLT_EINVAL;
    int st = s->be->ops->reserve_limits(s->be, holder, limits, n, estimate, now, timeout, combined,
                                        each, refused, reservation);
    if (st != RLT_OK) return st;
    /* Counted as rlt__decide_multi counts: every limit allowed, or the refusing one denied. */
    for (size_t i = 0; i < n; i++)
        if (combined->allowed || (refused && *refused == (int)i))
            count(s, limits[i].policy, combined->allowed, false);
    return RLT_OK;
}

int rlt__decide_settle_limits(rlt__srv *s, uint64_t reservation, const rlt_check *keys, size_t n,
                              const rlt_usage *usage, bool final, rlt_ns now,
                              rlt_decision *combined, rlt_decision *each, int64_t *charged)
{
    if (!s->be->ops->settle_limits) return RLT_EINVAL;
    return s->be->ops->settle_limits(s->be, reservation, keys, n, usage, final, now, combined, each,
                                     charged);
}
