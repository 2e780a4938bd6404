"""A system file outside data/ can carry its own price or point at a priced one; without a price, cost
outputs say n/a with the reason instead of failing the command (issue 17)."""

import json

import pytest
import yaml
from typer.testing import CliRunner

from hnplan.catalog import load_catalog
from hnplan.cli import app

runner = CliRunner()


def _rack(tmp_path, **extra):
    raw = yaml.safe_load(load_catalog().path_of("systems", "gb200-nvl72").read_text())
    raw.update(id="my-rack", **extra)
    path = tmp_path / "my-rack.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return str(path)


def _tco(system):
    res = runner.invoke(app, ["tco", "--system", system, "--gpus", "144", "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_price_item_costs_like_the_priced_system(tmp_path):
    mine, ref = _tco(_rack(tmp_path, price_item="gb200-nvl72")), _tco("gb200-nvl72")
    for key in ("systems_usd", "capex_usd", "tco_usd", "usd_per_gpu_hour"):
        assert mine[key] == pytest.approx(ref[key])


def test_own_unit_price(tmp_path):
    # two racks at a quoted $3.0M each: systems capex $6.0M (144 GPUs = 2 x 72)
    d = _tco(_rack(tmp_path, unit_price_usd=3.0e6, assumptions={"unit_price_usd": "a vendor quote, 2026-11"}))
    assert d["systems_usd"] == pytest.approx(6.0e6)


def test_no_price_infer_says_na_with_the_reason(tmp_path):
    res = runner.invoke(
        app,
        [
            "infer",
            "--model",
            "llama3.1-8b",
            "--system",
            _rack(tmp_path),
            "--input-tokens",
            "1000",
            "--output-tokens",
            "200",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["usd_per_million_tokens"] is None and d["usd_per_gpu_hour"] is None
    assert d["tokens_per_s"] > 0  # the performance answer is still there
    assert "no price for 'my-rack'" in d["cost_note"] and "unit_price_usd" in d["cost_note"]


def test_no_price_tco_names_the_fix(tmp_path):
    res = runner.invoke(app, ["tco", "--system", _rack(tmp_path), "--gpus", "144"])
    assert res.exit_code == 2
    assert "no price for 'my-rack'" in res.stderr and "price_item" in " ".join(res.stderr.split())
