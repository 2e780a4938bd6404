"""Catalog loading, the required ids, and every validation error path."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hnplan.catalog import Catalog, validate_file
from hnplan.errors import CatalogError

REQUIRED = {
    "accelerators": ["a100-sxm-80gb", "h100-sxm", "h800-sxm", "h200-sxm", "b200", "gb200", "mi300x", "ascend-910c"],
    "systems": [
        "dgx-a100-hdr",
        "hgx-h100-ib-ndr",
        "hgx-h100-roce-400g",
        "hgx-h800-ib",
        "hgx-h200-ib-ndr",
        "hgx-b200-ib-xdr",
        "gb200-nvl72",
        "cloudmatrix-384",
        "seed-40card",
    ],
    "models": [
        "gpt3-175b",
        "llama2-7b",
        "llama2-70b",
        "llama3.1-8b",
        "llama3.1-70b",
        "llama3.1-405b",
        "mixtral-8x7b",
        "deepseek-v3",
        "megatron-1.7b",
        "megatron-3.6b",
        "megatron-7.5b",
        "megatron-18.4b",
        "megatron-39.1b",
        "megatron-76.1b",
        "megatron-145.6b",
        "megatron-310.1b",
        "megatron-529.6b",
        "megatron-1t",
    ],
}


def test_project_catalog_is_valid(cat):
    assert cat.validate() == []


@pytest.mark.parametrize("kind", sorted(REQUIRED))
def test_required_ids_present(cat, kind):
    assert set(REQUIRED[kind]) <= set(cat.ids(kind))


def test_every_system_resolves_and_is_priced(cat):
    for sid in cat.ids("systems"):
        s = cat.system(sid)
        assert cat.price(s.price_item or s.id).usd > 0  # a re-cabled twin is priced as its rack
        assert cat.accelerator(s.accelerator).hbm_gb > 0


def test_datasheet_traps(cat):
    h100 = cat.accelerator("h100-sxm")
    assert h100.dense_tflops["bf16"] == pytest.approx(989.4)  # dense, not the 1979 sparse figure
    assert h100.scaleup_bw_GBps_per_dir == 450  # NVLink 900 GB/s is bidirectional
    assert cat.accelerator("h800-sxm").scaleup_bw_GBps_per_dir == 200
    assert cat.system("hgx-h100-ib-ndr").nic_gbps == 400  # gigabits
    assert cat.system("gb200-nvl72").scaleup_domain_gpus == 72
    assert cat.system("cloudmatrix-384").scaleup_domain_gpus == 384


def test_seed_40card_matches_the_seed(cat):
    s = cat.system("seed-40card")
    acc = cat.accelerator(s.accelerator)
    assert s.unit_gpus == 40 and s.unit_power_kw == 150
    assert 40 * acc.dense_tflops["fp8"] == pytest.approx(28000, rel=0.01)  # 28 PFLOPS FP8
    assert 40 * acc.hbm_gb == pytest.approx(5760, rel=0.01)  # 5.76 TB HBM3
    assert cat.facility.pue_liquid.value <= 1.2


def test_unknown_id_suggests_nearest(cat):
    with pytest.raises(CatalogError, match="nearest: h100-sxm"):
        cat.accelerator("h100-sxn")
    with pytest.raises(CatalogError, match="llama3.1-405b"):
        cat.model("llama3-405b")


def test_entry_by_path(cat, tmp_path):
    raw = _load(cat.path_of("models", "llama3.1-8b"))
    raw.update(id="my-model", layers=16)
    raw.pop("params_b_published")  # half the layers: not the published 8B (a file keeping it is refused)
    p = tmp_path / "my-model.yaml"
    p.write_text(yaml.safe_dump(raw))
    m = cat.model(str(p))
    assert m.id == "my-model" and m.layers == 16


@pytest.mark.parametrize(
    "change,needle",
    [
        ({"hidden": 10**12}, "field 'hidden': Input should be less than or equal to 1048576"),
        ({"vocab": 10**9}, "field 'vocab': Input should be less than or equal to 16777216"),
        ({"layers": 10**6}, "field 'layers'"),
        # each dimension within its bound, together 1000 x (4 x 2**40 + 3 x 2**42) = 1.7e16 parameters
        ({"layers": 1000, "hidden": 2**20, "ffn_hidden": 2**22, "heads": 64}, "about 1.8e+16 parameters"),
    ],
)
def test_absurd_model_dimensions_are_refused_naming_the_field(cat, tmp_path, change, needle):
    """A typo such as ``hidden: 1e12`` is refused with the field named, not computed (the products of
    such dimensions overflow the time and memory arithmetic)."""
    raw = _load(cat.path_of("models", "llama3.1-8b"))
    raw.update(id="typo", **change)
    p = tmp_path / "typo.yaml"
    p.write_text(yaml.safe_dump(raw))
    with pytest.raises(CatalogError) as info:
        cat.model(str(p))
    assert needle in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    "change,field",
    [
        ({"nic_gbps": 1e300}, "nic_gbps"),
        ({"nics_per_node": 10**11}, "nics_per_node"),
        ({"gpus_per_rack": 10**9}, "gpus_per_rack"),
    ],
)
def test_absurd_system_figures_are_refused_naming_the_field(cat, tmp_path, change, field):
    raw = _load(cat.path_of("systems", "hgx-h100-ib-ndr"))
    raw.update(id="typo", **change)
    p = tmp_path / "typo.yaml"
    p.write_text(yaml.safe_dump(raw))
    with pytest.raises(CatalogError) as info:
        cat.system(str(p))
    assert f"field '{field}': Input should be less than or equal to" in str(info.value)


def test_published_models_are_far_inside_the_bounds(cat):
    from hnplan.catalog.schemas.workload import MAX_PARAMS

    assert max(m.params_bound() for m in cat.entries("models")) < MAX_PARAMS / 100


def _load(path):
    return yaml.safe_load(Path(path).read_text())


def _write(folder, name, raw):
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.mark.parametrize(
    "mutate,field,needle",
    [
        (lambda r: r.update(hbm_gib=80), "hbm_gib", "unknown key (did you mean 'hbm_gb'?)"),
        (lambda r: r.update(tdp_watts=r.pop("tdp_w")), "tdp_watts", "did you mean 'tdp_w'?); field 'tdp_w': required"),
        (lambda r: r.update(source="TODO"), "source", "placeholder"),
        (lambda r: r.update(source=""), "source", "at least 3"),
        (lambda r: r.pop("tdp_w"), "tdp_w", "required field is missing"),
        (lambda r: r.update(hbm_bw_TBps=-1), "hbm_bw_TBps", "greater than or equal to 0.01 [TB/s"),
        (lambda r: r.update(hbm_bw_TBps=1e300), "hbm_bw_TBps", "less than or equal to 100000"),
        (lambda r: r["dense_tflops"].update(bf16=1e12), "dense_tflops.bf16", "less than or equal to 10000000"),
        (lambda r: r["dense_tflops"].update(fp12=1.0), "dense_tflops.fp12", "'fp32'"),
        (lambda r: r.update(field_sources={}, assumptions={}), "(entry)", "calibration field"),
    ],
)
def test_bad_accelerator_file_names_path_entry_field(cat, data_copy, mutate, field, needle):
    raw = _load(cat.path_of("accelerators", "h100-sxm"))
    mutate(raw)
    path = _write(data_copy / "accelerators", "h100-sxm", raw)
    with pytest.raises(CatalogError) as info:
        Catalog(data_copy).accelerator("h100-sxm")
    msg = str(info.value)
    assert str(path) in msg and "'h100-sxm'" in msg and needle in msg
    assert info.value.field == field
    assert "\n" not in msg  # one line, every problem named


def test_bad_literal_lists_allowed_values(cat, data_copy):
    raw = _load(cat.path_of("systems", "gb200-nvl72"))
    raw["cooling"] = "immersion"
    _write(data_copy / "systems", "gb200-nvl72", raw)
    with pytest.raises(CatalogError, match=r"cooling.*'air' or 'liquid'"):
        Catalog(data_copy).system("gb200-nvl72")


def test_dangling_reference_is_reported(cat, data_copy):
    raw = _load(cat.path_of("systems", "gb200-nvl72"))
    raw["accelerator"] = "no-such-gpu"
    _write(data_copy / "systems", "gb200-nvl72", raw)
    problems = Catalog(data_copy).validate()
    assert any("gb200-nvl72" in p and "accelerator" in p and "no-such-gpu" in p for p in problems)


def test_validate_reports_every_bad_file(cat, data_copy):
    for acc in ("h100-sxm", "b200"):
        raw = _load(cat.path_of("accelerators", acc))
        raw["speed"] = "fast"
        _write(data_copy / "accelerators", acc, raw)
    problems = Catalog(data_copy).validate()
    assert sum("h100-sxm" in p for p in problems) == 1 and sum("b200" in p for p in problems) == 1


def test_id_must_match_file_name(cat, data_copy):
    raw = _load(cat.path_of("models", "llama2-7b"))
    _write(data_copy / "models", "llama2-7b-copy", raw)
    with pytest.raises(CatalogError, match="differs from the file name"):
        Catalog(data_copy).model("llama2-7b-copy")
    # entries are parsed on demand: a bad file does not break lookups of the others, validate() lists it
    assert Catalog(data_copy).model("llama2-7b").id == "llama2-7b"
    assert any("llama2-7b-copy" in p and "differs from the file name" in p for p in Catalog(data_copy).validate())


def test_not_yaml(data_copy):
    (data_copy / "models" / "broken.yaml").write_text("id: [unclosed\n")
    with pytest.raises(CatalogError, match="not valid YAML"):
        Catalog(data_copy).model("broken")


def test_prices_are_dated_and_sourced(cat):
    for p in cat.prices:
        assert p.as_of.year >= 2020 and len(p.source) > 10


def test_validate_file_infers_kind(cat):
    assert validate_file(cat.path_of("switches", "qm9700")).ports == 64


def test_cli_validate_exit_codes(data_copy):
    ok = subprocess.run(
        [sys.executable, "-m", "hnplan.cli", "catalog", "validate", str(data_copy)], capture_output=True, text=True
    )
    assert ok.returncode == 0, ok.stderr
    raw = _load(data_copy / "models" / "llama2-7b.yaml")
    raw["activation"] = "relu"
    (data_copy / "models" / "llama2-7b.yaml").write_text(yaml.safe_dump(raw))
    bad = subprocess.run(
        [sys.executable, "-m", "hnplan.cli", "catalog", "validate", str(data_copy)], capture_output=True, text=True
    )
    assert bad.returncode == 2
    err = " ".join(bad.stderr.split())  # rich wraps long lines
    assert "llama2-7b" in err and "activation" in err and "'gelu' or 'swiglu'" in err


def test_readme_schema_tables_are_current():
    # README's tables are generated from the schemas; regenerate with tools/update_readme_schema.py
    from hnplan.catalog.docs import BEGIN, END, all_schemas_markdown

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    block = readme.split(BEGIN)[1].split(END)[0].strip()
    assert block == all_schemas_markdown().strip()


def test_reference_tables_load_with_sources(cat):
    t = cat.reference("training_measurements")
    mega = t[t["run_id"].str.startswith("megatron21_t1_")]
    import pandas as pd

    assert len(mega) == 10 and pd.to_numeric(mega["achieved_tflops_per_gpu"]).between(130, 170).all()
    assert t["source"].notna().all()
    with pytest.raises(CatalogError, match="available: comm_at_scale, comm_measurements"):
        cat.reference("nccl")


def test_typo_in_a_nested_field_names_the_nearest_key(cat, tmp_path):
    """A typo'd key inside a nested entry (a job class's distribution) is named with the nearest
    allowed key of that nested schema, in one line."""
    from hnplan.catalog.mixes import cluster_mix

    raw = _load(cat.root / "cluster_mixes" / "default.yaml")
    dist = raw["classes"][0]["duration_s"]
    dist["sigmaa"] = dist.pop("sigma")
    path = _write(tmp_path, "typo", raw)
    with pytest.raises(CatalogError) as info:
        cluster_mix(str(path), cat)
    msg = str(info.value)
    assert "field 'classes.0.duration_s.sigmaa': unknown key (did you mean 'classes.0.duration_s.sigma'?)" in msg
    assert "\n" not in msg and str(path) in msg


def test_a_retired_key_names_what_replaced_it(cat, tmp_path):
    """An interconnect file written for an older release (``collective_base_latency_us``, retired when NCCL's
    own latency model came in) fails in one line that names the key, the file and the field to set instead."""
    raw = _load(cat.path_of("interconnects", "nvlink4"))
    raw["collective_base_latency_us"] = 14.0
    path = _write(tmp_path, "nvlink4", raw)
    with pytest.raises(CatalogError) as info:
        validate_file(path, kind="interconnects")
    msg = str(info.value)
    assert "field 'collective_base_latency_us': unknown key (retired: NCCL's own latency model" in msg
    assert "set 'nccl_link' (nvlink or net) instead" in msg
    assert "\n" not in msg and str(path) in msg


def test_catalog_modules_stay_small_and_keep_their_import_paths():
    """The catalog package's modules stay under the project's ~500-line bound, and the loader's public names
    (and the names other modules import from it) stay importable from ``hnplan.catalog.loader``; the one-file
    check is the package's (``hnplan.catalog.validate_file``), from the checks above the loader."""
    import hnplan.catalog
    from hnplan.catalog import checks, loader

    for name in ("Catalog", "load_catalog", "data_dir", "parse_entry", "read_yaml", "_read_yaml"):
        assert hasattr(loader, name), name
    assert hnplan.catalog.validate_file is checks.validate_file
    folder = Path(hnplan.catalog.__file__).parent
    long = {p.name: n for p in folder.rglob("*.py") if (n := len(p.read_text().splitlines())) > 500}
    assert not long, long


