/* The server context the daemon's fuzz targets decide against: opened once from a config text,
 * no snapshot; any failure aborts (a fuzz target's set-up must not fail quietly). */
#ifndef RLT_FUZZ_SERVER_SRV_H
#define RLT_FUZZ_SERVER_SRV_H

#include "server/config/config.h"
#include "server/config/load.h"
#include "server/envoy/rlqs_srv.h"
#include "server/request/srv.h"

#include <stdlib.h>

static inline rlt__srv *fuzz_srv_open(const char *yaml, size_t len)
{
    rlt__config *c;
    rlt__srv *s;
    char err[300];
    if (rlt__config_parse(yaml, len, "fuzz", &c, err, sizeof err) != RLT_OK) abort();
    c->set.snapshot[0] = '\0';
    if (rlt__srv_open(&s, c, 0, 0, err, sizeof err) != RLT_OK) abort();
    if (rlt__rlqs_attach(s, err, sizeof err) != RLT_OK) abort(); /* as the daemon does */
    return s;
}

#endif
