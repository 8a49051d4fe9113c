/* libFuzzer target: the HTTP/2 input path of ratelimitd's gRPC front end (grpc.h): the input is
 * fed, in pieces whose sizes come from its first bytes, to one server session after the
 * client preface, as a connection would deliver it; every call that completes is decided
 * against a small config and answered.  The session must never crash, leak or grow its
 * output without bound. */
#include "server/config/config.h"
#include "server/grpc/grpc.h"
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
        "requests_per_unit: 3}\n  - key: u\n    rate_limit: {unlimited: true}\n"
        "quota_buckets:\n  - match: {name: w}\n    policy: token_bucket:10/1s\n"
        "  - match: {name: x}\n    blanket: deny_all\n";
    s = fuzz_srv_open(yaml, sizeof yaml - 1);
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 65536) return 0;
    static const uint8_t preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    rlt__grpc_session *g;
    if (rlt__grpc_session_new(&g, srv(), NULL) != RLT_OK) return 0;
    rlt__obuf out = {.max = 4 << 20};
    size_t piece = (size_t)data[0] % 64 + 1;
    bool open = rlt__grpc_session_feed(g, preface, sizeof preface - 1, 1, &out);
    for (size_t off = 1; open && off < size; off += piece) {
        size_t n = size - off < piece ? size - off : piece;
        open = rlt__grpc_session_feed(g, data + off, n, (rlt_ns)off, &out);
        if (out.overflow) abort();
        out.len = 0; /* "sent" */
    }
    rlt__obuf_free(&out);
    rlt__grpc_session_free(g);
    return 0;
}
