/* Reading ratelimitd's YAML configuration (load.c): a text, a file, or files and directories
 * of them, into a new rlt__config (config.h). */
#ifndef RLT_SERVER_CONFIG_LOAD_H
#define RLT_SERVER_CONFIG_LOAD_H

#include "server/config/config.h"

#include <stddef.h>

/* Parses YAML config text.  `file` names it in messages.  Returns RLT_OK and *out, or
 * RLT_EPARSE with a message "file:line: reason" in err. */
int rlt__config_parse(const char *text, size_t len, const char *file, rlt__config **out, char *err,
                      size_t errlen);
/* Reads and parses a file (as rlt__config_parse); a directory as rlt__config_load_many. */
int rlt__config_load(const char *path, rlt__config **out, char *err, size_t errlen);
/* Reads paths[0..n) into one config, in order: a file as rlt__config_parse, a directory as
 * every `*.yaml` file in it in name order (envoyproxy/ratelimit's runtime directory, one
 * domain each).  Domains must be distinct across files (a duplicate is an error naming the
 * file and line); settings set in a later file override earlier ones.  Returns as
 * rlt__config_parse. */
int rlt__config_load_many(const char *const *paths, size_t n, rlt__config **out, char *err,
                          size_t errlen);

#endif
