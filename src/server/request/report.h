/* The daemon's figures as text (report.c), for INFO (RESP), /metrics and /v1/top (HTTP):
 * the counters, the store's figures, the backend's own lines and the top offenders.  Each
 * appends to out; none fails (a part that cannot be read, a top-offenders' merge out of
 * memory, renders empty). */
#ifndef RLT_SERVER_REQUEST_REPORT_H
#define RLT_SERVER_REQUEST_REPORT_H

#include "server/base/obuf.h"
#include "server/request/request.h"

#include <stddef.h>

struct rlt__srv;

/* The Prometheus text of /metrics (the backend adds its families), without the top offenders. */
void rlt__report_prometheus(struct rlt__srv *s, rlt__obuf *out);
/* INFO's sections Server, Clients, Stats, Memory, Keyspace, Persistence, Policies, Backend. */
void rlt__report_info(struct rlt__srv *s, rlt__obuf *out);

/* The top offenders.  A tenant session sees only its own keys, without its prefix; the admin
 * sees every key as stored.  Keys and policy names are written percent-encoded (INFO: every
 * byte but [A-Za-z0-9_./@#()-]; JSON and Prometheus: bytes outside printable ASCII and
 * '%', '"', '\'), so any key renders losslessly and safely. */
/* INFO's "# Top" section: top_keys, top_denied_total, top_floor, top_dropped, then
 * top<rank>:key=K,policy=P,denied=N,error=E per entry (all of them). */
void rlt__report_top_info(struct rlt__srv *s, const rlt__session *ss, rlt__obuf *o);
/* /v1/top's body: {"k":K,"total":N,"floor":F,"keys":[{"key":..,"policy":..,"denied":N,
 * "error":E}, ...]} with the first n entries. */
void rlt__report_top_json(struct rlt__srv *s, const rlt__session *ss, size_t n, rlt__obuf *o);
/* The Prometheus families ratelimitd_top_denied, ratelimitd_top_denied_error (the first
 * RLT__TOP_METRICS entries, labels rank, key, policy) and ratelimitd_top_floor.  Nothing
 * when off. */
void rlt__report_top_prometheus(struct rlt__srv *s, const rlt__session *ss, rlt__obuf *o);
/* /v1/stats' body: {"now_s":S,"len":300,"untracked":N,"reservations":N,
 * "leases":{"concurrency":N,"redis_units":N},"backend":"local",
 * "backend_info":["INFO line", ...],"policies":[{"policy":P,"allowed_total":N,
 * "denied_total":N,"allowed":[300 per-second counts, oldest first, the last of second S],
 * "denied":[...]}, ...]} (series.h; names percent-encoded as /v1/top's). */
void rlt__report_stats_json(struct rlt__srv *s, rlt_ns now, rlt__obuf *out);

#endif
