"""One release's files: releases, GAF, FASTA, ontology, embeddings."""
