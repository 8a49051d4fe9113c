/* Internal interfaces of libratelimit_redis: nodes (one connection each, with its deadline I/O
 * and circuit breaker), cluster slot routing, and the embedded script.  Not installed. */
#ifndef RLT_REDIS_INTERNAL_H
#define RLT_REDIS_INTERNAL_H

#include "ratelimit/redis.h"
#include "redis/layout.h"

#include <hiredis/hiredis.h>

/* The Lua scripts of src/redis/lua/, assembled at build time (embed_lua.cmake -> script.c).
 * A one-limit decision runs its algorithm's own script (index = the rlt_algo number); the
 * multi-limit check and the concurrency release run the script holding every algorithm. */
typedef enum rlt__script_id {
    RLT__S_MULTI = 0,
    /* 1..7: RLT_FIXED_WINDOW .. RLT_CONCURRENCY */
    RLT__S_SETTLE = 8, /* reserve and settle (lua/settle.lua) */
    RLT__S_QUOTA = 9,  /* RLQS claims (lua/quota.lua, quota.h) */
    RLT__NSCRIPTS = 10
} rlt__script_id;

typedef struct rlt__script {
    const char *name;
    char sha[41]; /* SHA1 of text, for EVALSHA */
    const char *text;
    size_t len;
} rlt__script;

extern const rlt__script rlt__redis_scripts[RLT__NSCRIPTS];

#define RLT__MAX_NODES 64
#define RLT__NO_NODE 0xFFFF
#define RLT__PTEXT_CACHE 8
#define RLT__MAX_SENTINELS 8
#define RLT__MASTER_NAME_MAX 128
/* Least time between two topology reads forced by failures (a dead node must not cost a
 * CLUSTER SLOTS or a sentinel round trip per call). */
#define RLT__TOPO_GAP (100 * RLT_NS_PER_MS)

/* One Redis server and our connection to it. */
typedef struct rlt__node {
    char host[256];
    int port;
    redisContext *c;   /* NULL when not connected */
    unsigned failures; /* consecutive failures */
    bool open;         /* breaker open: calls short-circuit until retry_at */
    int64_t retry_at;  /* monotonic ns: when an open breaker lets one trial call through */
    rlt_ns backoff;    /* the current wait of an open breaker */

    /* The module, as detected at connect: engine SCRIPTS or MODULE (AUTO: never connected);
     * module_time: it takes caller time (its RL.TESTTIME exists). */
    rlt_redis_engine engine;
    bool module_time;
    bool sentinel; /* a Sentinel: no AUTH, no module detection */
} rlt__node;

/* Validated inputs of one limit (rlt__check_limit). */
typedef struct rlt__limit {
    const rlt_policy *p;
    rlt__rpol rp; /* the scripts' microsecond policy */
    int64_t cost; /* clamped to 2 x RLT__LIM: beyond every limit, and exact in the scripts */
} rlt__limit;

/* The size in costs of a GCRA, token bucket or leaky bucket: B, or for the leaky bucket its
 * queue plus the request in service, Q + 1 (src/core/leaky.c admits a backlog up to Q x unit
 * before the charge of all but one cost). */
static inline int64_t rlt__bucket_size(const rlt__rpol *p)
{
    return p->algo == RLT_LEAKY_BUCKET ? p->Q + 1 : p->B;
}

/* A command: argc arguments of given lengths. */
typedef struct rlt__cmd {
    int argc;
    const char *const *argv;
    const size_t *argvlen;
} rlt__cmd;

