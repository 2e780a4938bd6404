"""numpy's developer tools (``numpy.f2py``, ``numpy.testing``) imported when first used, not when SciPy lists numpy.

SciPy's array-API layer, imported by every SciPy subpackage (``scipy._lib._array_api`` importing the vendored
``array_api_compat.numpy``), copies numpy's namespace with ``from numpy import *`` and ``hasattr`` over ``dir(numpy)``
(``clone_module`` in ``scipy/_lib/array_api_compat/_internal.py``, SciPy 1.17.1). ``numpy.__all__`` names the
subpackages that numpy otherwise imports lazily (its module ``__getattr__``, numpy 2.x), so that copy imports all
of them, among them the Fortran wrapper generator ``numpy.f2py`` (with ``crackfortran`` and the
``charset_normalizer`` it tries) and ``numpy.testing`` (with ``unittest``, ``logging`` and ``concurrent.futures``):
326 million instructions under callgrind, a sixth of ``import scipy.optimize``'s 1.95 G, for modules no hnplan
command uses. :func:`defer_numpy_tools` registers the two as lazy modules first (the standard library's
:class:`importlib.util.LazyLoader`, the recipe of the Python documentation's "Implementing lazy imports"): the copy
then binds the module objects without running them, and the first attribute read of either runs it as a plain
import would. Nothing that hnplan computes changes.
"""

from __future__ import annotations

import importlib.util
import sys

#: numpy's subpackages that SciPy's namespace copy imports and no hnplan command uses
NUMPY_TOOLS = ("f2py", "testing")


def defer_numpy_tools() -> None:
    """Register :data:`NUMPY_TOOLS` as lazy modules (each runs on its first attribute read), unless imported
    already; call before the first SciPy import. Imports numpy. Idempotent; a module that cannot be found is
    left to numpy."""
    import numpy

    for name in NUMPY_TOOLS:
        full = f"numpy.{name}"
        if full in sys.modules:
            continue
        spec = importlib.util.find_spec(full)
        if spec is None or spec.loader is None:
            continue
        spec.loader = importlib.util.LazyLoader(spec.loader)
        module = importlib.util.module_from_spec(spec)
        sys.modules[full] = module
        spec.loader.exec_module(module)
        setattr(numpy, name, module)  # as the import system binds a submodule on its package


__all__ = ["NUMPY_TOOLS", "defer_numpy_tools"]
