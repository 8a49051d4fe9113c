/* Tier assignments (assign.h): per shard, a chained hash of key -> tier index, bounded and
 * counted like keys, never evicted except with their key. */
#include <stdlib.h>
#include <string.h>

#include "store/assign.h"
#include "store/table.h"

const rlt__assign *rlt__assign_find(const rlt__shard *sh, uint64_t h, const void *key, size_t klen)
{
    if (!sh->anb) return NULL;
    for (const rlt__assign *a = sh->abuckets[(h >> 32) & (sh->anb - 1)]; a; a = a->next)
        if (a->hash == h && a->klen == klen && memcmp(a->key, key, klen) == 0) return a;
    return NULL;
}

void rlt__assign_drop(const rlt_store *s, rlt__shard *sh, const void *key, size_t klen)
{
    if (sh->acount == 0) return;
    uint64_t h = rlt__key_hash(s, key, klen);
    for (rlt__assign **pp = &sh->abuckets[(h >> 32) & (sh->anb - 1)]; *pp; pp = &(*pp)->next) {
        rlt__assign *a = *pp;
        if (a->hash == h && a->klen == klen && memcmp(a->key, key, klen) == 0) {
            *pp = a->next;
            RLT__STAT_ADD(sh->bytes, -(uint64_t)(sizeof *a + klen));
            free(a);
            sh->acount--;
            return;
        }
    }
}

int rlt__assign_set(const rlt_store *s, rlt__shard *sh, uint64_t h, const void *key, size_t klen,
                    uint32_t tier)
{
    rlt__assign *a = (rlt__assign *)rlt__assign_find(sh, h, key, klen);
    if (a) {
        a->tier = tier;
        return RLT_OK;
    }
    /* Bounded like keys: at most a shard's share of max_keys, and counted in its bytes. */
    if (sh->acount >= s->key_cap || sh->bytes + sizeof *a + klen > s->byte_cap) return RLT_EFULL;
    if (sh->acount + 1 > sh->anb) {
        uint32_t nb = sh->anb ? sh->anb * 2 : 8;
        rlt__assign **b = calloc(nb, sizeof *b);
        if (!b) return RLT_ENOMEM;
        for (uint32_t i = 0; i < sh->anb; i++) {
            for (rlt__assign *x = sh->abuckets[i], *nx; x; x = nx) {
                nx = x->next;
                rlt__assign **slot = &b[(x->hash >> 32) & (nb - 1)];
                x->next = *slot;
                *slot = x;
            }
        }
        free(sh->abuckets);
        sh->abuckets = b;
        sh->anb = nb;
    }
    a = malloc(sizeof *a + klen);
    if (!a) return RLT_ENOMEM;
    a->hash = h;
    a->tier = tier;
    a->klen = (uint16_t)klen;
    memcpy(a->key, key, klen);
    rlt__assign **slot = &sh->abuckets[(h >> 32) & (sh->anb - 1)];
    a->next = *slot;
    *slot = a;
    sh->acount++;
    RLT__STAT_ADD(sh->bytes, sizeof *a + klen);
    return RLT_OK;
}

void rlt__assign_free(rlt__shard *sh)
{
    for (uint32_t i = 0; i < sh->anb; i++) {
        for (rlt__assign *a = sh->abuckets[i], *n; a; a = n) {
            n = a->next;
            free(a);
        }
    }
    free(sh->abuckets);
}
