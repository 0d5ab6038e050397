#!/bin/sh
# ensure-postgres.sh: make sure the PostgreSQL server binaries (initdb, pg_ctl,
# postgres) that internal/pgembed runs are installed, installing Debian's
# "postgresql" package when they are missing and we may (root, or password-less
# sudo). Used by "make run" and "make test" (design.md §9).
#
# Prints progress on stderr only; stdout stays clean for callers that capture
# it. Exits non-zero with a message saying what to install when it cannot.
set -eu

say() { echo "ensure-postgres: $*" >&2; }
fail() { say "$*"; exit 1; }

# The same places pgembed searches: PATH, then Debian's versioned directories
# (Debian puts no initdb or pg_ctl in PATH).
have_server() {
	if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
		return 0
	fi
	for d in /usr/lib/postgresql/*/bin; do
		if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/postgres" ]; then
			return 0
		fi
	done
	return 1
}

have_server && exit 0

what="the PostgreSQL server binaries (initdb, pg_ctl) are missing"
command -v apt-get >/dev/null 2>&1 ||
	fail "$what and this is not a Debian-like system: install your distribution's PostgreSQL server package, or set TEST_DATABASE_URL (tests) / DATABASE_URL (serve)"

if [ "$(id -u)" -eq 0 ]; then
	sudo=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
	sudo="sudo -n"
else
	fail "$what: run 'sudo apt-get install postgresql' (then run this again), or set TEST_DATABASE_URL (tests) / DATABASE_URL (serve)"
fi

say "$what; installing Debian's postgresql package"
# stdout of apt goes to stderr too: a caller may be capturing our stdout.
$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2 ||
	fail "apt-get update failed (see above)"
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql >&2 ||
	fail "apt-get install postgresql failed (see above)"
have_server || fail "installed postgresql but still found no initdb/pg_ctl in PATH or /usr/lib/postgresql/*/bin"
say "installed"
