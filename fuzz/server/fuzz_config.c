/* libFuzzer target: the YAML config parser (libyaml + our schema) over arbitrary text; a
 * parsed config is also matched against a descriptor built from the input. */
#include "server/resp/cmd.h"
#include "server/config/config.h"
#include "server/config/load.h"
#include "server/request/decide.h"
#include "server/http/httpin.h"
#include "server/stats/metrics.h"
#include "server/net/pipe.h"
#include "server/request/request.h"
#include "server/request/srv.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536) return 0;
    rlt__config *c = NULL;
    char err[600];
    if (rlt__config_parse((const char *)data, size, "fuzz.yaml", &c, err, sizeof err) == 0) {
        rlt__entry e[2] = {{"k", 1, (const char *)data, size < 8 ? size : 8}, {"key", 3, "v", 1}};
        for (size_t i = 0; i < c->ndomains; i++) {
            int r = rlt__config_match(c, c->domains[i].name, strlen(c->domains[i].name), e, 2);
            if (r >= (int)c->nrules) abort();
            r = rlt__config_match(c, c->domains[i].name, strlen(c->domains[i].name), e, 1);
            if (r >= (int)c->nrules) abort();
        }
        rlt__config_free(c);
    } else if (strncmp(err, "fuzz.yaml:", 10) != 0) {
        abort(); /* every error names the file and line */
    }
    return 0;
}
