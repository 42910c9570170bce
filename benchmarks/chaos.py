"""kill -9 the README's main job at N random moments on a fresh copy of an archive, re-run until it
finishes, and say what happened (``scripts/chaos.sh N``).

Each attempt is ``tempo materialize --all`` in its own process group, killed with SIGKILL (the whole
group). The N kill moments are drawn (seeded, printed) before the first attempt, spread along the
job: its steps' starts and its windows' TEST phases, in order, cut into N equal stretches, one
moment in each, plus a delay of at most ``--max-delay`` seconds (default 20). The k-th attempt is
killed at the k-th moment: a step it still has to run (a killed step re-runs, the steps before it
are built). A window whose TEST claim a kill left behind is released (burned: TEST may have been
read), as its status line says to. The attempt after the N-th kill runs to the end; an attempt that
finishes before its kill is said so and counted, and ends the loop. Printed: kills, attempts that
finished before their kill, recoveries (attempts after a kill that went on from where it stopped),
each window's TEST state (scored once, or burned with the reason), the submission's sha256 beside
an uninterrupted run's, and ``tempo audit-cutoffs``' verdict. Exit 0 when the job finished, the
sha256s agree and the audit passed.

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
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

REPO = Path(__file__).resolve().parents[1]
TEMPO = str(Path(sys.executable).with_name("tempo"))


def fresh_copy(archive: Path, folder: Path) -> dict[str, str]:
    """An environment pointing ``tempo`` at a copy of ``archive`` and empty state under ``folder``."""
    shutil.copytree(archive, folder / "archive")
    env = dict(os.environ, DAGSTER_HOME=str(folder / "home"), TEMPO_ARCHIVE=str(folder / "archive"),
               TEMPO_ARTEFACTS=str(folder / "artefacts"), TEMPO_CACHE=str(folder / "cache"),
               TEMPO_WAREHOUSE_URL=f"sqlite:///{folder / 'warehouse.sqlite'}")
    env.pop("TEMPO_FAULT_AT", None)
    env["TEMPO_PROGRESS_SECONDS"] = "5"  # progress lines often enough to see a window's TEST phase begin
    return env


STEP_LINE = re.compile(r"^\[\d+/\d+\] (\S+) (\S+): (.*)$")
STEP_ENDS = ("ok in ", "already materialised and current, skipped", "blocked, not run", "waiting, not run", "burned, not run",
             "FAILED in ", "refused in ")
STARTED_RUN = re.compile(r"^started run (\S+) ")
TEST_ASSETS = ("test_growth", "test_score")  # a window's TEST phase: TEST read by the one, scored by the other
TEST_DELAY_SHARE = 0.5  # a TEST phase is short (about 20 s on data/): its kills come within half the max delay


@dataclass(frozen=True)
class KillTarget:
    """Where an attempt is killed: ``delay`` seconds after ``anchor`` of ``step`` (``"job partition"``):
    ``start``, the step's start line in the output; ``test``, the start of test_growth or test_score
    in the window step's run (its event log); when the anchor never comes (the step had less to do),
    after the step's last line."""
    step: str
    anchor: str
    delay: float

    def describe(self) -> str:
        where = "TEST phase" if self.anchor == "test" else "start"
        return f"{self.delay:.1f}s after the {where} of {self.step}"


def remaining_steps(plan: list[str], finished: set[str]) -> list[str]:
    """The steps an attempt still has to run: the plan's, less those earlier attempts built or found
    current, less the catalog (rebuilt at the job's end when it would change, not a target of its own)."""
    return [s for s in plan if s not in finished and not s.startswith("catalog_job ")]


