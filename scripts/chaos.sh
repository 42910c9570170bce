#!/usr/bin/env bash
# kill -9 the README's main job at N random moments on a fresh copy of data/, re-run until it
# finishes, and print kills, recoveries, each window's TEST state, the submission's sha256 against
# an uninterrupted run's and audit-cutoffs' verdict (benchmarks/chaos.py; its --help for options).
#   bash scripts/chaos.sh 10 [--seed S] [--reference-sha256 SHA] [--archive DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/tempo ] || bash scripts/setup.sh
exec .venv/bin/python benchmarks/chaos.py "$@"
