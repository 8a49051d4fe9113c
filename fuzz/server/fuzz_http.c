/* libFuzzer target: the inputs of ratelimitd's HTTP endpoints without sockets: the first byte
 * picks the /v1/check query parser or the envoy /json body parser + decision against a small
 * config, over the rest of the input. */
#include "server/resp/cmd.h"
#include "server/config/config.h"
#include "server/request/decide.h"
#include "server/http/httpin.h"
#include "server/stats/metrics.h"
#include "server/net/pipe.h"
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
        "{unit: minute, requests_per_unit: 2, name: n1}\n  - key: c\n    value: x*\n"
        "    rate_limit: {requests_per_unit: 0, unit: hour}\n  - key: u\n    rate_limit: "
        "{unlimited: true}\n  - key: s\n    shadow_mode: true\n    rate_limit: {unit: second, "
        "requests_per_unit: 1, replaces: [{name: n1}]}\n";
    s = fuzz_srv_open(yaml, sizeof yaml - 1);
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0 || size > 65536) return 0;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    char err[300];
    if (data[0] & 1) {
        static rlt__check_req r;
        if (rlt__check_parse(body, len, &r, err, sizeof err) == RLT_OK) {
            if (r.klen == 0 || r.klen > RLT_KEY_MAX || r.plen == 0 || r.cost < 0) abort();
            if (r.timeout_ms < 0 || r.timeout_ms > 86400000) abort();
            if (r.nlimits < 1 || r.nlimits > RLT__CHECK_MAX_LIMITS) abort();
            for (size_t i = 1; i < r.nlimits; i++)
                if (r.more[i - 1].klen == 0 || r.more[i - 1].klen > RLT_KEY_MAX ||
                    r.more[i - 1].plen == 0)
                    abort();
        }
        return 0;
    }
    rlt__envoy_req r;
    if (rlt__envoy_parse(body, len, &r, err, sizeof err) == RLT_OK) {
        rlt__obuf o = {.max = 1 << 20};
        /* As a tenant: every key gets the prefix "t:". */
        rlt__session ss = {.auth = RLT__AUTH_TENANT, .prefix = "t:", .prefix_len = 2};
        int code = 0;
        static rlt__scratch *sc; /* as a worker's, for the process's lifetime */
        if (sc == NULL) sc = rlt__scratch_new(RLT__SCRATCH_CAP);
        int st = rlt__envoy_decide_json(srv(), &r, &ss, sc, (rlt_ns)size * RLT_NS_PER_MS, &o, &code,
                                        err, sizeof err);
        if (st == RLT_OK && code != 200 && code != 429) abort();
        if (st != RLT_OK && st >= 0) abort();
        rlt__obuf_free(&o);
    }
    rlt__envoy_free(&r);
    return 0;
}
