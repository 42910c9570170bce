"""Bad input is stopped at the door with one line: each case through the command a user runs.

Every case runs ``tempo`` or ``tempo-eval`` as a subprocess. Input refused before anything runs
gives exit status 2 and exactly one stderr line, ``<prog>: error: ...``, naming the file and line
(or key, namespace, endpoint, instance) at fault, with no traceback; a write refused inside a run
fails that run (exit 1) with the step's failure naming the path in Dagster's log. The full-disk
cases put a folder on a small ext4 image mounted with ``mount -o loop`` (root only: skipped with
the reason otherwise; the unwritable-folder case uses ``chattr +i`` as root, ``chmod`` otherwise).
"""
from __future__ import annotations

import argparse
import gzip
import os
import socket
import subprocess
import sys
from datetime import date
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.instance.ref import InstanceRef

from tempo_assets.cli import graph_cmd
from tempo_assets_tests.assets.tiny_archive import build_tiny_archive, write_gaf
from tempo_assets_tests.core.obo_fixtures import write_obo
from tempo_assets_tests.full_disk import small_filesystem  # noqa: F401 (a fixture)
from tempo_assets_tests.toolkit import unavailable

REPO = Path(__file__).resolve().parents[2]
# a run past the preflight: its steps in the tempo process, one after the other, so a write fails
# without a process of its own started for each run first (each loads Dagster and the definitions)
IN_PROCESS = ("--jobs", "1")
BIN = Path(sys.executable).parent

# the OBO fixture's terms: three namespaces under GO's three roots
TERMS = [
    {"id": "GO:0008150", "aspect": "BP"},
    {"id": "GO:0000001", "aspect": "BP", "is_a": ["GO:0008150"]},
    {"id": "GO:0000002", "aspect": "BP", "is_a": ["GO:0000001"]},
    {"id": "GO:0003674", "aspect": "MF"},
    {"id": "GO:0000011", "aspect": "MF", "is_a": ["GO:0003674"]},
    {"id": "GO:0005575", "aspect": "CC"},
    {"id": "GO:0000021", "aspect": "CC", "is_a": ["GO:0005575"]},
]


