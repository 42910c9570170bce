"""Validation of a method's ``predictions.tsv`` (CAFA format) against its cutoff bundle.

A file holds ``target term score`` rows (tab- or space-separated), optionally with CAFA's
``AUTHOR``, ``MODEL``, ``KEYWORDS``, ``ACCURACY`` header lines and a final ``END``. Every row
that cannot be scored is dropped, counted and listed (the removals manifest, kind
``method_prediction``):

=========================  =========================================================
reason                     row
=========================  =========================================================
``malformed_line``         not three fields (record id ``line <n>``)
``score_not_a_number``     score that does not parse as a number
``score_nan``              score NaN
``score_out_of_range``     score outside (0, 1] (``inf`` included)
``unknown_target``         target not in the bundle's ``targets.fasta``
``obsolete_term``          term obsolete in the bundle's ontology
``unknown_term``           term the ontology does not know (or without a namespace)
``duplicate_lower_score``  a repeated (target, term) after alt_id mapping: the max is kept
``alt_id_remapped``        kept: an alt_id rewritten to its primary id
``after_end``              a row after ``END``
=========================  =========================================================

A file where more than ``max_invalid_fraction`` of the rows were dropped (default one half) is
rejected with the counts; so is a file with no row at all.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.labels.annotations import classify_terms

HEADER_KEYWORDS = ("AUTHOR", "MODEL", "KEYWORDS", "ACCURACY")
KIND = "method_prediction"
KEPT_REASONS = ("alt_id_remapped",)
DROP_REASONS = ("malformed_line", "score_not_a_number", "score_nan", "score_out_of_range", "unknown_target",
                "obsolete_term", "unknown_term", "duplicate_lower_score", "after_end")
PREDICTION_COLUMNS = ["protein", "term", "aspect", "score"]

__all__ = ["DROP_REASONS", "PredictionCheck", "RejectedPredictions", "validate_predictions"]


class RejectedPredictions(TempoInputError):
    """The file is mostly invalid (or empty): nothing of it is stored; the message has the counts."""


@dataclass
class PredictionCheck:
    """The kept predictions (``protein, term, aspect, score``), the dropped records, the counts."""

    predictions: pd.DataFrame
    removed: pd.DataFrame  # record_id, reason
    rows: int
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def dropped(self) -> int:
        return int(sum(self.counts.get(r, 0) for r in DROP_REASONS))

    def log_into(self, log) -> None:
        """Add the records to a ``core.audits.removals.RemovalLog``."""
        for reason in DROP_REASONS + KEPT_REASONS:
            log._declare(reason)
        if len(self.removed):
            log.add_frame(self.removed, ["record_id"], KIND)


def _parse_lines(path: Path) -> tuple[list[tuple[int, str, str, str]], list[tuple[str, str]], int]:
    rows, removed, total = [], [], 0
    ended = False
    with open(path, "r", encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            fields = line.split()
            if not fields:
                continue
            head = fields[0].upper()
            if head == "END" and len(fields) == 1:
                ended = True
                continue
            if head in HEADER_KEYWORDS and not ended:
                continue
            total += 1
            if ended:
                removed.append((f"line {number}", "after_end"))
            elif len(fields) != 3:
                removed.append((f"line {number}", "malformed_line"))
            else:
                rows.append((number, fields[0], fields[1], fields[2]))
    return rows, removed, total


def validate_predictions(path: str | Path, targets: Iterable[str], ontology: Any,
                         max_invalid_fraction: float = 0.5) -> PredictionCheck:
    """Parse and check ``path``; raises :class:`RejectedPredictions` when it is mostly invalid.

    ``ontology`` is the bundle's (``core.inputs.go_graph.Ontology``): terms are resolved with
    ``core.labels.annotations.classify_terms`` (alt_id -> primary id, obsolete / unknown dropped) and
    given their aspect.
    """

    path = Path(path)
    if not path.is_file():
        raise RejectedPredictions("the method wrote no predictions.tsv")
    parsed, removed, total = _parse_lines(path)
    frame = pd.DataFrame(parsed, columns=["line", "protein", "given_term", "score_text"])
    score = pd.to_numeric(frame["score_text"], errors="coerce").to_numpy(dtype=np.float64)
    not_number = np.isnan(score) & ~frame["score_text"].str.lower().isin(["nan", "+nan", "-nan"]).to_numpy()
    reason = np.full(len(frame), "", dtype=object)
    reason[np.isnan(score)] = "score_nan"
    reason[not_number] = "score_not_a_number"
    reason[(reason == "") & ~((score > 0) & (score <= 1))] = "score_out_of_range"
    target_set = set(map(str, targets))
    reason[(reason == "") & ~frame["protein"].isin(target_set).to_numpy()] = "unknown_target"
    primary, dropped_terms = classify_terms(pd.unique(frame["given_term"]).tolist(), ontology)
    # per distinct term, then one vectorised lookup per row
    term_reasons = {t: "obsolete_term" if why == "obsolete" else "unknown_term" for t, why in dropped_terms.items()}
    term_reason = frame["given_term"].map(term_reasons).astype(object).fillna("").to_numpy(dtype=object)
    bad_term = (reason == "") & (term_reason != "")
    reason[bad_term] = term_reason[bad_term]
    frame["score"], frame["reason"] = score, reason
    records = [pd.DataFrame(removed, columns=["record_id", "reason"])]
    bad = frame[frame["reason"] != ""]
    records.append(pd.DataFrame({"record_id": bad["protein"] + "|" + bad["given_term"], "reason": bad["reason"]}))
    good = frame[frame["reason"] == ""].copy()
    good["term"] = good["given_term"].map(primary)
    remapped = good[good["term"] != good["given_term"]]
    records.append(pd.DataFrame({"record_id": remapped["protein"] + "|" + remapped["given_term"],
                                 "reason": "alt_id_remapped"}))
    good = good.sort_values(["protein", "term", "score"], ascending=[True, True, False], kind="mergesort")
    duplicate = good.duplicated(["protein", "term"], keep="first")
    records.append(pd.DataFrame({"record_id": good.loc[duplicate, "protein"] + "|" + good.loc[duplicate, "given_term"],
                                 "reason": "duplicate_lower_score"}))
    good = good[~duplicate]
    good["aspect"] = good["term"].map({t: ontology.aspect(t) for t in set(primary.values())})
    removed_frame = pd.concat(records, ignore_index=True)
    counts = {r: int((removed_frame["reason"] == r).sum()) for r in DROP_REASONS + KEPT_REASONS}
    check = PredictionCheck(predictions=good[PREDICTION_COLUMNS].reset_index(drop=True), removed=removed_frame,
                            rows=total, counts=counts)
    summary = ", ".join(f"{r}={n}" for r, n in counts.items() if n)
    if total == 0:
        raise RejectedPredictions("predictions.tsv holds no prediction rows", path=path.name)
    if check.dropped > max_invalid_fraction * total:
        raise RejectedPredictions(
            f"rejected: {check.dropped} of {total} rows invalid ({100 * check.dropped / total:.0f}% > "
            f"{100 * max_invalid_fraction:.0f}%): {summary}", path=path.name)
    return check
