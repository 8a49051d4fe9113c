/* The policies of the differential tests (tests/redis/test_redis_diff.c for the scripts,
 * tests/redismodule/test_module_diff.c for the module): all 7 algorithms, with rates whose
 * scaled units are 1 and not 1, periods of ms to minutes, bursts, queues and delays. */
#ifndef RLT_DIFF_POLICIES_H
#define RLT_DIFF_POLICIES_H

static const char *const policies[] = {
    "fixed_window:5/1s",
    "fixed_window:100/1m",
    "fixed_window:3/7ms",
    "sliding_log:5/1s",
    "sliding_log:20/10s",
    "sliding_log:3/7ms",
    "sliding_window:5/1s",
    "sliding_window:7/3s",
    "sliding_window:3/7ms",
    "token_bucket:3/1s",
    "token_bucket:10/7s,burst=25",
    "token_bucket:1000000/1s",
    "token_bucket:13/997us,burst=4",
    "gcra:3/1s",
    "gcra:7/3s,burst=2",
    "gcra:1000/1s,burst=50",
    "gcra:13/997us,burst=4",
    "leaky_bucket:3/1s,queue=5,delay=2",
    "leaky_bucket:7/3s,queue=3",
    "leaky_bucket:10/1s,queue=20,nodelay",
    "concurrency:3/2s",
    "concurrency:1/50ms",
};
#define NPOL (sizeof policies / sizeof policies[0])

/* The penalty box (block=) on every algorithm: blocks shorter and longer than the window, with
 * and without escalation, capped early and late, so traces see blocks end, escalate and
 * restart. */
static const char *const block_policies[] = {
    "fixed_window:3/1s,block=2s*2..10s",
    "fixed_window:2/7ms,block=5ms",
    "sliding_log:4/1s,block=1500ms*3..1m",
    "sliding_window:5/1s,block=700ms*2..3s",
    "token_bucket:3/1s,block=2s",
    "token_bucket:13/997us,burst=4,block=3ms*2..1s",
    "gcra:3/1s,block=1s*2..4s",
    "gcra:7/3s,burst=2,block=10s*10..1h",
    "leaky_bucket:3/1s,queue=2,delay=1,block=2s*2..5s",
    "concurrency:2/2s,block=3s*2..12s",
};
#define NBPOL (sizeof block_policies / sizeof block_policies[0])

#endif
