"""Session fixtures: the demo archive ``data/`` materialised once, in a tmp Dagster instance.

The demo graph takes minutes on two cores, so every test that needs a materialised graph shares
this one session: a copy of ``data/``, a persistent ``DAGSTER_HOME`` (telemetry off) whose
instance holds the registered partitions and the run history, and tmp artefact, cache and
warehouse paths. ``demo_graph.env`` points a subprocess (``dagster``, ``tempo``) at the same
instance and folders.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

# the SQL warehouse models: the evaluation sets scoring reads come from them, so they run too
from tempo_assets.cli.graph_cmd import WAREHOUSE_ASSETS  # noqa: F401 (re-exported for tests)
# the production path's servers (PostgreSQL, S3, redis) for the tests marked `production`
from tempo_assets_tests.services import dev_services, services_state, stop_run_services  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
DEMO_ARCHIVE = REPO / "data"
# the tests' instances capture no compute logs: Dagster's local capture starts a ``tail -F`` and a watcher
# interpreter per stream for every run it executes (about 0.06 CPU s a run, docs/performance.md) and no
# test reads them; the instance ``tempo init`` writes (cli/graph_cmd.py) keeps Dagster's default
DAGSTER_YAML = ("telemetry:\n  enabled: false\n"
                "compute_logs:\n  module: dagster._core.storage.noop_compute_log_manager\n"
                "  class: NoOpComputeLogManager\n")


@dataclass
class MaterialisedGraph:
    """An archive materialised through every window's ``test_score`` and the latest submission."""

    root: Path
    archive: Path
    home: Path
    artefacts: Path
    instance: object
    plan: object
    resources: dict
    report: list
    seconds: float
    env: dict = field(default_factory=dict)

    def store(self):
        from tempo_assets.core.storage.artefacts import ArtefactStore

        return ArtefactStore(self.artefacts)


# the session builds' grid: fewer bootstrap resamples than the default keeps test_score quick; nothing
# else changes (a run elsewhere compared byte for byte with a build uses the same)
GRID_BOOTSTRAP_SAMPLES = 20


def make_home(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "dagster.yaml").write_text(DAGSTER_YAML, encoding="utf-8")
    return path


def materialise_archive(root: Path, archive: Path, exclude=(), target: str = "all",
                        key: str | None = None, benchmark_config=None) -> MaterialisedGraph:
    """Register ``archive``'s partitions in a fresh instance under ``root`` and run ``target``."""
    import dagster as dg
    from dagster._core.instance.ref import InstanceRef

    from tempo_assets.cli.graph_cmd import plan_steps, run_steps
    from tempo_assets.definitions import build_resources
    from tempo_assets.partitions import plan_partitions, register_partitions
    from tempo_assets.resources import GridResource, open_archive

    home = make_home(root / "home")
    artefacts = root / "artefacts"
    warehouse = "sqlite:///" + str(root / "warehouse.sqlite")
    cache = root / "cache"
    instance = dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home)))
    plan = plan_partitions(open_archive(archive))
    register_partitions(instance, plan)
    resources = build_resources(str(archive), str(artefacts), warehouse, str(cache),
                                grid=GridResource(bootstrap_samples=GRID_BOOTSTRAP_SAMPLES),
                                benchmark_config=benchmark_config)
    started = time.perf_counter()
    report = run_steps(plan_steps(plan, target, key), instance, resources, echo=lambda *_: None, exclude=exclude)
    env = {"DAGSTER_HOME": str(home), "TEMPO_ARCHIVE": str(archive), "TEMPO_ARTEFACTS": str(artefacts),
           "TEMPO_WAREHOUSE_URL": warehouse, "TEMPO_CACHE": str(cache)}
    return MaterialisedGraph(root, archive, home, artefacts, instance, plan, resources, report,
                             time.perf_counter() - started, env)


def copy_sqlite(source: Path, target: Path) -> None:
    """A consistent copy of a SQLite database through SQLite's backup API: the warehouse runs in WAL
    mode, so copying its main file alone can miss committed rows still in the ``-wal`` file."""
    import sqlite3

    target.parent.mkdir(parents=True, exist_ok=True)
    src, dst = sqlite3.connect(source), sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        dst.close()
        src.close()


