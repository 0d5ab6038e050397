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

command -v npx >/dev/null 2>&1 && exit 0

what="npx (Node.js) is missing; the mcp-remote test needs it"
command -v apt-get >/dev/null 2>&1 ||
	fail "$what and this is not a Debian-like system: install Node.js 18 or later with npm"

if [ "$(id -u)" -eq 0 ]; then
	sudo=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
	sudo="sudo -n"
else
	fail "$what: run 'sudo apt-get update && sudo apt-get install -y nodejs npm', then run this again"
fi

say "installing nodejs and npm (apt-get update, then apt-get install)"
$sudo apt-get update -qq >&2 || fail "apt-get update failed"
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nodejs npm >&2 ||
	fail "apt-get install nodejs npm failed"
command -v npx >/dev/null 2>&1 || fail "nodejs and npm were installed but npx is not on PATH"
say "node installed: $(node --version 2>/dev/null)"
