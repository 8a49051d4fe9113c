#!/bin/sh
# Prepares nginx-dev's tree for building ngx_http_ratelimit_module against the installed nginx:
# copies it to OUT and runs its configure with the flags Debian built nginx with (conf_flags),
# so that the module's signature matches and load_module accepts it.  Only the generated
# headers (objs/ngx_auto_*.h) and the module list (objs/*_modules.c) are used afterwards.
#   configure.sh NGINX_DEV_TREE OUT MODULE_DIR
set -eu
src=$1 out=$2 mod=$3
rm -rf "$out"
mkdir -p "$out"
cp -R "$src"/. "$out"/
cd "$out"
# conf_flags is a bash array assignment; read it without bash.
flags=$(sed -n 's/^NGX_CONF_FLAGS=( *\(.*\) *)$/\1/p' conf_flags)
[ -n "$flags" ] || { echo "configure.sh: cannot read NGX_CONF_FLAGS from $src/conf_flags" >&2; exit 1; }
# shellcheck disable=SC2086 # the flags are words without spaces
./configure $flags --add-dynamic-module="$mod" >configure.log 2>&1 ||
  { tail -20 configure.log >&2; exit 1; }
