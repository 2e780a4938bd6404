"""hnplan: a capacity-planning workbench for AI clusters.

Compare a supernode (a large scale-up domain such as GB200 NVL72 or CloudMatrix 384) with a
traditional cluster of 8-GPU servers on an InfiniBand/RoCE fat-tree, in time, cost, power and risk.
"""


def __getattr__(name: str) -> str:
    # ``__version__`` read from the installed metadata on first use: importlib.metadata pulls in the
    # email parser, start-up a command that never prints the version need not pay
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            value = version("hnplan")
        except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
            value = "0.0.0"
        globals()["__version__"] = value
        return value
    raise AttributeError(f"module 'hnplan' has no attribute {name!r}")
