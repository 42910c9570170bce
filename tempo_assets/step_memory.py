"""What a run's steps leave behind in the process that runs them all, and where it is given back.

``tempo materialize`` runs each job's steps one after the other in one process (``execute_in_process``:
a window run is ``valid_evaluation_set`` ... ``benchmark`` and their checks). Two things made each
step start from what the earlier ones left (the full human archive's W2: ``test_score`` from 4.2 GB,
``benchmark`` from 5.3 GB; docs/performance.md):

- ``execute_in_process`` keeps every value an asset returns in a dict until the run ends (for
  ``result.output_for_node``, which Tempo does not read: every value is read back from the artefact
  store). :func:`forget_captured_output` drops it once the IO manager has stored it;
- what a step freed stays in the process (pyarrow's pool, glibc's heaps):
  :func:`release_before_step` gives it back (``core.base.memory``) when the next step loads its first
  input, that is after the earlier step's frames, inputs and value are gone.

Both are called by the artefact IO manager (``io_managers.py``), through which every step's inputs and
outputs pass.
"""
from __future__ import annotations

import dagster as dg

from tempo_assets.core.base.memory import release_unused_memory

_last_step: list[tuple[str, str]] = []  # (run id, step key) of the last step that released


def _step_of(context):
    """The step's execution context, or ``None`` for a context built outside a run (``build_input_context``)."""
    try:
        return context.step_context
    except dg.DagsterInvariantViolationError:
        return None


def forget_captured_output(context: dg.OutputContext) -> None:
    """Drop ``execute_in_process``'s in-memory copy of the output ``context`` just stored (a no-op
    where the executor captures none)."""
    captured = getattr(_step_of(context), "output_capture", None)
    if not captured:
        return
    for handle in [h for h in captured if h.step_key == context.step_key and h.output_name == context.name]:
        del captured[handle]


def release_before_step(context: dg.InputContext) -> None:
    """Once per step, before its first input is loaded: give back what the earlier steps of this
    process freed (:func:`core.base.memory.release_unused_memory`)."""
    step = _step_of(context)
    if step is None:
        return
    key = (step.run_id, step.step.key)
    if _last_step and _last_step[0] == key:
        return
    _last_step[:] = [key]
    release_unused_memory()
