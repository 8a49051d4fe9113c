/* `ratelimit headers`: runs requests at given times on one key and shows, for each, the HTTP
 * status line and the rate-limit headers (Retry-After, RateLimit-Policy, RateLimit, the legacy
 * RateLimit-* trio and X-RateLimit-*) that the decision produces, as a client would see them. */
#include "cli/cli.h"
#include "cli/cliutil.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CMD "headers"

static void usage(FILE *f)
{
    fputs("usage: ratelimit headers --policy SPEC --at TIME[,TIME...] [--name NAME] [--cost C]\n"
          "                         [--unit s|ms|us|ns]\n"
          "Decides a request at each TIME (in --unit, default s) on one key and prints the\n"
          "response's status line and rate-limit headers.\n"
          "  --policy SPEC  e.g. token_bucket:100/1m,burst=20\n"
          "  --at LIST      request times, comma-separated decimals: --at 0,0.1,0.2\n"
          "  --name NAME    the policy name in RateLimit-Policy / RateLimit (default \"default\")\n"
          "  --cost C       cost of each request, a whole number >= 1 (default 1)\n",
          f);
}

#define fail_usage(...) rlt__usage_error(CMD, __VA_ARGS__)

int rlt__cli_headers(int argc, char **argv)
{
    rlt_policy p;
    const char *policy = NULL, *at = NULL, *name = NULL, *v;
    int64_t cost = 1, unit = RLT_NS_PER_S;
    const char *unit_name = "s";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int m;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if ((m = rlt__opt(argc, argv, &i, CMD, "--policy", &v)) != 0) {
            if (m < 0 || rlt__opt_policy(CMD, v, &p)) return 2;
            policy = v;
        } else if ((m = rlt__opt(argc, argv, &i, CMD, "--at", &v)) != 0) {
            if (m < 0) return 2;
            at = v;
        } else if ((m = rlt__opt(argc, argv, &i, CMD, "--name", &v)) != 0) {
            if (m < 0) return 2;
            name = v;
        } else if ((m = rlt__opt(argc, argv, &i, CMD, "--cost", &v)) != 0) {
            if (m < 0 || rlt__opt_int(CMD, "--cost", v, 1, INT64_MAX, &cost)) return 2;
        } else if ((m = rlt__opt(argc, argv, &i, CMD, "--unit", &v)) != 0) {
            if (m < 0) return 2;
            if (!(unit = rlt__dec_unit_ns(v)))
                return fail_usage("--unit '%s': expected s, ms, us or ns", v);
            unit_name = v;
        } else {
            return fail_usage("unknown option '%s'", a);
        }
    }
    if (!policy) return fail_usage("--policy is required");
    if (!at) return fail_usage("--at is required");
    if (name) {
        if (!*name || strlen(name) > RLT_NAME_MAX)
            return fail_usage("--name '%s': expected 1 to %d characters", name, RLT_NAME_MAX);
        for (const char *c = name; *c; c++)
            if (!((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') ||
                  (*c >= '0' && *c <= '9') || strchr("_.:-", *c)))
                return fail_usage("--name '%s': use only letters, digits and _ . : -", name);
    }
    /* Validate every time before deciding anything. */
    size_t n = 1;
    for (const char *c = at; *c; c++)
        n += *c == ',';
    rlt_ns *times = malloc(n * sizeof *times);
    void *st = calloc(1, rlt_state_size(&p));
    if (!times || !st) {
        free(times);
        free(st);
        fprintf(stderr, "ratelimit " CMD ": out of memory\n");
        return 1;
    }
    int status = 0;
    const char *s = at;
    for (size_t k = 0; k < n; k++) {
        const char *e = strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        int rc = rlt__dec_parse(s, len, unit, &times[k]);
        if (rc != RLT__DEC_OK) {
            status = fail_usage("--at: bad time '%.*s': %s", (int)len, s,
                                rc == RLT__DEC_PRECISION ? "more precise than 1 ns"
                                                         : rlt__dec_strerror(rc));
            break;
        }
        s = e ? e + 1 : s + len;
    }
    char buf[2048], t[RLT__DEC_BUF], r[RLT__DEC_BUF], x[RLT__DEC_BUF];
    for (size_t k = 0; k < n && !status; k++) {
        rlt_decision d;
        int rc = rlt_decide(&p, st, times[k], cost, &d);
        if (rc == RLT_OK) rc = rlt_format_headers(buf, sizeof buf, name, &p, &d, RLT_HDR_ALL);
        if (rc < 0) {
            fprintf(stderr, "ratelimit " CMD ": request at %s %s: %s\n",
                    (rlt__dec_format(t, times[k], unit), t), unit_name, rlt_strerror(rc));
            status = 1;
            break;
        }
        rlt__dec_format(t, times[k], unit);
        printf("%s# request %zu at t = %s %s, cost %lld: %s, remaining %lld", k ? "\n" : "", k + 1,
               t, unit_name, (long long)cost, d.allowed ? "allowed" : "denied",
               (long long)d.remaining);
        if (!d.allowed) {
            if (d.retry_after < 0)
                printf(", can never fit");
            else
                printf(", retry after %s %s", (rlt__dec_format(r, d.retry_after, unit), r),
                       unit_name);
        }
        if (d.delay > 0)
            printf(", delayed %s %s", (rlt__dec_format(x, d.delay, unit), x), unit_name);
        printf("\n%s\n", d.allowed ? "HTTP/1.1 200 OK" : "HTTP/1.1 429 Too Many Requests");
        /* The library writes CRLF line ends, as on the wire; a terminal wants LF. */
        for (const char *c = buf; *c; c++)
            if (*c != '\r') putchar(*c);
    }
    free(times);
    free(st);
    if (fflush(stdout) != 0 && !status) status = 1;
    return status;
}
