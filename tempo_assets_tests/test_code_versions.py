"""Code versions are declared per asset, and what an artefact stores does not depend on where it lives.

Issue 20, Build item 5: no absolute path, host name or wall-clock time inside an artefact's value
or fingerprint (a moved checkout stores the same bytes, so nothing goes stale); code versions are
declared (``code_version=`` on each asset) and bumped by hand, never hashed from source text (a pure
refactor makes nothing stale); the pinned-numbers test says when a bump is due. The whole graph in
a moved checkout is ``test_moved_checkout.py``.
"""
from __future__ import annotations

import json
import shutil

import dagster as dg

from tempo_assets.definitions import ASSETS, build_resources
from tempo_assets.fingerprints import asset_code_version, code_versions
from tempo_assets.partitions import plan_partitions, register_partitions
from tempo_assets.resources import open_archive
from tempo_assets_tests.assets.tiny_archive import RELEASES, build_tiny_archive
from tempo_assets_tests.test_numbers_unchanged import CODE_VERSIONS, code_version_verdict

W = "2014-09-29__2016-01-15__2017-06-15__2019-01-14"


def test_every_asset_declares_its_code_version_and_the_fixtures_record_them():
    for assets_def in ASSETS:
        for key in assets_def.keys:
            assert assets_def.code_versions_by_key.get(key), f"{key.to_user_string()} declares no code_version"
    recorded = json.loads(CODE_VERSIONS.read_text(encoding="utf-8"))
    assert recorded == code_versions(ASSETS), "record the code versions with TEMPO_WRITE_FIXTURES=1"


def test_a_pure_refactor_keeps_the_code_version():
    """Two bodies that compute the same thing (a rename, a moved helper) under one declared version."""

    @dg.asset(name="x", code_version="3")
    def before() -> int:
        return 1 + 1

    @dg.asset(name="x", code_version="3")
    def after() -> int:
        two = 2  # refactored
        return two

    assert asset_code_version(before) == asset_code_version(after) == "3"


def test_the_numbers_test_says_when_a_code_version_bump_is_due():
    deps = {"test_score": {"frozen_recipe", "knn_corpus"}, "frozen_recipe": {"valid_selection"}, "benchmark": {"test_score"}}
    recorded = {"test_score": "1", "frozen_recipe": "1", "valid_selection": "1", "knn_corpus": "1", "benchmark": "1"}
    changed = [f"{W}.test_score_summary.tsv"]
    said = code_version_verdict(changed, recorded, dict(recorded), deps)
    assert len(said) == 1 and "bump code_version of test_score" in said[0], said
    # bumped upstream (the recipe's selection changed deliberately): regenerate, nothing to bump
    bumped = dict(recorded, valid_selection="2")
    said = code_version_verdict(changed, recorded, bumped, deps)
    assert "valid_selection 1 -> 2" in said[0] and "TEMPO_WRITE_FIXTURES=1" in said[0]
    assert "bump code_version" not in said[0]
    # a benchmark table changed: benchmark is named, with its own files
    said = code_version_verdict([f"{W}.benchmark_paired.tsv", f"{W}.benchmark_summary.tsv"], recorded, recorded, deps)
    assert "bump code_version of benchmark" in said[0] and "benchmark_paired" in said[0]
    # nothing changed but a version bumped without recording it
    said = code_version_verdict([], recorded, dict(recorded, knn_corpus="2"), deps)
    assert said and "knn_corpus 1 -> 2" in said[0]
    assert code_version_verdict([], recorded, dict(recorded), deps) == []


def materialise_releases(archive, root) -> dict[str, str]:
    """``{"asset[partition]": sha256}`` of the release assets of ``archive`` built under ``root``."""
    instance = dg.DagsterInstance.ephemeral()
    register_partitions(instance, plan_partitions(open_archive(archive)))
    resources = build_resources(str(archive), str(root / "artefacts"), "sqlite:///" + str(root / "wh.sqlite"),
                                str(root / "cache"))
    result = dg.materialize([a for a in ASSETS if a.key.to_user_string() in ("ontology", "sequences",
                                                                             "release_annotations")],
                            partition_key=RELEASES[0], instance=instance, resources=resources)
    assert result.success
    shas = {}
    for sidecar in (root / "artefacts").glob("*/*/artefact.json"):
        meta = json.loads(sidecar.read_text(encoding="utf-8"))
        shas[f"{meta['asset']}[{meta['partition']}]"] = (meta["sha256"], meta["fingerprint"])
    return shas


def test_release_artefacts_are_the_same_bytes_wherever_the_archive_lives(tmp_path):
    """The ontology's stored value held the OBO's absolute path: a moved archive changed its sha256."""
    archive = build_tiny_archive(tmp_path / "here")
    moved = tmp_path / "elsewhere" / "deeper" / "archive"
    shutil.copytree(archive, moved)
    here = materialise_releases(archive, tmp_path / "here")
    there = materialise_releases(moved, tmp_path / "elsewhere")
    assert sorted(here) == [f"{a}[{RELEASES[0]}]" for a in ("ontology", "release_annotations", "sequences")]
    assert here == there  # sha256 and fingerprint of every artefact
    for folder in (tmp_path / "here", tmp_path / "elsewhere"):
        for value in (folder / "artefacts").glob("*/*/versions/*/value.json"):
            text = value.read_text(encoding="utf-8")
            assert str(tmp_path) not in text, f"{value} holds a path: {text[:300]}"
