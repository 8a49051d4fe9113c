/* RESP on the connection layer: every whole command in the input is parsed (resp.h) and
 * executed (cmd.h), its decision staged in the worker's pipe. */
#include "server/resp/cmd.h"
#include "server/net/conn.h"
#include "server/stats/metrics.h"
#include "server/net/protocol.h"
#include "server/resp/resp.h"
#include "server/request/srv.h"

#include <stdlib.h>

/* The argument vector of a feed's commands (max_args entries) is taken from the worker's
 * scratch, which a connection's open grows to hold it beside a command's own needs. */
static int resp_open(rlt__conn *c)
{
    size_t need = rlt__srv_config(rlt__conn_srv(c))->set.max_args;
    return rlt__scratch_reserve(rlt__conn_scratch(c),
                                RLT__SCRATCH_CAP + need * sizeof(rlt__resp_arg));
}

static size_t feed(rlt__conn *c, rlt__scratch *sc, char *in, size_t len, rlt_ns now);

static size_t resp_feed(rlt__conn *c, char *in, size_t len, rlt_ns now)
{
    rlt__scratch *sc = rlt__conn_scratch(c);
    size_t mark = rlt__scratch_mark(sc);
    size_t r = feed(c, sc, in, len, now);
    rlt__scratch_release(sc, mark);
    return r;
}

static size_t feed(rlt__conn *c, rlt__scratch *sc, char *in, size_t len, rlt_ns now)
{
    rlt__srv *s = rlt__conn_srv(c);
    const rlt__settings *set = &rlt__srv_config(s)->set;
    rlt__session *ss = rlt__conn_session(c);
    rlt__obuf *out = rlt__conn_out(c);
    rlt__pipe *pipe = rlt__conn_pipe(c);
    /* What the scratch holds beside a command's needs (a reload's larger max_args counts for
     * the connections opened after it). */
    size_t room = rlt__scratch_cap(sc) - rlt__scratch_mark(sc);
    room = room > RLT__SCRATCH_CAP ? (room - RLT__SCRATCH_CAP) / sizeof(rlt__resp_arg) : 0;
    size_t max_args = set->max_args < room ? set->max_args : room;
    rlt__resp_arg *argv = rlt__scratch_alloc(sc, max_args * sizeof *argv);
    if (argv == NULL || max_args == 0) { /* not expected: resp_open reserved it */
        rlt__resp_error(rlt__conn_out(c), "ERR out of scratch space for the arguments");
        rlt__conn_close_after(c);
        return len;
    }
    rlt__resp_limits lim = {.max_args = max_args,
                            .max_bulk = set->max_bulk,
                            .max_inline = set->max_bulk};
    size_t off = 0;
    while (off < len && !ss->close) {
        size_t argc;
        const char *perr = NULL;
        ssize_t r = rlt__resp_parse(in + off, len - off, &lim, argv, &argc, &perr);
        if (r == RLT__RESP_PARTIAL) break;
        if (r == RLT__RESP_ERROR) {
            rlt__pipe_flush(pipe, s); /* the replies before the error, in order */
            rlt__resp_errorf(out, "ERR %s", perr);
            rlt__mslot *ms = rlt__mslot_get(&s->metrics);
            rlt__mcount(&ms->errors, 1);
            rlt__conn_close_after(c);
            return len;
        }
        off += (size_t)r;
        if (argc == 0) continue;
        rlt__conn_request_done(c);
        rlt__cmd_exec(s, ss, pipe, sc, argv, argc, now, out);
        if (out->overflow) break;
    }
    return off;
}

static void resp_refuse(rlt__conn *c, rlt__refusal why, rlt__obuf *out)
{
    (void)c;
    switch (why) {
    case RLT__REFUSE_FULL:
        rlt__resp_error(out, "ERR max number of clients reached");
        break;
    case RLT__REFUSE_TIMEOUT:
        rlt__resp_error(out, "ERR client timeout: command not completed in time");
        break;
    case RLT__REFUSE_TOO_LARGE:
        rlt__resp_error(out, "ERR Protocol error: command too large");
        break;
    }
}

const rlt__proto rlt__proto_resp = {
    .name = "resp",
    .open = resp_open,
    .close = NULL,
    .feed = resp_feed,
    .refuse = resp_refuse,
};
