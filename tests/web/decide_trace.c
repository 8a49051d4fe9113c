/* The native half of the WebAssembly comparison (wasm_vs_native.sh): reads a script of policy
 * texts and decisions on stdin and prints one line per step, the same lines decide_trace.mjs
 * prints through ratelimit.wasm, so the two outputs must be equal byte for byte.  Steps:
 *   policy TEXT        a new policy and a fresh state ("policy ok CANONICAL" or the error)
 *   decide NOW COST    rlt_decide; prints the status, the decision and the state's bytes
 *   peek NOW           a cost-0 decision on a copy of the state
 *   release NOW        rlt_release of the last lease granted */
#include "ratelimit/ratelimit.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_decision(int rc, const rlt_decision *d, const rlt_policy *p, const void *st)
{
    printf("%d %d %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 " ", rc,
           d->allowed ? 1 : 0, d->limit, d->remaining, d->retry_after, d->reset_after, d->delay,
           d->lease);
    const unsigned char *b = st;
    for (size_t i = 0; i < rlt_state_size(p); i++)
        printf("%02x", b[i]);
    putchar('\n');
}

int main(void)
{
    char line[2048];
    rlt_policy p;
    void *st = NULL;
    int64_t lease = 0;
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = '\0';
        int64_t a, b;
        if (strncmp(line, "policy ", 7) == 0) {
            char err[1024] = "";
            free(st);
            st = NULL;
            lease = 0;
            int rc = rlt_policy_parse(&p, line + 7, strlen(line + 7), err, sizeof err);
            if (rc != RLT_OK) {
                printf("policy error %s\n", err[0] ? err : rlt_strerror(rc));
                continue;
            }
            char text[1024];
            if (rlt_policy_format(&p, text, sizeof text) < 0) text[0] = '\0';
            printf("policy ok %s\n", text);
            st = calloc(1, rlt_state_size(&p));
            if (!st) return 1;
        } else if (!st) {
            continue; /* steps after a policy that did not parse */
        } else if (sscanf(line, "decide %" SCNd64 " %" SCNd64, &a, &b) == 2) {
            rlt_decision d;
            memset(&d, 0, sizeof d);
            int rc = rlt_decide(&p, st, a, b, &d);
            if (rc == RLT_OK && d.allowed && d.lease) lease = d.lease;
            print_decision(rc, &d, &p, st);
        } else if (sscanf(line, "peek %" SCNd64, &a) == 1) {
            rlt_decision d;
            memset(&d, 0, sizeof d);
            size_t n = rlt_state_size(&p);
            void *c = malloc(n);
            if (!c) return 1;
            int rc = rlt_decide(&p, memcpy(c, st, n), a, 0, &d);
            free(c);
            print_decision(rc, &d, &p, st);
        } else if (sscanf(line, "release %" SCNd64, &a) == 1) {
            printf("release %d\n", rlt_release(&p, st, a, lease));
        }
    }
    free(st);
    return 0;
}
