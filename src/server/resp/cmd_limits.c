/* RESP's multi-limit reservations: RL.MRESERVE and RL.MSETTLE (one reservation over up to 16
 * (key, policy, weighting) limits, settled once or in partial settles; budget.h). */
#include <string.h>
#include <strings.h>

#include "core/text.h"
#include "server/request/decide.h"
#include "server/request/limits.h"
#include "server/resp/cmd_limits.h"

/* Longest settle timeout a client may ask for, as RL.RESERVE's: a day. */
#define TIMEOUT_MAX_MS INT64_C(86400000)

static bool word(const rlt__resp_arg *a, const char *w)
{
    return a->len == strlen(w) && strncasecmp(a->ptr, w, a->len) == 0;
}

static void arity(rlt__obuf *o, const char *syntax)
{
    rlt__resp_errorf(o, "ERR syntax: %s", syntax);
}

/* [limit, remaining, reset_after_ms(, charged)] of each limit. */
static void per_limit(rlt__obuf *o, const rlt_decision *each, const int64_t *charged, size_t n)
{
    rlt__resp_array(o, n);
    for (size_t i = 0; i < n; i++) {
        int64_t v[4] = {each[i].limit, each[i].remaining, rlt_retry_after_ms(each[i].reset_after),
                        charged ? charged[i] : 0};
        rlt__resp_ints(o, v, charged ? 4 : 3);
    }
}

static void head(rlt__obuf *o, const rlt_decision *d, size_t len)
{
    rlt__resp_array(o, len);
    int64_t v[5] = {d->allowed ? 1 : 0, d->limit, d->remaining,
                    d->allowed ? 0 : rlt_retry_after_ms(d->retry_after),
                    rlt_retry_after_ms(d->reset_after)};
    for (int i = 0; i < 5; i++)
        rlt__resp_int(o, v[i]);
}

static const char MRESERVE[] = "RL.MRESERVE estimate key policy cost [key policy cost ...] "
                               "[TIMEOUT ms], at most 16 limits, 1 <= ms <= 86400000";
static const char MSETTLE[] = "RL.MSETTLE reservation usage key policy [key policy ...] "
                              "[PARTIAL], the keys and policies of RL.MRESERVE in its order";

/* RL.MRESERVE: [allowed, limit, remaining, retry_after_ms, reset_after_ms, reservation (nil
 * when denied), refused (the first refusing limit's index, -1), [[limit, remaining,
 * reset_after_ms] per limit]] (each limit's own decision: after its charge when allowed, as it
 * stands when denied). */
static void mreserve(struct rlt__srv *s, rlt__session *ss, rlt__scratch *sc, const rlt__resp_arg *a,
                     size_t n,
                     rlt_ns now, rlt__obuf *o)
{
    size_t rest = n - 2, m = rest / 3;
    int64_t timeout_ms = 0;
    if (n < 5 || (rest % 3 != 0 && rest % 3 != 2)) return arity(o, MRESERVE);
    if (rest % 3 == 2 &&
        (!word(&a[n - 2], "TIMEOUT") || !rlt__parse_i64(a[n - 1].ptr, a[n - 1].len, &timeout_ms) ||
         timeout_ms < 1 || timeout_ms > TIMEOUT_MAX_MS))
        return arity(o, MRESERVE);
    if (m > RLT_BUDGET_LIMITS) return rlt__resp_error(o, "ERR at most 16 limits per reservation");
    char err[200];
    rlt_usage est;
    if (rlt__limit_usage(a[1].ptr, a[1].len, "estimate", &est, err, sizeof err) != RLT_OK)
        return rlt__resp_errorf(o, "ERR %s", err);
    rlt_ns timeout = rlt__decide_reserve_timeout(s, timeout_ms, err, sizeof err);
    if (timeout < 0) return rlt__resp_errorf(o, "ERR %s", err);
    rlt_limit lim[RLT_BUDGET_LIMITS];
    char(*keys)[RLT_KEY_MAX] = rlt__scratch_alloc(sc, m * RLT_KEY_MAX);
    if (keys == NULL) return rlt__resp_error(o, "ERR out of scratch space for the keys");
    for (size_t i = 0; i < m; i++) {
        const rlt__resp_arg *t = &a[2 + 3 * i];
        if (rlt__limit_resolve(s, ss, t[0].ptr, t[0].len, t[1].ptr, t[1].len, t[2].ptr, t[2].len,
                               now, keys[i], &lim[i], err, sizeof err) != RLT_OK)
            return rlt__resp_errorf(o, "ERR limit %zu: %s", i + 1, err);
    }
    rlt_decision d, each[RLT_BUDGET_LIMITS];
    int refused = -1;
    uint64_t rid = 0;
    int st = rlt__decide_reserve_limits(s, rlt__session_holder(ss), lim, m, &est, now, timeout, &d,
                                        each, &refused, &rid);
    if (st != RLT_OK) return rlt__resp_errorf(o, "ERR %s", rlt__limits_strerror(s, st, false));
    head(o, &d, 8);
    if (rid == 0) {
        rlt__resp_null(o);
    } else {
        char hex[RLT__RESERVATION_HEX + 1];
        rlt__reservation_format(rid, hex);
        rlt__resp_bulk(o, hex, RLT__RESERVATION_HEX);
    }
    rlt__resp_int(o, refused);
    per_limit(o, each, NULL, m); /* denied: where each stands, nothing charged */
}