def copy_state(source: Path, target: Path) -> None:
    """``source`` (an instance home, artefact store, cache or archive folder, or a graph root) copied to
    ``target``, every SQLite database through :func:`copy_sqlite` (their ``-wal``/``-shm`` files are
    not copied: the backup holds what they committed)."""
    databases = (".db", ".sqlite")

    def ignore(folder, names):
        return [n for n in names if n.endswith(databases) or n.endswith(tuple(d + s for d in databases
                                                                                 for s in ("-wal", "-shm")))]

    shutil.copytree(source, target, ignore=ignore)
    for suffix in databases:
        for db in source.rglob("*" + suffix):
            copy_sqlite(db, target / db.relative_to(source))


GRAPH_FOLDERS = ("archive", "home", "artefacts", "cache", "warehouse.sqlite")


def graph_from(build: Path, root: Path, benchmark_config=None) -> MaterialisedGraph:
    """A working copy under ``root`` of a graph materialised in ``build`` (:func:`demo_build`):
    its own instance, store, cache and warehouse, the build left as it was.

    Sidecars record archive files by their path inside the archive, so the copy's artefacts are as
    current against the copied archive as the build's were against its own.
    """
    import dagster as dg
    from dagster._core.instance.ref import InstanceRef

    from tempo_assets.core.inputs.releases import open_archive
    from tempo_assets.definitions import build_resources
    from tempo_assets.partitions import plan_partitions
    from tempo_assets.resources import GridResource

    for name in GRAPH_FOLDERS:
        source = build / name
        if source.is_dir():
            copy_state(source, root / name)
        elif source.exists():
            copy_sqlite(source, root / name)
    done = json.loads((build / BUILT).read_text(encoding="utf-8"))
    warehouse = "sqlite:///" + str(root / "warehouse.sqlite")
    instance = dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(root / "home")))
    resources = build_resources(str(root / "archive"), str(root / "artefacts"), warehouse, str(root / "cache"),
                                grid=GridResource(bootstrap_samples=GRID_BOOTSTRAP_SAMPLES),
                                benchmark_config=benchmark_config)
    env = {"DAGSTER_HOME": str(root / "home"), "TEMPO_ARCHIVE": str(root / "archive"),
           "TEMPO_ARTEFACTS": str(root / "artefacts"), "TEMPO_WAREHOUSE_URL": warehouse,
           "TEMPO_CACHE": str(root / "cache")}
    return MaterialisedGraph(root, root / "archive", root / "home", root / "artefacts", instance,
                             plan_partitions(open_archive(root / "archive")), resources,
                             [tuple(r) for r in done["report"]], done["seconds"], env)


BUILT = "materialised.json"  # written last in a demo build: its run report and time


def run_folder(tmp_path_factory) -> Path:
    """The folder of this pytest run: shared by its xdist workers (each has ``popen-gwN`` in it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def build_demo(folder: Path) -> Path:
    """``data/`` materialised in ``folder / "demo_graph"`` once per test run, under a file lock.

    Whoever takes the lock first builds (the background build ``pytest_collection_modifyitems``
    starts, or the first test to need it); everyone else waits for it and then finds it built.
    The build is never changed after: tests work on copies (:func:`graph_from`). No test on it reads
    the reports' figures (its numbers, time bindings, states and submission are what they check;
    the figures are tested in ``core/test_report.py`` and on the tiny build), so none is drawn
    (``unrendered.undrawn_figures``: every stored value the same bytes, the report pages without images).
    """
    from filelock import FileLock

    from tempo_assets_tests.unrendered import undrawn_figures

    build = folder / "demo_graph"
    with FileLock(str(folder / "demo_graph.lock")):
        if not (build / BUILT).exists():
            if build.exists():  # a build that was interrupted
                shutil.rmtree(build)
            build.mkdir(parents=True)
            shutil.copytree(DEMO_ARCHIVE, build / "archive")
            with undrawn_figures():
                graph = materialise_archive(build, build / "archive")
            graph.instance.dispose()
            (build / BUILT).write_text(json.dumps({"report": graph.report, "seconds": graph.seconds}),
                                       encoding="utf-8")
    return build


# The tiny archive (assets/tiny_archive.py: four releases a year apart, one window), materialised
# once per test run in two stages: ``unscored`` (everything its window's frozen_recipe needs, and
# the recipe; TEST never read) and ``scored`` (a copy of it continued through test_growth,
# test_score, benchmark, the latest submission and the catalog, with ``--jobs 2``: the submission starts
# once the stored recipe is ready, while the window's run goes on). Tests work on copies (tiny_copy).
TEST_ASSETS = ("test_growth", "test_score")
TINY_STAGES = ("unscored", "scored")


def tiny_benchmark_config():
    """The tiny graph's benchmark settings: fewer bootstrap resamples, nothing else changed."""
    from tempo_assets.assets.evaluation import BenchmarkResource

    return BenchmarkResource(bootstrap_samples=40)


