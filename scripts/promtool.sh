#!/usr/bin/env bash
# Checks deploy/prometheus/*.yml with promtool. promtool comes from Debian's
# prometheus package: when it is not on PATH (or in .run/bin from an earlier
# run) the package is downloaded and only promtool is unpacked into .run/bin,
# so no Prometheus server is installed or started. Without promtool and
# without a way to get it the check is skipped, except in CI (CI=true),
# where that fails.
#
# Usage: scripts/promtool.sh
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'promtool: %s\n' "$*" >&2; }

find_promtool() {
	if command -v promtool >/dev/null; then
		command -v promtool
	elif [[ -x .run/bin/promtool ]]; then
		echo .run/bin/promtool
	fi
}

promtool=$(find_promtool)
if [[ -z $promtool ]] && command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null; then
	log "not found; unpacking it from Debian's prometheus package into .run/bin"
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	if [[ $(id -u) == 0 ]]; then
		apt-get update -qq >/dev/null
	fi
	if (cd "$tmp" && apt-get download -qq prometheus >/dev/null 2>&1); then
		dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/root"
		mkdir -p .run/bin
		install -m 0755 "$tmp/root/usr/bin/promtool" .run/bin/promtool
		promtool=.run/bin/promtool
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
