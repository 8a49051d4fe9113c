/* The RLQS quota state's records, shared by the file that owns them (rlqs.c: the table,
 * streams and reports) and its Redis mode (rlqs_redis.c: the claims, their deadlines, the
 * fail modes and the amounts retired buckets still hold); read, under the lock, by its bounded
 * snapshot (rlqs_view.c).  Internal to those three files. */
#ifndef RLT_SERVER_ENVOY_RLQS_INT_H
#define RLT_SERVER_ENVOY_RLQS_INT_H

#include "quota/quota.h"
#include "server/config/config.h"
#include "server/envoy/rlqs_counters.h"
#include "server/envoy/rlqs_hold.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RLT__RLQS_MAX_DIVISIONS 32 /* distinct TTLs in use */
#define RLT__RLQS_MAX_UNKNOWN 256  /* unknown domains remembered for their one log line */
#define RLT__RLQS_CARRY_SLOTS 1024 /* chains of the retired buckets' carried amounts */

/* One division: every policy bucket whose assignments live `ttl`. */
typedef struct rlt__rlqs_division {
    rlt_ns ttl;
    rlt__quota *div;
} rlt__rlqs_division;

/* Redis mode: where a policy bucket's budget comes from. */
typedef enum rlt__rlqs_claim_state {
    RLT__RLQS_UNCLAIMED = 0, /* awaiting its first exchange: divides nothing */
    RLT__RLQS_CLAIMED,       /* divides its claimed part until claim_until */
    RLT__RLQS_FAILING,       /* in its fail mode (`fail`) since fail_since */
} rlt__rlqs_claim_state;

/* A BucketId of a domain, as the table holds it. */
typedef struct rlt__rlqs_bucket {
    struct rlt__rlqs_bucket *next; /* hash chain */
    uint64_t hash;
    const rlt__config *cfg;   /* the config it was matched under */
    const rlt__qrule *rule;   /* NULL: the domain's quota_default */
    int kind;                 /* RLT__QUOTA_* */
    rlt__rlqs_division *dv; /* kind POLICY */
    uint32_t qb;              /* its bucket in dv */
    rlt_ns ttl;
    rlt_ns observed;      /* the time_elapsed its default TTL came from */
    bool provisional;     /* its TTL is the least default (no elapsed seen): settle() moves it */
    rlt_ns lowered_until; /* after a move: its budget is lowered until then (quotas_move) */
    rlt_ns blocked_until; /* penalty box (the policy's block=): deny-all until then */
    size_t refs;          /* memberships */
    rlt_ns idle_since;    /* refs 0: freed a TTL later (the ledger's entries have expired) */
    bool dead;            /* out of the table: its rule was removed; freed at refs 0 */
    uint64_t id;          /* unique: Redis mode finds it again by it */
    /* the client it is charged to until freed (NULL: none) */
    rlt__rlqs_holder *holder;
    int64_t cap_q, cap_b; /* POLICY: the global Q and B */
    /* Redis mode */
    rlt__rlqs_claim_state claim;
    int fail;                 /* FAILING: RLT__FAIL_OPEN, _CLOSED or _LOCAL */
    rlt_ns claim_until;       /* CLAIMED: no assignment from the claim past this (its deadline) */
    rlt_ns fail_since;        /* FAILING: when it entered the mode */
    int64_t claim_q, claim_b; /* the claim stored by the last successful exchange, less what
                                 retired buckets of the key carried in it */
    rlt_ns claim_expires;     /* that claim's earliest end of reservation in Redis (0: none) */
    size_t klen;
    char key[]; /* tenant prefix, domain, NUL, canonical BucketId */
} rlt__rlqs_bucket;

/* Redis mode: what a retired policy bucket's ledger still holds for its key, until `until`
 * (its live assignments' last expiry), counted in the key's claim. */
typedef struct rlt__rlqs_carry {
    struct rlt__rlqs_carry *next;
    uint64_t hash;
    int64_t q, b;         /* the live sums at retirement */
    int64_t cap_q, cap_b; /* the rule's Q and B then */
    rlt_ns ttl, until;
    size_t klen;
    char key[];
} rlt__rlqs_carry;

/* (rlqs.h declares the same name: this header does not include it, so that rlqs_redis.c
 * depends on the records alone.) */
typedef struct rlt__rlqs rlt__rlqs;

struct rlt__rlqs {
    pthread_mutex_t lock;
    rlt__rlqs_bucket **tab;
    size_t cap, n;
    rlt__rlqs_division dvs[RLT__RLQS_MAX_DIVISIONS];
    size_t ndvs;
    size_t members, streams;
    rlt__rlqs_counters counted;
    rlt_ns last_sweep;
    char *unknown[RLT__RLQS_MAX_UNKNOWN];
    size_t nunknown;
    uint64_t next_id;
    bool redis;              /* Redis mode (rlt__rlqs_redis_mode) */
    void (*wake)(void *arg); /* a new policy bucket awaits its first exchange */
    void *wake_arg;
    rlt__rlqs_carry **carry; /* Redis mode: RLT__RLQS_CARRY_SLOTS chains, or NULL */
    size_t ncarry;
    rlt__rlqs_holders *holders; /* the clients holding streams and buckets */
};

#endif
