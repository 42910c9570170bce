"""Candidate sources, features, the reranker, baselines, selecting and freezing a recipe."""
