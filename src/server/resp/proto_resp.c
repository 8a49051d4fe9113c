/* RESP on the connection layer: every whole command in the input is parsed (resp.h) and
 * executed (cmd.h), its decision staged in the worker's pipe. */
#include "server/resp/cmd.h"
#include "server/net/conn.h"
#include "server/stats/metrics.h"
#include "server/net/protocol.h"
#include "server/resp/resp.h"
#include "server/request/srv.h"

#include <pthread.h>
#include <stdlib.h>

/* The argument vector of this thread's commands (max_args entries), shared by the thread's
 * connections and freed when the thread exits (the key's destructor). */
static __thread rlt__resp_arg *tl_argv;
static __thread size_t tl_argv_cap;
static pthread_key_t argv_key;
static pthread_once_t argv_once = PTHREAD_ONCE_INIT;

static void argv_key_init(void)
{
    pthread_key_create(&argv_key, free);
}

static int resp_open(rlt__conn *c)
{
    size_t need = rlt__srv_config(rlt__conn_srv(c))->set.max_args;
    if (tl_argv_cap >= need) return RLT_OK;
    pthread_once(&argv_once, argv_key_init);
    rlt__resp_arg *a = realloc(tl_argv, need * sizeof *a);
    if (a == NULL) return RLT_ENOMEM;
    tl_argv = a;
    tl_argv_cap = need;
    pthread_setspecific(argv_key, a);
    return RLT_OK;
}

static size_t resp_feed(rlt__conn *c, char *in, size_t len, rlt_ns now)
{
    rlt__srv *s = rlt__conn_srv(c);
    const rlt__settings *set = &rlt__srv_config(s)->set;
    rlt__session *ss = rlt__conn_session(c);
    rlt__obuf *out = rlt__conn_out(c);
    rlt__pipe *pipe = rlt__conn_pipe(c);
    rlt__resp_limits lim = {.max_args = set->max_args < tl_argv_cap ? set->max_args : tl_argv_cap,
                            .max_bulk = set->max_bulk,
                            .max_inline = set->max_bulk};
    size_t off = 0;
    while (off < len && !ss->close) {
        size_t argc;
        const char *perr = NULL;
        ssize_t r = rlt__resp_parse(in + off, len - off, &lim, tl_argv, &argc, &perr);
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
        rlt__cmd_exec(s, ss, pipe, tl_argv, argc, now, out);
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
