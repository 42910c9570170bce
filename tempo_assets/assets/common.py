"""Shared wiring for asset bodies: time-binding metadata, role-tagged inputs, the removals manifest,
the evaluator's ontology and the frozen recipe's hash check.

The pipeline logic the assets call is in ``core/pipeline/`` (``workflow.py``, ``window_benchmark.py``,
``recipe_scoring.py``, ``catalog.py``).
"""
from __future__ import annotations

import json
from datetime import date
from typing import Any, Iterable, Mapping

import dagster as dg

from tempo_assets.core.audits.removals import MANIFEST_NAME, RemovalLog, log_evaluation, log_growth
from tempo_assets.core.base.dates import parse_date
from tempo_assets.core.evaluation import EvalOntology
from tempo_assets.core.labels.ia import ia_series
from tempo_assets.core.base.windows import parse_window_key
from tempo_assets.core.pipeline.frozen_rerankers import check_rerankers, rerankers_sha256, stored_rerankers
from tempo_assets.core.pipeline.workflow import verify_recipe as check_recipe
from tempo_assets.core.storage.artefacts import Artefact
from tempo_assets.fingerprints import record_fingerprint


def role_in(role: str, mapping: dg.PartitionMapping | None = None) -> dg.AssetIn:
    """An input read under ``role`` (train, valid, refit, test) through ``mapping``.

    Window assets read release/cutoff partitions with ``AllPartitionMapping`` (Dagster's
    ``StaticPartitionMapping`` refuses dynamic partitions); the IO manager gates which of them
    the role allows.
    """
    # ``IdentityPartitionMapping()`` is falsy (an empty tuple): test for None, or every window
    # would depend on every other window's partition and show "Unsynced" once another is built
    mapping = dg.AllPartitionMapping() if mapping is None else mapping
    return dg.AssetIn(partition_mapping=mapping, metadata={"tempo/role": role})


def all_in() -> dg.AssetIn:
    """A cutoff asset reading its own and earlier partitions of an upstream (e.g. the previous)."""
    return dg.AssetIn(partition_mapping=dg.AllPartitionMapping())


def _iso(value: date | str) -> str:
    return parse_date(value).isoformat()


