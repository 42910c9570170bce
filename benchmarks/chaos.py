"""kill -9 the README's main job at N random moments on a fresh copy of an archive, re-run until it
finishes, and say what happened (``scripts/chaos.sh N``).

Each attempt is ``tempo materialize --all`` in its own process group, killed with SIGKILL (the whole
group) a random time into a random step of the job; a window whose TEST claim the kill left behind is released (burned:
TEST may have been read), as its status line says to. The last attempt runs to the end. Printed:
kills, recoveries (attempts after a kill that went on from where it stopped), each window's TEST
state (scored once, or burned with the reason), the submission's sha256 beside an uninterrupted
run's, and ``tempo audit-cutoffs``' verdict. Exit 0 when the job finished, the sha256s agree and the
audit passed.

    bash scripts/chaos.sh 10                      # data/, seed printed
    bash scripts/chaos.sh 10 --seed 7 --reference-sha256 <sha of an uninterrupted run>
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TEMPO = str(Path(sys.executable).with_name("tempo"))


def fresh_copy(archive: Path, folder: Path) -> dict[str, str]:
    """An environment pointing ``tempo`` at a copy of ``archive`` and empty state under ``folder``."""
    shutil.copytree(archive, folder / "archive")
    env = dict(os.environ, DAGSTER_HOME=str(folder / "home"), TEMPO_ARCHIVE=str(folder / "archive"),
               TEMPO_ARTEFACTS=str(folder / "artefacts"), TEMPO_CACHE=str(folder / "cache"),
               TEMPO_WAREHOUSE_URL=f"sqlite:///{folder / 'warehouse.sqlite'}")
    env.pop("TEMPO_FAULT_AT", None)
    return env


def attempt(env: dict, target: tuple[int, float] | None, log) -> tuple[bool, str]:
    """One ``tempo materialize --all``; ``(killed, output)``.

    ``target`` ``(k, delay)``: SIGKILL the process group ``delay`` seconds after the ``k``-th step that
    this attempt starts (``[i/total] ... started``; the steps earlier attempts finished are skipped
    within seconds); None runs to the end. So the kills fall all along the job.
    """
    process = subprocess.Popen([TEMPO, "materialize", "--all"], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True, cwd=REPO)
    lines: list[str] = []
    timer, started = None, 0
    for line in process.stdout:
        lines.append(line)
        started += line.startswith("[") and ": started" in line
        if target and timer is None and started == target[0]:
            timer = threading.Timer(target[1], os.killpg, (process.pid, signal.SIGKILL))
            timer.start()
    process.wait()
    if timer is not None:
        timer.cancel()
    killed = process.returncode == -signal.SIGKILL
    if killed:
        last = [l for l in lines if l.startswith("[")][-1:] or ["(before the first step)"]
        log(f"  killed {target[1]:.0f}s into the attempt's step {target[0]}: {last[0].strip()[:140]}")
    return killed, "".join(lines)


def step_count(env: dict) -> int:
    """How many steps ``tempo materialize --all`` has on this archive (from a dry look at its plan)."""
    code = ("from tempo_assets.cli.graph_cmd import current_plan, plan_steps; "
            "print(len(plan_steps(current_plan(), 'all')))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return int(out.stdout.strip().splitlines()[-1])


def release_dead_claims(env: dict, log) -> list[str]:
    """Release every window whose claim a kill left behind (``tempo status`` names the command)."""
    status = subprocess.run([TEMPO, "status", "--json"], env=env, capture_output=True, text=True, check=True)
    released = []
    for state in json.loads(status.stdout):
        match = re.search(r"next: tempo test-claim release (\S+) --reason", state["reason"])
        if state["state"] == "claimed" and match and match.group(1) not in released:
            window = match.group(1)
            subprocess.run([TEMPO, "test-claim", "release", window, "--reason", "chaos: killed while TEST was claimed"],
                           env=env, capture_output=True, text=True, check=True)
            log(f"  released {window}: burned (TEST may have been read by the killed run)")
            released.append(window)
    return released


def submission_sha(output: str) -> str | None:
    match = re.search(r"CAFA submission for cutoff \S+: (\S+)", output)
    return hashlib.sha256(Path(match.group(1)).read_bytes()).hexdigest() if match else None


def run_to_end(env: dict) -> str:
    done = subprocess.run([TEMPO, "materialize", "--all"], env=env, capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        sys.exit(f"chaos: the uninterrupted run failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return submission_sha(done.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kills", type=int, help="how many times to kill -9 the job")
    parser.add_argument("--seed", type=int, default=None, help="seed of the kill moments (printed)")
    parser.add_argument("--archive", type=Path, default=REPO / "data", help="archive to copy (default data/)")
    parser.add_argument("--max-delay", type=float, default=120.0,
                        help="longest time after the chosen step starts before the kill, seconds (default 120: "
                             "a kill may land in a later step, e.g. inside a window job's TEST phase)")
    parser.add_argument("--reference-sha256", default=None,
                        help="the submission's sha256 from an uninterrupted run (default: make one first)")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 16)
    rng = random.Random(seed)
    log = lambda line: print(line, flush=True)  # noqa: E731
    work = Path(tempfile.mkdtemp(prefix="tempo-chaos-"))
    log(f"chaos: {args.kills} kills, seed {seed}, archive {args.archive}, work folder {work}")
    reference = args.reference_sha256
    if reference is None:
        log("uninterrupted run (the reference) ...")
        reference = run_to_end(fresh_copy(args.archive, work / "reference"))
    env = fresh_copy(args.archive, work / "chaos")
    kills = recoveries = attempts = 0
    burned: list[str] = []
    started = time.perf_counter()
    steps, done = step_count(env), 0
    while True:
        attempts += 1
        remaining = max(1, steps - done - 1)  # the catalog, rebuilt every time, is not a target of its own
        target = (rng.randint(1, remaining), rng.uniform(0.0, args.max_delay)) if kills < args.kills else None
        killed, output = attempt(env, target, log)
        done = max(done, sum(1 for l in output.splitlines() if l.startswith("[") and (": ok in" in l or "skipped" in l)))
        if kills and ("ok in" in output or "skipped" in output):
            recoveries += 1  # after a kill, this attempt went on from where the last one stopped
        if not killed:
            break
        kills += 1
        burned += release_dead_claims(env, log)
    finished_ok = "summary:" in output and "failed:" not in output
    tests = json.loads(subprocess.run([TEMPO, "test-claim", "list", "--json"], env=env, capture_output=True,
                                      text=True, check=True).stdout)
    audit = subprocess.run([TEMPO, "audit-cutoffs"], env=env, capture_output=True, text=True, cwd=REPO)
    verdict = audit.stdout.strip().splitlines()[-1] if audit.stdout.strip() else audit.stderr.strip()[-200:]
    verdict = next((l for l in audit.stdout.splitlines() if l in ("PASS",) or l.startswith("FAIL")), verdict)
    sha = submission_sha(output)
    log(f"kills: {kills}; attempts: {attempts}; recoveries: {recoveries}; "
        f"wall {time.perf_counter() - started:.0f}s; last attempt {'finished' if finished_ok else 'did NOT finish'}")
    for test in tests:
        burn = f" ({test['burn']['reason']})" if test.get("burn") else ""
        log(f"window {test['window']}: TEST {test['state']}{burn}")
    log(f"submission sha256: {sha} ({'same as' if sha == reference else 'DIFFERS from'} the uninterrupted "
        f"run's {reference})")
    log(f"audit-cutoffs: {verdict}")
    return 0 if finished_ok and sha == reference and verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
