/* `ratelimit sim --serve [ADDR]` (sim_serve.c): the playground without a daemon, for someone
 * who only wants to learn: the site embedded at build time (webassets.h) on a small HTTP/1.1
 * server of its own (GET and HEAD, one response per connection), until SIGINT or SIGTERM. */
#ifndef RLT_CLI_SIM_SERVE_H
#define RLT_CLI_SIM_SERVE_H

#define RLT__SERVE_DEFAULT "127.0.0.1:8090"

/* Serves on addr (HOST:PORT or PORT; NULL: RLT__SERVE_DEFAULT; port 0 picks a free one),
 * printing "ratelimit sim: the playground on http://HOST:PORT/ (Ctrl-C stops)" once it
 * listens.  Returns the exit code: 0 after a signal, 1 when it cannot listen, 2 for a bad
 * address. */
int rlt__sim_serve(const char *addr);

#endif