def build_tiny(folder: Path) -> Path:
    """The tiny archive materialised in ``folder / "tiny_graph"`` once per test run, under a file lock."""
    from filelock import FileLock

    from tempo_assets.cli.graph_cmd import plan_steps, run_steps
    from tempo_assets.core.inputs.releases import open_archive
    from tempo_assets.partitions import plan_partitions
    from tempo_assets_tests.assets.tiny_archive import build_tiny_archive

    build = folder / "tiny_graph"
    with FileLock(str(folder / "tiny_graph.lock")):
        if (build / "scored" / BUILT).exists():
            return build
        if build.exists():  # a build that was interrupted
            shutil.rmtree(build)
        unscored = build / "unscored"
        archive = build_tiny_archive(unscored, n_releases=4)
        [window] = plan_partitions(open_archive(archive)).windows
        graph = materialise_archive(unscored, archive, exclude=TEST_ASSETS + ("benchmark",), target="window",
                                    key=window, benchmark_config=tiny_benchmark_config())
        graph.instance.dispose()
        if not graph.report or any(r[2] != "ok" for r in graph.report):
            raise RuntimeError(f"the tiny archive did not materialise through frozen_recipe: {graph.report}")
        (unscored / BUILT).write_text(json.dumps({"report": graph.report, "seconds": graph.seconds}),
                                      encoding="utf-8")
        scored = graph_from(unscored, build / "scored", benchmark_config=tiny_benchmark_config())
        started = time.perf_counter()
        report = run_steps(plan_steps(scored.plan, "all"), scored.instance, scored.resources, echo=lambda *_: None,
                           jobs=2)
        scored.instance.dispose()
        if any(r[2] not in ("ok", "skipped") for r in report):
            raise RuntimeError(f"the tiny archive did not materialise through its TEST score: {report}")
        ran = graph.report + [r for r in report if r[2] == "ok"]
        (build / "scored" / BUILT).write_text(json.dumps({"report": ran, "seconds": graph.seconds
                                                          + time.perf_counter() - started}), encoding="utf-8")
    return build


def tiny_copy(tiny_build: Path, root: Path, stage: str = "scored") -> MaterialisedGraph:
    """A working copy under ``root`` of the tiny build's ``stage`` (``unscored`` or ``scored``)."""
    if stage not in TINY_STAGES:
        raise ValueError(f"stage {stage!r} is not one of {TINY_STAGES}")
    return graph_from(tiny_build / stage, root, benchmark_config=tiny_benchmark_config())


DEMO_FIXTURES = {"demo_graph", "demo_build"}


@pytest.hookimpl(tryfirst=True)  # before the item's fixtures, module-scoped ones included, are set up
def pytest_runtest_setup(item):
    """Start every test without a dead Dagster defs-state storage.

    An entered ``DagsterInstance`` puts its defs-state storage in a context variable of Dagster's
    (``set_defs_state_storage``), restored when it exits. Exits out of order (a half-consumed
    execution generator closed later by the garbage collector) can restore the storage of an
    instance that is gone, and the next definitions load in this process then fails ("Attempted to
    resolve undefined DagsterInstance weakref"; seen in CI, in whichever file ran next on that
    worker). A storage whose instance is alive is left alone. (``run_steps``, ``tempo status`` and
    ``tempo report`` load the definitions against their own instance's storage, so they are immune
    either way: ``cli/test_defs_state.py``.)
    """
    drop_a_dead_defs_state_storage()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    """Again before the test's body: the setup above runs before the previous file's module fixtures are
    torn down, and their teardown can close such a generator (seen in CI in test_ui_texts.py)."""
    drop_a_dead_defs_state_storage()


