/* The table of every algorithm's operations (algo.h) and the size of its state. */
#include "algo.h"

#include "ratelimit/adaptive.h"

const rlt__algo_ops rlt__algos[RLT_CONCURRENCY + 1] = {
    [RLT_FIXED_WINDOW] = {16, 0, rlt__fixed_window_decide, rlt__fixed_window_fresh,
                          rlt__fixed_window_shift, rlt__fixed_window_settle},
    [RLT_SLIDING_LOG] = {16, 8, rlt__sliding_log_decide, rlt__sliding_log_fresh,
                         rlt__sliding_log_shift, rlt__sliding_log_settle},
    [RLT_SLIDING_WINDOW] = {24, 0, rlt__sliding_window_decide, rlt__sliding_window_fresh,
                            rlt__sliding_window_shift, rlt__sliding_window_settle},
    [RLT_TOKEN_BUCKET] = {16, 0, rlt__bucket_decide, rlt__bucket_fresh, rlt__bucket_shift,
                          rlt__bucket_settle},
    [RLT_GCRA] = {8, 0, rlt__bucket_decide, rlt__bucket_fresh, rlt__bucket_shift,
                  rlt__bucket_settle},
    [RLT_LEAKY_BUCKET] = {8, 0, rlt__leaky_decide, rlt__leaky_fresh, rlt__leaky_shift, NULL},
    [RLT_CONCURRENCY] = {16, 16, rlt__concurrency_decide, rlt__concurrency_fresh,
                         rlt__concurrency_shift, NULL},
};

size_t rlt__algo_state_size(const rlt_policy *p)
{
    if (!p || p->scale_ <= 0 || !rlt__algo_known(p)) return 0;
    const rlt__algo_ops *a = &rlt__algos[p->algo];
    return a->state_fixed + a->state_per_slot * (size_t)p->limit +
           (p->adapt ? sizeof(rlt_adapt_state) : 0);
}
