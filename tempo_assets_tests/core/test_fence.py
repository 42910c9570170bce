"""The fence, exercised for real under bubblewrap: what a method cannot see, reach or exhaust."""
import dataclasses
import json
import os
import resource
import shutil
import socket
from datetime import date
from pathlib import Path

import pandas as pd
import pytest

from tempo_assets.core.methods.fence import FenceLimits, FenceSpec, MissingBubblewrap, find_bwrap, run_fenced
from tempo_assets.core.methods.bundle import BundleContent, read_bundle_targets, write_cutoff_bundle
from tempo_assets.core.methods.registry import MethodSpec
from tempo_assets.core.methods.run import MethodCall, run_method
from tempo_assets.core.inputs.ontology import parse_obo
from tempo_assets_tests.core.obo_fixtures import small_terms, write_obo
from tempo_assets_tests.toolkit import Listener, needs_bwrap, wait_until

REPO = Path(__file__).resolve().parents[2]
LATER_GAF = next((REPO / "data" / "releases" / "2022-09-12").glob("*.gaf.gz"))
SMALL = FenceLimits(timeout_s=60, memory_bytes=2 << 30, output_bytes=1 << 20, tmp_bytes=1 << 20)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    root = tmp_path_factory.mktemp("bundle")
    obo = write_obo(root / "src.obo", small_terms())
    ann = pd.DataFrame({"protein": ["P1", "P2"], "term": ["GO:0000003", "GO:0000011"], "aspect": ["BP", "MF"],
                        "evidence": ["IDA", "EXP"]})
    seqs = {"P1": "MKV", "P2": "MKLL", "P3": "MAAA"}
    manifest = write_cutoff_bundle(root, date(2016, 1, 15), BundleContent(
        targets=seqs, sequences=seqs, experimental=ann, non_experimental=ann.iloc[:0], obo_path=obo,
        ia=pd.Series({"GO:0000003": 1.0, "GO:0000011": 0.5})))
    return root / manifest["folder"]


def call_on(bundle: Path) -> MethodCall:
    """A run at the bundle's cutoff, 2016-01-15, checked against its targets and ontology."""
    return MethodCall(bundle, "2016-01-15", date(2016, 1, 15), read_bundle_targets(bundle),
                      parse_obo(bundle / "go.obo"))


def method(tmp_path, script: str) -> Path:
    folder = tmp_path / "method"
    folder.mkdir()
    (folder / "run.py").write_text(script, encoding="utf-8")
    return folder


LEAKER = """
import json, os, socket
seen = {"gaf_exists": os.path.exists(__GAF__), "archive_exists": os.path.exists(__ARCHIVE__),
        "home_exists": os.path.exists(__HOME__), "dagster_home_exists": os.path.exists(__DHOME__)}
try:
    open(__GAF__, "rb").read(10)
    seen["gaf_read"] = True
except OSError as exc:
    seen["gaf_read"] = type(exc).__name__
try:
    s = socket.create_connection(("127.0.0.1", __PORT__), timeout=2)
    s.sendall(b"leak")
    seen["tcp"] = "connected"
except OSError as exc:
    seen["tcp"] = type(exc).__name__
seen["env"] = sorted(os.environ)
seen["passwd"] = open("/etc/passwd").read()
seen["cwd"] = os.getcwd()
seen["input"] = sorted(os.listdir(os.environ["TEMPO_INPUT"]))
try:
    open("/method/x", "w")
    seen["method_writable"] = True
except OSError:
    seen["method_writable"] = False
print("REPORT " + json.dumps(seen))
with open(os.path.join(os.environ["TEMPO_OUTPUT"], "predictions.tsv"), "w") as out:
    out.write("P1\\tGO:0000003\\t0.9\\nP3\\tGO:0000011\\t0.4\\n")
"""


@needs_bwrap
def test_fenced_method_sees_no_archive_no_network_and_is_scored_normally(tmp_path, bundle, monkeypatch):
    monkeypatch.setenv("TEMPO_SECRET_TOKEN", "do-not-leak")
    with Listener() as listener:
        with socket.create_connection(("127.0.0.1", listener.port), timeout=2) as control:
            control.sendall(b"control")  # the listener is reachable from outside the fence
        assert listener.drain(at_least=1) == (1, b"control")
        dhome = os.environ.get("DAGSTER_HOME", str(REPO / ".dagster_home"))
        values = {"__GAF__": repr(str(LATER_GAF)), "__ARCHIVE__": repr(str(REPO / "data")),
                  "__HOME__": repr(str(Path.home())), "__DHOME__": repr(dhome), "__PORT__": str(listener.port)}
        script = LEAKER
        for placeholder, value in values.items():
            script = script.replace(placeholder, value)
        folder = method(tmp_path, script)
        spec = MethodSpec(name="leaker", kind="command", dir=str(folder), command="python3 run.py", timeout_s=60)
        lines = []
        outcome = run_method(spec, call_on(bundle), SMALL, on_line=lambda s, l: lines.append((s, l)))
        # the method has exited: a connection it made would be queued in the backlog now
        connections = listener.drain()
    assert LATER_GAF.exists()  # on the host
    reports = [l for s, l in lines if s == "stdout" and l.startswith("REPORT ")]
    assert reports, (outcome.reason, lines)
    report = json.loads(reports[0][len("REPORT "):])
    assert report["gaf_exists"] is False and report["gaf_read"] == "FileNotFoundError"
    assert not (report["archive_exists"] or report["home_exists"] or report["dagster_home_exists"])
    assert connections == (1, b"control"), connections  # only the control connection, none from the fence
    assert report["tcp"] in ("ConnectionRefusedError", "OSError", "TimeoutError")
    assert "TEMPO_SECRET_TOKEN" not in report["env"] and "DAGSTER_HOME" not in report["env"]
    assert "root:" not in report["passwd"] and report["cwd"] == "/method" and report["method_writable"] is False
    assert report["input"] == sorted(p.name for p in bundle.iterdir())
    assert outcome.status == "ok", outcome.reason
    assert sorted(outcome.predictions["protein"]) == ["P1", "P3"]
    assert outcome.provenance["method_sha256"]


