/* Envoy's quota service attached to the server context (rlqs_srv.c): the RLQS state
 * (rlqs.h), in Redis mode its exchanges with the fleet (rlqs_sync.h), and its parts of INFO,
 * /metrics and /v1/stats, handed to request/srv.h as an rlt__srv_service so that the context
 * and its reports never call up into this room. */
#ifndef RLT_SERVER_ENVOY_RLQS_SRV_H
#define RLT_SERVER_ENVOY_RLQS_SRV_H

#include "server/envoy/rlqs.h"
#include "server/envoy/rlqs_pb.h"
#include "server/request/srv.h"

#include <stddef.h>

/* Opens the RLQS state on s (s->rlqs) and, when s's backend shares quota buckets with a
 * fleet (Redis: quota_exchange), starts their exchanges (s->rlqs_sync); rlt__srv_close closes
 * both.  Call once, after rlt__srv_open and before any thread serves s.  Returns RLT_OK, or
 * an RLT_* code with a message in err (s is left without the service). */
int rlt__rlqs_attach(rlt__srv *s, char *err, size_t errlen);

/* One decoded report of a stream (it, from rlt__rlqs_decode_reports; the stream qs bound to
 * domain[0..dlen)): every usage fed to q under its lock (rlt__rlqs_report), and the actions
 * that come back appended to out as one length-prefixed gRPC message, or nothing when there is
 * none (*actions 0).  Returns RLT_OK, or the first usage's failure (RLT_EFULL: a bucket past
 * the table's or the stream's cap; RLT_ENOMEM), the actions before it kept. */
int rlt__rlqs_feed_report(rlt__rlqs *q, const rlt__config *cfg, rlt__rlqs_stream *qs,
                          const char *domain, size_t dlen, rlt__rlqs_reader *it, rlt_ns now,
                          rlt__obuf *out, size_t *actions);

#endif
