"""Signals around a sweep's local Dask cluster: Ctrl-C and SIGTERM stop the client alone, which closes the
cluster (:func:`hnplan.planning.sweep.run_sweep`)."""

from __future__ import annotations

import contextlib


@contextlib.contextmanager
def _sigint_held():
    """Ignore SIGINT while a local Dask cluster starts its worker processes, so that they ignore it for
    good; the client's process handles Ctrl-C alone.

    Ctrl-C at a terminal signals every process of the foreground group, Dask's worker processes too;
    each would then die with its own ``KeyboardInterrupt`` traceback while the client is already
    shutting the cluster down (:func:`hnplan.planning.sweep.run_sweep`'s ``ExitStack`` closes it). An ignored signal stays
    ignored across ``fork`` and ``exec`` (POSIX ``execve``), and a Python started with SIGINT ignored
    installs no ``KeyboardInterrupt`` handler, so the workers are started under ``SIG_IGN`` and the
    client's handler is put back afterwards. SIGINT is also blocked in this thread meanwhile: Linux keeps
    a blocked signal pending even when it is ignored, so a Ctrl-C pressed while the workers start is
    raised as ``KeyboardInterrupt`` once the handler and the mask are restored. Off the main thread, or
    where a handler was not set from Python, it does nothing.
    """
    import signal
    import threading

    handler = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or handler is None:
        yield
        return
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if hasattr(signal, "pthread_sigmask") else None
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, handler)
        if mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)


@contextlib.contextmanager
def _sigterm_as_interrupt():
    """Raise SIGTERM (``timeout``, ``kill``, a batch scheduler's time limit) as ``KeyboardInterrupt("stopped by
    SIGTERM")`` in the client, so the local cluster is closed as on Ctrl-C; by default the signal ended the
    process at once, leaving the worker processes' semaphores to Python's resource tracker, which warned about
    them on stderr. Off the main thread it does nothing; the previous handler is put back afterwards."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum, frame):
        raise KeyboardInterrupt("stopped by SIGTERM")

    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
