"""Annotations, growth between releases, information accretion."""
