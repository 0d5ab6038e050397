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
. "$(dirname "$0")/apt.sh"

CHROMIUM=/usr/bin/chromium

[ -x "$CHROMIUM" ] && exit 0

apt_install "Debian's chromium ($CHROMIUM) is missing; the browser test needs it" \
	"install Chromium so that $CHROMIUM exists" \
	"run 'sudo apt-get update && sudo apt-get install -y chromium', then run this again" \
	chromium
[ -x "$CHROMIUM" ] || fail "chromium was installed but $CHROMIUM is not there"
say "chromium installed: $("$CHROMIUM" --version 2>/dev/null | head -n 1)"
