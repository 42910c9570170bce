"""Shared wiring for asset bodies: time-binding metadata and role-tagged inputs."""
from __future__ import annotations

import json
from datetime import date
from typing import Any, Iterable, Mapping

import dagster as dg

from tempo_assets.core.dates import parse_date
from tempo_assets.fingerprints import record_fingerprint
from tempo_assets.io_managers import Artefact


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
    """Metadata every output carries (PROTOCOL.md): cutoff, max_source_date, sources, window.

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
    """Write ``log`` (a ``core.removals.RemovalLog``) beside this output's artefact; its metadata.

    The manifest goes to ``<artefact folder>/removals.tsv.gz`` (written even when empty, so a
    rematerialisation never leaves an older manifest behind); the metadata carries
    ``removed_<reason>`` counts, ``removed_total``, the per-kind counts and the file's sha256.
    """
    from tempo_assets.core.removals import MANIFEST_NAME

    partition = context.partition_key if context.has_partition_key else None
    folder = artefact_store.store().folder(context.asset_key.to_user_string(), partition)
    meta = log.metadata(sha256=log.write(folder / MANIFEST_NAME))
    meta["removals"] = dg.MetadataValue.json(meta["removals"])
    return meta


def corpus_index(corpus: Mapping[str, Any]):
    """The faiss index of a stored ``knn_corpus`` value (rebuilt: an exact flat index is cheap)."""
    from tempo_assets.core.knn import KnnIndex

    return KnnIndex.build(corpus["ids"], corpus["matrix"])


def query_rows(embedded: Mapping[str, Any], proteins: Iterable[str]):
    """``(ids, matrix)`` of the ``proteins`` present in an ``embeddings`` value, in sorted order."""
    position = {p: i for i, p in enumerate(embedded["ids"])}
    ids = sorted(p for p in set(proteins) if p in position)
    return ids, embedded["matrix"][[position[p] for p in ids]]


def neighbours_of(corpus: Mapping[str, Any], embedded: Mapping[str, Any], proteins: Iterable[str], k: int):
    """Top-``k`` corpus neighbours (self excluded) of ``proteins`` embedded in ``embedded``."""
    ids, matrix = query_rows(embedded, proteins)
    return corpus_index(corpus).search(ids, matrix, k, exclude_self=True)


def sequence_map(frame, restrict: Iterable[str] | None = None) -> dict[str, str]:
    """``{protein: sequence sha256}`` of a stored ``sequences`` frame (optionally restricted)."""
    mapping = dict(zip(frame["protein"], frame["sequence_sha256"]))
    if restrict is not None:
        keep = set(restrict)
        mapping = {p: h for p, h in mapping.items() if p in keep}
    return mapping


def growth_between(old_annotations: Mapping[str, Any], new_annotations: Mapping[str, Any], new_ontology,
                   old_sequences: Mapping[str, str], new_sequences: Mapping[str, str] | None = None):
    """NK/LK/PK growth from an older release's experimental annotations to a newer one's.

    The older annotations are first expressed in the newer ontology (``align_terms``), so an edge
    added between releases is not counted as growth. Targets are restricted to proteins whose
    sequence is available at the older release (``old_sequences``: protein -> sequence sha256)
    and, where ``new_sequences`` knows the protein too, unchanged at the newer one (PROTOCOL.md).
    """
    from tempo_assets.core.growth import align_terms, annotation_growth

    old_aligned, _ = align_terms(old_annotations["experimental"], new_ontology)
    return annotation_growth(old_aligned, new_annotations["experimental"], sequences=dict(old_sequences),
                             new_sequences=None if new_sequences is None else dict(new_sequences))


def term_depths(ontology, terms: Iterable[str]):
    """Depth of each term in ``ontology`` (a feature of candidates)."""
    import pandas as pd

    terms = sorted(set(terms))
    return pd.Series([ontology.depth(t) if t in ontology else 0 for t in terms], index=terms, dtype=float)


def build_corpus(embedded: Mapping[str, Any], annotations: Mapping[str, Any]) -> dict[str, Any]:
    """Corpus of the proteins with both an embedding and an experimental term at one release."""
    experimental = annotations["experimental"]
    position = {p: i for i, p in enumerate(embedded["ids"])}
    ids = sorted(set(experimental["protein"]) & set(position))
    return {
        "ids": ids,
        "matrix": embedded["matrix"][[position[p] for p in ids]],
        "annotations": experimental[experimental["protein"].isin(ids)].reset_index(drop=True),
        "embedder_id": embedded["embedder_id"],
    }


def candidate_source(corpus: Mapping[str, Any], embedded: Mapping[str, Any], proteins, ontology, k: int,
                     growth=None):
    """A ``core.selection.CandidateSource``: neighbours of ``proteins`` in ``corpus`` with term weights.

    IA and depth come from ``corpus`` and ``ontology`` (the candidate release), IA as counts so each
    candidate's IA leaves its own protein out (the golden rule). With ``growth`` the source also
    carries the ground truth (with its ``mode``) and known terms.
    """
    from tempo_assets.core.ia import ia_counts
    from tempo_assets.core.selection import CandidateSource

    neighbours = neighbours_of(corpus, embedded, proteins, k)
    depth = term_depths(ontology, corpus["annotations"]["term"].unique())
    return CandidateSource(
        neighbours=neighbours, corpus_annotations=corpus["annotations"],
        ground_truth=None if growth is None else growth.ground_truth,
        known=None if growth is None else growth.known,
        ia=ia_counts(corpus["annotations"], ontology), term_depth=depth)


NAMESPACE = {"BP": "biological_process", "MF": "molecular_function", "CC": "cellular_component"}


def evaluate_growth(eval_ontology, growth, predictions, n_boot: int = 0, seed: int = 0,
                    taus: Mapping[str, float] | None = None):
    """Per (mode, aspect): Fmax and its tau, weighted Fmax, Smin, coverage, targets, bootstrap CI.

    With ``taus`` (aspect -> the threshold frozen on VALID) each row also carries precision,
    recall and F at that fixed threshold (``f_at_tau``): the number the protocol reports, beside
    the best-over-thresholds Fmax of the whole curve.

    Modes are scored separately, never pooled (PROTOCOL.md); PK known terms are removed by the
    evaluator. A target whose true terms were never predicted scores zero (it stays in the
    denominator). Returns ``(summary, curves)``; ``curves`` is the whole threshold frame.
    """
    import pandas as pd

    from tempo_assets.core.evaluation import bootstrap_ci, evaluate_frames, fmax_score, smin_loss

    rows, curves = [], []
    for mode in ("NK", "LK", "PK"):
        for aspect, ns in NAMESPACE.items():
            targets = growth.targets[(growth.targets["mode"] == mode) & (growth.targets["aspect"] == aspect)]
            if targets.empty:
                continue
            truth = growth.ground_truth.merge(targets[["protein", "aspect"]], on=["protein", "aspect"])[["protein", "term"]]
            preds = predictions[predictions["protein"].isin(targets["protein"]) & (predictions["aspect"] == aspect)]
            preds = preds[["protein", "term", "score"]]
            known = None
            if mode == "PK":
                known = growth.known[growth.known["protein"].isin(targets["protein"]) & (growth.known["aspect"] == aspect)]
                known = known[["protein", "term"]]
            df_all = evaluate_frames(eval_ontology, truth, preds, known=known)
            # what was scored, so methods can be shown to share their targets
            scored = {"mode": mode, "aspect": aspect, "targets": len(targets),
                      "truth_proteins": int(truth["protein"].nunique()), "truth_pairs": len(truth),
                      "truth_sha256": frame_digest(truth), "predicted_pairs": len(preds)}
            if ns not in df_all.index.get_level_values("ns"):
                rows.append({**scored, "fmax": 0.0})
                continue
            fmax, tau = fmax_score(df_all, ns)
            smin, _ = smin_loss(df_all, ns)
            curve = df_all.loc[ns].reset_index()
            best = curve.loc[curve["f"].idxmax()]
            row = {**scored, "fmax": float(fmax), "tau": float(tau), "coverage": float(best["cov"]),
                   "wfmax": float(curve["f_w"].max()) if "f_w" in curve else float("nan"), "smin": float(smin)}
            if taus and taus.get(aspect) is not None:
                row.update(scores_at_tau(curve, float(taus[aspect])))
            if n_boot:
                ci = bootstrap_ci(eval_ontology, truth, preds, metric="f", n_boot=n_boot, seed=seed,
                                  known=known).get(ns, {})
                row.update({"fmax_low": ci.get("low"), "fmax_high": ci.get("high")})
            rows.append(row)
            curves.append(curve.assign(mode=mode, aspect=aspect))
    curves_frame = pd.concat(curves, ignore_index=True) if curves else pd.DataFrame()
    return pd.DataFrame(rows), curves_frame


def frame_digest(frame) -> str:
    """sha256 of a frame's rows, sorted (order-free identity of a target or truth set)."""
    import hashlib

    text = "\n".join(sorted("\t".join(map(str, row)) for row in frame.itertuples(index=False)))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def method_predictions(recipe: Mapping[str, Any], source, train_source, targets, k_plain: int) -> dict:
    """Predictions of the frozen recipe, plain KNN (``k_plain``) and the naive baseline.

    All three use the same neighbours and corpus of ``source``; ``train_source`` holds the
    labelled candidates the recipe's rerankers are refit on; ``targets`` (``protein, aspect``)
    are the proteins the naive baseline scores.
    """
    from tempo_assets.core.baselines import naive_term_scores
    from tempo_assets.core.knn import knn_term_scores
    from tempo_assets.core.selection import apply_recipe

    return {
        "recipe": apply_recipe(recipe, source.neighbours, source.corpus_annotations, train_source,
                               ia=source.ia, term_depth=source.term_depth),
        "knn": knn_term_scores(source.neighbours, source.corpus_annotations, k=k_plain),
        "naive": naive_term_scores(source.corpus_annotations, targets[["protein", "aspect"]]),
    }


