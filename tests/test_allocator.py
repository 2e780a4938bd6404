"""hnplan.allocator: freed arrays stay in the heap after keep_freed_memory (glibc only)."""

from __future__ import annotations

import platform
import resource
import sys

import numpy as np
import pytest

from hnplan import allocator

GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


def test_once_per_process(monkeypatch):
    monkeypatch.setattr(allocator, "_done", False)
    assert allocator.keep_freed_memory() is GLIBC
    assert allocator.keep_freed_memory() is False  # already set: nothing to do


@pytest.mark.skipif(not GLIBC, reason="glibc's mallopt")
def test_reallocation_takes_no_page_faults(monkeypatch):
    # 20 MiB is 5,120 pages of 4 KiB: under the 32 MiB mmap threshold it comes from the heap and, with the
    # 256 MiB trim threshold, stays there when freed, so filling it again faults (almost) no page in.
    monkeypatch.setattr(allocator, "_done", False)
    allocator.keep_freed_memory()
    n = 20 * 2**20 // 8
    a = np.ones(n)
    del a
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    b = np.ones(n)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    assert b.sum() == n
    # glibc's defaults fault ~500 pages in here (the heap top trimmed back), an mmapped block all 5,120
    assert faults < 64