def _dedup(entries: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for entry in entries:
        seen.setdefault(json.dumps(entry, sort_keys=True, default=str), dict(entry))
    return [seen[k] for k in sorted(seen)]


def binding_metadata(
    cutoff: date | str,
    *,
    reader=None,
    artefacts: Iterable[Artefact] = (),
    window: str | None = None,
    window_role: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """Metadata every output carries (docs/PROTOCOL.md): cutoff, max_source_date, sources, window.

    ``sources`` lists the raw files read (release, path, sha256, date) through ``reader``
    (a ``CutoffReader``) or by the upstream artefacts, plus a reference to each artefact read;
    ``max_source_date`` is the latest date of all of them.
    """
    artefacts = list(artefacts)
    files: list[Mapping[str, Any]] = []
    dates: list[date] = []
    if reader is not None:
        files.extend(reader.sources)
        if reader.max_source_date is not None:
            dates.append(parse_date(reader.max_source_date))
    for artefact in artefacts:
        files.extend(s for s in artefact.meta.get("sources", []) if "path" in s)
        dates.append(artefact.max_source_date)
    refs = [{"artefact": f"{a.meta.get('asset')}[{a.meta.get('partition')}]", "sha256": a.meta.get("sha256")}
            for a in artefacts]
    sources = _dedup([{k: (str(v) if isinstance(v, date) else v) for k, v in f.items()} for f in files]) + _dedup(refs)
    metadata: dict[str, Any] = {
        "cutoff": _iso(cutoff),
        "max_source_date": _iso(max(dates)) if dates else _iso(cutoff),
        "sources": dg.MetadataValue.json(sources),
    }
    if window is not None:
        metadata["window"] = window
        metadata["window_role"] = window_role
    metadata.update(extra)
    record_fingerprint(metadata, sources)  # what it read, as the sidecar's and Dagster's data version
    return metadata


def scalar_metadata(values: Mapping[str, Any]) -> dict[str, Any]:
    """Ints/floats/strings from a report, for the UI (nested values go as JSON)."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if hasattr(value, "item"):
            value = value.item()
        if isinstance(value, (bool, int, float, str)) or value is None:
            out[key] = value if value is not None else "none"
        elif isinstance(value, (dict, list)):
            try:
                out[key] = dg.MetadataValue.json(json.loads(json.dumps(value, default=str)))
            except (TypeError, ValueError):
                continue
    return out


def removal_metadata(context: dg.AssetExecutionContext, artefact_store, log) -> dict[str, Any]:
    """Write ``log`` (a ``core.audits.removals.RemovalLog``) beside this output's artefact; its metadata.

    The manifest goes to ``<artefact folder>/removals.tsv.gz`` (written even when empty, so a
    rematerialisation never leaves an older manifest behind); the metadata carries
    ``removed_<reason>`` counts, ``removed_total``, the per-kind counts and the file's sha256.
    """
    partition = context.partition_key if context.has_partition_key else None
    folder = artefact_store.store().folder(context.asset_key.to_user_string(), partition)
    meta = log.metadata(sha256=log.write(folder / MANIFEST_NAME))
    meta["removals"] = dg.MetadataValue.json(meta["removals"])
    return meta


def eval_ontology(archive, release: str, ia_frame=None, orphans: bool = True):
    """The cafaeval-exact evaluator's ontology of ``release`` (its OBO read as of it), IA attached."""
    ia = None if ia_frame is None else ia_series(ia_frame)
    return EvalOntology.from_obo(archive.reader(release).obo_path(release), ia=ia, orphans=orphans)


def verify_recipe(frozen: Artefact) -> dict:
    """The frozen recipe, after checking its content still hashes to what was frozen and its rerankers (if
    kept) are its window's, fitted on its TRAIN labels and unchanged: before anything of TEST is claimed."""
    window = str(frozen.meta.get("partition"))
    recipe = check_recipe(frozen.value, frozen.meta.get("recipe_hash"), window)
    check_rerankers(recipe, frozen.value.get("rerankers"), parse_window_key(window),
                    frozen.meta.get("rerankers_sha256"))
    return recipe


def frozen_rerankers(frozen: Artefact, window) -> dict | None:
    """The rerankers frozen with the recipe (fitted on ``window``'s TRAIN labels), checked against what was
    frozen; ``None`` for a recipe frozen before they were kept (its readers refit them)."""
    return stored_rerankers(frozen.value["recipe"], frozen.value.get("rerankers"), window,
                            frozen.meta.get("rerankers_sha256"), window.recipe_labels)


def rerankers_metadata(archive, fitted) -> dict[str, Any]:
    """What the metadata says of a window's fitted rerankers (``FittedRerankers`` or ``None``): their sha256,
    the TRAIN labels they were fitted on and those labels' cutoff (``frozen_recipe__hash_matches`` checks both)."""
    if fitted is None:
        return {}
    return {"rerankers_sha256": rerankers_sha256(fitted),
            "rerankers_cutoff": archive.cutoff_of(fitted.labels_release).isoformat(),
            "rerankers_fitted_on": f"reranker_labels[{fitted.labels_release}]",
            "rerankers_aspects": ", ".join(sorted(fitted.models))}


def growth_removals(growth, methods=None) -> RemovalLog:
    """What was left out of ``growth`` (targets dropped from it) and, given the ``methods``' predictions
    scored on it, of those predictions: a ``core.audits.removals.RemovalLog`` for :func:`removal_metadata`."""
    removals = RemovalLog()
    log_growth(removals, growth)
    if methods is not None:
        log_evaluation(removals, growth, methods)
    return removals