def plan_kills(rng: random.Random, plan: list[str], kills: int, max_delay: float) -> list[KillTarget]:
    """``kills`` kill moments spread along the whole job: its anchors (each step's start and, after a
    window step's, its TEST phase; not the catalog's) cut into ``kills`` equal stretches in order, one
    anchor drawn in each, each with a delay drawn uniformly in [0, max_delay]."""
    anchors = []
    for step in remaining_steps(plan, set()):
        anchors += [(step, "start")] + ([(step, "test")] if step.startswith("window_job ") else [])
    targets = []
    for i in range(kills if anchors else 0):
        low = i * len(anchors) // kills
        high = max(low + 1, (i + 1) * len(anchors) // kills)
        step, anchor = anchors[rng.randrange(low, high)]
        longest = max_delay * (TEST_DELAY_SHARE if anchor == "test" else 1.0)
        targets.append(KillTarget(step, anchor, round(rng.uniform(0.0, longest), 1)))
    return targets


def still_ahead(target: KillTarget, plan: list[str], remaining: list[str]) -> KillTarget:
    """``target`` if its step is still to run, else the start of the first remaining step after it
    (the moments are in job order and a killed step re-runs, so this is only a safety net)."""
    if target.step in remaining or not remaining:
        return target
    later = [s for s in remaining if plan.index(s) > plan.index(target.step)] or remaining[-1:]
    return KillTarget(later[0], "start", target.delay)


def reaction(target: KillTarget, line: str) -> tuple[str, str] | None:
    """What ``line`` of the output does to ``target``'s countdown: ``("arm", why)`` starts it (its
    step's start for a ``start`` anchor; the step's last line when the anchor never came), ``("watch",
    run_id)`` has the TEST phase of the window step's run watched for; None when nothing."""
    match = STEP_LINE.match(line.rstrip("\n"))
    if match is None or f"{match.group(1)} {match.group(2)}" != target.step:
        return None
    said = match.group(3)
    started = STARTED_RUN.match(said)
    if started and target.anchor == "start":
        return "arm", "the step started"
    if started:
        return "watch", started.group(1)
    if said.startswith(STEP_ENDS):
        return "arm", "the step ended before its TEST phase came" if target.anchor == "test" else "the step ended"
    return None


class Countdown:
    """SIGKILL a process group ``delay`` seconds after the first ``arm`` (later ones change nothing)."""

    def __init__(self, group: int, delay: float):
        self.group, self.delay, self.why = group, delay, None
        self.lock, self.timer, self.stop = threading.Lock(), None, threading.Event()

    def arm(self, why: str) -> None:
        with self.lock:
            if self.timer is None:
                self.why = why
                self.timer = threading.Timer(self.delay, os.killpg, (self.group, signal.SIGKILL))
                self.timer.start()

    def watch_test_phase(self, home: str, run_id: str, poll: float = 0.5) -> None:
        """Arm when the run ``run_id`` starts test_growth or test_score (a thread reading its event log)."""
        def watch() -> None:
            instance = dg.DagsterInstance.from_config(home)
            while self.timer is None and not self.stop.wait(poll):
                found = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.STEP_START).records
                steps = {r.event_log_entry.step_key for r in found}
                if steps & set(TEST_ASSETS):
                    self.arm(f"{'/'.join(sorted(steps & set(TEST_ASSETS)))} started (run {run_id[:8]})")
        threading.Thread(target=watch, name="chaos-test-phase", daemon=True).start()

    def cancel(self) -> None:
        self.stop.set()
        if self.timer is not None:
            self.timer.cancel()


def finished_steps(output: str) -> set[str]:
    """``"job partition"`` of each step an attempt's output shows built or found current."""
    done = set()
    for line in output.splitlines():
        match = STEP_LINE.match(line)
        if match and (match.group(3).startswith("ok in ") or match.group(3).endswith("skipped")
                      or "current, skipped" in match.group(3)):
            done.add(f"{match.group(1)} {match.group(2)}")
    return done


def attempt(env: dict, target: KillTarget | None, log) -> tuple[bool, str]:
    """One ``tempo materialize --all``; ``(killed, output)``. ``target``: SIGKILL the process group
    ``target.delay`` seconds after the line that arms it; None runs to the end."""
    process = subprocess.Popen([TEMPO, "materialize", "--all"], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True, cwd=REPO)
    lines: list[str] = []
    countdown = Countdown(process.pid, target.delay) if target else None
    for line in process.stdout:
        lines.append(line)
        react = reaction(target, line) if target else None
        if react and react[0] == "arm":
            countdown.arm(react[1])
        elif react:
            countdown.watch_test_phase(env["DAGSTER_HOME"], react[1])
    process.wait()
    if countdown is not None:
        countdown.cancel()
    killed = process.returncode == -signal.SIGKILL
    last = ([l for l in lines if l.startswith("[")][-1:] or ["(before the first step)"])[0].strip()[:160]
    if killed:
        log(f"  killed {countdown.delay:.1f}s after {countdown.why}; last line: {last}")
    elif target:
        log(f"  FINISHED before its kill ({target.describe()}; armed: {countdown.why or 'never'}); last line: {last}")
    return killed, "".join(lines)


