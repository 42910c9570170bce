#!/usr/bin/env bash
# Install the Debian packages Tempo needs outside Python, idempotently, as root:
#   diamond-aligner  the BLAST baseline (tempo_assets.core.blast runs `diamond`)
#   chromium         headless rendering check of the HTML report (tempo_assets_tests/test_report_browser.py)
#   bubblewrap       the fence third-party methods run in (tempo_assets.core.fence runs `bwrap`)
#   postgresql       the production path's Dagster storage and warehouse (scripts/dev_services.sh)
#   redis-server     the production path's broker (scripts/dev_services.sh)
# Packages already installed are skipped; `apt-get update` runs at most once, and only when
# something is missing.
#   bash scripts/setup_system.sh
set -euo pipefail

PACKAGES=(diamond-aligner chromium bubblewrap postgresql redis-server)

if ! command -v dpkg >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
  echo "setup_system.sh: this script needs a Debian-like system (dpkg, apt-get);" >&2
  echo "install by hand: ${PACKAGES[*]}" >&2
  exit 1
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  if [ "$status" = "install ok installed" ]; then
    echo "setup_system.sh: $pkg already installed"
  else
    missing+=("$pkg")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "setup_system.sh: must run as root to install: ${missing[*]}" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends "${missing[@]}"
echo "setup_system.sh: installed ${missing[*]}"
