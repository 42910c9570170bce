"""Errors, dates, file io, vocabulary, windows, progress lines, arrays, process liveness, fault points."""
