/* Charge after the response: settling a reservation at its real cost.
 *
 * A reservation is an ordinary allowed request of cost e (the estimate) decided at instant
 * t_r (reserved_at); its caller later learns the real cost r and settles:
 *   r > e  the extra x = r - e is charged at `now` even past the limit: the client really
 *          used it, so the state goes into debt (token bucket: used > B x unit; GCRA: the tat
 *          further ahead; fixed and sliding window: a count above N; sliding log: see below)
 *          and later requests wait until it is repaid.  Nothing is ever denied here.
 *   r < e  the difference k = e - r is refunded, but only what the reservation still holds
 *          in the state; r = e changes nothing.
 * Leaky bucket (a request already queued or sent cannot be un-sent) and concurrency (a lease
 * has no cost) cannot settle: RLT_EINVAL.
 *
 * Never mints.  Let REF be the state had r been charged (forced, even past the limit) at t_r
 * instead of e, with the same requests accepted since.  After settle, the state is never more
 * generous than REF: at every later instant it allows no cost REF would deny.
 *   Extra charge.  Each algorithm's state after "charge e, then c's, then x at now" holds at
 *   least what "charge e + x, then c's" holds: refill (bucket), window ends (windows) and
 *   expiry (log) can only have reduced the earlier charge, never the later one.
 *   Token bucket and GCRA.  Write used(t) for the used scaled units; a charge adds, refill
 *   subtracts, clamped at 0.  That map f is monotone and 1-Lipschitz, so the state's used
 *   minus REF's is at least k x unit minus the refill that REF wasted at 0.  REF can be at 0
 *   only after refill repaid all of r x unit charged at t_r, so the waste is at most
 *   max(0, elapsed x scale - r x unit), with elapsed = max(0, T - t_r) and T the latest
 *   instant the state was decided at since t_r (refill since t_r is at most that).  A token
 *   bucket keeps T (its `last`); a GCRA word does not, so rlt_settle takes `now` as T: with a
 *   clock that stepped back since, the caller passes the latest instant it has seen (the
 *   store passes its shard's), else a GCRA refund could exceed what is held by the step's
 *   refill.  Hence
 *       used - used_REF >= min(k x unit, e x unit - elapsed x scale)  and  >= 0,
 *   and the refund R = min(k x unit, max(0, e x unit - elapsed x scale), used) leaves
 *   used - R >= used_REF.  (Without that cap, a reservation of 10 at t = 0 on 10/10s refunded
 *   in full at t = 5 after a request of 5 would leave 0 used where REF has 5.)
 *   Fixed window.  While `now` is in the reservation's window the count is REF's + k, so
 *   taking back min(k, count) is REF exactly; after that window REF's count is gone too and
 *   nothing is refunded.  (A clock that stepped back at the reservation charged a later
 *   window than t_r's: then nothing is refunded either.)
 *   Sliding window.  The reservation's count is REF's + k in window t_r / W while that
 *   window is the current or the previous one; taking min(k, that count) off it is REF.  A
 *   refund taken off the previous window where a stepped-back clock charged the current one
 *   weighs less than REF's, never more.
 *   Sliding log.  The state is REF's entries plus k entries stamped at sigma >= t_r (the
 *   stamp the reservation got).  The refund removes k live entries stamped <= t_r <= sigma:
 *   each removal swaps an entry of REF for one at sigma, which expires no earlier.  The one
 *   bound: the log has N slots, so an extra charge that does not fit drops the oldest live
 *   entries and records at most N at the settle (a key blocked for a full W is the most it
 *   can hold); debt beyond that is not kept, and that is the only case where it forgives.
 *
 * Settling at most once per reservation, and its expiry, are the caller's (the store keeps a
 * table of outstanding reservations: store.h).  A reservation never settled stays charged at
 * its estimate. */
#include "algo.h"

bool rlt_settle_supported(const rlt_policy *p)
{
    return p && rlt__algo_known(p) && rlt__algos[p->algo].settle != NULL;
}

int rlt_settle(const rlt_policy *p, void *state, rlt_ns now, rlt_ns reserved_at, int64_t estimate,
               int64_t real_cost, rlt_decision *d)
{
    if (!p || !state || !d || p->scale_ <= 0 || p->unit_ <= 0 || p->limit <= 0 || p->period <= 0 ||
        !rlt_settle_supported(p) || estimate < 0 || real_cost < 0 || estimate > rlt_policy_limit(p))
        return RLT_EINVAL;
    int rc = rlt__algos[p->algo].settle(p, state, now, reserved_at, estimate, real_cost);
    if (rc) return rc;
    return rlt_decide(p, state, now, 0, d); /* the state as it now stands, a peek */
}
