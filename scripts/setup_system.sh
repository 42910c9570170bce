#!/usr/bin/env bash
# Install the Debian packages Tempo needs outside Python, idempotently, as root.
#   bash scripts/setup_system.sh               # what the main job runs:
#       diamond-aligner  the BLAST baseline and the recipe's DIAMOND hits (tempo_assets.core.neighbours.blast runs `diamond`)
#       bubblewrap       the fence third-party methods run in (tempo_assets.core.methods.fence runs `bwrap`)
#   bash scripts/setup_system.sh --test        # plus what the test suite starts or drives:
#       chromium         headless rendering of the HTML report and the Dagster UI
#       postgresql       the production path's Dagster storage and warehouse (scripts/dev_services.sh)
#       redis-server     the production path's celery broker (scripts/dev_services.sh)
#   bash scripts/setup_system.sh --production  # the main job's packages plus postgresql and redis-server
# Packages already installed are skipped; `apt-get update` runs at most once, and only when
# something is missing.
set -euo pipefail

PACKAGES=(diamond-aligner bubblewrap)
case "${1:-}" in
  "") ;;
  --test) PACKAGES+=(chromium postgresql redis-server) ;;
  --production) PACKAGES+=(postgresql redis-server) ;;
  *) echo "setup_system.sh: unknown option ${1}: use --test or --production (or nothing)" >&2; exit 2 ;;
esac

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
