/* The connection commands of RESP (cmd_conn.c): what Redis clients, redis-cli and
 * redis-benchmark send besides rate-limit commands (AUTH, HELLO with RESP2 and RESP3, PING,
 * ECHO, CLIENT, SELECT, COMMAND, CONFIG GET, INFO, DBSIZE), answered as Redis answers them. */
#ifndef RLT_SERVER_RESP_CMD_CONN_H
#define RLT_SERVER_RESP_CMD_CONN_H

#include "server/base/obuf.h"
#include "server/request/request.h"
#include "server/resp/resp.h"

#include <stdbool.h>
#include <stddef.h>

struct rlt__srv;

/* Answers argv[0..n) when it is one of the connection commands and returns true; false (and
 * nothing written) for any other command.  AUTH and HELLO are answered whether or not the
 * session is authenticated; the caller checks authentication before the others. */
bool rlt__cmd_connection(struct rlt__srv *s, rlt__session *ss, const rlt__resp_arg *argv,
                         size_t n, rlt__obuf *out);

#endif
