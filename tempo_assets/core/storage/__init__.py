"""Artefacts and their types, TEST claims, staleness, the warehouse."""
