"""Shared fixtures: the project catalog, and a throw-away copy of data/ for error-path tests."""

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import settings

from hnplan.catalog import Catalog, load_catalog

# property tests check values, not speed (speed targets live in benchmarks/): on a loaded 2-core CI machine a
# first example that also pays a module's import can take 0.5 s, which hypothesis's 200 ms deadline calls a failure
settings.register_profile("hnplan", deadline=None)
settings.load_profile("hnplan")

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def cat() -> Catalog:
    return load_catalog()


@pytest.fixture()
def data_copy(tmp_path) -> Path:
    dst = tmp_path / "data"
    shutil.copytree(ROOT / "data", dst)
    return dst


@pytest.fixture(autouse=True, scope="session")
def _own_cache_dir(tmp_path_factory):
    # the tests' cached predictions (hnplan.planning.prediction_cache) in a folder of their own, not the user's
    old = os.environ.get("HNPLAN_CACHE_DIR")
    os.environ["HNPLAN_CACHE_DIR"] = str(tmp_path_factory.mktemp("hnplan-cache"))
    yield
    if old is None:
        os.environ.pop("HNPLAN_CACHE_DIR", None)
    else:
        os.environ["HNPLAN_CACHE_DIR"] = old
