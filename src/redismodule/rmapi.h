/* The project's own declarations of the part of the Redis module API that ratelimit.so uses,
 * written from the public module API reference (https://redis.io/docs/reference/modules/) for
 * API version 1 as Redis 7.0 serves it.  No Debian package ships redismodule.h, and its text is
 * not ours to copy, so this header declares only what the module calls.
 *
 * How the interface works: the first word of the context Redis passes to RedisModule_OnLoad is
 * a function `GetApi(name, &pointer)` that looks a function up by its name ("RedisModule_" +
 * name).  rlt__rm_init() fills the table `rlt__rm` that way, then registers the module's name.
 * Handles (context, strings, keys, call replies) are opaque pointers owned by Redis. */
#ifndef RLT_RMAPI_H
#define RLT_RMAPI_H

#include <stddef.h>
#include <stdint.h>

typedef struct RedisModuleCtx RedisModuleCtx;
typedef struct RedisModuleString RedisModuleString;
typedef struct RedisModuleKey RedisModuleKey;
typedef struct RedisModuleCallReply RedisModuleCallReply;
typedef int (*rlt__rm_cmd_fn)(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

/* Constants of API version 1 (values from the reference). */
enum {
    RLT_RM_OK = 0,
    RLT_RM_ERR = 1,
    RLT_RM_APIVER_1 = 1,
    RLT_RM_READ = 1 << 0,
    RLT_RM_WRITE = 1 << 1,
    RLT_RM_KEYTYPE_EMPTY = 0,
    RLT_RM_KEYTYPE_STRING = 1,
    RLT_RM_KEYTYPE_LIST = 2,
    RLT_RM_KEYTYPE_HASH = 3,
    RLT_RM_REPLY_STRING = 0,
    RLT_RM_REPLY_ERROR = 1,
    RLT_RM_REPLY_INTEGER = 2,
    RLT_RM_REPLY_ARRAY = 3,
    RLT_RM_REPLY_NULL = 4,
    RLT_RM_CTX_FLAGS_CLUSTER = 1 << 5,
};
#define RLT_RM_WRONGTYPE "WRONGTYPE Operation against a key holding the wrong kind of value"

/* X(return type, name, parameters): every function the module looks up. */
#define RLT_RM_FUNCS(X)                                                                            \
    X(int, CreateCommand,                                                                          \
      (RedisModuleCtx *, const char *, rlt__rm_cmd_fn, const char *, int, int, int))               \
    X(void, SetModuleAttribs, (RedisModuleCtx *, const char *, int, int))                          \
    X(int, IsModuleNameBusy, (const char *))                                                       \
    X(void *, Alloc, (size_t))                                                                     \
    X(void, Free, (void *))                                                                        \
    X(int, WrongArity, (RedisModuleCtx *))                                                         \
    X(int, ReplyWithLongLong, (RedisModuleCtx *, long long))                                       \
    X(int, ReplyWithError, (RedisModuleCtx *, const char *))                                       \
    X(int, ReplyWithSimpleString, (RedisModuleCtx *, const char *))                                \
    X(int, ReplyWithArray, (RedisModuleCtx *, long))                                               \
    X(int, ReplyWithStringBuffer, (RedisModuleCtx *, const char *, size_t))                        \
    X(RedisModuleKey *, OpenKey, (RedisModuleCtx *, RedisModuleString *, int))                     \
    X(void, CloseKey, (RedisModuleKey *))                                                          \
    X(int, KeyType, (RedisModuleKey *))                                                            \
    X(int, DeleteKey, (RedisModuleKey *))                                                          \
    X(int, StringSet, (RedisModuleKey *, RedisModuleString *))                                     \
    X(char *, StringDMA, (RedisModuleKey *, size_t *, int))                                        \
    X(int, StringTruncate, (RedisModuleKey *, size_t))                                             \
    X(int, SetAbsExpire, (RedisModuleKey *, long long))                                            \
    X(RedisModuleString *, CreateString, (RedisModuleCtx *, const char *, size_t))                 \
    X(void, FreeString, (RedisModuleCtx *, RedisModuleString *))                                   \
    X(const char *, StringPtrLen, (const RedisModuleString *, size_t *))                           \
    X(RedisModuleCallReply *, Call, (RedisModuleCtx *, const char *, const char *, ...))           \
    X(void, FreeCallReply, (RedisModuleCallReply *))                                               \
    X(int, CallReplyType, (RedisModuleCallReply *))                                                \
    X(long long, CallReplyInteger, (RedisModuleCallReply *))                                       \
    X(size_t, CallReplyLength, (RedisModuleCallReply *))                                           \
    X(RedisModuleCallReply *, CallReplyArrayElement, (RedisModuleCallReply *, size_t))             \
    X(const char *, CallReplyStringPtr, (RedisModuleCallReply *, size_t *))                        \
    X(int, Replicate, (RedisModuleCtx *, const char *, const char *, ...))                         \
    X(int, GetContextFlags, (RedisModuleCtx *))                                                    \
    X(void, Log, (RedisModuleCtx *, const char *, const char *, ...))                              \
    X(long long, Milliseconds, (void))

typedef struct rlt__rm_api {
#define RLT_RM_FIELD(ret, name, params) ret(*name) params;
    RLT_RM_FUNCS(RLT_RM_FIELD)
#undef RLT_RM_FIELD
} rlt__rm_api;

/* The looked-up functions; valid after rlt__rm_init returned RLT_OK. */
extern rlt__rm_api rlt__rm;

/* Fills rlt__rm from the context given to RedisModule_OnLoad and registers the module as
 * `name` (version `ver`, API version 1).  Returns RLT_OK; RLT_ENOENT when a function is
 * missing (a Redis older than 7.0), RLT_EINVAL when the name is already taken (the module
 * loaded twice).  (The RLT_RM_* constants are the module API's own, for its calls only.) */
int rlt__rm_init(RedisModuleCtx *ctx, const char *name, int ver);

#endif
