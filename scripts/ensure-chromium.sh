#!/bin/sh
# ensure-chromium.sh: make sure Debian's chromium (/usr/bin/chromium), which
# the dashboard's browser test (cmd/mcpgate/web_e2e_test.go) drives through
# chromedp, is installed; install the "chromium" package when it is missing
# and we may (root, or password-less sudo). Used by "make test" (design.md §9).
#
# Prints progress on stderr only. Exits non-zero with a message saying what to
# install when it cannot: a missing browser is a failure, never a skip.
set -eu

say() { echo "ensure-chromium: $*" >&2; }
fail() { say "$*"; exit 1; }

CHROMIUM=/usr/bin/chromium

[ -x "$CHROMIUM" ] && exit 0

what="Debian's chromium ($CHROMIUM) is missing; the browser test needs it"
command -v apt-get >/dev/null 2>&1 ||
	fail "$what and this is not a Debian-like system: install Chromium so that $CHROMIUM exists"

if [ "$(id -u)" -eq 0 ]; then
	sudo=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
	sudo="sudo -n"
else
	fail "$what: run 'sudo apt-get update && sudo apt-get install -y chromium', then run this again"
fi

say "installing chromium (apt-get update, then apt-get install chromium)"
$sudo apt-get update -qq >&2 || fail "apt-get update failed"
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium >&2 ||
	fail "apt-get install chromium failed"
[ -x "$CHROMIUM" ] || fail "chromium was installed but $CHROMIUM is not there"
say "chromium installed: $("$CHROMIUM" --version 2>/dev/null | head -n 1)"
