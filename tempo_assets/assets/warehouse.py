"""SQL warehouse models, one asset per model (the data lives in the warehouse; the artefact is a summary)."""

import dagster as dg
import pandas as pd

from tempo_assets.assets.common import all_in, binding_metadata, role_in
from tempo_assets.io_managers import Artefact, ArtefactSet
from tempo_assets.partitions import CUTOFFS, RELEASES, WINDOWS, parse_window_key, previous_release
from tempo_assets.resources import ArchiveResource, WarehouseResource


@dg.asset(partitions_def=RELEASES, group_name="warehouse")
def stg_annotations(
    context: dg.AssetExecutionContext, archive: ArchiveResource, warehouse: WarehouseResource,
    release_annotations: Artefact, ontology: Artefact, sequences: Artefact,
) -> dg.Output:
    """One row per cleaned GAF annotation at the release's cutoff, plus its term closure and sequence hashes."""
    release = context.partition_key
    value = release_annotations.value
    frame = pd.concat([value["experimental_cleaned"].assign(is_experimental=True),
                       value["non_experimental_cleaned"].assign(is_experimental=False)], ignore_index=True)
    wh = warehouse.warehouse()
    counts = {"stg_annotations": wh.load_annotations(release, frame),
              "stg_term_closure": wh.load_ontology(release, ontology.value),
              "stg_sequences": wh.load_sequences(release, sequences.value[["protein", "sequence_sha256"]])}
    return dg.Output(counts, metadata=binding_metadata(
        archive.cutoff_of(release), artefacts=[release_annotations, ontology, sequences], **counts))


@dg.asset(partitions_def=RELEASES, group_name="warehouse")
def experimental_annotations(
    context: dg.AssetExecutionContext, archive: ArchiveResource, warehouse: WarehouseResource,
    stg_annotations: Artefact,
) -> dg.Output:
    """One row per (protein, term) propagated experimental annotation at the release (SQL model)."""
    release = context.partition_key
    run = warehouse.warehouse().run_model("experimental_annotations", release_id=release)
    return dg.Output({"rows": run.rows}, metadata=binding_metadata(
        archive.cutoff_of(release), artefacts=[stg_annotations], rows=run.rows, seconds=run.seconds))


@dg.asset(partitions_def=CUTOFFS, group_name="warehouse", ins={"experimental_annotations": all_in()})
def annotation_growth(
    context: dg.AssetExecutionContext, archive: ArchiveResource, warehouse: WarehouseResource,
    experimental_annotations: ArtefactSet,
) -> dg.Output:
    """One row per (protein, aspect, term) of the NK/LK/PK growth (prev, cutoff] (SQL model)."""
    cutoff = context.partition_key
    prev = previous_release(archive.release_ids(), cutoff)
    read = [experimental_annotations.get(prev), experimental_annotations.get(cutoff)]
    wh = warehouse.warehouse()
    wh.run_model("aligned_annotations", old_release=prev, new_release=cutoff)
    run = wh.run_model("annotation_growth", old_release=prev, new_release=cutoff)
    return dg.Output({"rows": run.rows}, metadata=binding_metadata(
        archive.cutoff_of(cutoff), artefacts=read, rows=run.rows, old_release=prev))


@dg.asset(
    partitions_def=WINDOWS, group_name="warehouse",
    ins={"experimental_annotations": role_in("test"), "frozen_recipe": role_in("valid", dg.IdentityPartitionMapping())},
)
def evaluation_sets(
    context: dg.AssetExecutionContext, archive: ArchiveResource, warehouse: WarehouseResource,
    experimental_annotations: ArtefactSet, frozen_recipe: Artefact,
) -> dg.Output:
    """One row per (window, role, protein, term): VALID (t-1, t0] and TEST (t0, t1] sets; built after the recipe froze."""
    window = parse_window_key(context.partition_key)
    wh = warehouse.warehouse()
    read, rows = [frozen_recipe], {}
    for role, old, new in (("valid", window.t_minus_1, window.t0), ("test", window.t0, window.t1)):
        read += [experimental_annotations.get(old), experimental_annotations.get(new)]
        wh.run_model("aligned_annotations", old_release=old, new_release=new)
        wh.run_model("annotation_growth", old_release=old, new_release=new)
        rows[role] = wh.run_model("evaluation_sets", window_key=window.key, window_role=role,
                                  old_release=old, new_release=new).rows
    return dg.Output(rows, metadata=binding_metadata(
        archive.cutoff_of(window.t1), artefacts=read, window=window.key, window_role="test",
        valid_rows=rows["valid"], test_rows=rows["test"]))
