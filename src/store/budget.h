/* The multi-limit reservations' internal entry point for the store's lifecycle (store.c); the
 * public calls are in include/ratelimit/budget.h. */
#ifndef RLT_STORE_BUDGET_H
#define RLT_STORE_BUDGET_H

#include "ratelimit/store.h"

/* Frees the multi-limit reservations' table, at close (the store no longer shared). */
void rlt__budget_free(rlt_store *s);

#endif
