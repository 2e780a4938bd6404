"""The ``hnplan`` command line: one entry point, one sub-command per planner (thin: parse, call, print).

Each sub-command lives in its own module and registers itself on :data:`app`.
"""

from __future__ import annotations

from hnplan.cli._app import app
from hnplan.cli import catalog_cmd, report_cmd, train_cmd  # noqa: F401  (registration)
from hnplan.cli import roofline_cmd  # noqa: F401  (registration)
from hnplan.cli import reliability_cmd, tco_cmd  # noqa: F401  (registration, issue 8)
from hnplan.cli import collective_cmd, topology_cmd  # noqa: F401  (registration)
from hnplan.cli import memory_cmd  # noqa: F401  (registration)
from hnplan.cli import infer_cmd  # noqa: F401  (registration)
from hnplan.cli import size_cmd  # noqa: F401
from hnplan.cli import claims_cmd  # noqa: F401  (registration, issue 15)


def main() -> None:
    """Console-script entry point."""
    app()


__all__ = ["app", "main"]
