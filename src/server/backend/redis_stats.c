/* The Redis backend's counters: published per thread, summed for INFO and /metrics. */
#include "server/backend/redis_stats.h"

#include "server/stats/metrics.h"

#include <inttypes.h>
#include <string.h>

#ifdef RLT_SERVER_REDIS

void rlt__backend_redis_publish(tctx *t)
{
    rlt_redis_stats st;
    rlt_redis_stats_get(t->r, &st);
    /* Under nodes_mu, as sum() reads: fail_local is subtracted from fail_closed, and a reader
     * must see both from the same moment. */
    pthread_mutex_lock(&t->nodes_mu);
    __atomic_store_n(&t->pub.fail_local, t->fail_local, __ATOMIC_RELAXED);
#define PUB(f) __atomic_store_n(&t->pub.f, (uint64_t)st.f, __ATOMIC_RELAXED)
    PUB(decisions);
    PUB(round_trips);
    PUB(fail_open);
    PUB(fail_closed);
    PUB(timeouts);
    PUB(errors);
    PUB(breaker_opened);
    PUB(short_circuited);
    PUB(connects);
    PUB(script_loads);
    PUB(redirects);
    PUB(lease_local);
    PUB(nodes);
    PUB(nodes_open);
    PUB(tryagain);
    PUB(topology_reads);
    PUB(master_switches);
#undef PUB
    t->nnodes = 0;
    for (unsigned i = 0; i < NODES_SHOWN && i < st.nodes; i++)
        if (rlt_redis_node_info_get(t->r, i, &t->nodes[t->nnodes]) == RLT_OK) t->nnodes++;
    pthread_mutex_unlock(&t->nodes_mu);
}

/* The sum of every thread's published counters. */
static unsigned sum(redis_be *b, pubstats *out)
{
    memset(out, 0, sizeof *out);
    unsigned handles = 0;
    pthread_mutex_lock(&b->mu);
    for (tctx *t = b->threads; t != NULL; t = t->next) {
        handles++;
        pthread_mutex_lock(&t->nodes_mu); /* one moment of each thread (publish) */
#define ADD(f) out->f += __atomic_load_n(&t->pub.f, __ATOMIC_RELAXED)
        ADD(decisions);
        ADD(round_trips);
        ADD(fail_open);
        ADD(fail_closed);
        ADD(timeouts);
        ADD(errors);
        ADD(breaker_opened);
        ADD(short_circuited);
        ADD(connects);
        ADD(script_loads);
        ADD(redirects);
        ADD(lease_local);
        ADD(nodes);
        ADD(nodes_open);
        ADD(fail_local);
        ADD(tryagain);
        ADD(topology_reads);
        ADD(master_switches);
#undef ADD
        pthread_mutex_unlock(&t->nodes_mu);
    }
    pthread_mutex_unlock(&b->mu);
    return handles;
}

uint64_t rlt__backend_redis_lease_units(rlt__backend *be)
{
    redis_be *b = (redis_be *)be;
    int64_t n = 0;
    pthread_mutex_lock(&b->mu); /* a handle lives in the list until the backend closes */
    for (tctx *t = b->threads; t != NULL; t = t->next)
        n += rlt_redis_lease_units(t->r, 0, 0);
    pthread_mutex_unlock(&b->mu);
    return n > 0 ? (uint64_t)n : 0;
}

