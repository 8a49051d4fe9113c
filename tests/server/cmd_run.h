/* The command tests' one helper (test_cmd.c, test_cmd_class.c): an inline command line run
 * through the RESP parser and the command layer, without sockets. */
#ifndef RLT_TESTS_SERVER_CMD_RUN_H
#define RLT_TESTS_SERVER_CMD_RUN_H

#include "server/request/request.h"
#include "server/request/srv.h"
#include "server/resp/cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Runs `line` (a command with its arguments, space-separated) at `now` on session ss and
 * returns the RESP reply's text, valid until the next call (at most 8191 bytes kept). */
static inline const char *rlt_test_cmd_run(rlt__srv *s, rlt__session *ss, rlt_ns now,
                                           const char *line)
{
    static char reply[8192], buf[4096];
    static rlt__resp_arg argv[64];
    size_t argc;
    snprintf(buf, sizeof buf, "%s\r\n", line);
    const char *err;
    ssize_t r = rlt__resp_parse(buf, strlen(buf), NULL, argv, &argc, &err);
    rlt__obuf o = {0};
    rlt__scratch *sc = rlt__scratch_new(RLT__SCRATCH_CAP);
    if (r > 0 && argc > 0 && sc) rlt__cmd_exec(s, ss, NULL, sc, argv, argc, now, &o);
    if (sc && rlt__scratch_mark(sc) != 0) { /* every command gives its scratch back */
        fprintf(stderr, "%s: scratch not released\n", line);
        abort();
    }
    rlt__scratch_free(sc);
    size_t n = o.len < sizeof reply - 1 ? o.len : sizeof reply - 1;
    if (n) memcpy(reply, o.data, n);
    reply[n] = '\0';
    rlt__obuf_free(&o);
    return reply;
}

#endif