def sandbox_processes(marker: bytes) -> list[str]:
    """Pids whose command line holds ``marker``."""
    alive = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if marker in (proc / "cmdline").read_bytes():
                    alive.append(proc.name)
            except OSError:
                continue
    return alive


@needs_bwrap
def test_timeout_kills_the_whole_sandbox(tmp_path, bundle):
    """The fence's own timeout test: the run stops at its limit, and nothing it started outlives it."""
    folder = method(tmp_path, "")
    out = tmp_path / "out"
    out.mkdir()
    limits = FenceLimits(timeout_s=1.5, output_bytes=1 << 20, tmp_bytes=1 << 20)
    result = run_fenced(FenceSpec("sleep 299.173 & sleep 299.173", folder, bundle, out), limits)
    assert result.timed_out and result.failure.startswith("timed out")
    assert limits.timeout_s <= result.seconds < 60  # killed at its limit, not when the sleeps ended
    # the pid namespace goes down with its init: every process in it is killed, none is left behind
    wait_until(lambda: sandbox_processes(b"299.173") == [], "the sandbox's processes gone after the timeout")


# burns CPU until its own process has used 0.25 s, then prints what it used
BURNER = """
import time
while time.process_time() < 0.25:
    pass
print(time.process_time())
"""


def children_cpu() -> float:
    """CPU seconds (user + system) of this process's waited-for descendants."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@needs_bwrap
def test_the_sandboxs_cpu_reaches_the_process_that_ran_the_fence(tmp_path, bundle):
    """The CPU of the fenced command and of the processes it waited for is charged to the process
    that ran the fence (its ``RUSAGE_CHILDREN``, which a step's ``tempo/children_cpu_s`` counts)."""
    folder = method(tmp_path, BURNER)
    out = tmp_path / "out"
    out.mkdir()
    before = children_cpu()
    result = run_fenced(FenceSpec("python3 run.py & python3 run.py; wait", folder, bundle, out), SMALL)
    charged = children_cpu() - before
    assert result.returncode == 0 and len(result.stdout_tail) == 2, result
    burnt = sum(float(line) for line in result.stdout_tail)  # the two burners' own CPU, 0.5 s or more
    assert charged >= 0.9 * burnt, (charged, burnt)


# Each command then waits far past its time limit: only the output limit can stop it before the
# timeout does, so the reason ("output exceeded", not "timed out") says which limit fired.
@needs_bwrap
@pytest.mark.parametrize("command", [
    "head -c 50000000 /dev/zero > $TEMPO_OUTPUT/predictions.tsv; sleep 299",  # one huge file: RLIMIT_FSIZE
    "for i in $(seq 1 40); do head -c 200000 /dev/zero > $TEMPO_OUTPUT/part$i; done; sleep 299",  # many: watcher
])
def test_output_over_its_limit_is_a_failure_and_never_fills_the_disk(tmp_path, bundle, command):
    folder = method(tmp_path, "")
    spec = MethodSpec(name="flood", kind="command", dir=str(folder), command=command, timeout_s=60)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    outcome = run_method(spec, call_on(bundle), SMALL, scratch=scratch)
    assert outcome.status == "failed" and "output exceeded" in outcome.reason, outcome.reason
    assert outcome.predictions.empty
    assert list(scratch.iterdir()) == []  # the output folder is gone


@needs_bwrap
@pytest.mark.parametrize("without_prlimit", [False, True])
def test_memory_limit_stops_a_greedy_method(tmp_path, bundle, monkeypatch, without_prlimit):
    if without_prlimit:  # the same limits set in the child before exec
        real_which = shutil.which
        monkeypatch.setattr(shutil, "which", lambda name: None if name == "prlimit" else real_which(name))
    folder = method(tmp_path, "buf = bytearray(1 << 30)\nopen('/output/predictions.tsv', 'w').write('P1 GO:0000003 0.5')\n")
    spec = MethodSpec(name="greedy", kind="command", dir=str(folder), command="python3 run.py", timeout_s=60,
                      memory_gb=0.25)
    outcome = run_method(spec, call_on(bundle), SMALL)
    assert outcome.status == "failed" and "MemoryError" in outcome.reason
    roomy = run_method(spec.model_copy(update={"memory_gb": 3.0}), call_on(bundle), SMALL)
    assert roomy.status == "ok", roomy.reason


@needs_bwrap
def test_too_many_output_files_is_a_failure(tmp_path, bundle):
    folder = method(tmp_path, "")
    out = tmp_path / "out"
    out.mkdir()
    limits = FenceLimits(timeout_s=60, output_bytes=1 << 20, tmp_bytes=1 << 20, output_files=50)
    result = run_fenced(FenceSpec("cd $TEMPO_OUTPUT && for i in $(seq 1 500); do : > f$i; done; sleep 299",
                                  folder, bundle, out), limits)
    # killed by the file-count watcher, long before its time limit could stop the sleep
    assert result.output_exceeded and not result.timed_out and "file-count" in result.failure, result.failure


@needs_bwrap
def test_tmp_is_private_and_bounded(tmp_path, bundle):
    folder = method(tmp_path, "")
    out = tmp_path / "out"
    out.mkdir()
    marker = Path("/tmp") / f"tempo_fence_marker_{os.getpid()}"
    marker.write_text("host")
    try:
        result = run_fenced(FenceSpec(f"test ! -e {marker} && head -c 5000000 /dev/zero > /tmp/fill", folder, bundle,
                                      out), SMALL)
    finally:
        marker.unlink()
    assert result.returncode != 0 and "No space left" in " ".join(result.stderr_tail)


@needs_bwrap
def test_non_zero_exit_and_no_output_are_failures_with_reasons(tmp_path, bundle):
    folder = method(tmp_path, "import sys\nprint('bad model file', file=sys.stderr)\nsys.exit(3)\n")
    spec = MethodSpec(name="crash", kind="command", dir=str(folder), command="python3 run.py", timeout_s=60)
    call = call_on(bundle)
    crashed = run_method(spec, call, SMALL)
    assert crashed.status == "failed" and "exited with status 3" in crashed.reason and "bad model file" in crashed.reason
    silent = run_method(spec.model_copy(update={"command": "true"}), call, SMALL)
    assert silent.status == "failed" and "no predictions.tsv" in silent.reason


def test_precomputed_produced_after_the_cutoff_is_refused(tmp_path, bundle):
    (tmp_path / "2016-01-15.tsv").write_text("P1\tGO:0000003\t0.5\n")
    call = call_on(bundle)
    late = MethodSpec(name="late", kind="precomputed", predictions=str(tmp_path), produced_at=date(2016, 2, 1))
    refused = run_method(late, call)
    assert refused.status == "failed" and refused.reason.startswith("refused: produced at 2016-02-01")
    ok = run_method(late.model_copy(update={"produced_at": date(2016, 1, 10)}), call)
    assert ok.status == "ok" and ok.predictions["term"].tolist() == ["GO:0000003"]
    missing = run_method(late.model_copy(update={"produced_at": date(2016, 1, 10)}),
                         dataclasses.replace(call, cutoff_key="2017-06-15"))
    assert missing.status == "failed" and "no precomputed file" in missing.reason


def test_missing_bubblewrap_names_the_package(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(MissingBubblewrap, match="apt-get install bubblewrap"):
        find_bwrap()


def test_a_method_run_s_output_folder_is_inside_a_folder_that_names_its_owner(tmp_path, bundle, monkeypatch):
    """With no ``scratch`` a method run's output folder lies in an owned temporary folder (owner.json: this
    process), so a run killed before removing it is swept by the next; both are gone after the run."""
    import tempfile

    from tempo_assets.core.base.liveness import OWNER_FILE
    from tempo_assets.core.methods import run as run_module
    from tempo_assets.core.methods.fence import FenceResult

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    seen = {}

    def fake_fence(spec, limits, env=None, on_line=None):
        seen["output"] = spec.output_dir
        seen["owner"] = json.loads((spec.output_dir.parent / OWNER_FILE).read_text(encoding="utf-8"))
        seen["empty"] = not any(spec.output_dir.iterdir())
        return FenceResult(returncode=1, seconds=0.0, output=spec.output_dir)

    monkeypatch.setattr(run_module, "run_fenced", fake_fence)
    spec = MethodSpec(name="owned", kind="command", dir=str(method(tmp_path, "")), command="true", timeout_s=60)
    outcome = run_method(spec, call_on(bundle), SMALL)
    assert outcome.status == "failed"
    assert seen["output"].parent.parent == tmp_path and seen["output"].parent.name.startswith("tempo_method_out_")
    assert seen["owner"]["pid"] == os.getpid() and seen["empty"]
    assert not seen["output"].parent.exists()
