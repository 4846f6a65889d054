#!/usr/bin/env bash
# Makes sure the programs a make target needs are on PATH before it starts.
# Usage: tools/prereq/ensure.sh TARGET PROGRAM...   (e.g. ensure.sh "make test" redis-server)
#
# Every program present: prints nothing, exits 0.
# Some missing, running as root with apt-get: installs the Debian packages that
#   provide them, says so in one line, exits 0 (apt-get's own output goes to a log).
# Some missing otherwise, or the install failed: one line naming what to install, exit 1.
#
# TLB_PREREQ_APT_LOG: where apt-get's output goes (default: a file under ${TMPDIR:-/tmp}).
set -euo pipefail

target="${1:?usage: ensure.sh TARGET PROGRAM...}"
shift

# package_of names the Debian package that installs a program.
package_of() {
	case "$1" in
	redis-server) echo redis-server ;;
	redis-cli | redis-benchmark) echo redis-tools ;;
	redis-sentinel) echo redis-sentinel ;;
	promtool) echo prometheus ;;
	ip) echo iproute2 ;;
	*) echo "$1" ;;
	esac
}

missing=()
packages=()
for program in "$@"; do
	command -v "$program" >/dev/null 2>&1 && continue
	missing+=("$program")
	pkg=$(package_of "$program")
	case " ${packages[*]-} " in
	*" $pkg "*) ;;
	*) packages+=("$pkg") ;;
	esac
done
[ "${#missing[@]}" -eq 0 ] && exit 0

what="${missing[*]}"
install="${packages[*]}"
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	echo "$target: needs $what on PATH; install it first: sudo apt-get install -y $install" >&2
	exit 1
fi

log="${TLB_PREREQ_APT_LOG:-${TMPDIR:-/tmp}/tlb-prereq-apt.log}"
echo "$target: $what not on PATH; installing Debian packages $install with apt-get (log: $log)"
if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}"; } >"$log" 2>&1; then
	echo "$target: apt-get install $install failed (see $log); install it by hand: apt-get install -y $install" >&2
	exit 1
fi
for program in "${missing[@]}"; do
	if ! command -v "$program" >/dev/null 2>&1; then
		echo "$target: $program still not on PATH after installing $install (see $log)" >&2
		exit 1
	fi
done