def run(prog: str, *args, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    script = BIN / prog
    if not script.exists():
        pytest.fail(f"console script {script} is not installed (pip install -e .)")
    environment = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    environment.pop("TEMPO_LOG_LEVEL", None)
    return subprocess.run([str(script), *map(str, args)], env=environment, capture_output=True,
                          text=True, timeout=timeout)


def one_error_line(done: subprocess.CompletedProcess, prog: str = "tempo") -> str:
    """The single stderr line of a command that stopped on bad input (exit 2, no traceback)."""
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert lines[0].startswith(f"{prog}: error: "), lines[0]
    return lines[0]


def init_instance(env: dict, monkeypatch) -> None:
    """``tempo init`` (it runs as a subprocess in test_test_once and test_production_instance) in this
    process, for ``env``; the instance is closed again, so nothing holds its files open (a loop-mounted
    one is unmounted after)."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert graph_cmd._init(argparse.Namespace()) == 0


def gaf_rows(n: int, day: str = "20140101") -> list[tuple]:
    terms = [("GO:0000002", "P"), ("GO:0000011", "F"), ("GO:0000021", "C")]
    return [(f"P{i:05d}", *terms[i % 3], "IDA", day) for i in range(n)]


@pytest.fixture
def src(tmp_path) -> dict[str, Path]:
    folder = tmp_path / "src"
    folder.mkdir()
    gaf = folder / "goa.gaf"
    write_gaf(gaf, "2014-09-29", gaf_rows(3000))
    gz = folder / "goa.gaf.gz"
    gz.write_bytes(gzip.compress(gaf.read_bytes(), mtime=0))
    obo = write_obo(folder / "go.obo", TERMS, data_version="releases/2014-10-27")
    return {"gaf": gaf, "gaf_gz": gz, "obo": obo, "folder": folder}


def add(tmp_path, gaf, obo, *extra, release_id="2014-09-29"):
    return run("tempo", "release", "add", tmp_path / "archive", "--id", release_id, "--gaf", gaf,
               "--obo", obo, *extra)


def test_the_fixture_release_is_accepted(tmp_path, src):
    done = add(tmp_path, src["gaf_gz"], src["obo"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("added 2014-09-29")


def test_debug_log_level_keeps_the_traceback(tmp_path, src):
    missing = src["folder"] / "missing.gaf"
    line = one_error_line(add(tmp_path, missing, src["obo"]))
    assert line == f"tempo: error: {missing}: file not found: check the path"
    script = BIN / "tempo"
    done = subprocess.run([str(script), "release", "add", str(tmp_path / "archive"), "--id", "x", "--gaf",
                           str(missing), "--obo", str(src["obo"])], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO), "TEMPO_LOG_LEVEL": "DEBUG"})
    assert done.returncode != 0 and "Traceback (most recent call last)" in done.stderr
    assert done.stderr.strip().splitlines()[-1].endswith(f"{missing}: file not found: check the path")


def test_truncated_gaf_gz_names_the_file_and_line(tmp_path, src):
    data = src["gaf_gz"].read_bytes()
    cut = src["folder"] / "cut.gaf.gz"
    cut.write_bytes(data[: len(data) // 2])
    line = one_error_line(add(tmp_path, cut, src["obo"]))
    assert f"{cut}:" in line and "truncated" in line and "download or copy it again" in line
    number = int(line.split(f"{cut}:")[1].split(":")[0])
    assert 3 < number < 3003  # inside the data rows, where the stream stops
    assert not (tmp_path / "archive" / "releases" / "2014-09-29").exists()


def test_obo_with_an_is_a_cycle_is_refused_naming_the_line(tmp_path, src):
    terms = [dict(t) for t in TERMS]
    terms[1]["is_a"] = ["GO:0008150", "GO:0000002"]  # GO:0000001 -> GO:0000002 -> GO:0000001
    obo = write_obo(src["folder"] / "cycle.obo", terms, data_version="releases/2014-10-27")
    line = one_error_line(add(tmp_path, src["gaf"], obo))
    assert "cycle GO:0000001 -> GO:0000002 -> GO:0000001" in line
    lines = obo.read_text().splitlines()
    number = int(line.split(f"{obo}:")[1].split(":")[0])
    assert lines[number - 1].startswith("is_a: GO:0000002")
    # derive reads its OBO the same way
    assert add(tmp_path, src["gaf"], src["obo"]).returncode == 0
    done = run("tempo", "release", "derive", tmp_path / "archive", "--from", "2014-09-29",
               "--cutoff", "2014-06-01", "--id", "2014-06-01", "--obo", obo)
    assert "cycle GO:0000001" in one_error_line(done)


def test_truncated_obo_is_refused(tmp_path, src):
    text = src["obo"].read_bytes()
    cut = src["folder"] / "cut.obo"
    cut.write_bytes(text[: text.rindex(b"name:") + 9])  # ends inside the last term's name line
    line = one_error_line(add(tmp_path, src["gaf"], cut))
    last_line = cut.read_bytes().count(b"\n") + 1
    assert f"{cut}:{last_line}: " in line and "truncated" in line
    cut_gz = src["folder"] / "cut.obo.gz"
    whole = gzip.compress(text * 40, mtime=0)  # long enough that the cut is inside the deflate stream
    cut_gz.write_bytes(whole[: len(whole) - 20])
    line = one_error_line(add(tmp_path, src["gaf"], cut_gz))
    assert f"{cut_gz}:" in line and "truncated" in line


@pytest.mark.parametrize("change, fragment", [
    (lambda terms: [t for t in terms if t["aspect"] != "CC"], "no term of namespace cellular_component"),
    (lambda terms: terms + [{"id": "GO:0000099", "aspect": "BP"}],
     "namespace biological_process has 2 root terms (GO:0000099, GO:0008150)"),
])
def test_obo_without_its_namespace_roots_is_refused(tmp_path, src, change, fragment):
    obo = write_obo(src["folder"] / "partial.obo", change([dict(t) for t in TERMS]),
                    data_version="releases/2014-10-27")
    line = one_error_line(add(tmp_path, src["gaf"], obo))
    assert line.startswith(f"tempo: error: {obo}: ") and fragment in line


def test_dates_after_today_are_refused(tmp_path, src):
    today = date.today()
    line = one_error_line(add(tmp_path, src["gaf"], src["obo"], "--date", "2099-02-02"))
    assert "declared date 2099-02-02 is after today" in line and today.isoformat() in line
    future_gaf = src["folder"] / "future.gaf"
    write_gaf(future_gaf, "2099-01-01", gaf_rows(10))
    line = one_error_line(add(tmp_path, future_gaf, src["obo"]))
    assert line.startswith(f"tempo: error: {future_gaf}: ") and "dated 2099-01-01 by its '!Generated:' header" in line
    future_obo = write_obo(src["folder"] / "future.obo", TERMS, data_version="releases/2099-01-01")
    line = one_error_line(add(tmp_path, src["gaf"], future_obo))
    assert line.startswith(f"tempo: error: {future_obo}: ") and "after today" in line
    assert not (tmp_path / "archive" / "releases").exists() or \
        not any((tmp_path / "archive" / "releases").iterdir())


def test_a_declared_date_replaced_by_a_files_date_is_said(tmp_path, src):
    done = add(tmp_path, src["gaf"], src["obo"], "--date", "2014-11-30")
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stdout.splitlines() if line.startswith("note: ")]
    assert notes == [
        f"note: {src['gaf']}: dated 2014-09-29 by its '!Generated:' header, which replaces the declared "
        "date 2014-11-30 for this file",
        f"note: {src['obo']}: dated 2014-10-27 by its data-version/date header, which replaces the declared "
        "date 2014-11-30 for this file",
    ]


def test_tempo_eval_truncated_ground_truth_is_one_line(tmp_path, src):
    (tmp_path / "preds").mkdir()
    (tmp_path / "preds" / "m.tsv").write_text("P00001\tGO:0000002\t0.5\n")
    gt = tmp_path / "gt.tsv.gz"
    whole = gzip.compress(b"".join(b"P%05d\tGO:0000002\n" % i for i in range(20000)), mtime=0)
    gt.write_bytes(whole[: len(whole) // 2])
    line = one_error_line(run("tempo-eval", src["obo"], tmp_path / "preds", gt, "-out_dir", tmp_path / "out"),
                          prog="tempo-eval")
    assert line.startswith(f"tempo-eval: error: {gt}: ") and "truncated" in line


@pytest.mark.parametrize("missing", ["obo", "gt"])
def test_tempo_eval_missing_file_is_one_line(tmp_path, src, missing):
    gt = tmp_path / "gt.tsv"
    gt.write_text("P00001\tGO:0000002\n")
    (tmp_path / "preds").mkdir()
    (tmp_path / "preds" / "m.tsv").write_text("P00001\tGO:0000002\t0.5\n")
    obo = src["obo"]
    if missing == "obo":
        obo = absent = tmp_path / "nowhere.obo"
    else:
        gt = absent = tmp_path / "nowhere.tsv"
    line = one_error_line(run("tempo-eval", obo, tmp_path / "preds", gt, "-out_dir", tmp_path / "out"),
                          prog="tempo-eval")
    assert line == f"tempo-eval: error: {absent}: No such file or directory; check the path"


def test_unreachable_object_store_names_the_endpoint(tmp_path):
    import s3fs  # noqa: F401 (the test extra installs it: its absence is a failure, not a skip)
    archive = build_tiny_archive(tmp_path, n_releases=2)
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {"DAGSTER_HOME": str(tmp_path / "home"), "TEMPO_ARCHIVE": str(archive),
           "TEMPO_ARTEFACTS": "s3://tempo-test/artefacts", "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
           "AWS_ACCESS_KEY_ID": "tempo-test-key", "AWS_SECRET_ACCESS_KEY": "tempo-test-secret",
           "TEMPO_S3_CONNECT_TIMEOUT": "1"}
    line = one_error_line(run("tempo", "status", env=env))
    assert f"cannot reach the artefact store at endpoint http://127.0.0.1:{port}" in line
    assert line.startswith("tempo: error: s3://tempo-test/artefacts: ")
    assert "tempo-test-secret" not in line


def test_status_works_on_a_broken_instance_and_says_what_is_broken(tmp_path, monkeypatch):
    archive = build_tiny_archive(tmp_path, n_releases=2)
    env = {"DAGSTER_HOME": str(tmp_path / "home"), "TEMPO_ARCHIVE": str(archive),
           "TEMPO_ARTEFACTS": str(tmp_path / "artefacts")}
    init_instance(env, monkeypatch)
    runs_db = tmp_path / "home" / "history" / "runs.db"
    assert runs_db.exists()
    runs_db.write_bytes(b"this is not an SQLite database, a disk error wrote over it\n" * 100)
    done = run("tempo", "status", env=env)
    line = one_error_line(done)
    assert f"Dagster's instance at DAGSTER_HOME={tmp_path / 'home'} cannot be used" in line
    assert "file is not a database" in line and "restore DAGSTER_HOME from a backup" in line
    states = done.stdout.splitlines()
    assert "ontology[2015-01-15] missing not materialised" in states
    assert len(states) > 5


# ------------------------------------------------------------------------------------------------
# full disks: a small ext4 image mounted with `mount -o loop` (tempo_assets_tests/full_disk.py)


def test_full_disk_under_the_artefacts_names_the_path(tmp_path, small_filesystem):
    archive = build_tiny_archive(tmp_path, n_releases=2)
    artefacts = small_filesystem.path / "artefacts"
    env = {"DAGSTER_HOME": str(tmp_path / "home"), "TEMPO_ARCHIVE": str(archive), "TEMPO_ARTEFACTS": str(artefacts)}
    small_filesystem.fill()
    # the preflight: nothing is started on a full disk
    line = one_error_line(run("tempo", "materialize", "--cutoff", "2016-01-15", env=env))
    assert line.startswith(f"tempo: error: {artefacts}: only 0.0 MiB free on the filesystem of TEMPO_ARTEFACTS")
    # past the preflight, the run's failed write names the file it could not write
    done = run("tempo", "materialize", "--cutoff", "2016-01-15", *IN_PROCESS, env={**env, "TEMPO_MIN_FREE_MB": "0"})
    assert done.returncode == 1, done.stderr
    failures = [line for line in done.stderr.splitlines() if "cannot write " in line]
    assert failures, done.stderr
    assert f"cannot write {artefacts}/" in failures[0] and "No space left on device" in failures[0]
    assert "free space on that filesystem" in failures[0]
    assert "OSError: [Errno 28]" not in done.stderr  # the store's own trace is not shown
    assert "FAILED" in done.stdout


def test_unwritable_artefacts_folder_names_the_path(tmp_path):
    archive = build_tiny_archive(tmp_path, n_releases=2)
    artefacts = tmp_path / "artefacts"
    artefacts.mkdir()
    if os.geteuid() == 0:  # root writes through permissions, not through the immutable attribute
        locked = subprocess.run(["chattr", "+i", str(artefacts)], capture_output=True, text=True)
        if locked.returncode != 0:
            unavailable(f"chattr +i ({locked.stderr.strip()})", "run the tests on a filesystem with the immutable "
                                                                 "attribute")
        unlock, reason = ["chattr", "-i", str(artefacts)], "Operation not permitted"
    else:
        artefacts.chmod(0o555)
        unlock, reason = ["chmod", "755", str(artefacts)], "Permission denied"
    env = {"DAGSTER_HOME": str(tmp_path / "home"), "TEMPO_ARCHIVE": str(archive), "TEMPO_ARTEFACTS": str(artefacts)}
    try:
        done = run("tempo", "materialize", "--cutoff", "2016-01-15", *IN_PROCESS, env=env)
    finally:
        subprocess.run(unlock, check=True)
    assert done.returncode == 1, done.stderr
    failures = [line for line in done.stderr.splitlines() if "cannot write " in line]
    assert failures and f"cannot write {artefacts}/" in failures[0] and reason in failures[0], done.stderr
    assert "make the folder writable for this user" in failures[0]
    assert not any(artefacts.iterdir())


def test_full_disk_under_dagster_home_names_the_instance(tmp_path, small_filesystem, monkeypatch):
    archive = build_tiny_archive(tmp_path, n_releases=2)
    home = small_filesystem.path / "home"
    env = {"DAGSTER_HOME": str(home), "TEMPO_ARCHIVE": str(archive), "TEMPO_ARTEFACTS": str(tmp_path / "artefacts")}
    init_instance(env, monkeypatch)
    small_filesystem.fill()
    line = one_error_line(run("tempo", "materialize", "--cutoff", "2016-01-15", env=env))
    assert line.startswith(f"tempo: error: {home}: only ") and "filesystem of DAGSTER_HOME" in line
    assert "free space there, then run again" in line
    # status still works on the full disk, and no run was started (none left STARTED)
    small_filesystem.free_up()
    done = run("tempo", "status", env=env)
    assert done.returncode == 0, done.stderr
    assert "ontology[2015-01-15] missing not materialised" in done.stdout.splitlines()
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        assert instance.get_runs() == []


def test_disk_filling_under_dagster_home_during_a_run_names_the_instance(tmp_path, small_filesystem, monkeypatch):
    archive = build_tiny_archive(tmp_path, n_releases=2)
    home = small_filesystem.path / "home"
    env = {"DAGSTER_HOME": str(home), "TEMPO_ARCHIVE": str(archive), "TEMPO_ARTEFACTS": str(tmp_path / "artefacts"),
           "TEMPO_MIN_FREE_MB": "0"}  # past the preflight: the run's event log fills the disk
    init_instance(env, monkeypatch)
    small_filesystem.fill(leave_kib=400)
    done = run("tempo", "materialize", "--cutoff", "2016-01-15", *IN_PROCESS, env=env)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"tempo: error: Dagster's instance at DAGSTER_HOME={home} cannot be used: SQLite says"), last
    assert ("database or disk is full" in last or "disk I/O error" in last) and "free space on that filesystem" in last
    small_filesystem.free_up()
    assert run("tempo", "status", env=env).returncode == 0
