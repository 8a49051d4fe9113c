#!/bin/sh
# The Envoy YAML we ship against Envoy's own protos (envoy_schema.js): installs npm
# @grpc/grpc-js-xds (which vendors envoy-api, xds, googleapis and protoc-gen-validate .proto
# files), protobufjs (to load them) and yaml (the YAML syntax) at pinned versions into a
# temporary folder.  The envoy-api these protos come from is named in envoy_schema.js and
# docs/envoy.md: a new @grpc/grpc-js-xds pin needs both updated.
# Usage: envoy_schema.sh SOURCE_DIR.  Exit 77 (skipped, with a message) only when the npm
# registry cannot be reached; a missing node or npm is a failure naming it.
set -eu
for tool in node npm; do
  command -v $tool >/dev/null 2>&1 || { echo "envoy_schema: $tool is missing (apt-get install nodejs npm)" >&2; exit 1; }
done
tmp=$(mktemp -d /tmp/rlt-envoyschema.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
if ! timeout 30 npm ping >/dev/null 2>&1; then
  echo "SKIPPED envoy_schema: the npm registry is unreachable, the Envoy YAML NOT checked against Envoy's protos" >&2
  exit 77
fi
(cd "$tmp" && timeout 240 npm install --no-audit --no-fund --loglevel=error --legacy-peer-deps --prefix "$tmp" \
   @grpc/grpc-js-xds@1.14.1 protobufjs@8.8.1 yaml@2.9.1 >npm.log 2>&1) ||
  { cat "$tmp/npm.log" >&2; echo "envoy_schema: npm install failed" >&2; exit 1; }
node "$(dirname "$0")/envoy_schema.js" "$tmp/node_modules" "$1"
