/* Counters and the latency histogram: one writer slot per thread, summed when read (the
 * renderings are request/report.c's). */
#include "server/stats/metrics.h"

#include <inttypes.h>

/* Per-thread state, not scratch (tests/docs/thread_state.sh): the thread's slot (metrics.h). */
__thread unsigned rlt__tl_slot;

void rlt__metrics_bind_thread(unsigned slot)
{
    rlt__tl_slot = slot < RLT__METRIC_SLOTS ? slot : 0;
}

rlt__mslot *rlt__mslot_get(rlt__metrics *m)
{
    return &m->slots[rlt__tl_slot];
}

void rlt__metrics_hist(uint64_t *buckets, uint64_t *sum_ns, rlt_ns ns)
{
    uint64_t us = ns <= 0 ? 0 : (uint64_t)ns / 1000;
    unsigned b = 0;
    /* bucket b holds latencies <= 2^b us; the last one is +Inf. */
    while (b < RLT__LAT_BUCKETS - 1 && us > (UINT64_C(1) << b))
        b++;
    rlt__mcount(&buckets[b], 1);
    rlt__mcount(sum_ns, (uint64_t)(ns > 0 ? ns : 0));
}

void rlt__metrics_latency(rlt__mslot *s, rlt_ns ns)
{
    rlt__metrics_hist(s->lat, &s->lat_sum_ns, ns);
    rlt__mcount(&s->commands, 1);
}

void rlt__prom_histogram(rlt__obuf *o, const char *name, const char *help,
                         const uint64_t *buckets, uint64_t sum_ns)
{
    rlt__prom_family(o, name, "histogram", help);
    uint64_t cum = 0;
    for (unsigned b = 0; b < RLT__LAT_BUCKETS; b++) {
        cum += buckets[b];
        if (b == RLT__LAT_BUCKETS - 1)
            rlt__obuf_printf(o, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n", name, cum);
        else
            rlt__obuf_printf(o, "%s_bucket{le=\"%.6f\"} %" PRIu64 "\n", name,
                             (double)(UINT64_C(1) << b) / 1e6, cum);
    }
    rlt__obuf_printf(o, "%s_sum %.9f\n%s_count %" PRIu64 "\n", name, (double)sum_ns / 1e9, name,
                     cum);
}

void rlt__prom_family(rlt__obuf *o, const char *name, const char *type, const char *help)
{
    rlt__obuf_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void rlt__prom_value(rlt__obuf *o, const char *name, const char *type, const char *help, uint64_t v)
{
    rlt__prom_family(o, name, type, help);
    rlt__obuf_printf(o, "%s %" PRIu64 "\n", name, v);
}
