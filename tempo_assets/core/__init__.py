"""Pure-Python core of Tempo: parsing, annotation growth, IA, evaluation, models.

Nothing below this package imports dagster; the asset layer wraps these functions.

The modules are grouped by stage. A group imports only from itself and the groups before it, and
no module imports inside a function (``tempo_assets_tests/test_layout.py`` checks both):

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
