/* SPOP v2, HAProxy's Stream Processing Offload Protocol (spop.c): the sans-I/O frame parser,
 * the typed-data readers and the writers of the agent's frames.  Strict like http1.c: a length
 * past its frame, an unknown frame or data type, a varint longer than 10 bytes, a frame over
 * the agreed size, are errors with the DISCONNECT status that names them, never guesses.
 *
 * A frame on the wire: a 4-byte big-endian length, then the frame (type: 1 byte; flags: 4
 * bytes big-endian, FIN = 1, ABORT = 2; stream-id and frame-id: varints; the payload).
 * Varints are HAProxy's: a value under 240 in one byte, else the low 4 bits with 0xf0, then
 * 7 bits per byte, each byte but the last >= 128, every byte after the first adding its value
 * shifted (not masked), so 240 + 16 x ... is the encoding's base. */
#ifndef RLT_SERVER_SPOP_SPOP_H
#define RLT_SERVER_SPOP_SPOP_H

#include "server/base/obuf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Frame types. */
enum {
    RLT__SPOP_HAPROXY_HELLO = 1,
    RLT__SPOP_HAPROXY_DISCONNECT = 2,
    RLT__SPOP_NOTIFY = 3,
    RLT__SPOP_AGENT_HELLO = 101,
    RLT__SPOP_AGENT_DISCONNECT = 102,
    RLT__SPOP_ACK = 103,
};
#define RLT__SPOP_FIN 1u
#define RLT__SPOP_ABORT 2u

/* DISCONNECT status codes (SPOE.txt section 3.2.8's list). */
typedef enum rlt__spop_status {
    RLT__SPOP_ST_NORMAL = 0,
    RLT__SPOP_ST_IO = 1,
    RLT__SPOP_ST_TIMEOUT = 2,
    RLT__SPOP_ST_TOO_BIG = 3,
    RLT__SPOP_ST_INVALID = 4,
    RLT__SPOP_ST_NO_VERSION = 5,
    RLT__SPOP_ST_NO_FRAME_SIZE = 6,
    RLT__SPOP_ST_NO_CAPABILITIES = 7,
    RLT__SPOP_ST_BAD_VERSION = 8,
    RLT__SPOP_ST_BAD_FRAME_SIZE = 9,
    RLT__SPOP_ST_NO_FRAGMENTATION = 10,
    RLT__SPOP_ST_INTERLACED = 11,
    RLT__SPOP_ST_NO_FRAME_ID = 12,
    RLT__SPOP_ST_RESOURCE = 13,
    RLT__SPOP_ST_UNKNOWN = 99,
} rlt__spop_status;

/* The smallest frame size HAProxy agrees to, and the most this agent offers. */
#define RLT__SPOP_MIN_FRAME 256u
#define RLT__SPOP_MAX_FRAME 16384u

/* One frame, pointing into the parsed input. */
typedef struct rlt__spop_frame {
    unsigned type;
    uint32_t flags;
    uint64_t stream_id, frame_id;
    const unsigned char *payload;
    size_t plen;
} rlt__spop_frame;

#define RLT__SPOP_PARTIAL 0
#define RLT__SPOP_ERROR (-1)

/* Cuts one frame off in[0..len).  `max_frame` is the agreed frame size (the 4-byte length
 * excluded).  Returns the bytes consumed (> 0) and *f; RLT__SPOP_PARTIAL when the frame is not
 * whole yet (its length was within max_frame); RLT__SPOP_ERROR with *status and a static
 * message in *err: a length over max_frame (TOO_BIG), a type outside the six, metadata past
 * the frame or a varint of more than 10 bytes (INVALID).  A fragmented frame (NOTIFY without
 * FIN) is RLT__SPOP_ERROR with NO_FRAGMENTATION: this agent does not offer it. */
ssize_t rlt__spop_frame_parse(const char *in, size_t len, size_t max_frame, rlt__spop_frame *f,
                              rlt__spop_status *status, const char **err);

/* Data types of typed data (the low 4 bits of the type byte; a boolean's value is bit 4). */
enum {
    RLT__SPOP_T_NULL = 0,
    RLT__SPOP_T_BOOL = 1,
    RLT__SPOP_T_INT32 = 2,
    RLT__SPOP_T_UINT32 = 3,
    RLT__SPOP_T_INT64 = 4,
    RLT__SPOP_T_UINT64 = 5,
    RLT__SPOP_T_IPV4 = 6,
    RLT__SPOP_T_IPV6 = 7,
    RLT__SPOP_T_STRING = 8,
    RLT__SPOP_T_BINARY = 9,
};

/* One typed value, pointing into the payload: `u` holds booleans and every integer (signed
 * ones as their two's complement), `s`/`n` strings, binaries and addresses (4 or 16 bytes). */
typedef struct rlt__spop_value {
    unsigned type;
    uint64_t u;
    const unsigned char *s;
    size_t n;
} rlt__spop_value;

/* A cursor over a payload. */
typedef struct rlt__spop_reader {
    const unsigned char *p, *end;
} rlt__spop_reader;

/* Each reads one item and advances; false (the cursor then undefined) when it runs past the
 * end, a varint is over 10 bytes, or a type is unknown. */
bool rlt__spop_read_varint(rlt__spop_reader *r, uint64_t *v);
bool rlt__spop_read_bytes(rlt__spop_reader *r, const unsigned char **s, size_t *n);
bool rlt__spop_read_value(rlt__spop_reader *r, rlt__spop_value *v);

/* What a HAPROXY-HELLO says. */
typedef struct rlt__spop_hello {
    bool v2;            /* "2.0" is among supported-versions */
    uint32_t max_frame; /* max-frame-size */
    bool healthcheck;
} rlt__spop_hello;

/* Reads a HAPROXY-HELLO payload.  Returns RLT__SPOP_ST_NORMAL and *h, or the status to
 * disconnect with: INVALID (bad KV list), NO_VERSION, NO_FRAME_SIZE, NO_CAPABILITIES,
 * BAD_VERSION (no 2.x), BAD_FRAME_SIZE (under RLT__SPOP_MIN_FRAME). */
rlt__spop_status rlt__spop_hello_parse(const unsigned char *p, size_t n, rlt__spop_hello *h);

/* Writers: every frame goes whole into `out`. */
void rlt__spop_put_agent_hello(rlt__obuf *out, uint32_t max_frame);
void rlt__spop_put_disconnect(rlt__obuf *out, rlt__spop_status st, const char *message);

/* An ACK under construction: begin, add set-var actions (scope txn), end. */
size_t rlt__spop_ack_begin(rlt__obuf *out, uint64_t stream_id, uint64_t frame_id);
void rlt__spop_ack_set_int(rlt__obuf *out, const char *name, int64_t v);
void rlt__spop_ack_set_bool(rlt__obuf *out, const char *name, bool v);
void rlt__spop_ack_set_str(rlt__obuf *out, const char *name, const char *s, size_t n);
/* Writes the frame's length at `start` (rlt__spop_ack_begin's result). */
void rlt__spop_ack_end(rlt__obuf *out, size_t start);

/* The name of a status, for logs and messages ("frame too big"). */
const char *rlt__spop_status_text(rlt__spop_status st);

#endif
