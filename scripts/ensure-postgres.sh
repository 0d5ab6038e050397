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
. "$(dirname "$0")/apt.sh"

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

apt_install "the PostgreSQL server binaries (initdb, pg_ctl) are missing" \
	"install your distribution's PostgreSQL server package, or set TEST_DATABASE_URL (tests) / DATABASE_URL (serve)" \
	"run 'sudo apt-get install postgresql' (then run this again), or set TEST_DATABASE_URL (tests) / DATABASE_URL (serve)" \
	postgresql
have_server || fail "installed postgresql but still found no initdb/pg_ctl in PATH or /usr/lib/postgresql/*/bin"
say "installed"