def drop_a_dead_defs_state_storage() -> None:
    import gc

    from dagster._core.storage.defs_state.base import _current_storage

    storage = _current_storage.get()
    if storage is None:
        return
    gc.collect()  # an instance only a reference cycle keeps is gone now, not in the middle of a fixture
    ref = getattr(storage, "_instance_weakref", None)
    if ref is None or ref() is None:
        _current_storage.set(None)


# fixtures built once per module (or class) for the tests that share them: the tests of a file that use
# one are run on one xdist worker, every other test goes to whichever worker is free (FileGroupScheduling)
SHARED_SCOPES = ("package", "module", "class")
GROUPS_FILE = "xdist_file_groups.json"  # in the run folder: the tests that go to one worker with their file's others


def file_of(item) -> str:
    return item.nodeid.split("::")[0]


def shares_a_fixture(item) -> bool:
    """``item`` uses a fixture built once per module, class or package."""
    return any(defs and defs[-1].scope in SHARED_SCOPES for defs in item._fixtureinfo.name2fixturedefs.values())


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own scheduler for --dist loadgroup
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` with the groups the workers found (:data:`GROUPS_FILE`): the tests of a file
    that share a module fixture go to one worker, in their order (the fixture built once); every other
    test, those of the same file that do not use it included, goes to whichever worker is free, so one
    long file no longer holds one worker.

    (pytest-xdist's own ``xdist_group`` markers no longer group anything under pytest 9.2: it renames
    ``item._nodeid``, which pytest no longer reads.)"""
    from xdist.scheduler import LoadScopeScheduling

    if config.getvalue("dist") != "loadgroup":
        return None
    groups = config._tmp_path_factory.getbasetemp() / GROUPS_FILE

    class FileGroupScheduling(LoadScopeScheduling):
        grouped: set | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.grouped is None:  # first called once every worker has collected (and written the file)
                self.grouped = set(json.loads(groups.read_text(encoding="utf-8"))) if groups.exists() else set()
            return nodeid.split("::")[0] if nodeid in self.grouped else nodeid

    return FileGroupScheduling(config, log)


def write_groups(folder: Path, grouped: set[str]) -> None:
    """The grouped tests' node ids for the controller's scheduler (every worker writes the same list, atomically)."""
    partial = folder / f"{GROUPS_FILE}.{os.getpid()}"
    partial.write_text(json.dumps(sorted(grouped)), encoding="utf-8")
    os.replace(partial, folder / GROUPS_FILE)


# the session builds started in the background as soon as a worker has collected: name -> the fixtures
# that need it (each build function takes the run folder and holds that build's lock)
BACKGROUND_BUILDS = {"demo": DEMO_FIXTURES, "tiny": {"tiny_build"}}


def needs_build(item, name: str) -> bool:
    return bool(BACKGROUND_BUILDS[name] & set(getattr(item, "fixturenames", ())))


@pytest.hookimpl(trylast=True)  # after ``-m``/``-k`` deselected what will not run
def pytest_collection_modifyitems(session, config, items):
    """Slow tests first (those on the tiny build after the others), tests that need the materialised
    ``data/`` last (the slow ones of them first).

    With pytest-xdist, as soon as it has collected, the first worker starts
    ``python -m tempo_assets_tests.conftest RUN_FOLDER demo`` and the second ``... tiny`` (the first
    both, when it is alone) for the builds the selected tests need (each takes its build's lock), and
    every worker lowers its own priority (``nice`` 5) and meanwhile runs the tests that need neither.
    Without xdist the first test that needs a build builds it.
    """
    # xdist hands out the tests (a file's group as one unit, where it has one) in this order
    # (pyproject: --no-loadscope-reorder), each to the first worker free: the long tests start early
    # and the short ones fill the end, so the two workers finish together
    def rank(tests) -> int:  # 0 slow, 1 slow on the tiny build, 2 other, 3 slow on data/, 4 other on data/
        slow = any(t.get_closest_marker("slow") for t in tests)
        if any(needs_build(t, "demo") for t in tests):
            return 3 + (not slow)
        return 2 if not slow else int(any(needs_build(t, "tiny") for t in tests))

    # a group: the tests of a file that share a module fixture, ranked together; the file's other tests
    # are ranked (and handed out) alone: a test on data/ does not hold its file's others until data/ is built
    sharing = [item for item in items if shares_a_fixture(item)]
    files = {file_of(item) for item in sharing}
    ranks = {name: rank([item for item in sharing if file_of(item) == name]) for name in files}
    # stable: each group's tests keep their order
    items.sort(key=lambda item: ranks[file_of(item)] if shares_a_fixture(item) else rank([item]))
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:
        return
    write_groups(run_folder(session.config._tmp_path_factory), {item.nodeid for item in sharing})
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    needed = [name for name in BACKGROUND_BUILDS if any(needs_build(item, name) for item in items)]
    if not needed:
        return
    mine = [name for i, name in enumerate(needed) if f"gw{i % workers}" == worker]
    config._tempo_builds = [start_build(run_folder(session.config._tmp_path_factory), name) for name in mine]
    # the builds are what the tests left for later wait on: the workers (and what their tests start)
    # yield the CPU to them, which were started before this at the default priority
    os.nice(5)


WORKERS_VARIABLE = "TEMPO_TEST_WORKERS"


def pytest_xdist_auto_num_workers(config) -> int:
    """``-n auto``: one xdist worker per core, plus one. Much of the slow tests' time is spent waiting
    for the subprocesses they start (``tempo``, ``dagster``, servers) to import, start up or be
    killed; a worker more keeps both cores busy meanwhile. ``TEMPO_TEST_WORKERS`` sets the number."""
    given = os.environ.get(WORKERS_VARIABLE, "").strip()
    if given:
        if not given.isdigit() or int(given) < 1:
            raise pytest.UsageError(f"{WORKERS_VARIABLE}={given!r} is not a whole number of at least 1")
        return int(given)
    return len(os.sched_getaffinity(0)) + 1


def start_build(folder: Path, name: str):
    import subprocess
    import sys

    log = open(folder / f"{name}_graph_build.log", "w", encoding="utf-8")
    return subprocess.Popen([sys.executable, "-m", "tempo_assets_tests.conftest", str(folder), name], cwd=REPO,
                            stdout=log, stderr=subprocess.STDOUT)


def pytest_sessionfinish(session):
    """The run's servers (``dev_services``, shared by its xdist workers) stopped by the process that
    outlives every test: the xdist controller, or pytest without xdist."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        stop_run_services(run_folder(session.config._tmp_path_factory))


def pytest_unconfigure(config):
    for build in getattr(config, "_tempo_builds", ()):
        if build.poll() is None:  # the run ended before the build did: stop it by its pid
            build.kill()
            build.wait()


@pytest.fixture(scope="session")
def demo_build(tmp_path_factory) -> Path:
    """The folder of this run's materialised ``data/`` (:func:`build_demo`); never write to it."""
    return build_demo(run_folder(tmp_path_factory))


@pytest.fixture(scope="session")
def tiny_build(tmp_path_factory) -> Path:
    """The folder of this run's materialised tiny archive (:func:`build_tiny`); never write to it."""
    return build_tiny(run_folder(tmp_path_factory))


@pytest.fixture(scope="session")
def demo_graph(demo_build, tmp_path_factory) -> MaterialisedGraph:
    """``data/`` materialised: every window through test_score, the latest submission; this worker's
    working copy of the run's build (tests may add runs and artefacts to it)."""
    graph = graph_from(demo_build, tmp_path_factory.mktemp("demo_graph") / "graph")
    yield graph
    graph.instance.dispose()


def subprocess_env(graph: MaterialisedGraph) -> dict:
    """The current environment pointed at ``graph``'s instance and folders."""
    env = dict(os.environ)
    env.update(graph.env)
    return env


if __name__ == "__main__":  # a background build: python -m tempo_assets_tests.conftest RUN_FOLDER demo|tiny
    import sys

    {"demo": build_demo, "tiny": build_tiny}[sys.argv[2]](Path(sys.argv[1]))
