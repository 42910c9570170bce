#!/usr/bin/env bash
# Set up Tempo on a fresh machine: a virtual environment with the project and its packages,
# and a project-local DAGSTER_HOME with telemetry off.
#   bash scripts/setup.sh          # what the main job needs
#   bash scripts/setup.sh --test   # plus what the test suite needs: chromium, the production extra
#                                  # (Postgres, S3, celery; its tests start their own servers) and
#                                  # the cafaeval 1.3.0 reference venv
#   bash scripts/setup.sh --production  # the main job plus the production path (Postgres, S3, celery)
set -euo pipefail
cd "$(dirname "$0")/.."
want_tests=0
want_production=0
case "${1:-}" in
  "") ;;
  --test) want_tests=1; want_production=1 ;;
  --production) want_production=1 ;;
  *) echo "setup.sh: unknown option ${1}: use --test or --production (or nothing)" >&2; exit 2 ;;
esac

# Debian packages: the main job's (diamond-aligner, bubblewrap); with --test also chromium, and
# with --test or --production the production path's servers (postgresql, redis-server).
bash scripts/setup_system.sh ${1:-}

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
cafaeval_install=
if [ "$want_tests" = 1 ]; then
  # The reference evaluator lives in its own environment: cafaeval and cafaeval-protea install
  # the same module name, and neither may shadow the other. It installs on the other core while
  # pip installs the project (pip works on one); its failure fails the setup (`wait` below).
  (
    if [ ! -x .venv-cafaeval/bin/python ]; then
      "$PYTHON" -m venv .venv-cafaeval
    fi
    .venv-cafaeval/bin/python -m pip install -q "cafaeval==1.3.0"
  ) &
  cafaeval_install=$!
fi
# pip compiles the bytecode of what it installs one file at a time; compileall below does it on every core
if [ "$want_tests" = 1 ]; then
  .venv/bin/python -m pip install -q --no-compile -e ".[test,production]"
elif [ "$want_production" = 1 ]; then
  .venv/bin/python -m pip install -q --no-compile -e ".[production]"
else
  .venv/bin/python -m pip install -q --no-compile -e .
fi
if [ -n "$cafaeval_install" ]; then
  wait "$cafaeval_install"
fi
# bytecode for the installed packages and the project's own modules (an editable install compiles
# none): every tempo and dagster process imports them, and where PYTHONDONTWRITEBYTECODE is set a
# module without its .pyc is compiled again on every import. The packages are compiled again only
# when pip installed or upgraded one (the distributions it lists differ from the last compile's).
# A file that does not compile (a package's Python 2 example) is only a missing cache: not an error.
packages=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
installed=$(cd "$packages" && ls -d ./*.dist-info | grep -v '^./tempo_assets-' || true)
if [ "$installed" != "$(cat .venv/bytecode.stamp 2>/dev/null || true)" ]; then
  .venv/bin/python -m compileall -q -j 0 "$packages" >/dev/null 2>&1 || true
  printf '%s\n' "$installed" > .venv/bytecode.stamp
fi
.venv/bin/python -m compileall -q tempo_assets >/dev/null

mkdir -p .dagster_home
if [ ! -f .dagster_home/dagster.yaml ]; then
  printf 'telemetry:\n  enabled: false\n' > .dagster_home/dagster.yaml
fi
