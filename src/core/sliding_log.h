/* The sliding log's compact states, for the keyed store (src/store): a log that holds S <= N
 * slots instead of N, so a key pays for the entries in its window, not for its limit.  The
 * layout is the full state's (sliding_log.c) with S in the header; a full state (every other
 * caller's: rlt_state_size bytes, zeroed) reads as S = N.  The algorithm's functions
 * (rlt_decide, rlt_when, rlt_is_fresh, rlt_state_shift, rlt_settle) take either; a decision or
 * a settle that would record more entries than a compact state's S returns RLT_EFULL and
 * changes nothing: the caller makes room first (rlt__sliding_log_room, _copy).  Not for
 * policies with a penalty box (block=): its state follows N slots. */
#ifndef RLT_CORE_SLIDING_LOG_H
#define RLT_CORE_SLIDING_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "ratelimit/ratelimit.h"

/* Bytes of a state of `slots` slots: 16 + 8 x slots. */
size_t rlt__sliding_log_bytes(int64_t slots);

/* The slots state `st` has (N for a full state), and the entries it holds (expired or not). */
int64_t rlt__sliding_log_slots(const rlt_policy *p, const void *st);
int64_t rlt__sliding_log_count(const void *st);

/* The slots `st` needs for a decision of `cost` at `now` (cost 0: a peek) or, with settle_x
 * > 0, for a settle that charges settle_x more: at most N; no more than it has when the call
 * records nothing past its room.  A decision that will be allowed drops the expired entries
 * first, so they are not counted. */
int64_t rlt__sliding_log_room(const rlt_policy *p, const void *st, rlt_ns now, int64_t cost,
                              int64_t settle_x);

/* Writes into `to` a state of `slots` slots (at least the entries kept; a full state when
 * slots = N) holding the entries of `from` that are live at `now`, oldest first; every entry
 * with now = INT64_MIN.  Dropping the expired ones is what the next charge does anyway: copy
 * at `now` only before one (as the store does when it grows a log for a decision it allows).
 * `from` and `to` do not overlap. */
void rlt__sliding_log_copy(const rlt_policy *p, const void *from, void *to, int64_t slots,
                           rlt_ns now);

#endif
