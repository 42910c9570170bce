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
