#!/bin/sh
# build-progress.sh runs a go build command line and says what it is doing,
# so that a first build does not look hung:
#
#   sh scripts/build-progress.sh [VAR=value...] go build [flags] ./pkg...
#
# The first build on a machine compiles the standard library and every
# dependency (about 360 packages for ./cmd/mcpgate and ./cmd/e2bsim) and
# prints nothing for minutes; this adds -v (through GOFLAGS) and, every 5 s,
# prints how many packages are compiled so far, then that it links. The
# package names themselves are not shown; everything else go build says
# (module downloads, compile errors) passes through unchanged, and the exit
# status is go build's. The packages to count are the arguments that start
# with ./ (the -o target "." is not one).
set -u

pkgs=
for a in "$@"; do
	case $a in ./?*) pkgs="$pkgs $a" ;; esac
done
envs=
for a in "$@"; do
	case $a in *=*) envs="$envs $a" ;; *) break ;; esac
done

# The packages the build needs (with the command's CGO_ENABLED and the
# like): an upper bound, as packages already in the build cache are not
# compiled again. go list fetches missing modules first and says so; when
# it fails (a missing package), go build would fail the same way, so its
# error is the only one shown.
# shellcheck disable=SC2086 # the lists are words on purpose
deps=$(env $envs go list -deps $pkgs) || exit
total=$(printf '%s\n' "$deps" | wc -l | tr -d ' ')
targets=$(env $envs go list $pkgs | tr '\n' ' ')

{
	(while sleep 5; do echo "@tick"; done) &
	ticker=$!
	env GOFLAGS="${GOFLAGS:+$GOFLAGS }-v" "$@" 2>&1
	echo "@rc $?"
	kill "$ticker" 2>/dev/null
} | awk -v total="$total" -v targets="$targets" '
	# now is the time in seconds (POSIX awk: srand returns the previous seed).
	function now() { srand(); return srand() }
	function report(what) {
		printf "make: go build: %d packages compiled (of up to %d), %d s so far%s\n", n, total, now() - start, what
		fflush()
		last = now()
	}
	BEGIN {
		start = now(); last = start; rc = 1
		nt = split(targets, t, " ")
		for (i = 1; i <= nt; i++) target[t[i]] = 1
	}
	$0 == "@tick" {
		if (now() - last >= 5) report(linked == nt && nt > 0 ? "; linking" : "")
		next
	}
	/^@rc / { rc = $2; next }
	# A package name: a path without blanks or colons (errors have both).
	/^[A-Za-z0-9._~+\/-]+$/ {
		n++
		if ($0 in target) linked++
		next
	}
	{ print; fflush() }
	END {
		if (rc == 0 && n > 0) report("; done")
		exit rc
	}'