struct rlt_redis {
    rlt_redis_options opt; /* with defaults filled and strings pointing at our copies */
    char *servers, *password, *prefix;
    size_t prefix_len;
    rlt__node nodes[RLT__MAX_NODES];
    unsigned nnodes;
    uint16_t *slots; /* cluster: slot -> node index, RLT__NO_NODE when unknown */
    bool refresh;    /* cluster: reload the slot table before the next call */
    struct rlt__lease *leases;
    size_t nleases;
    struct rlt__ptext {
        rlt_policy p;
        bool used;
        int len; /* the canonical text (the module's RL.DECIDE); < 0: none */
        char text[160];
        int tl; /* the key names' policy part (layout.h) */
        char tail[RLT__KEYTAIL_MAX];
    } ptext[RLT__PTEXT_CACHE]; /* recently used policies' texts: formatting them costs more
                                  than the rest of a call's arguments */
    unsigned ptext_next;
    rlt_redis_stats st;

    /* Topology (cluster slot map or Sentinel's master): read again when mono time reaches
     * topo_at; topo_last is the last attempt (RLT__TOPO_GAP apart when forced). */
    int64_t topo_at, topo_last;
    /* Sentinel: node 0 is the master (port 0 while unknown). */
    char *sentinel_list, *master_name;
    rlt__node sents[RLT__MAX_SENTINELS];
    unsigned nsents, sent_next;
    rlt__node sub;         /* a sentinel connection subscribed to +switch-master */
    int64_t sub_retry_at;  /* mono ns: when to try subscribing again */
    int64_t sub_polled_at; /* mono ns: the subscription's last look */
};

/* Monotonic clock, ns. */
int64_t rlt__mono_ns(void);

/* Index of node host:port, added if new (RLT__NO_NODE when the table is full). */
unsigned rlt__node_find_or_add(rlt_redis *r, const char *host, size_t hlen, int port);

/* Whether the node's breaker lets a call through at mono time `now`; false = short-circuit. */
bool rlt__node_usable(rlt_redis *r, rlt__node *n, int64_t now);

/* Records the outcome of a call on the node for its breaker. */
void rlt__node_success(rlt_redis *r, rlt__node *n);
void rlt__node_failure(rlt_redis *r, rlt__node *n, int64_t now);

/* Sends ncmd commands pipelined to node `n` and reads one reply each into replies[] (caller
 * frees them with freeReplyObject), all before mono time `deadline`.  Connects (and AUTHs)
 * first if needed.  Returns RLT_OK (replies may be error replies), RLT_EBACKEND (connection
 * failed or lost: the connection is dropped), RLT_ETIMEDOUT (dropped too).  On failure no
 * reply is returned.  Does not touch the breaker. */
int rlt__node_exec(rlt_redis *r, rlt__node *n, const rlt__cmd *cmds, size_t ncmd,
                   redisReply **replies, int64_t deadline);

/* Connects node `n` (AUTH, then the module detection that sets n->engine) unless a live
 * connection is open.  RLT_OK or RLT_EBACKEND / RLT_ETIMEDOUT / RLT_ENOMEM. */
int rlt__node_ensure(rlt_redis *r, rlt__node *n, int64_t deadline);

/* Drops the node's connection. */
void rlt__node_drop(rlt__node *n);

/* Cluster: reloads the slot table from any reachable node.  RLT_OK or an error. */
int rlt__cluster_refresh(rlt_redis *r, int64_t deadline);

/* The node that serves `slot` (standalone: node 0). */
unsigned rlt__route(rlt_redis *r, unsigned slot, int64_t deadline);

/* The topology may have changed (a node failed, answered CLUSTERDOWN, READONLY...): read it
 * again before a call at mono time `now` + at most RLT__TOPO_GAP.  No-op on a plain server. */
void rlt__topology_stale(rlt_redis *r, int64_t now);

/* Sentinel: asks the sentinels for the master and points node 0 at it.  RLT_OK or an error. */
int rlt__sentinel_resolve(rlt_redis *r, int64_t deadline);

/* Parses a "MOVED 3999 127.0.0.1:6381" / "ASK ..." error into slot and node index.
 * Returns true if it was such a redirect. */
bool rlt__parse_redirect(rlt_redis *r, const redisReply *rep, bool *ask, unsigned *node);

#endif
