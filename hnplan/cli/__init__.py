"""The ``hnplan`` command line: one entry point, one sub-command per planner (thin: parse, call, print).

Each sub-command lives in its own module and registers itself on :data:`app`.
"""

from __future__ import annotations

from hnplan.cli import (  # noqa: F401  (registration)  # noqa: F401  (registration, issue 8)  # noqa: F401  (registration)
    catalog_cmd,
    collective_cmd,
    gemm_cmd,  # noqa: F401  (registration, issue 13; drop once sub-commands load lazily)
    infer_cmd,  # noqa: F401  (registration)
    memory_cmd,  # noqa: F401  (registration)
    reliability_cmd,
    report_cmd,
    roofline_cmd,  # noqa: F401  (registration)
    size_cmd,  # noqa: F401
    tco_cmd,
    topology_cmd,
    train_cmd,
)
from hnplan.cli._app import app


def main() -> None:
    """Console-script entry point."""
    app()


__all__ = ["app", "main"]
