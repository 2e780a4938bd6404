"""Shared fixtures: the project catalog, and a throw-away copy of data/ for error-path tests."""

import shutil
from pathlib import Path

import pytest

from hnplan.catalog import Catalog, load_catalog

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def cat() -> Catalog:
    return load_catalog()


@pytest.fixture()
def data_copy(tmp_path) -> Path:
    dst = tmp_path / "data"
    shutil.copytree(ROOT / "data", dst)
    return dst
