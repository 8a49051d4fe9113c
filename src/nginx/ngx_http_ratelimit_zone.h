/* The keyed state of a ratelimit_zone in nginx's shared memory (ngx_http_ratelimit_zone.c): the
 * zone's header, one node per key, lookup with eviction, and the zone's creation and reload.
 * Every function here is called with the zone's slab mutex held unless it says otherwise. */
#ifndef RLT_NGX_ZONE_H
#define RLT_NGX_ZONE_H

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ratelimit/ratelimit.h"

/* Overlays ngx_rbtree_node_t from its `color` field on, as limit_req's node does. */
typedef struct {
    u_char color;
    u_char dummy;
    u_short len; /* key bytes */
    ngx_queue_t queue;
    u_char data[1]; /* the key, then the state at the next multiple of 8 */
} rlt_ngx_node_t;

typedef struct {
    ngx_rbtree_t rbtree;
    ngx_rbtree_node_t sentinel;
    ngx_queue_t queue;     /* most recently used first */
    rlt_policy *policy;    /* the policy every worker decides with (in the zone, see init) */
    size_t state_size;     /* rlt_state_size(&policy), rounded up to 8 */
    int64_t offset_ns;     /* UTC minus monotonic time when the zone was created */
    uint64_t evicted;      /* keys dropped while still in use, since the zone was created */
    ngx_msec_t logged;     /* monotonic ms of the last "zone is full" message */
    ngx_msec_t logged_big; /* the last "cannot hold a key" or "malformed address" message */
} rlt_ngx_shctx_t;

/* A ratelimit_zone: its configuration, and its shared memory once nginx has mapped it. */
typedef struct {
    rlt_ngx_shctx_t *sh;
    ngx_slab_pool_t *shpool;
    ngx_http_complex_value_t key;
    rlt_policy policy; /* as configured; the zone's copy wins while decisions run */
    ngx_str_t policy_text;
    ngx_str_t name;
    int addr_prefix; /* addr_prefix=N: the key is a client address made a key by rlt_addr_key */
} rlt_ngx_zone_t;

/* The zone's `now` in ns: nginx's cached monotonic ms (its loop turn's) on the zone's UTC
 * origin.  Inline: the handler reads it once per limit and request. */
static ngx_inline rlt_ns rlt__ngx_now(const rlt_ngx_shctx_t *sh)
{
    return (rlt_ns)ngx_current_msec * RLT_NS_PER_MS + sh->offset_ns;
}

/* The state block of node `n` (sh->state_size bytes): after the key, at the next multiple of 8.
 * The key comes first so the rbtree's insert compares keys without knowing the state size. */
static ngx_inline void *rlt__ngx_node_state(rlt_ngx_node_t *n)
{
    return n->data + ngx_align(n->len, 8);
}

/* rlt_state_size(p) rounded up to 8: a node's state bytes under policy p. */
size_t rlt__ngx_state_size(const rlt_policy *p);

/* The slab allocation of a node holding a key of key_len bytes and state_size state bytes. */
size_t rlt__ngx_node_size(size_t state_size, size_t key_len);

/* The node of key[0..len) with crc32 `hash`, or NULL. */
rlt_ngx_node_t *rlt__ngx_find(rlt_ngx_shctx_t *sh, uint32_t hash, u_char *key, size_t len);

/* The longest key a zone of this pool holds: 65535 bytes (a node's length field), and no node
 * over a quarter of the zone's pages (evicting every other key for one would not do). */
size_t rlt__ngx_key_max(const rlt_ngx_zone_t *z);

/* A new node for key[0..len) (not in the zone), with a fresh state, at the head of the LRU
 * queue.  It first frees idle keys, then least recently used ones, until it fits (logged to
 * `log`, at most once a second).  NULL when the zone cannot hold the key: longer than
 * rlt__ngx_key_max (nothing is evicted for it), or the zone cannot hold it even empty; that
 * is logged at most once a second a zone, and the caller refuses the request. */
rlt_ngx_node_t *rlt__ngx_create(rlt_ngx_zone_t *z, uint32_t hash, u_char *key, size_t len,
                                rlt_ns now, ngx_log_t *log);

/* The node of key[0..len), created if missing (rlt__ngx_create), moved to the head of the LRU
 * queue.  NULL only when the zone cannot hold the key: the caller refuses the request.
 * Inline: a known key, the handler's common case, costs a search and two queue moves. */
static ngx_inline rlt_ngx_node_t *rlt__ngx_lookup(rlt_ngx_zone_t *z, uint32_t hash, u_char *key,
                                                  size_t len, rlt_ns now, ngx_log_t *log)
{
    rlt_ngx_node_t *n = rlt__ngx_find(z->sh, hash, key, len);
    if (n == NULL) return rlt__ngx_create(z, hash, key, len, now, log);
    ngx_queue_remove(&n->queue);
    ngx_queue_insert_head(&z->sh->queue, &n->queue);
    return n;
}

/* nginx's ngx_shm_zone_init_pt for a ratelimit_zone (shm_zone->data is its rlt_ngx_zone_t; data
 * the previous cycle's, on a reload): lays out a new zone, or takes over the old one and adopts
 * the new policy.  Called without the mutex.  NGX_OK, or NGX_ERROR (logged) for nginx. */
ngx_int_t rlt__ngx_init_zone(ngx_shm_zone_t *shm_zone, void *data);

#endif
