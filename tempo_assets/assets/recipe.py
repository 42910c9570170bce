"""Per-window frozen recipe: the VALID choice, content-hashed; immutable once written."""

import dagster as dg

from tempo_assets.assets.common import binding_metadata, role_in
from tempo_assets.core.storage.artefact_types import FrozenRecipe
from tempo_assets.core.storage.artefacts import Artefact
from tempo_assets.partitions import WINDOWS, parse_window_key
from tempo_assets.resources import ArchiveResource


@dg.asset(
    code_version="1",
    partitions_def=WINDOWS, group_name="recipe", metadata={"tempo/immutable_key": "recipe_hash"},
    ins={"valid_selection": role_in("valid", dg.IdentityPartitionMapping())},
)
def frozen_recipe(
    context: dg.AssetExecutionContext, archive: ArchiveResource, valid_selection: Artefact
) -> dg.Output:
    """One recipe per window, chosen on VALID (t-1, t0] and frozen (sha256 of its canonical JSON)."""
    from tempo_assets.core.recipe.selection import recipe_hash

    window = parse_window_key(context.partition_key)
    recipe = valid_selection.value["recipe"]
    digest = recipe_hash(recipe)
    return dg.Output(FrozenRecipe(recipe=recipe, recipe_hash=digest, window=window.key), metadata=binding_metadata(
        archive.cutoff_of(window.t0), artefacts=[valid_selection], window=window.key, window_role="valid",
        recipe_hash=digest))
