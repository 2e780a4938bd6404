"""Text helpers the command-line tests share."""


def one_line(text: str) -> str:
    """``text`` with every run of white space (a rich console's line folds included) made one space, so a
    message is matched whatever width the terminal folded it to.

    >>> one_line("error: --gpus 12\\n  has no plan ")
    'error: --gpus 12 has no plan'
    """
    return " ".join(text.split())


def gemm_cli_probe(report: str, before: str = "") -> str:
    """A ``python -c`` script that runs ``hnplan gemm`` once through the command line's entry point (its output
    swallowed, a non-zero exit raised) and then prints ``report``, a Python expression evaluated after the call
    (what the entry point left in ``os.environ``, say); ``before``: statements run before the call (after ``import
    contextlib, gc, io, os, sys`` and ``from hnplan.cli import main``)."""
    return f"""
import contextlib, gc, io, os, sys
from hnplan.cli import main
{before}
sys.argv = ["hnplan", "gemm", "--accelerator", "h100-sxm", "--shape", "8192x8192x8192", "--json"]
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main()
    except SystemExit as exc:
        assert not exc.code, exc.code
print({report})
"""
