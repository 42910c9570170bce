"""Give the memory a finished piece of work freed back to the system, so that the next one starts near
the size of what it reads rather than of what came before it.

A step process runs several large steps one after the other (a window's ``valid_selection``,
``test_score``, ``benchmark``); what one step freed stays in the process unless it is handed back:

- pyarrow keeps freed buffers in its own pool (jemalloc's, on Linux) until asked to release them;
- glibc's ``malloc`` keeps freed chunks inside its heaps, and after large frees it raises its mmap
  threshold so that later large arrays come from the heap as well: ``malloc_trim(0)`` returns every
  free page of every heap (Linux, glibc only; elsewhere nothing is done).
"""
from __future__ import annotations

import contextlib
import ctypes
import sys
from functools import lru_cache


@lru_cache(maxsize=1)
def _malloc_trim():
    """glibc's ``malloc_trim``, or ``None`` where there is none (macOS, musl)."""
    if not sys.platform.startswith("linux"):
        return None
    with contextlib.suppress(OSError, AttributeError):
        trim = ctypes.CDLL("libc.so.6").malloc_trim
        trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
        return trim
    return None


def release_unused_memory() -> None:
    """Empty pyarrow's pool of freed buffers (when pyarrow is loaded) and return glibc's free heap pages to
    the system. Nothing still referenced is touched.

    The cyclic collector is not run here: it freed almost nothing between a window's steps (the human W2,
    docs/performance.md), and a full pass in the middle of a run can close a half-consumed Dagster
    execution generator of an earlier run in the same process, which restores that run's (dead)
    instance's defs-state storage for the next definitions load (CI15, ``test_ui_texts.py``).
    """
    pyarrow = sys.modules.get("pyarrow")
    if pyarrow is not None:
        pyarrow.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
