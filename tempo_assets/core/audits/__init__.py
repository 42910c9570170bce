"""Leakage audits, design audit, removals, the quality gate."""