def scores_at_tau(curve, tau: float) -> dict:
    """Precision, recall and F of one threshold-curve row at ``tau`` (0 when no protein is covered there)."""
    import numpy as np

    at = curve[np.isclose(curve["tau"].to_numpy(dtype=float), tau, rtol=0, atol=1e-9)]
    if at.empty:  # cafaeval drops rows without coverage: nothing is predicted at this threshold
        return {"tau_valid": tau, "pr_at_tau": 0.0, "rc_at_tau": 0.0, "f_at_tau": 0.0}
    first = at.iloc[0]
    return {"tau_valid": tau, "pr_at_tau": float(first["pr"]), "rc_at_tau": float(first["rc"]),
            "f_at_tau": float(first["f"])}


def recipe_taus(recipe: Mapping[str, Any]) -> dict:
    """aspect -> the threshold the recipe froze on VALID."""
    return {aspect: choice.get("tau") for aspect, choice in recipe.get("aspects", {}).items()}


def score_methods(eval_ontology, growth, methods: Mapping[str, Any], n_boot: int = 0, seed: int = 0,
                  boot_methods: Iterable[str] = ("recipe",), taus: Mapping[str, Mapping[str, float]] | None = None):
    """``evaluate_growth`` for each method on the same growth; ``(summary, curves)`` with a ``method`` column.

    ``taus`` maps a method to its aspect -> VALID-frozen threshold (see ``evaluate_growth``).
    """
    import pandas as pd

    boot = set(boot_methods)
    summaries, curves = [], []
    for name, predictions in methods.items():
        summary, curve = evaluate_growth(eval_ontology, growth, predictions,
                                         n_boot=n_boot if name in boot else 0, seed=seed,
                                         taus=(taus or {}).get(name))
        summaries.append(summary.assign(method=name))
        curves.append(curve.assign(method=name))
    return pd.concat(summaries, ignore_index=True), pd.concat(curves, ignore_index=True)
