"""Pure-Python core of Tempo: parsing, annotation growth, IA, evaluation, models.

Nothing below this package imports dagster; the asset layer wraps these functions.
"""
