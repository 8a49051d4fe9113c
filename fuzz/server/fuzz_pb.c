/* libFuzzer target: the protobuf decoder of ratelimitd's gRPC front end (pb.h).  Any input is
 * decoded as a RateLimitRequest; a decoded request is decided against a small config and its
 * response encoded, and the decoder's invariants (bounds, NUL-free strings) are checked.  The
 * first byte also selects the health check request decoder. */
#include "server/config/config.h"
#include "server/envoy/rls.h"
#include "server/grpc/pb.h"
#include "server/request/request.h"
#include "server/request/srv.h"
#include "fuzz_srv.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static rlt__srv *srv(void)
{
    static rlt__srv *s;
    if (s != NULL) return s;
    static const char yaml[] =
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, "
        "requests_per_unit: 3}\n    descriptors:\n      - key: b\n        rate_limit: "
        "{unit: week, requests_per_unit: 2, name: n1}\n  - key: c\n    value: x*\n"
        "    rate_limit: {requests_per_unit: 0, unit: year}\n  - key: u\n    rate_limit: "
        "{unlimited: true}\n  - key: s\n    shadow_mode: true\n    rate_limit: {unit: month, "
        "requests_per_unit: 1, replaces: [{name: n1}]}\n";
    s = fuzz_srv_open(yaml, sizeof yaml - 1);
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536) return 0;
    static rlt__envoy_req r;
    static rlt__envoy_result res;
    char err[300];
    if (size > 0 && data[0] == 0xff) {
        const char *svc;
        size_t sl;
        if (rlt__pb_decode_health(data + 1, size - 1, &svc, &sl) == RLT__PB_OK && sl > 0 &&
            (svc < (const char *)data || svc + sl > (const char *)data + size))
            abort();
        return 0;
    }
    if (rlt__pb_decode_rls(data, size, &r, err, sizeof err) != RLT__PB_OK) return 0;
    if (r.dlen == 0 || r.ndesc == 0 || r.ndesc > RLT__ENVOY_MAX_DESCRIPTORS) abort();
    for (size_t i = 0; i < r.ndesc; i++) {
        if (r.desc[i].nentries > RLT__ENVOY_MAX_ENTRIES) abort();
        for (size_t j = 0; j < r.desc[i].nentries; j++) {
            const rlt__entry *e = &r.desc[i].entries[j];
            if (memchr(e->key, 0, e->klen) || memchr(e->value, 0, e->vlen)) abort();
        }
    }
    rlt__session ss = {.auth = RLT__AUTH_TENANT, .prefix = "t:", .prefix_len = 2};
    static rlt__scratch *sc; /* as a worker's, for the process's lifetime */
    if (sc == NULL) sc = rlt__scratch_new(RLT__SCRATCH_CAP);
    if (rlt__envoy_decide(srv(), &r, &ss, sc, (rlt_ns)size * RLT_NS_PER_MS, &res, err, sizeof err) ==
        RLT_OK) {
        if (res.n != r.ndesc) abort();
        rlt__obuf o = {.max = 1 << 20};
        rlt__pb_header h[1] = {{"ratelimit", "x"}};
        rlt__pb_encode_rls(&res, h, 1, &o);
        /* What we encode decodes as a message of known fields only. */
        rlt__obuf_free(&o);
    }
    return 0;
}
