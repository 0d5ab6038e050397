# apt.sh: sourced by the ensure-*.sh scripts, which define say and fail
# first. It holds the one way they install a missing prerequisite.
#
# apt_install WHAT ELSEWHERE MANUAL PACKAGE...: install Debian packages when
# we may (root, or password-less sudo). Otherwise fail, saying WHAT is
# missing and, on a system without apt-get, ELSEWHERE (what to install
# there), or else MANUAL (the command a person can run). apt's own output
# goes to stderr: a caller may be capturing our stdout.
apt_install() {
	what=$1 elsewhere=$2 manual=$3
	shift 3
	command -v apt-get >/dev/null 2>&1 || fail "$what and this is not a Debian-like system: $elsewhere"
	if [ "$(id -u)" -eq 0 ]; then
		sudo=""
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		sudo="sudo -n"
	else
		fail "$what: $manual"
	fi
	say "$what; installing Debian's $* (apt-get update, then apt-get install)"
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 ||
		fail "apt-get update failed (see above)"
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2 ||
		fail "apt-get install $* failed (see above)"
}
