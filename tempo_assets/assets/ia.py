"""Per-cutoff information accretion, from the cutoff's experimental annotations only."""

import dagster as dg
import pandas as pd

from tempo_assets.assets.common import binding_metadata
from tempo_assets.core.labels.ia import ia_series, information_accretion  # noqa: F401 (ia_series moved to core)
from tempo_assets.core.storage.artefacts import Artefact
from tempo_assets.partitions import CUTOFFS
from tempo_assets.resources import ArchiveResource


@dg.asset(code_version="1", partitions_def=CUTOFFS, group_name="ia")
def ia_weights(
    context: dg.AssetExecutionContext, archive: ArchiveResource,
    release_annotations: Artefact, ontology: Artefact,
) -> dg.Output:
    """One IA value (bits) per GO term, estimated from experimental annotations at the cutoff."""
    cutoff = context.partition_key
    series = information_accretion(release_annotations.value["experimental"], ontology.value)
    frame = pd.DataFrame({"term": series.index.astype(str), "ia": series.to_numpy(dtype=float)})
    return dg.Output(frame, metadata=binding_metadata(
        archive.cutoff_of(cutoff), artefacts=[release_annotations, ontology],
        terms=len(frame), informative_terms=int((frame["ia"] > 0).sum())))
