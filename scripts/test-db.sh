#!/bin/sh
# test-db.sh: print on stdout a PostgreSQL URL for TEST_DATABASE_URL, for a
# role that may create databases (the store test harness makes one per test).
# Called by "make test" (design.md §9):
#
#   1. TEST_DATABASE_URL, if set, as is;
#   2. else a server on 127.0.0.1:5432, if one answers and lets postgres (or
#      the current user) in without a password;
#   3. else the embedded PostgreSQL (internal/pgembed) in .cache/testpg,
#      started once and left running for the next runs, after installing the
#      server binaries if needed. Stop it with:
#        go run ./internal/pgembed/cmd/pgembed-dev --dir .cache/testpg --stop
#
# TEST_DB_FORCE_EMBEDDED=1 skips step 2; TEST_PG_DIR overrides the directory of
# step 3. Everything but the URL goes to stderr. Any failure is a message and a
# non-zero exit, never an empty URL.
set -eu

say() { echo "test-db: $*" >&2; }
fail() { say "$*"; exit 1; }

if [ -n "${TEST_DATABASE_URL:-}" ]; then
	echo "$TEST_DATABASE_URL"
	exit 0
fi

repo=$(cd "$(dirname "$0")/.." && pwd)
command -v go >/dev/null 2>&1 || fail "the Go toolchain is not in PATH"

# One small Go program does the probing (psql may be missing; Go never is)
# and runs the embedded cluster. The build cache makes rebuilds instant.
tool="$repo/.cache/bin/pgembed-dev"
mkdir -p "$repo/.cache/bin"
(cd "$repo" && go build -o "$tool" ./internal/pgembed/cmd/pgembed-dev) >&2 ||
	fail "cannot build internal/pgembed/cmd/pgembed-dev (see above)"

if [ "${TEST_DB_FORCE_EMBEDDED:-}" != 1 ]; then
	candidates="postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	me=$(id -un 2>/dev/null || true)
	if [ -n "$me" ] && [ "$me" != postgres ]; then
		candidates="$candidates postgres://$me@127.0.0.1:5432/postgres?sslmode=disable"
	fi
	probe_err=$(mktemp)
	set +e
	# shellcheck disable=SC2086 # the candidates are split on purpose
	url=$("$tool" --probe $candidates 2>"$probe_err")
	rc=$?
	set -e
	if [ "$rc" -eq 0 ]; then
		rm -f "$probe_err"
		say "using the server on 127.0.0.1:5432"
		echo "$url"
		exit 0
	fi
	if [ "$rc" -eq 1 ]; then
		# A server answered but would not let us in: say so, since the user may
		# have meant it, then carry on with the embedded one.
		say "a server answers on 127.0.0.1:5432 but cannot be used without a password; set TEST_DATABASE_URL to use it. Details:"
		cat "$probe_err" >&2
	fi
	rm -f "$probe_err"
fi

"$repo/scripts/ensure-postgres.sh" || exit 1

dir=${TEST_PG_DIR:-$repo/.cache/testpg}
if [ -z "${TEST_PG_DIR:-}" ] && [ "$(id -u)" -eq 0 ]; then
	# As root the server runs as "postgres" (or "nobody"), which must reach the
	# directory. A checkout under a private directory such as /root would
	# block it, so use a root-owned system directory instead.
	runas=postgres
	id -u postgres >/dev/null 2>&1 || runas=nobody
	runuser=$(command -v runuser || echo /usr/sbin/runuser)
	if [ -x "$runuser" ] && ! "$runuser" -u "$runas" -- test -x "$repo/.cache" 2>/dev/null; then
		dir=/var/lib/mcpgate-testpg
		say "user $runas cannot reach $repo/.cache; using $dir"
	fi
fi

say "using the embedded PostgreSQL in $dir (log: $dir/postgres.log)"
url=$("$tool" --dir "$dir") || fail "cannot start the embedded PostgreSQL in $dir (see above)"
[ -n "$url" ] || fail "the embedded PostgreSQL gave no URL"
echo "$url"
