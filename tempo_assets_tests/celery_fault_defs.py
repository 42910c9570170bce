"""A one-asset code location for the celery fault test (``test_celery_executor.py``).

``fault_value`` is stored through Tempo's artefact IO manager (value under ``versions/``, the
``artefact.json`` pointer last); with ``block: true`` its step waits (up to 5 minutes, then fails)
so the test can ``kill -9`` the worker process running it. Its jobs use ``$TEMPO_EXECUTOR``'s
executor, like ``tempo_assets.definitions``; the workers import this module by name.
"""

import time

import dagster as dg
import pandas as pd

from tempo_assets.executors import tempo_executor
from tempo_assets.io_managers import ArtefactIOManager
from tempo_assets.resources import ArchiveResource, ArtefactStoreResource, default_archive_root, default_artefacts_root

BINDING = {"cutoff": "2019-01-14", "max_source_date": "2019-01-14", "sources": "celery fault test"}


class FaultConfig(dg.Config):
    label: str = "first"
    block: bool = False


@dg.asset
def fault_value(context: dg.AssetExecutionContext, config: FaultConfig) -> dg.Output:
    """A small frame; blocks before returning when asked to."""
    if config.block:
        context.log.info("fault_value: blocking until the worker is killed")
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            time.sleep(0.5)
        raise RuntimeError("fault_value: nobody killed this step within 5 minutes")
    return dg.Output(pd.DataFrame({"label": [config.label] * 3, "n": [1, 2, 3]}), metadata=BINDING)


fault_job = dg.define_asset_job("fault_job", selection=[fault_value])

_store = ArtefactStoreResource(root=default_artefacts_root())
defs = dg.Definitions(
    assets=[fault_value], jobs=[fault_job], executor=tempo_executor(),
    resources={"io_manager": ArtefactIOManager(artefact_store=_store,
                                               archive=ArchiveResource(root=default_archive_root()))},
)
