/* Helpers of the cluster failure tests (cluster6: masters s0-s2, replicas s3-s5): node ids,
 * slot ownership as the servers see it, and a steady load of checks over many keys through
 * rlt_redis_decide_batch, counting per key what came back. */
#ifndef RLT_RCLUSTER_H
#define RLT_RCLUSTER_H

#include "rtest.h"

/* A reply of server i to a command (NULL when it cannot be reached). */
static inline redisReply *rc_cmd(int i, const char *fmt, ...)
{
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", rtest_port(i), tv);
    if (!c || c->err) {
        if (c) redisFree(c);
        return NULL;
    }
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(c, fmt, ap);
    va_end(ap);
    redisFree(c);
    return rep;
}

/* Server i's node id into id[41]. */
static inline void rc_id(int i, char id[41])
{
    redisReply *rep = rc_cmd(i, "CLUSTER MYID");
    snprintf(id, 41, "%s", rep && rep->type == REDIS_REPLY_STRING ? rep->str : "");
    freeReplyObject(rep);
}

/* The slot of Redis key `name` (asked of server `via`). */
static inline long rc_slot(int via, const char *name, size_t len)
{
    redisReply *rep = rc_cmd(via, "CLUSTER KEYSLOT %b", name, len);
    long s = rep && rep->type == REDIS_REPLY_INTEGER ? (long)rep->integer : -1;
    freeReplyObject(rep);
    return s;
}

/* Whether server i serves `slot` now (CLUSTER SLOTS as it sees it, masters only). */
static inline bool rc_serves(int i, long slot)
{
    redisReply *rep = rc_cmd(i, "CLUSTER SLOTS");
    bool yes = false;
    int port = rtest_port(i);
    for (size_t k = 0; rep && rep->type == REDIS_REPLY_ARRAY && k < rep->elements; k++) {
        redisReply *e = rep->element[k];
        if (e->elements >= 3 && e->element[0]->integer <= slot && slot <= e->element[1]->integer &&
            e->element[2]->element[1]->integer == port)
            yes = true;
    }
    freeReplyObject(rep);
    return yes;
}

/* The integer count of a fixed window key ("w:c") on server i, 0 when absent, -1 unknown. */
static inline long long rc_count(int i, const char *name, size_t len)
{
    redisReply *rep = rc_cmd(i, "GET %b", name, len);
    long long c = -1;
    if (rep && rep->type == REDIS_REPLY_NIL) c = 0;
    if (rep && rep->type == REDIS_REPLY_STRING) {
        const char *colon = strchr(rep->str, ':');
        c = colon ? atoll(colon + 1) : -1;
    }
    freeReplyObject(rep);
    return c;
}

#endif
