/* The division itself, free of any state: max-min fair water-filling in whole tokens, a
 * member's demand from its recent reports, and its want (demand plus headroom).
 *
 * Water-filling.  Sort the wants ascending; walk them with `left` tokens for `k` members
 * still unserved.  While the smallest remaining want fits the equal share floor(left / k) it
 * is granted whole; the first that does not, and every larger one, share `left` equally:
 * floor(left / k) each and one more for the first left mod k of them.  That is the max-min
 * fair allocation in integers: no member can gain without taking from one that has no more.
 * With cap >= n every member gets at least one token: left >= k holds throughout, since a
 * grant g <= left / k leaves left - g >= (k - 1) x left / k >= k - 1.  And sum(got) <= cap:
 * every grant is taken from `left`. */
#include "quota/divide.h"

#include "core/internal.h"

#include <stdlib.h>

static int by_want(const void *a, const void *b)
{
    const rlt__quota_share *x = a, *y = b;
    if (x->want != y->want) return x->want < y->want ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int by_idx(const void *a, const void *b)
{
    const rlt__quota_share *x = a, *y = b;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

void rlt__quota_fill(rlt__quota_share *s, size_t n, int64_t cap)
{
    if (n == 0) return;
    if (cap < 0) cap = 0;
    if ((uint64_t)cap < n) { /* not one token each: the first `cap` by idx get one */
        qsort(s, n, sizeof *s, by_idx);
        for (size_t i = 0; i < n; i++)
            s[i].got = (uint64_t)i < (uint64_t)cap && s[i].want >= 1 ? 1 : 0;
        return;
    }
    qsort(s, n, sizeof *s, by_want);
    int64_t left = cap;
    size_t i = 0;
    for (; i < n; i++) {
        int64_t share = left / (int64_t)(n - i);
        if (s[i].want > share) break;
        s[i].got = s[i].want;
        left -= s[i].want;
    }
    if (i == n) return;
    int64_t k = (int64_t)(n - i), share = left / k, extra = left % k;
    for (size_t j = i; j < n; j++) {
        /* every want here exceeds `share`, so share + 1 never passes it */
        s[j].got = share + ((int64_t)(j - i) < extra ? 1 : 0);
        assert(s[j].got <= s[j].want);
    }
}

int64_t rlt__quota_demand(const uint64_t *counts, const rlt_ns *elapsed, size_t k, rlt_ns fill,
                          int64_t cap)
{
    /* A report's count is capped at 2^62 (no fleet sends more within one report): the sum of
     * RLT__QUOTA_HISTORY of them stays under 2^64, and times fill (< 2^63) under 2^127. */
    const uint64_t count_cap = UINT64_C(1) << 62;
    uint64_t count = 0;
    rlt_ns el = 0;
    for (size_t i = 0; i < k; i++) {
        if (elapsed[i] <= 0) continue;
        count += counts[i] < count_cap ? counts[i] : count_cap;
        el = rlt__sat_add(el, elapsed[i]);
        if (count >= count_cap) count = count_cap;
    }
    if (el <= 0) return -1;
    if (fill <= 0 || cap <= 0) return 0;
    unsigned __int128 num = (unsigned __int128)count * (uint64_t)fill;
    unsigned __int128 d = num / (uint64_t)el + (num % (uint64_t)el != 0);
    return d > (unsigned __int128)cap ? cap : (int64_t)d;
}

int64_t rlt__quota_want(int64_t demand, uint32_t headroom_permille, int64_t cap)
{
    if (cap < 1) return 1;
    if (demand < 0 || demand >= cap) return cap;
    int64_t head = (int64_t)((__int128)demand * headroom_permille / 1000);
    if (head < 1) head = 1;
    int64_t w = rlt__sat_add(demand, head);
    return w > cap ? cap : w;
}