static uint64_t ld(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static const char *engine_name(rlt_redis_engine e)
{
    return e == RLT_REDIS_ENGINE_MODULE    ? "module"
           : e == RLT_REDIS_ENGINE_SCRIPTS ? "scripts"
                                           : "unknown";
}

/* redis_node<i>:addr=...,engine=module|scripts|unknown,connected=0|1,breaker=open|closed, as
 * the most recently published worker handle saw them. */
static void node_lines(redis_be *b, rlt__obuf *o)
{
    pthread_mutex_lock(&b->mu);
    for (tctx *t = b->threads; t != NULL; t = t->next) {
        pthread_mutex_lock(&t->nodes_mu);
        unsigned n = t->nnodes;
        for (unsigned i = 0; i < n; i++) {
            const rlt_redis_node_info *ni = &t->nodes[i];
            rlt__obuf_printf(o, "redis_node%u:addr=%s,engine=%s,connected=%d,breaker=%s\r\n", i,
                             ni->addr, engine_name(ni->engine), ni->connected ? 1 : 0,
                             ni->breaker_open ? "open" : "closed");
        }
        pthread_mutex_unlock(&t->nodes_mu);
        if (n > 0) break;
    }
    pthread_mutex_unlock(&b->mu);
}

void rlt__backend_redis_info(rlt__backend *be, rlt__obuf *o)
{
    redis_be *b = (redis_be *)be;
    pubstats t;
    unsigned handles = sum(b, &t);
    const rlt__config *c = rlt__registry_config(b->reg);
    uint64_t closed = t.fail_closed >= t.fail_local ? t.fail_closed - t.fail_local : 0;
    uint64_t without = t.fail_open + t.fail_closed;
    uint64_t in_redis =
        t.decisions >= without + t.lease_local ? t.decisions - without - t.lease_local : 0;
    rlt__obuf_printf(o,
                     "redis_address:%s\r\nredis_cluster:%d\r\n"
                     "redis_timeout_us:%" PRId64 "\r\nredis_fail_default:%s\r\nredis_handles:%u\r\n"
                     "redis_nodes:%" PRIu64 "\r\nredis_breaker:%s\r\nredis_breakers_open:%" PRIu64
                     "\r\n",
                     b->txt.servers, b->opt.cluster ? 1 : 0,
                     (b->opt.timeout ? b->opt.timeout : RLT_REDIS_DEFAULT_TIMEOUT) / RLT_NS_PER_US,
                     c->set.redis.fail_local  ? "local"
                     : c->set.redis.fail_open ? "open"
                                              : "closed",
                     handles, t.nodes, t.nodes_open > 0 ? "open" : "closed", t.nodes_open);
    rlt__obuf_printf(o,
                     "redis_decisions:%" PRIu64 "\r\nredis_decisions_without_redis:%" PRIu64
                     "\r\nredis_fail_open_allowed:%" PRIu64 "\r\nredis_fail_closed_denied:%" PRIu64
                     "\r\nredis_timeouts:%" PRIu64 "\r\nredis_errors:%" PRIu64
                     "\r\nredis_breaker_opened:%" PRIu64 "\r\nredis_short_circuited:%" PRIu64
                     "\r\nredis_connects:%" PRIu64 "\r\nredis_round_trips:%" PRIu64
                     "\r\nredis_script_loads:%" PRIu64 "\r\nredis_redirects:%" PRIu64
                     "\r\nredis_release_lost:%" PRIu64 "\r\nredis_multi_split:%" PRIu64
                     "\r\nredis_lease_local:%" PRIu64 "\r\n",
                     in_redis, without, t.fail_open, closed, t.timeouts, t.errors, t.breaker_opened,
                     t.short_circuited, t.connects, t.round_trips, t.script_loads, t.redirects,
                     ld(&b->release_lost), ld(&b->multi_split), t.lease_local);
    rlt__obuf_printf(o,
                     "redis_fail_local:%" PRIu64 "\r\nredis_local_fallback:%d\r\n"
                     "redis_local_fallback_entered:%" PRIu64 "\r\nredis_fleet_size:%u\r\n",
                     t.fail_local, __atomic_load_n(&b->in_local, __ATOMIC_RELAXED),
                     ld(&b->local_entered), rlt__backend_redis_fleet(c));
    rlt__obuf_printf(o,
                     "redis_sentinel_master:%s\r\nredis_tryagain:%" PRIu64
                     "\r\nredis_topology_reads:%" PRIu64 "\r\nredis_master_switches:%" PRIu64
                     "\r\n",
                     b->txt.master, t.tryagain, t.topology_reads, t.master_switches);
    node_lines(b, o);
}

void rlt__backend_redis_prometheus(rlt__backend *be, rlt__obuf *o)
{
    redis_be *b = (redis_be *)be;
    pubstats t;
    sum(b, &t);
    uint64_t without = t.fail_open + t.fail_closed;
    uint64_t in_redis =
        t.decisions >= without + t.lease_local ? t.decisions - without - t.lease_local : 0;
    uint64_t closed = t.fail_closed >= t.fail_local ? t.fail_closed - t.fail_local : 0;
    rlt__prom_family(o, "ratelimitd_redis_decisions_total", "counter",
                     "Decisions by who made them: Redis, or the fail mode without Redis "
                     "(fail_local: the node's share on its own store).");
    rlt__obuf_printf(o,
                     "ratelimitd_redis_decisions_total{by=\"redis\"} %" PRIu64 "\n"
                     "ratelimitd_redis_decisions_total{by=\"fail_open\"} %" PRIu64 "\n"
                     "ratelimitd_redis_decisions_total{by=\"fail_closed\"} %" PRIu64 "\n"
                     "ratelimitd_redis_decisions_total{by=\"fail_local\"} %" PRIu64 "\n",
                     in_redis, t.fail_open, closed, t.fail_local);
    rlt__prom_value(o, "ratelimitd_redis_local_fallback", "gauge",
                    "1 while fail: local policies decide on this node's store.",
                    __atomic_load_n(&b->in_local, __ATOMIC_RELAXED));
    rlt__prom_value(o, "ratelimitd_redis_local_fallback_entered_total", "counter",
                    "Times this node entered local fallback (Redis unreachable).",
                    ld(&b->local_entered));
    rlt__prom_value(o, "ratelimitd_redis_breaker_open", "gauge",
                    "Redis nodes whose circuit breaker is open (summed over worker handles).",
                    t.nodes_open);
    static const struct {
        const char *name, *help;
    } counters[] = {
        {"ratelimitd_redis_timeouts_total", "Redis calls that missed their deadline."},
        {"ratelimitd_redis_errors_total", "Redis calls that failed (connection or reply errors)."},
        {"ratelimitd_redis_breaker_opened_total", "Times a node's circuit breaker opened."},
        {"ratelimitd_redis_short_circuited_total", "Decisions made by the fail mode while a "
                                                   "breaker was open, without calling Redis."},
        {"ratelimitd_redis_connects_total", "Connections made to Redis nodes."},
        {"ratelimitd_redis_round_trips_total", "Round trips to Redis (a pipeline is one)."},
        {"ratelimitd_redis_release_lost_total", "Concurrency releases Redis could not take "
                                                "(the lease expires by itself)."},
        {"ratelimitd_redis_tryagain_total", "TRYAGAIN replies from a Cluster slot being "
                                            "migrated (retried with a short backoff)."},
        {"ratelimitd_redis_topology_reads_total", "Reads of the Cluster slot map or of the "
                                                  "Sentinel master (after a failure, a MOVED, "
                                                  "or periodically)."},
        {"ratelimitd_redis_master_switches_total", "Times the Sentinel master changed "
                                                   "(+switch-master or a new answer)."},
    };
    const uint64_t values[] = {t.timeouts,           t.errors,   t.breaker_opened,
                               t.short_circuited,    t.connects, t.round_trips,
                               ld(&b->release_lost), t.tryagain, t.topology_reads,
                               t.master_switches};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        rlt__prom_value(o, counters[i].name, "counter", counters[i].help, values[i]);
    }
}

#endif
