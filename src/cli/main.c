/* The `ratelimit` command: dispatches to the subcommands (sim, replay, headers, bench,
 * quota) and
 * answers --help and --version. */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

#ifndef RLT_VERSION
#define RLT_VERSION "unknown"
#endif

static void usage(FILE *f)
{
    fputs("usage: ratelimit <command> [options]   (ratelimit <command> --help for its options)\n"
          "Every rate-limiting algorithm as exact integer code, with time as a parameter.\n"
          "commands:\n"
          "  sim       run every algorithm over the same request trace on a virtual clock\n"
          "  replay    replay a trace or an access log through a policy, one verdict per line\n"
          "  headers   show the HTTP rate-limit headers a policy's decisions produce\n"
          "  bench     measure the keyed store's decisions per second\n"
          "  quota     N Envoys' Rate Limit Quota Service streams against a running ratelimitd\n"
          "options:\n"
          "  --help, -h     this text\n"
          "  --version, -V  the version\n",
          f);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
        printf("ratelimit %s\n", RLT_VERSION);
        return 0;
    }
    if (strcmp(cmd, "sim") == 0) return rlt__cli_sim(argc - 1, argv + 1);
    if (strcmp(cmd, "replay") == 0) return rlt__cli_replay(argc - 1, argv + 1);
    if (strcmp(cmd, "headers") == 0) return rlt__cli_headers(argc - 1, argv + 1);
    if (strcmp(cmd, "bench") == 0) {
#ifdef RLT_HAVE_BENCH
        return rlt__cli_bench(argc - 1, argv + 1);
#else
        fprintf(stderr, "ratelimit: bench not built (src/cli/bench.c was missing at configure "
                        "time)\n");
        return 1;
#endif
    }
    if (strcmp(cmd, "quota") == 0) {
#ifdef RLT_HAVE_QUOTA
        return rlt__cli_quota(argc - 1, argv + 1);
#else
        fprintf(stderr, "ratelimit: quota not built (libnghttp2 was missing at configure time: "
                        "install libnghttp2-dev)\n");
        return 1;
#endif
    }
    fprintf(stderr, "ratelimit: unknown command '%s' (see ratelimit --help)\n", cmd);
    return 2;
}
