"""Running one notebook quietly and exporting it: the kernel manager whose kernel writes its own output
to a log, the context that sends the notebook machinery's logs there too, and the HTML export of an
executed notebook (code hidden, plotly embedded, prices kept as text). Used by :mod:`hnplan.reports`.

Nothing here imports papermill, nbformat or nbconvert at module level: a report re-run with nothing to do
imports none of them.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parent / "templates"

# the kernel's own log quiet (its start-up warning about TCP transport on localhost is not the reader's
# concern); errors still show, and the notebooks' output is in the reports
KERNEL_ARGS = ["--IPKernelApp.log_level=ERROR"]


# loggers of the notebook machinery in this process: papermill, nbclient (through traitlets), jupyter_client
# and asyncio (a cell's task still waiting when Ctrl-C shuts the kernel down ends in DeadKernelError,
# logged when the task is collected)
RUNNER_LOGGERS = ("papermill", "nbclient", "traitlets", "jupyter_client", "asyncio")


@contextmanager
def runner_log(log_path: Path):
    """Send what the notebook machinery logs while a notebook runs to ``log_path`` (beside the kernel's
    own output) instead of the terminal. The report records a failure itself (its error and the failed
    notebook). On Ctrl-C the loggers stay off: the run is over, and what they would still say (a kernel
    that died because it was shut down) is no news."""
    import logging

    handler = logging.FileHandler(log_path, encoding="utf-8")
    saved = []
    for name in RUNNER_LOGGERS:
        lg = logging.getLogger(name)
        saved.append((lg, lg.handlers[:], lg.propagate))
        lg.handlers, lg.propagate = [handler], False
    try:
        yield
    except KeyboardInterrupt:
        for lg, _, _ in saved:
            lg.disabled = True
        raise
    finally:
        for lg, handlers, propagate in saved:
            lg.handlers, lg.propagate = handlers, propagate
        handler.close()


def quiet_kernel_manager(log_path: Path):
    """A jupyter_client kernel manager whose kernel writes its own stdout and stderr to ``log_path``
    instead of the terminal: the notebook's output travels over the kernel's sockets into the report;
    what the kernel process itself prints (IPKernelApp warnings, "KeyboardInterrupt caught in kernel",
    a ``ZMQError`` when Ctrl-C closes its sockets mid-reply) is no concern of the reader's. The log
    is kept next to a failed notebook. ``_async_launch_kernel`` is jupyter_client's documented hook for
    launching the kernel process differently."""
    from jupyter_client.manager import AsyncKernelManager

    class QuietKernelManager(AsyncKernelManager):
        async def _async_launch_kernel(self, kernel_cmd, **kw):
            with open(log_path, "ab") as log:  # the child keeps its own copy of the descriptor
                kw.setdefault("stdout", log)
                kw.setdefault("stderr", log)
                await super()._async_launch_kernel(kernel_cmd, **kw)

    return QuietKernelManager


def escape_dollars(text: str) -> str:
    r"""Markdown with every unescaped ``$`` escaped: nbconvert reads ``$...$`` as LaTeX, so between two
    prices (``$933M capex ... **gb200-nvl72** costs $16.8M``) the Markdown would show as typed, stars
    and all. The reports hold no LaTeX.

    >>> escape_dollars("costs $16.8M and $1.12")
    'costs \\$16.8M and \\$1.12'
    >>> escape_dollars(r"already \$1")
    'already \\$1'
    """
    import re

    return re.sub(r"(?<!\\)\$", r"\\$", text)


def _escape_markdown_dollars(nb) -> None:
    """:func:`escape_dollars` on the Markdown cells and Markdown outputs of a notebook, in place."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = escape_dollars(cell.source)
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if "text/markdown" in data:
                md = data["text/markdown"]
                data["text/markdown"] = escape_dollars("".join(md) if isinstance(md, list) else md)


def export_html(nb, title: str) -> str:
    """HTML of an executed notebook: code hidden, no CDN scripts (see templates/report.html.j2), prices
    in Markdown kept as text (:func:`escape_dollars`)."""
    from nbconvert import HTMLExporter

    _escape_markdown_dollars(nb)

    exporter = HTMLExporter(
        template_name="lab",
        template_file=str(TEMPLATES / "report.html.j2"),
        exclude_input=True,
        exclude_input_prompt=True,
        exclude_output_prompt=True,
    )
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": title}})
    return body
