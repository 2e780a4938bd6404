"""The ``hnplan`` command line: one entry point, one sub-command per planner (thin: parse, call, print).

Each sub-command lives in its own module ``hnplan/cli/<name>_cmd.py`` and registers itself on
:data:`app` when imported. The modules are imported lazily (:class:`hnplan.cli._app.LazyGroup`): a
new ``<name>_cmd.py`` needs no registration line here, and ``hnplan train`` imports only what
``train`` needs.
"""

from __future__ import annotations

from hnplan.cli._app import app, command_modules

#: allocations of container objects between two collections of the garbage collector's youngest generation in
#: the command-line process (CPython's default 700), set by :func:`main`
GC_YOUNG_THRESHOLD = 100_000


def main() -> None:
    """Console-script entry point. With ``--json`` a usage error (a missing option, a value out of range)
    is printed as ``{"error": {...}}`` on stdout too, like every other error (see ``handle_errors``).

    The process runs BLAS on one thread unless ``OPENBLAS_NUM_THREADS`` is set: hnplan's arrays are
    small (candidate plans, a fit of a few parameters), too small for OpenBLAS to split over threads, yet
    each OpenBLAS copy that numpy and scipy load starts a thread per core that busy-waits before it sleeps
    (OpenBLAS ``THREAD_TIMEOUT``), about 0.1 s of CPU per command on this project's benchmark
    (benchmarks/bench_startup.py) and more on a machine with more cores. Set before numpy is imported,
    the only time OpenBLAS reads it. Freed arrays stay in the heap for the next search
    (:func:`hnplan.allocator.keep_freed_memory`).

    The cyclic garbage collector's youngest generation is collected after :data:`GC_YOUNG_THRESHOLD` net
    allocations of container objects instead of CPython's 700 (``gc.set_threshold``, the older generations'
    thresholds kept): a command builds many short-lived containers (catalog entries, the sub-command's
    modules, its plans' columns) and few reference cycles, and the default threshold ran about 170 young and
    15 middle collections in a ``compare`` that plans its published runs, 0.03-0.04 s of its CPU, against
    about 0.003 s now (the collections left run while the command line itself is imported). What is computed
    does not change: the collector only frees unreachable cycles, later.

    At exit every object left is moved to the collector's permanent generation (:func:`gc.freeze`, registered
    with :mod:`atexit`, which runs before the interpreter's finalization): the finalization's full collection
    then skips them rather than tracing every module, catalog entry and array the command made (some 120,000
    tracked objects after a ``calibrate``, 80,000 after a first ``compare``: 0.05-0.08 s of CPU a command on the
    2-core reference machine at load average about 4, benchmarks/bench_startup.py); the operating
    system takes back the memory when the process ends. Output is flushed at exit as before, and a program
    that calls :func:`main` keeps its collector until it exits.

    Pydantic's plugins are not looked for unless ``PYDANTIC_DISABLE_PLUGINS`` is set (to ``""`` to load them
    all): on its first validator pydantic otherwise reads the entry points of every installed distribution
    (:func:`importlib.metadata.entry_points`, ``pydantic/plugin/_loader.py``) for plugins that the command line
    never uses, about 33 million instructions (some 10 ms) a command under callgrind;
    ``PYDANTIC_DISABLE_PLUGINS=__all__`` turns the search off (pydantic/pydantic#8767, ``get_plugins`` in
    ``pydantic/plugin/_loader.py`` @ v2.14.4). What is validated does not change."""
    import atexit
    import gc
    import os
    import sys

    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    atexit.unregister(gc.freeze)  # once per process, however often main runs in it
    atexit.register(gc.freeze)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    from hnplan.allocator import keep_freed_memory

    keep_freed_memory()  # commands that run many searches (size, claims, calibrate) reuse freed arrays

    if "--json" not in sys.argv[1:]:
        app()
        return
    from hnplan.cli._app import run_json

    sys.exit(run_json(sys.argv[1:]))


__all__ = ["app", "command_modules", "main"]
