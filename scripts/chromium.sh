#!/usr/bin/env bash
# Makes sure a Chromium is installed for the dashboard's browser test
# (internal/app/dashboard_browser_test.go): Debian's chromium, installed when
# it is missing and we are root. Without one the test fails in CI (CI=true)
# and is skipped elsewhere.
#
# Usage: scripts/chromium.sh
set -euo pipefail

log() { printf 'chromium: %s\n' "$*" >&2; }

for b in chromium chromium-browser google-chrome; do
	if command -v "$b" >/dev/null; then
		log "found $(command -v "$b")"
		exit 0
	fi
done
if [[ $(id -u) != 0 ]]; then
	log "missing, and not root: install it (apt-get install chromium) or the browser test is skipped (and fails in CI)"
	exit 0
fi
log "installing chromium from Debian's packages"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends chromium >/dev/null
log "installed $(command -v chromium)"
