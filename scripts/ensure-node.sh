#!/bin/sh
# ensure-node.sh: make sure Node.js and npx are installed, which the OAuth
# end-to-end test (cmd/mcpgate/oauth_mcpremote_test.go) needs to run the real
# mcp-remote bridge from the npm registry; install Debian's "nodejs" and "npm"
# packages when npx is missing and we may (root, or password-less sudo). Used
# by "make test" (design.md §9).
#
# Prints progress on stderr only. Exits non-zero with a message saying what to
# install when it cannot: a missing prerequisite is a failure, never a skip.
set -eu

say() { echo "ensure-node: $*" >&2; }
fail() { say "$*"; exit 1; }
. "$(dirname "$0")/apt.sh"

command -v npx >/dev/null 2>&1 && exit 0

apt_install "npx (Node.js) is missing; the mcp-remote test needs it" \
	"install Node.js 18 or later with npm" \
	"run 'sudo apt-get update && sudo apt-get install -y nodejs npm', then run this again" \
	nodejs npm
command -v npx >/dev/null 2>&1 || fail "nodejs and npm were installed but npx is not on PATH"
say "node installed: $(node --version 2>/dev/null)"
