"""K-NN over embeddings, BLAST, homology bins."""
