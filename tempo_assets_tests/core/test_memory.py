"""What ``release_unused_memory`` gives back between two steps: glibc's free heap pages; what it leaves: cycles."""
from __future__ import annotations

import gc
import platform
import sys
import weakref
from pathlib import Path

import pytest

from tempo_assets.core.base.memory import release_unused_memory


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS in /proc/self/status")


class _Node:
    pass


def test_the_cyclic_collector_is_not_run():
    """A collection in the middle of a run may close an earlier run's execution generator, which restores a
    dead instance's defs-state storage (see ``release_unused_memory``): cycles are left to Python's own passes."""
    gc.disable()  # no automatic pass may free it either
    try:
        node = _Node()
        node.me = node
        alive = weakref.ref(node)
        del node
        release_unused_memory()
        assert alive() is not None
    finally:
        gc.enable()


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
                    reason="malloc_trim is glibc's")
def test_free_heap_pages_inside_the_heap_go_back_to_the_system():
    """64 MB of 1 kB blocks (glibc's heap, not mmap) freed below a block still in use: ``free`` keeps
    them (only a free top of the heap is trimmed on its own), the release hands them back."""
    blocks = [bytes(1024) for _ in range(64 * 1024)]
    pin = bytes(1024)  # after the blocks: the heap's top stays in use
    del blocks
    gc.collect()
    before = _rss_mb()
    release_unused_memory()
    assert before - _rss_mb() > 32, "the freed blocks' pages are still resident"
    assert pin
