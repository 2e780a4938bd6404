"""A system file outside data/ can carry its own price or point at a priced one; without a price, cost
outputs say n/a with the reason instead of failing the command (issue 17)."""

import json

import pandas as pd
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


def test_no_price_tco_says_na_and_names_the_fix(tmp_path):
    # the power and racks need no price (2 racks of 132 kW as gb200-nvl72); every cost that needs the system's
    # price is n/a with the reason; energy, facility build and the (priced) network stand, as for gb200-nvl72
    res = runner.invoke(app, ["tco", "--system", _rack(tmp_path), "--gpus", "144"])
    assert res.exit_code == 0, res.output
    text = " ".join(res.stdout.split())
    assert "capex │ n/a" in text and "TCO over 5 years │ n/a" in text and "$nan" not in text
    assert "cost n/a: no price for 'my-rack'" in text and "price_item" in text
    d, ref = _tco(_rack(tmp_path)), _tco("gb200-nvl72")
    assert d["capex_usd"] is None and d["usd_per_gpu_hour"] is None and "unit_price_usd" in d["cost_note"]
    assert (d["racks"], d["gpus_bought"]) == (ref["racks"], ref["gpus_bought"]) == (2, 144)
    assert d["it_power_kw"] == pytest.approx(ref["it_power_kw"])
    for k in ("energy_usd_per_year", "facility_usd", "network_usd"):
        assert d[k] == pytest.approx(ref[k]) and d[k] > 0, k
    assert d["systems_usd"] is None and d["maintenance_usd_per_year"] is None and d["tco_usd"] is None


def test_no_price_design_comparison_keeps_the_plan(tmp_path, cat):
    # the design comparison's time and power stand; capex and the run's cost are n/a, said in status
    from hnplan.planning.compare import compare_training_designs, verdict

    df = compare_training_designs("llama3.1-8b", [_rack(tmp_path), "gb200-nvl72"], 144, 1e11, 4096, 288, catalog=cat)
    mine, ref = df.iloc[0], df.iloc[1]
    assert mine["status"].startswith("ok") and "cost n/a" in mine["status"]
    assert mine["days"] == pytest.approx(ref["days"]) and mine["racks"] == ref["racks"]
    assert mine[["capex_musd", "run_musd", "usd_per_million_tokens"]].isna().all()
    assert "no price for 'my-rack'" in mine["cost_note"]
    text = verdict(df)
    assert "**gb200-nvl72** costs least to buy" in text and "cost n/a for my-rack: it has no price" in text
    assert "$nan" not in text and "nan" not in text.replace("nanosecond", "")


def test_no_price_sizing_keeps_the_count(tmp_path, cat):
    from hnplan.planning.sizing import size_designs, sizing_verdict

    df = size_designs("llama3.1-8b", [_rack(tmp_path)], 1e11, 10.0, 4096, 288, catalog=cat)
    row = df.iloc[0]
    assert row["status"] == "ok" and row["gpus"] % 72 == 0 and pd.isna(row["capex_usd"])
    assert "no price for 'my-rack'" in row["cost_note"]
    text = sizing_verdict(df)
    assert "n/a capex" in text and "cost n/a, it has no price" in text and "nan" not in text


def test_price_item_with_no_price_is_bad_input(tmp_path):
    # a price_item is the user's own statement of what the system costs: a typo in it is bad input (exit 2,
    # naming the file, the field and the nearest priced items), not a quiet "cost n/a" with exit 0
    path = _rack(tmp_path, price_item="gb200-nvl7")
    res = runner.invoke(app, ["tco", "--system", path, "--gpus", "144", "--json"])
    assert res.exit_code == 2, res.output
    err = json.loads(res.stdout)["error"]
    assert (err["kind"], err["field"], err["entry"]) == ("input", "price_item", "my-rack")
    assert "no price for 'gb200-nvl7'" in err["message"] and "nearest: gb200-nvl72" in err["message"]
    assert err["message"].startswith(f"--system: {path}: ")  # the flag that named the file, as check_refs says it
    res = runner.invoke(app, ["infer", "--model", "llama3.1-8b", "--system", path, "--input-tokens", "100"])
    assert res.exit_code == 2 and "field 'price_item'" in res.output and "Traceback" not in res.output
    res = runner.invoke(app, ["catalog", "validate", path, "--kind", "systems"])
    assert res.exit_code == 2 and "field 'price_item': no price for 'gb200-nvl7'" in " ".join(res.output.split())


def test_a_price_item_of_another_unit_size_is_refused(tmp_path):
    # an NVL72 rack copy costed as hgx-h100-ib-ndr: prices.yaml's $270k buys one 8-GPU server, and it was taken
    # for each 72-GPU rack, 2 x $270k = $540k of systems for 144 GPUs (an H100 server costs $33,750 a GPU there)
    path = _rack(tmp_path, price_item="hgx-h100-ib-ndr")
    want = (
        f"{path}: system 'my-rack', field 'price_item': 'hgx-h100-ib-ndr' is priced per unit of 8 GPUs, this "
        "system's unit is 72; name a priced system of 72-GPU units, or give the file its own unit_price_usd"
    )
    for argv in (["tco", "--system", path, "--gpus", "144"], ["catalog", "validate", path]):
        res = runner.invoke(app, argv, env={"COLUMNS": "1000"})  # no folds inside the path
        assert res.exit_code == 2, res.output
        assert want in " ".join(res.output.split()) and "Traceback" not in res.output
    # its own quote still prices it (a file of its own: the catalog keeps a file it has read)
    (quoted := tmp_path / "quoted").mkdir()
    d = _tco(_rack(quoted, price_item="hgx-h100-ib-ndr", unit_price_usd=3.0e6))
    assert d["systems_usd"] == pytest.approx(6e6)
