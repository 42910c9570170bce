"""Report figures drawn but not rendered to PNG, for the graph tests whose promise is not the figures.

Rendering (matplotlib's Agg drawing and text layout, in ``savefig``) was a fifth to a quarter of a tiny
graph's materialisation: every window's curves and strata, the catalog's longitudinal plots. Each figure is
still built from its data (a plot that cannot be drawn still fails); only ``core.evaluation.plots._png_bytes``
gives ``b""``. The figures themselves are tested in ``core/test_report.py``.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import pytest


@contextlib.contextmanager
def unrendered_figures() -> Iterator[None]:
    from tempo_assets.core.evaluation import plots

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plots, "_png_bytes", lambda figure: b"")
        yield


PLOT_FUNCTIONS = ("plot_fmax_curve", "plot_precision_recall", "plot_longitudinal", "plot_identity_strata")
# the modules that draw them (imported first, so that their names are there to patch)
DRAWING_MODULES = ("tempo_assets.core.evaluation.report", "tempo_assets.core.evaluation.window_markdown",
                   "tempo_assets.core.pipeline.catalog")


@contextlib.contextmanager
def undrawn_figures() -> Iterator[None]:
    """No figure drawn at all, for a graph a test only sets up: each report plot function gives ``b""``
    (written to its path where it has one), what :func:`unrendered_figures` gives once a figure is drawn,
    so the stored artefacts are the same bytes. Drawing (matplotlib's artists, axes and legends) was a fifth
    of a tiny graph's materialisation even unrendered. Patched in every loaded module of the project that
    holds the function by name."""
    import importlib
    import inspect
    import sys

    from tempo_assets.core.evaluation import plots

    for module in DRAWING_MODULES:
        importlib.import_module(module)

    def undrawn(function):
        signature = inspect.signature(function)

        def emit(*args, **kwargs) -> bytes:
            path = signature.bind(*args, **kwargs).arguments.get("path")
            return plots._emit(b"", path)
        return emit

    with pytest.MonkeyPatch.context() as patch:
        for name in PLOT_FUNCTIONS:
            drawn = getattr(plots, name)
            stub = undrawn(drawn)
            for module in [m for key, m in sys.modules.items() if key.startswith("tempo_assets.") and m is not None]:
                if getattr(module, name, None) is drawn:
                    patch.setattr(module, name, stub)
        yield
