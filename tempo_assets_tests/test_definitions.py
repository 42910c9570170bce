"""The code location resolves, and the asset graph's edges match the reviewed snapshot."""
import json
import subprocess
import sys
from pathlib import Path

import dagster as dg

from tempo_assets.core import IMPORTED_WHERE_USED
from tempo_assets.definitions import defs
from tempo_assets_tests.toolkit import REPO, rewrite_fixtures

SNAPSHOT = Path(__file__).with_name("graph_edges.json")
TEST_ROLES = {"test"}


def graph_edges() -> list[dict]:
    """Every (upstream, downstream) edge with its partition mapping and the reading role."""
    edges = []
    for assets_def in defs.resolve_asset_graph().assets_defs:
        for key in assets_def.keys:
            for name, spec_in in assets_def.keys_by_input_name.items():
                mapping = assets_def.get_partition_mapping(spec_in)
                role = (assets_def.node_def.input_def_named(name).metadata or {}).get("tempo/role")
                edges.append({"upstream": spec_in.to_user_string(), "downstream": key.to_user_string(),
                              "mapping": type(mapping).__name__ if mapping else None, "role": role})
    return sorted(edges, key=lambda e: (e["downstream"], e["upstream"]))


def test_every_job_sensor_schedule_and_check_resolves():
    dg.Definitions.validate_loadable(defs)
    repo = defs.get_repository_def()
    for name in ("release_job", "cutoff_job", "window_job", "submission_job"):
        assert repo.get_job(name).name == name
    assert {s.name for s in repo.sensor_defs} == {"archive_sensor"}
    assert {s.name for s in repo.schedule_defs} == {"weekly_archive_check"}
    checks = {k.name for k in defs.resolve_asset_graph().asset_check_keys}
    for name in ("knn_corpus__within_cutoff", "valid_selection__no_test_lineage",
                 "test_score__recipe_frozen_before_test", "test_score__scored_once"):
        assert name in checks


def test_the_code_location_loads_without_the_libraries_core_imports_where_used():
    """Every `tempo` command and dagster code load imports the definitions: none of the heavy libraries
    of ``IMPORTED_WHERE_USED`` comes with them (issue 22), a fresh interpreter's ``sys.modules`` says."""
    probe = ("import json, sys, tempo_assets.definitions; "
             f"print(json.dumps(sorted(m for m in {sorted(IMPORTED_WHERE_USED)!r} if m in sys.modules)))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == [], f"importing tempo_assets.definitions imports {done.stdout.strip()}"


def test_edges_match_snapshot():
    edges = graph_edges()
    rewrite_fixtures("TEMPO_UPDATE_SNAPSHOT",
                     lambda: SNAPSHOT.write_text(json.dumps(edges, indent=1) + "\n", encoding="utf-8"),
                     f"the asset graph's edges in {SNAPSHOT.name}")
    assert edges == json.loads(SNAPSHOT.read_text(encoding="utf-8")), "asset graph rewired: review, then regenerate"


def test_nothing_upstream_of_valid_selection_reads_test_data():
    edges = graph_edges()
    upstream = {"valid_selection"}
    frontier = ["valid_selection"]
    while frontier:
        node = frontier.pop()
        for edge in edges:
            if edge["downstream"] == node:
                assert edge["role"] not in TEST_ROLES, edge
                if edge["upstream"] not in upstream:
                    upstream.add(edge["upstream"])
                    frontier.append(edge["upstream"])
    assert not upstream & {"test_score", "evaluation_sets", "frozen_recipe", "submission"}
    # window inputs of valid_selection are TRAIN (<= t-1) or VALID (<= t0), never t1
    roles = {e["role"] for e in edges if e["downstream"] == "valid_selection"}
    assert roles <= {"train", "valid"}


def test_submission_reads_frozen_recipe_through_the_graph():
    graph = defs.resolve_asset_graph()
    parents = {k.to_user_string() for k in graph.get(dg.AssetKey("submission")).parent_keys}
    assert "frozen_recipe" in parents
    # TEST growth is one asset both TEST readers depend on
    for reader in ("test_score", "benchmark"):
        assert "test_growth" in {k.to_user_string() for k in graph.get(dg.AssetKey(reader)).parent_keys}
    assert "valid_evaluation_set" in {k.to_user_string() for k in graph.get(dg.AssetKey("valid_selection")).parent_keys}
