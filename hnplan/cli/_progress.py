"""A progress bar for long runs of the command line (``hnplan cluster simulate``): on stderr, shown only once the
run has lasted a moment, gone when it ends."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from hnplan.cli._console import err_console

#: how long a run goes before its bar appears [s]: a shorter one prints nothing
PROGRESS_DELAY_S = 1.0


@contextmanager
def delayed_progress(label: str, delay_s: float = PROGRESS_DELAY_S) -> Iterator[Callable[[float], None]]:
    """A transient progress bar on stderr (``label``, bar, percent, time elapsed and left) that appears once
    ``delay_s`` [s] have passed inside the ``with`` block, whether or not an update came (reading a trace or
    drawing jobs counts), and is removed at its end; a run that ends sooner prints nothing.

    Yields ``update(done)``, ``done`` the share of the work done [0-1]. rich redraws the bar ten times a second
    on its own thread, so an update only records the share; callers still call it per batch of events (the
    cluster simulation: per time sample, some 400 a run), not per event. The caller decides whether a bar is
    wanted at all (a terminal, no ``--json``)."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    bar = Progress(
        TextColumn(label),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        console=err_console,
        transient=True,
    )
    task = bar.add_task("run", total=1.0)
    lock = threading.Lock()
    state = {"shown": False, "over": False}

    def show() -> None:
        with lock:
            if not state["over"]:
                bar.start()
                state["shown"] = True

    timer = threading.Timer(delay_s, show)
    timer.daemon = True
    timer.start()
    try:
        yield lambda done: bar.update(task, completed=min(max(float(done), 0.0), 1.0))
    finally:
        timer.cancel()
        with lock:
            state["over"] = True
            if state["shown"]:
                bar.stop()
