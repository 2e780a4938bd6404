"""Signals around a sweep's local Dask cluster: Ctrl-C and SIGTERM stop the client alone, which closes the
cluster (:func:`hnplan.planning.sweep.run_sweep`), quietly."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable

#: the loggers that report a Dask client's and cluster's shutdown in this process: distributed's own (lost
#: heartbeats, closed comms), and the event loop's (tornado's and asyncio's "Exception in callback")
DASK_LOGGERS = ("distributed", "tornado", "asyncio")


@contextlib.contextmanager
def _quiet_on_interrupt():
    """Silence :data:`DASK_LOGGERS` the moment the sweep is interrupted, before the client and the cluster close.

    Ctrl-C lands in whatever the client's thread was doing, often distributed's ``sync`` waiting on its event
    loop: that schedules a cancel on the loop thread, which may find the coroutine's future not yet bound and log
    a ``NameError`` traceback there (distributed 2026.8 ``utils.sync``); closing the cluster while its workers
    beat then logs their heartbeats' failures. None of it is the user's concern once the sweep is stopped (the
    chunks written are whole, a re-run resumes from them), so the SIGINT handler installed here first raises
    those loggers to CRITICAL and then raises ``KeyboardInterrupt`` as Python's default handler does. Yields the
    silencing function (for SIGTERM, and for any other error that ends the run); the loggers' levels and the
    previous handler are put back on exit. Off the main thread, or where SIGINT has no Python handler, it only yields the function.
    """
    import signal
    import threading

    loggers = [logging.getLogger(name) for name in DASK_LOGGERS]
    levels = [log.level for log in loggers]

    def silence() -> None:
        for log in loggers:
            log.setLevel(logging.CRITICAL)

    previous = signal.getsignal(signal.SIGINT)
    # a Python handler (default_int_handler, or one a caller installed) is wrapped; SIG_IGN or SIG_DFL is left be
    main = threading.current_thread() is threading.main_thread() and callable(previous)

    def _interrupt(signum, frame):
        silence()
        if callable(previous):
            previous(signum, frame)  # default_int_handler raises KeyboardInterrupt
        raise KeyboardInterrupt

    if main:
        signal.signal(signal.SIGINT, _interrupt)
    try:
        yield silence
    finally:
        if main:
            signal.signal(signal.SIGINT, previous)
        for log, level in zip(loggers, levels, strict=True):
            log.setLevel(level)


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
def _sigterm_held():
    """Hold SIGTERM while a local Dask cluster starts: the signal is recorded, and the handler in place before
    (:func:`_sigterm_as_interrupt`'s) is called once the cluster is made, so that it is closed whole.

    A SIGTERM raised as ``KeyboardInterrupt`` inside ``LocalCluster(...)`` left a cluster half made, which
    distributed's exit hook (``close_clusters``) then failed to close, printing an ``AssertionError: Status.init``
    traceback under the one ``interrupted`` line. The signal is not blocked (a blocked signal stays blocked in the
    worker processes started meanwhile, which their nannies stop with SIGTERM), only deferred by a handler of this
    process. A previous handler that is not a function gets its own behaviour then: the default one ends the
    process with the signal (re-raised), an ignored signal stays ignored. Off the main thread it does nothing.
    """
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: got.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
    if got:  # only when the block ended normally: an error of its own goes first
        if callable(previous):
            previous(signal.SIGTERM, None)
        elif previous == signal.SIG_DFL:  # held, not swallowed: the default action (end the process) now
            signal.raise_signal(signal.SIGTERM)


@contextlib.contextmanager
def _sigterm_as_interrupt(before: Callable[[], None] | None = None):
    """Raise SIGTERM (``timeout``, ``kill``, a batch scheduler's time limit) as ``KeyboardInterrupt("stopped by
    SIGTERM")`` in the client, so the local cluster is closed as on Ctrl-C; by default the signal ended the
    process at once, leaving the worker processes' semaphores to Python's resource tracker, which warned about
    them on stderr. ``before`` runs first (:func:`_quiet_on_interrupt`'s silencing). Off the main thread it does
    nothing; the previous handler is put back afterwards."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum, frame):
        if before is not None:
            before()
        raise KeyboardInterrupt("stopped by SIGTERM")

    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def sigterm_as_interrupt():
    """:func:`_sigterm_as_interrupt` with nothing run first: the command line's guard from the moment ``hnplan
    sweep`` starts, so a SIGTERM while the sweep's modules load (seconds) also ends in one line and exit 130
    instead of the default handler's silent exit 143 (docs/sweep.md)."""
    return _sigterm_as_interrupt()
