#!/usr/bin/env bash
# Checks deploy/prometheus/*.yml with promtool. promtool comes from Debian's
# prometheus package: when it is not on PATH (or in the user's cache from an
# earlier run, $XDG_CACHE_HOME/seckill/bin, which a fresh clone shares) the
# package is downloaded and only promtool is unpacked there, so no
# Prometheus server is installed or started. Without promtool and
# without a way to get it the check is skipped, except in CI (CI=true),
# where that fails.
#
# Usage: scripts/promtool.sh
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'promtool: %s\n' "$*" >&2; }

bin=${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/seckill/bin

find_promtool() {
	if command -v promtool >/dev/null; then
		command -v promtool
	elif [[ -x $bin/promtool ]]; then
		echo "$bin/promtool"
	fi
}

promtool=$(find_promtool)
if [[ -z $promtool ]] && command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null; then
	log "not found; unpacking it from Debian's prometheus package into $bin"
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	if [[ $(id -u) == 0 ]]; then
		apt-get update -qq >/dev/null
	fi
	if (cd "$tmp" && apt-get download -qq prometheus >/dev/null 2>&1); then
		dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/root"
		mkdir -p "$bin"
		# Into place in one rename: a run beside this one sees it whole or not at all.
		install -m 0755 "$tmp/root/usr/bin/promtool" "$bin/promtool.$$"
		mv -f "$bin/promtool.$$" "$bin/promtool"
		promtool=$bin/promtool
	fi
fi
if [[ -z $promtool ]]; then
	if [[ ${CI:-} == true ]]; then
		log "promtool is missing and could not be installed"
		exit 1
	fi
	log "promtool is missing (apt-get install prometheus, or run as root): skipping the rules check"
	exit 0
fi
"$promtool" check rules deploy/prometheus/alerts.yml
"$promtool" test rules deploy/prometheus/alerts_test.yml