def test_a_relative_path_in_a_system_file_found_beside_it_is_named(cat, tmp_path, monkeypatch):
    """A system file naming ``accelerator: ./my-gpu.yaml`` is read from the working folder, as every path is;
    run from elsewhere, the message said only 'my-gpu.yaml: file not found'. It now names the file beside the
    system file and the path to write."""
    from typer.testing import CliRunner

    from hnplan.cli import app

    mine = tmp_path / "mine"
    mine.mkdir()
    acc = yaml.safe_load(Path(cat.path_of("accelerators", "h100-sxm")).read_text())
    (mine / "my-gpu.yaml").write_text(yaml.safe_dump({**acc, "id": "my-gpu"}))
    sys_ = yaml.safe_load(Path(cat.path_of("systems", "hgx-h100-ib-ndr")).read_text())
    (mine / "my-cluster.yaml").write_text(
        yaml.safe_dump({**sys_, "id": "my-cluster", "accelerator": "./my-gpu.yaml", "price_item": "hgx-h100-ib-ndr"})
    )
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["catalog", "validate", "mine/my-cluster.yaml"])
    out = " ".join(res.output.split())
    assert res.exit_code == 2 and "Traceback" not in out, out
    assert (
        "field 'accelerator': my-gpu.yaml: file not found; a path in a file is read from the folder hnplan runs" in out
    )
    assert f"({tmp_path}), as on the command line, not from the file's folder: write mine/my-gpu.yaml" in out
    argv = ["train", "--model", "llama3.1-8b", "--gpus", "8", "--seq-len", "8192", "--global-batch-size", "8"]
    res = CliRunner().invoke(app, [*argv, "--system", "mine/my-cluster.yaml"])
    assert res.exit_code == 2 and "write mine/my-gpu.yaml" in " ".join(res.output.split())
    monkeypatch.chdir(mine)  # from the file's own folder the path holds
    res = CliRunner().invoke(app, [*argv, "--system", "my-cluster.yaml", "--json"])
    assert res.exit_code == 0, res.output