/* RL.MSETTLE: [allowed, limit, remaining, retry_after_ms, reset_after_ms, [[limit, remaining,
 * reset_after_ms, charged] per limit]], charged being what this settle charged beyond what the
 * reservation held. */
static void msettle(struct rlt__srv *s, rlt__session *ss, rlt__scratch *sc, const rlt__resp_arg *a,
                     size_t n,
                    rlt_ns now, rlt__obuf *o)
{
    if (n < 5) return arity(o, MSETTLE);
    bool final = true;
    size_t rest = n - 3;
    if (rest % 2 == 1) {
        if (!word(&a[n - 1], "PARTIAL")) return arity(o, MSETTLE);
        final = false;
        rest--;
    }
    size_t m = rest / 2;
    if (m > RLT_BUDGET_LIMITS) return rlt__resp_error(o, "ERR at most 16 limits per reservation");
    uint64_t rid;
    if (!rlt__reservation_parse(a[1].ptr, a[1].len, &rid))
        return rlt__resp_error(o, "ERR reservation must be the id RL.MRESERVE returned "
                                  "(1 to 16 hex digits)");
    char err[200];
    rlt_usage u;
    memset(&u, 0, sizeof u);
    if (!(a[2].len == 1 && a[2].ptr[0] == '-') &&
        rlt__limit_usage(a[2].ptr, a[2].len, "usage", &u, err, sizeof err) != RLT_OK)
        return rlt__resp_errorf(o, "ERR %s", err);
    rlt_check k[RLT_BUDGET_LIMITS];
    char(*keys)[RLT_KEY_MAX] = rlt__scratch_alloc(sc, m * RLT_KEY_MAX);
    if (keys == NULL) return rlt__resp_error(o, "ERR out of scratch space for the keys");
    for (size_t i = 0; i < m; i++) {
        const rlt__resp_arg *t = &a[3 + 2 * i];
        rlt_limit l;
        if (rlt__limit_resolve(s, ss, t[0].ptr, t[0].len, t[1].ptr, t[1].len, NULL, 0, now, keys[i],
                               &l, err, sizeof err) != RLT_OK)
            return rlt__resp_errorf(o, "ERR limit %zu: %s", i + 1, err);
        k[i] = (rlt_check){l.policy, l.key, l.klen, 0};
    }
    rlt_decision d, each[RLT_BUDGET_LIMITS];
    int64_t charged[RLT_BUDGET_LIMITS];
    int st = rlt__decide_settle_limits(s, rid, k, m, &u, final, now, &d, each, charged);
    if (st != RLT_OK) return rlt__resp_errorf(o, "ERR %s", rlt__limits_strerror(s, st, true));
    head(o, &d, 6);
    per_limit(o, each, charged, m);
}

bool rlt__cmd_limits(struct rlt__srv *s, rlt__session *ss, rlt__scratch *sc,
                     const rlt__resp_arg *a, size_t n, rlt_ns now, rlt__obuf *o)
{
    if (word(&a[0], "RL.MRESERVE")) {
        mreserve(s, ss, sc, a, n, now, o);
        return true;
    }
    if (word(&a[0], "RL.MSETTLE")) {
        msettle(s, ss, sc, a, n, now, o);
        return true;
    }
    return false;
}
