"""Pure-Python core of Tempo: parsing, annotation growth, IA, evaluation, models.

Nothing below this package imports dagster; the asset layer wraps these functions.

The modules are grouped by stage. A group imports only from itself and the groups before it, and
no module imports inside a function but the libraries of ``IMPORTED_WHERE_USED``
(``tempo_assets_tests/test_layout.py`` checks both):

GROUPS: base, inputs, labels, neighbours, evaluation, recipe, methods, audits, storage, pipeline

- ``base``: errors, dates, file io, vocabulary, windows, progress lines, arrays, process liveness,
  fault points for kill tests.
- ``inputs``: one release's files: releases, GAF, FASTA, ontology, embeddings.
- ``labels``: annotations, growth between releases, information accretion.
- ``neighbours``: k-NN over embeddings, BLAST, homology bins.
- ``evaluation``: the CAFA evaluator, scoring a window, benchmark tables, reports.
- ``recipe``: candidate sources, features, the reranker, baselines, selecting and freezing a recipe.
- ``methods``: external methods: fence, registry, bundle, run, output, eligibility, CAFA submission.
- ``audits``: leakage audits, design audit, removals, the quality gate.
- ``storage``: artefacts and their types, TEST claims, staleness, the warehouse.
- ``pipeline``: the window workflow the assets call, one or two calls per asset.
"""

# the only imports core makes inside a function, in the function that uses them, never at module top:
# every `tempo` command (status, audit-cutoffs, report on stored artefacts, ...) and every dagster code
# load imports core, and these libraries cost a tenth of a second to a second each at import (issue 22;
# `python -X importtime -c "import tempo_assets.definitions"`) or are an optional extra. Every other
# import, tempo_assets' own above all, stays at the top of its module: no imports inside functions to
# dodge cycles.
IMPORTED_WHERE_USED = {
    "lightgbm": "~0.9 s with the scikit-learn and scipy.stats it pulls in; fitting and loading rerankers",
    "matplotlib": "~0.5 s; drawing the report PNGs",
    "scipy": "~0.2 s for scipy.sparse; IA counts, homology clusters, sparse artefacts",
    "faiss": "~0.05 s; the KNN index",
    "h5py": "~0.06 s; precomputed embeddings in HDF5",
    "upath": "the production extra (universal-pathlib): artefacts on an object store",
}
