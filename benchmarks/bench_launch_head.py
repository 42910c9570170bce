"""The head of ``tempo materialize --all``: how long until its first run starts, and the CPU spent by then.

Before the first step process is forked, the launcher imports dagster and the code location, opens its
instance and plans the first step, and the forkserver the step processes are forked from imports what
they use (``cli/step_forkserver.PRELOAD``). Each repeat launches ``tempo materialize --all`` on a fresh
copy of the archive from ``--checkout`` (and from ``--against``, alternated), and at its first
``started run`` line prints the wall seconds so far and the CPU seconds (user + system) of the launcher
and of the forkserver by then; then it stops the launch (SIGTERM, as ``kill`` does).

    .venv/bin/python benchmarks/bench_launch_head.py --repeat 3 --against /tmp/before
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chaos import fresh_copy  # noqa: E402  (benchmarks/ is not a package)

REPO = Path(__file__).resolve().parents[1]


def cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def head(checkout: Path, archive: Path) -> tuple[float, float, float]:
    """``(wall s, launcher CPU s, forkserver CPU s)`` at the first ``started run`` line of a launch from ``checkout``."""
    with tempfile.TemporaryDirectory(prefix="tempo_head_") as tmp:
        env = fresh_copy(archive, Path(tmp))
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(checkout), os.environ.get("PYTHONPATH")]))
        started = time.perf_counter()
        launch = subprocess.Popen([sys.executable, "-u", "-m", "tempo_assets.cli.main", "materialize", "--all"],
                                  cwd=checkout, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        launcher = psutil.Process(launch.pid)
        found = None
        for line in launch.stdout:
            if "started run" in line:
                servers = [c for c in launcher.children() if "forkserver" in " ".join(c.cmdline())]
                found = (time.perf_counter() - started, cpu_s(launcher),
                         cpu_s(servers[0]) if servers else float("nan"))
                break
        launch.send_signal(signal.SIGTERM)
        launch.communicate()
        if found is None:
            raise SystemExit(f"no run started from {checkout} (exit {launch.returncode})")
        return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", type=Path, default=REPO)
    parser.add_argument("--against", type=Path)
    parser.add_argument("--archive", type=Path, default=REPO / "data")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    for _ in range(args.repeat):
        for checkout in filter(None, [args.against, args.checkout]):
            wall, launcher, server = head(checkout, args.archive)
            print(f"{str(checkout):<24} first run started at {wall:6.2f} s; CPU by then: launcher {launcher:5.2f} s, "
                  f"forkserver {server:5.2f} s; load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
