"""The frozen recipe's rerankers, fitted once per window and read wherever the recipe is applied at its
frozen thresholds.

``valid_selection`` fits each LightGBM aspect's reranker of the chosen recipe on the window's TRAIN labels
(``Window.recipe_labels``: growth ``(t-2, t-1]``) and keeps it as LightGBM's own model text
(:func:`kept_rerankers`); ``frozen_recipe`` freezes them with the recipe, before TEST is read.
``test_score`` and ``benchmark`` (at ``t0`` and ``t-1``) read them back (:func:`stored_rerankers`)
instead of rebuilding the TRAIN features and refitting. Rerankers are read only in the window they were
fitted for and only where the recipe is trained on the labels they were fitted on; anything else is
refused (another window) or refitted (other labels). A submission refits on its own cutoff's labels.
"""
from __future__ import annotations

import hashlib
from typing import Any, Mapping

from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.base.windows import Window
from tempo_assets.core.recipe.reranker import Reranker
from tempo_assets.core.storage.artefact_types import FittedRerankers, ModelText


def kept_rerankers(rerankers: Mapping[str, Reranker], window: Window) -> FittedRerankers:
    """``rerankers`` (aspect -> fitted on ``window``'s TRAIN labels) as the window stores them."""
    return FittedRerankers(models={aspect: ModelText(r.model_text()) for aspect, r in sorted(rerankers.items())},
                           window=window.key, labels_release=window.recipe_labels)


def rerankers_sha256(fitted: FittedRerankers) -> str:
    """sha256 over the aspects and model texts, in aspect order (the frozen recipe's metadata records it)."""
    digest = hashlib.sha256()
    for aspect, text in sorted(fitted.models.items()):
        digest.update(f"{aspect}\n{len(text)}\n".encode("utf-8"))
        digest.update(str(text).encode("utf-8"))
    return digest.hexdigest()


def rerankers_problems(fitted: FittedRerankers, window: Window, recorded_sha256: str | None) -> list[str]:
    """What makes ``fitted`` unusable for ``window``: another window, labels other than its TRAIN labels,
    or model texts that no longer hash to what was frozen (empty when they may be read)."""
    problems = []
    if fitted.window != window.key:
        problems.append(f"fitted for window {fitted.window}, not {window.key}")
    if fitted.labels_release != window.recipe_labels:
        problems.append(f"fitted on reranker_labels[{fitted.labels_release}], not the window's TRAIN labels "
                        f"reranker_labels[{window.recipe_labels}]")
    digest = rerankers_sha256(fitted)
    if digest != recorded_sha256:
        problems.append(f"model texts hash to {digest}, not the frozen {recorded_sha256}")
    return problems


def check_rerankers(recipe: Mapping[str, Any], fitted: FittedRerankers | None, window: Window,
                    recorded_sha256: str | None) -> None:
    """Raise ``TempoInputError`` when ``recipe``'s kept rerankers belong to another window, were fitted on
    other labels than its TRAIN labels, no longer hash to what was frozen, or miss an aspect the recipe
    reranks (nothing to check when none were kept). Run before TEST is claimed."""
    if fitted is None:
        return
    problems = rerankers_problems(fitted, window, recorded_sha256)
    lacking = sorted(a for a, c in recipe["aspects"].items() if c["variant"] != "none" and a not in fitted.models)
    if lacking:
        problems.append(f"no reranker for aspect(s) {lacking}")
    if problems:
        raise TempoInputError(f"the frozen rerankers of window {window.key}: {'; '.join(problems)}: refusing to "
                              "score with them", path=f"frozen_recipe[{window.key}].rerankers")


def stored_rerankers(recipe: Mapping[str, Any], fitted: FittedRerankers | None, window: Window,
                     recorded_sha256: str | None, labels_release: str) -> dict[str, Reranker] | None:
    """The frozen rerankers of ``recipe`` to score with, its rerankers trained on ``labels_release``.

    ``None`` (the caller refits on its labels) when none were stored (a recipe frozen before they were
    kept) or the recipe is trained on other labels here; refused as :func:`check_rerankers` says.
    """
    check_rerankers(recipe, fitted, window, recorded_sha256)
    if fitted is None or fitted.labels_release != labels_release:
        return None
    params = {a: c.get("params") or {} for a, c in recipe["aspects"].items()}
    return {aspect: Reranker.from_model_text(text, params.get(aspect)) for aspect, text in fitted.models.items()}
