"""hnplan: a capacity-planning workbench for AI clusters.

Compare a supernode (a large scale-up domain such as GB200 NVL72 or CloudMatrix 384) with a
traditional cluster of 8-GPU servers on an InfiniBand/RoCE fat-tree, in time, cost, power and risk.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("hnplan")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0"
