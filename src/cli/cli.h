/* Entry points of the `ratelimit` command's subcommands, one file each under src/cli/.
 * Each takes the arguments after the subcommand name (argv[0] is the subcommand), writes
 * its results to stdout and its errors to stderr, and returns the process exit code:
 * 0 success, 1 a runtime failure, 2 a usage error (with a message naming the bad argument). */
#ifndef RLT_CLI_H
#define RLT_CLI_H

int rlt__cli_sim(int argc, char **argv);     /* sim.c: every algorithm on the same traffic */
int rlt__cli_sim_llm(int argc, char **argv); /* sim_llm.c: LLM budgets, three strategies */
int rlt__cli_replay(int argc, char **argv);  /* replay.c: a trace or access log through a policy */
int rlt__cli_headers(int argc, char **argv); /* headers.c: the HTTP headers a decision makes */
int rlt__cli_bench(int argc, char **argv);   /* bench.c: the keyed store under load */
int rlt__cli_quota(int argc, char **argv);   /* quota.c: N Envoys' RLQS streams to a daemon */

#endif
