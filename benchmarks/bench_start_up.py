"""Start-up of the commands that compute nothing, against `import dagster` in the same run (issue 22).

Every `tempo` command and every dagster code load imports ``tempo_assets.definitions``; the read-only
commands (``status``, ``audit-cutoffs``, ``--help``) spend most of their time there. Each case runs
``--repeat`` times in a fresh interpreter (this one's, ``sys.executable``) and prints the median wall
and CPU seconds (user + system of the child) and the ratio of its CPU to the floor, a bare
``python -c "import dagster"`` measured in the same run, plus ``python -X importtime``'s total for
the definitions. ``--against CHECKOUT`` runs the same cases on another checkout of the repository
(e.g. ``git worktree add /tmp/before main``) and prints this one's CPU over that one's.

The ``tempo`` cases read the instance and store of the environment (``$DAGSTER_HOME``,
``$TEMPO_ARCHIVE``, ``$TEMPO_ARTEFACTS``, ...): point them at a materialised instance, e.g.
``data/`` after ``tempo materialize --all``; they only read it.

    .venv/bin/python benchmarks/bench_start_up.py --repeat 3
    .venv/bin/python benchmarks/bench_start_up.py --repeat 3 --against /tmp/before
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FLOOR = "import dagster"
TEMPO = "tempo_assets.cli.main"
CASES = {
    FLOOR: ["-c", "import dagster"],
    "import tempo_assets.definitions": ["-c", "import tempo_assets.definitions"],
    "tempo --help": ["-m", TEMPO, "--help"],
    "tempo status": ["-m", TEMPO, "status"],
    "tempo audit-cutoffs": ["-m", TEMPO, "audit-cutoffs"],
}


@dataclass(frozen=True)
class Timing:
    wall: float
    cpu: float


def run_once(args: list[str], checkout: Path) -> Timing:
    """One fresh interpreter running ``args`` with ``checkout`` first on its path; its wall and CPU seconds."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(checkout), os.environ.get("PYTHONPATH")]))}
    with tempfile.TemporaryFile("w+") as stderr:
        start = time.perf_counter()
        child = subprocess.Popen([sys.executable, *args], cwd=checkout, env=env, stdout=subprocess.DEVNULL,
                                 stderr=stderr)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            stderr.seek(0)
            raise SystemExit(f"{' '.join(args)} in {checkout} exited {child.returncode}: {stderr.read()[-2000:]}")
    return Timing(wall, usage.ru_utime + usage.ru_stime)


def import_total(checkout: Path) -> float:
    """``python -X importtime``'s cumulative seconds for ``tempo_assets.definitions``."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", "import tempo_assets.definitions"],
                          cwd=checkout, env=env, capture_output=True, text=True, check=True)
    found = re.search(r"\|\s*(\d+) \| tempo_assets\.definitions$", done.stderr, re.M)
    return int(found.group(1)) / 1e6


def measure(checkout: Path, repeat: int) -> dict[str, Timing]:
    """The median wall and CPU seconds of every case; the cases interleaved, so load hits them alike."""
    runs: dict[str, list[Timing]] = {name: [] for name in CASES}
    for _ in range(repeat):
        for name, args in CASES.items():
            runs[name].append(run_once(args, checkout))
    return {name: Timing(statistics.median(t.wall for t in timings), statistics.median(t.cpu for t in timings))
            for name, timings in runs.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each case; the median is printed")
    parser.add_argument("--against", type=Path, help="another checkout to run the same cases on")
    args = parser.parse_args(argv)
    checkouts = {"this": REPO} | ({"against": args.against.resolve()} if args.against else {})
    results = {label: measure(path, args.repeat) for label, path in checkouts.items()}
    imports = {label: statistics.median(import_total(path) for _ in range(args.repeat))
               for label, path in checkouts.items()}
    for label, path in checkouts.items():
        print(f"{label}: {path} (median of {args.repeat}; python -X importtime tempo_assets.definitions "
              f"{imports[label]:.2f} s)")
        floor = results[label][FLOOR].cpu
        print(f"  {'case':34s} {'wall s':>7s} {'CPU s':>7s} {'CPU / import dagster':>21s}")
        for name, timing in results[label].items():
            print(f"  {name:34s} {timing.wall:7.2f} {timing.cpu:7.2f} {timing.cpu / floor:20.2f}x")
    if args.against:
        print(f"this / against, CPU: importtime {imports['this'] / imports['against']:.2f}x; " + "; ".join(
            f"{name} {results['this'][name].cpu / results['against'][name].cpu:.2f}x" for name in CASES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
