#!/bin/sh
# The playground in headless chromium: installs npm puppeteer-core (no browser download) into a
# temporary folder and runs page.mjs against the staged site.
# Usage: page.sh SITE_DIR RATELIMIT_CLI [SCREENSHOT_DIR], or page.sh --run SCRIPT.mjs ARGS...
# (the script gets the node_modules folder, then ARGS: live.mjs).  Exit 77 (skipped, with a message) only
# when the npm registry cannot be reached; a missing node, npm or chromium is a failure naming it.
set -eu
script=page.mjs
if [ "${1:-}" = "--run" ]; then script=$2; shift 2; fi
here=$(cd "$(dirname "$0")" && pwd)
command -v node >/dev/null 2>&1 || { echo "web_page ($script): node is missing (apt-get install nodejs npm)" >&2; exit 1; }
command -v npm >/dev/null 2>&1 || { echo "web_page ($script): npm is missing (apt-get install npm)" >&2; exit 1; }
[ -x /usr/bin/chromium ] || { echo "web_page ($script): /usr/bin/chromium is missing (apt-get install chromium)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/rlt-web.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
if ! timeout 30 npm ping >/dev/null 2>&1; then
  echo "SKIPPED web_page: the npm registry is unreachable, the page NOT tested in a browser" >&2
  exit 77
fi
(cd "$tmp" && PUPPETEER_SKIP_DOWNLOAD=1 timeout 240 npm install --no-audit --no-fund --loglevel=error \
   --prefix "$tmp" puppeteer-core >npm.log 2>&1) ||
  { cat "$tmp/npm.log" >&2; echo "web_page ($script): npm install failed" >&2; exit 1; }
node "$here/$script" "$tmp/node_modules" "$@"
