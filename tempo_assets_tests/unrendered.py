"""Report figures not rendered, or not drawn at all, for the graph tests whose promise is not the figures.

Rendering (matplotlib's Agg drawing and text layout, in ``savefig``) was a fifth to a quarter of a tiny
graph's materialisation: every window's curves and strata, the catalog's longitudinal plots.
:func:`unrendered_figures` still builds each figure from its data (a plot that cannot be drawn still fails);
only ``core.evaluation.plots._png_bytes`` gives ``b""``. :func:`undrawn_figures` draws none, in this process;
:func:`undrawn_launch_env` does the same in a launched ``tempo``/``dagster`` process and every Python process
it starts. Every stored value keeps its bytes (the figures are extras beside it). The figures themselves are
tested in ``core/test_report.py`` and on the session's tiny build (``assets/test_benchmark_assets.py``).
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator, Mapping


@contextlib.contextmanager
def unrendered_figures() -> Iterator[None]:
    import pytest

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
    import sys

    import pytest

    from tempo_assets.core.evaluation import plots

    for module in DRAWING_MODULES:
        importlib.import_module(module)
    with pytest.MonkeyPatch.context() as patch:
        for name in PLOT_FUNCTIONS:
            drawn = getattr(plots, name)
            stub = _undrawn(plots, drawn)
            for module in [m for key, m in sys.modules.items() if key.startswith("tempo_assets.") and m is not None]:
                if getattr(module, name, None) is drawn:
                    patch.setattr(module, name, stub)
        yield


def _undrawn(plots, function):
    """``function`` (one of :data:`PLOT_FUNCTIONS` of the module ``plots``) drawing nothing: ``b""``,
    written to its ``path`` where it has one."""
    import inspect

    signature = inspect.signature(function)

    def emit(*args, **kwargs) -> bytes:
        path = signature.bind(*args, **kwargs).arguments.get("path")
        return plots._emit(b"", path)
    return emit


def undraw(plots) -> None:
    """The plot functions of the just-loaded module ``plots`` replaced by :func:`_undrawn` stubs, before any
    other module imports them by name (called by :data:`UNDRAWN_SITECUSTOMIZE` in a launched process)."""
    for name in PLOT_FUNCTIONS:
        setattr(plots, name, _undrawn(plots, getattr(plots, name)))


# what a launched process (and every Python process it starts: the --jobs 2 forkserver and step processes)
# runs at start-up from PYTHONPATH: the plots module, once Python has loaded it, draws nothing (undraw)
UNDRAWN_SITECUSTOMIZE = '''"""Written by tempo_assets_tests.unrendered (undrawn_launch_env): no report figure is drawn."""
import sys
from importlib.machinery import PathFinder

PLOTS = "tempo_assets.core.evaluation.plots"


class _UndrawnPlots:
    """Finds the plots module as Python would, and lets its loader replace its plot functions once it ran."""

    def find_spec(self, name, path=None, target=None):
        if name != PLOTS:
            return None
        spec = PathFinder.find_spec(name, path)
        if spec is None:
            return None
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            from tempo_assets_tests.unrendered import undraw
            undraw(module)
        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _UndrawnPlots())
'''


def undrawn_launch_env(env: Mapping[str, str], folder: Path) -> dict[str, str]:
    """``env`` for a launched ``tempo``/``dagster`` process that draws no report figure (what
    :func:`undrawn_figures` does in this process; the stored artefacts are the same bytes): ``folder`` holds
    :data:`UNDRAWN_SITECUSTOMIZE` as ``sitecustomize.py``, first on ``PYTHONPATH``, the repository after it."""
    from tempo_assets_tests.toolkit import REPO

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(UNDRAWN_SITECUSTOMIZE, encoding="utf-8")
    paths = [str(folder), str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**env, "PYTHONPATH": os.pathsep.join(paths)}
