"""Keep freed memory in the process for programs that run many searches (the CLI, sweep workers).

A training-plan search allocates and frees a few tens of MiB of numpy arrays per call. With glibc's
defaults, arrays above the dynamic mmap threshold (128 KiB at first, raised as large blocks are freed) are
mapped and unmapped on every call, and the heap top is trimmed back to the system once 128 KiB lie free
(``man 3 mallopt``: ``M_MMAP_THRESHOLD``, ``M_TRIM_THRESHOLD``). The next call then takes a page fault for
every 4 KiB page it touches again: on the 2-core reference machine the cold Llama 3.1 405B search
(``benchmarks/bench_planner.py``) takes 850-2,300 extra page faults in about two runs of three, 1-2 ms of
its 13 ms. :func:`keep_freed_memory` raises both thresholds so freed blocks stay in the heap for the next
call: the process keeps up to ``trim_threshold_bytes`` of freed memory resident, and nothing changes in
what is computed.

It is called by the ``hnplan`` command line (:func:`hnplan.cli.main`), by the sweep's Dask workers and by
the planner benchmark, not by the library on import: a notebook or another program keeps its allocator
settings unless it calls this itself.
"""

from __future__ import annotations

import ctypes
import sys

from hnplan.units import MiB

# glibc's malloc.h parameter numbers (man 3 mallopt)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

_done = False


def keep_freed_memory(trim_threshold_bytes: int = int(256 * MiB), mmap_threshold_bytes: int = int(32 * MiB)) -> bool:
    """Raise glibc's trim and mmap thresholds so freed arrays stay in the heap (once per process).

    Parameters
    ----------
    trim_threshold_bytes : int
        Freed memory at the heap top kept before it is returned to the system [bytes] (glibc default
        128 KiB, growing dynamically).
    mmap_threshold_bytes : int
        Allocations at least this large are mapped on their own and unmapped when freed [bytes]; glibc
        caps the value at 32 MiB on 64-bit systems (``HEAP_MAX_SIZE / 2``), which is the default here.

    Returns
    -------
    bool
        True when the thresholds were set (Linux with glibc), False elsewhere (musl, macOS, Windows: their
        allocators are left as they are) or when already set by an earlier call.

    >>> isinstance(keep_freed_memory(), bool)
    True
    """
    global _done
    if _done or not sys.platform.startswith("linux"):
        return False
    try:  # the C library the interpreter is linked with (ctypes is imported by numpy already)
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # no mallopt: not glibc
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    ok = bool(mallopt(_M_MMAP_THRESHOLD, int(mmap_threshold_bytes)))
    ok = bool(mallopt(_M_TRIM_THRESHOLD, int(trim_threshold_bytes))) and ok
    _done = ok
    return ok
