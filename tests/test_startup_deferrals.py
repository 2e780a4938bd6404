"""Start-up work the command line leaves out without changing a result (issue 16): the strict YAML loader builds a
plain document without PyYAML's per-node bookkeeping (hnplan.catalog.yaml_io._plain_data), numpy's f2py and
testing load when first used rather than when SciPy copies numpy's namespace (hnplan.lazy_modules), and the
entry point does not look for pydantic plugins unless told to (hnplan.cli.main)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hnplan.catalog.yaml_io import DEFAULT_DATA_DIR, _StrictLoader
from tests.clitext import gemm_cli_probe

ROOT = Path(__file__).resolve().parents[1]


class _Constructed(_StrictLoader):
    """The strict loader with PyYAML's own document construction (every node through ``construct_object``)."""

    def construct_document(self, node):
        return yaml.constructor.BaseConstructor.construct_document(self, node)


def _same(a, b) -> bool:
    """Equal values of the same types, dict keys in the same order (NaN equal to NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(x, y) for x, y in zip(a, b)) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return a == b


def _sharing(x, seen: dict):
    """Which containers are one object: the tree with each container numbered where first met."""
    if not isinstance(x, (dict, list)):
        return None
    if id(x) in seen:
        return ("same as", seen[id(x)])
    seen[id(x)] = len(seen)
    return [_sharing(v, seen) for v in (x.values() if isinstance(x, dict) else x)]


def _both(text: str):
    out = []
    for loader in (_Constructed, _StrictLoader):
        try:
            out.append(yaml.load(text, Loader=loader))  # noqa: S506 (a safe loader)
        except yaml.YAMLError as exc:
            out.append(("error", str(exc)))
    return out


def test_every_data_file_reads_as_pyyaml_constructs_it():
    files = sorted(DEFAULT_DATA_DIR.rglob("*.yaml")) + sorted((ROOT / "docs").rglob("*.yaml"))
    assert len(files) > 80
    for path in files:
        want, got = _both(path.read_text(encoding="utf-8"))
        assert _same(want, got), path
        assert _sharing(want, {}) == _sharing(got, {}), path


def test_the_published_runs_share_an_aliased_plan_as_pyyaml_does():
    """``data/validation/training_runs.yaml`` names one ``fixed`` mapping twice (``&id001`` / ``*id001``): one dict."""
    runs = yaml.load((DEFAULT_DATA_DIR / "validation/training_runs.yaml").read_text(), Loader=_StrictLoader)  # noqa: S506
    shared = [r["fixed"] for r in runs if "fixed" in r]
    assert any(a is b for i, a in enumerate(shared) for b in shared[i + 1 :])


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\na: 2\n",  # a key given twice: the strict loader's error
        "1: a\ntrue: b\nnull: c\n'1': d\n1: e\n",
        "x: &A {b: [1, 2]}\ny: *A\n",  # an alias: one object
        "- [a, {b: &q [1]}]\n- *q\n- {c: *q}\n",
        "base: &B {a: 1}\nd:\n  <<: *B\n  c: 2\n",  # a merge key: PyYAML's constructor
        "=: 3\n",  # a value key
        "&r [1, *r]\n",  # recursive: PyYAML's constructor
        "a: &r {b: *r}\n",
        "? [1]\n: 2\n",  # an unhashable key: PyYAML's error
        "t: 2020-01-01\nb: !!binary aGk=\ns: !!set {a}\n",  # other tags
        "f: 1e12\ni: 0x1f\nb: yes\nn: ~\ns: '1'\nk: .nan\nj: !!int '7'\nu: !!str 3\n",
        "",
    ],
)
def test_each_kind_of_node_reads_as_pyyaml_constructs_it(text):
    want, got = _both(text)
    if isinstance(want, tuple) or text.startswith(("&r", "a: &r")):
        assert repr(want) == repr(got)
    else:
        assert _same(want, got)
    assert _sharing(want, {}) == _sharing(got, {})


NUMPY_TOOLS_PROBE = """
import sys
from hnplan.lazy_modules import defer_numpy_tools
defer_numpy_tools()
defer_numpy_tools()
from scipy.optimize import least_squares
ran = [m for m in ("numpy.f2py.crackfortran", "numpy.testing._private.utils", "unittest") if m in sys.modules]
import numpy
from numpy.testing import assert_allclose
assert_allclose(numpy.ones(2), 1.0)
import numpy.f2py
print(ran, "numpy.testing._private.utils" in sys.modules, callable(numpy.f2py.run_main))
"""


def test_scipy_imports_without_running_numpys_f2py_and_testing_and_they_work_when_used():
    out = subprocess.run([sys.executable, "-c", NUMPY_TOOLS_PROBE], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[] True True"


PLUGINS_PROBE = gemm_cli_probe('repr(os.environ.get("PYDANTIC_DISABLE_PLUGINS"))')


@pytest.mark.parametrize("given,expected", [(None, "'__all__'"), ("", "''")])
def test_the_command_line_looks_for_no_pydantic_plugins_unless_told(given, expected):
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    if given is not None:
        env["PYDANTIC_DISABLE_PLUGINS"] = given
    out = subprocess.run([sys.executable, "-c", PLUGINS_PROBE], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip().splitlines()[-1] == expected
