#!/bin/sh
# npm run build: the addon with CMake (Release), from the repository this folder is in, into
# build/ratelimit.node beside package.json.  Needs cmake, gcc and Node-API's headers (Debian:
# nodejs, which ships /usr/include/node); nothing is downloaded.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(cd "$here/.." && pwd)
out="$here/build/cmake"
cmake -S "$root" -B "$out" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF >/dev/null
cmake --build "$out" -j2 --target ratelimit_node
cp "$out/node/ratelimit.node" "$here/build/ratelimit.node"
echo "built $here/build/ratelimit.node"