def job_plan(env: dict) -> list[str]:
    """``"job partition"`` of each step of ``tempo materialize --all`` on this archive, in order."""
    code = ("from tempo_assets.cli.graph_cmd import current_plan, plan_steps; "
            "print('\\n'.join(f'{j} {k}' for j, k in plan_steps(current_plan(), 'all')))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return [l for l in out.stdout.splitlines() if l.split(" ")[0].endswith("_job")]


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


def summary_lines(output: str) -> list[str]:
    """``tempo materialize``'s closing summary: its ``summary:`` line and the indented lines under it."""
    lines = output.splitlines()
    first = next((i for i, line in enumerate(lines) if line.startswith("summary:")), len(lines))
    tail = lines[first + 1:]
    return lines[first:first + 1] + tail[:next((i for i, l in enumerate(tail) if not l.startswith("  ")), len(tail))]


def submission_sha(output: str) -> str | None:
    match = re.search(r"CAFA submission for cutoff \S+: (\S+)", output)
    return hashlib.sha256(Path(match.group(1)).read_bytes()).hexdigest() if match else None


def run_to_end(env: dict) -> str:
    done = subprocess.run([TEMPO, "materialize", "--all"], env=env, capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        sys.exit(f"chaos: the uninterrupted run failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return submission_sha(done.stdout)


@dataclass
class Tally:
    """What the kill loop saw: kills, attempts that finished before their kill, recoveries, burns."""
    kills: int = 0
    attempts: int = 0
    early: int = 0
    recoveries: int = 0
    burned: list = field(default_factory=list)


def kill_loop(env: dict, wanted: int, rng: random.Random, max_delay: float, log) -> tuple[Tally, str]:
    """Attempts of the job, the k-th of the first ``wanted`` killed at the k-th of ``plan_kills``'
    moments (on a step it still has to run), the next one run to the end; ``(tally, its output)``."""
    tally, plan, finished = Tally(), job_plan(env), set()
    moments = plan_kills(rng, plan, wanted, max_delay)
    log(f"the job's plan: {len(plan)} steps; the kills: " + "; ".join(t.describe() for t in moments))
    while True:
        tally.attempts += 1
        remaining = remaining_steps(plan, finished)
        target = still_ahead(moments[tally.kills], plan, remaining) if tally.kills < len(moments) else None
        log(f"attempt {tally.attempts}: {len(remaining)} of the plan's steps left to run; "
            + (f"kill {target.describe()}" if target else "runs to the end"))
        killed, output = attempt(env, target, log)
        if tally.kills and re.search(r"^\[\d+/\d+\] .*: (ok in|already materialised)", output, re.M):
            tally.recoveries += 1  # after a kill, this attempt went on from where the last one stopped
        finished |= finished_steps(output)
        if not killed:
            tally.early += target is not None
            return tally, output
        tally.kills += 1
        tally.burned += release_dead_claims(env, log)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kills", type=int, help="how many times to kill -9 the job")
    parser.add_argument("--seed", type=int, default=None, help="seed of the kill moments (printed)")
    parser.add_argument("--archive", type=Path, default=REPO / "data", help="archive to copy (default data/)")
    parser.add_argument("--max-delay", type=float, default=20.0,
                        help="longest time from the chosen moment (a remaining step's start, or a window's "
                             "TEST phase) to the kill, seconds (default 20)")
    parser.add_argument("--reference-sha256", default=None,
                        help="the submission's sha256 from an uninterrupted run (default: make one first)")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 16)
    log = lambda line: print(line, flush=True)  # noqa: E731
    work = Path(tempfile.mkdtemp(prefix="tempo-chaos-"))
    log(f"chaos: {args.kills} kills, seed {seed}, max delay {args.max_delay:g}s, archive {args.archive}, "
        f"work folder {work}")
    reference = args.reference_sha256
    if reference is None:
        log("uninterrupted run (the reference) ...")
        reference = run_to_end(fresh_copy(args.archive, work / "reference"))
    env = fresh_copy(args.archive, work / "chaos")
    started = time.perf_counter()
    tally, output = kill_loop(env, args.kills, random.Random(seed), args.max_delay, log)
    return report(env, tally, output, reference, time.perf_counter() - started, log)


def report(env: dict, tally: Tally, output: str, reference: str, seconds: float, log) -> int:
    """The closing lines; 0 when the job finished, the sha256s agree and the audit passed."""
    finished_ok = "summary:" in output and "failed:" not in output
    tests = json.loads(subprocess.run([TEMPO, "test-claim", "list", "--json"], env=env, capture_output=True,
                                      text=True, check=True).stdout)
    audit = subprocess.run([TEMPO, "audit-cutoffs"], env=env, capture_output=True, text=True, cwd=REPO)
    verdict = audit.stdout.strip().splitlines()[-1] if audit.stdout.strip() else audit.stderr.strip()[-200:]
    verdict = next((l for l in audit.stdout.splitlines() if l in ("PASS",) or l.startswith("FAIL")), verdict)
    sha = submission_sha(output)
    log(f"kills: {tally.kills}; attempts: {tally.attempts}; finished before their kill: {tally.early}; "
        f"recoveries: {tally.recoveries}; wall {seconds:.0f}s; last attempt "
        f"{'finished' if finished_ok else 'did NOT finish'}")
    for line in summary_lines(output):  # what the last attempt left blocked, waiting or failed, and why
        log(f"  last attempt's {line.strip()[:200]}")
    for test in tests:
        burn = f" ({test['burn']['reason']})" if test.get("burn") else ""
        log(f"window {test['window']}: TEST {test['state']}{burn}")
    log(f"submission sha256: {sha} ({'same as' if sha == reference else 'DIFFERS from'} the uninterrupted "
        f"run's {reference})")
    log(f"audit-cutoffs: {verdict}")
    return 0 if finished_ok and sha == reference and verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
