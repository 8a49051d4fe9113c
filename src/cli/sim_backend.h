/* `ratelimit sim --backend C`: a modelled backend behind a concurrency limit, and a workload of
 * priority classes, so that a static limit, each adaptive controller (AIMD, Vegas) and each
 * with a critical reserve run side by side on the same traffic (sim_backend.c). */
#ifndef RLT_CLI_SIM_BACKEND_H
#define RLT_CLI_SIM_BACKEND_H

/* `ratelimit sim ... --backend C ...`: sim.c hands its argv here when it holds --backend.
 * Returns the exit code as the other subcommands (cli.h). */
int rlt__cli_sim_backend(int argc, char **argv);

#endif
