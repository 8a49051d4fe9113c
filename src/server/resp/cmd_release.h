/* RL.RELEASE's report (cmd_release.c): how the request went, for an adaptive limit. */
#ifndef RLT_SERVER_RESP_CMD_RELEASE_H
#define RLT_SERVER_RESP_CMD_RELEASE_H

#include "server/base/obuf.h"
#include "server/resp/resp.h"

#include <stdbool.h>
#include <stddef.h>

/* Reads RL.RELEASE's options after key, policy and lease (a[4..n)), in any order: LATENCY d
 * (a duration, bare numbers in milliseconds: "12", "850us", "1s"; 0..1h) and OUTCOME
 * success|dropped|ignore (default success; needs LATENCY).  Sets *latency_ns (-1 when no
 * LATENCY: a release without a report) and *outcome (rlt_outcome).  Returns false after
 * appending an error reply to o. */
bool rlt__resp_release_options(const rlt__resp_arg *a, size_t n, rlt_ns *latency_ns, int *outcome,
                               rlt__obuf *o);

#endif
