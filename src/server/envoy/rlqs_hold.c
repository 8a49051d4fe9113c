/* The RLQS quota state's holders (rlqs_hold.h): a chained table of per-client counts. */
#include "server/envoy/rlqs_hold.h"

#include "server/base/mem.h"

#include <assert.h>
#include <stdlib.h>

static size_t slot_of(uint64_t id)
{
    /* ids are sequential (connections) or FNV-1a hashes (tenants): mix before taking bits */
    return (size_t)((id * UINT64_C(0x9e3779b97f4a7c15)) >> 56) % RLT__RLQS_HOLDER_SLOTS;
}

rlt__rlqs_holder *rlt__rlqs_holder_get(rlt__rlqs_holders *hs, uint64_t id)
{
    assert(id != 0);
    rlt__rlqs_holder **pp = &hs->slot[slot_of(id)];
    for (rlt__rlqs_holder *h = *pp; h != NULL; h = h->next)
        if (h->id == id) return h;
    if (!rlt__mem_conn_take(sizeof(rlt__rlqs_holder))) return NULL;
    rlt__rlqs_holder *h = calloc(1, sizeof *h);
    if (h == NULL) {
        rlt__mem_conn_give(sizeof *h);
        return NULL;
    }
    h->id = id;
    h->next = *pp;
    *pp = h;
    hs->n++;
    return h;
}

void rlt__rlqs_holder_release(rlt__rlqs_holders *hs, rlt__rlqs_holder *h)
{
    if (h == NULL || h->streams > 0 || h->buckets > 0) return;
    rlt__rlqs_holder **pp = &hs->slot[slot_of(h->id)];
    while (*pp != h)
        pp = &(*pp)->next;
    *pp = h->next;
    hs->n--;
    free(h);
    rlt__mem_conn_give(sizeof *h);
}

void rlt__rlqs_holders_free(rlt__rlqs_holders *hs)
{
    for (size_t i = 0; i < RLT__RLQS_HOLDER_SLOTS; i++)
        for (rlt__rlqs_holder *h = hs->slot[i], *nx; h != NULL; h = nx) {
            nx = h->next;
            free(h);
            rlt__mem_conn_give(sizeof *h);
        }
    hs->n = 0;
}
