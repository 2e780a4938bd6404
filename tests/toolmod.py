"""The project's ``tools/`` scripts loaded as modules, for the tests that check their figures."""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

TOOLS = Path(__file__).resolve().parents[1] / "tools"


def load_tool(name: str) -> ModuleType:
    """``tools/<name>.py`` executed as a module named ``name`` (registered in :data:`sys.modules` first, where
    dataclasses look their module up by name; a module already there is reused).

    >>> load_tool("scale_split").__name__
    'scale_split'
    """
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        del sys.modules[name]
        raise
    return mod
