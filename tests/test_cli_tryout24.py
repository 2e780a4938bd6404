"""What a trial of hnplan by an infrastructure architect (GB200 NVL72 against 8-GPU H100/B200 servers) found:
ids typed in another case, the option named as typed, the cluster table's brackets."""

import json

import pytest
from typer.testing import CliRunner

from hnplan.catalog import Catalog
from hnplan.cli import app
from hnplan.errors import CatalogError

try:  # click before 8.2 mixes stderr into the output unless told not to
    runner = CliRunner(mix_stderr=False)
except TypeError:
    runner = CliRunner()


def one_line(text: str) -> str:
    return " ".join(text.split())


# -- ids that differ from a catalog id only in case ------------------------------------------------------------


def test_an_id_in_another_case_resolves_to_the_lower_kebab_case_id():
    """Catalog ids are lower-kebab-case file names; an id typed as a datasheet spells it names the same entry
    and the same design object, while an id that is not one in any case is still refused with the nearest."""
    cat = Catalog()
    assert cat.resolve_id("systems", "HGX-H100-IB-NDR") == "hgx-h100-ib-ndr"
    assert cat.resolve_id("models", "Llama3.1-405B") == "llama3.1-405b"
    assert cat.resolve_id("accelerators", "H100-SXM") == "h100-sxm"
    assert cat.resolve_id("systems", "gb200-nvl27") is None
    assert cat.model("Llama3.1-405B").id == "llama3.1-405b"
    assert cat.model("Llama3.1-405B").layers == 126  # Llama 3 paper, Table 3
    assert cat.design("GB200-NVL72") is cat.design("gb200-nvl72")
    with pytest.raises(CatalogError, match=r"unknown system id 'GB200-NVL27'; nearest: gb200-nvl72"):
        cat.system("GB200-NVL27")


def test_train_with_mixed_case_ids_is_the_plan_of_the_lower_case_ids():
    """``--model Llama3.1-8B --system HGX-H100-IB-NDR`` was refused (``unknown model id 'Llama3.1-8B'; nearest:
    llama3.1-8b``); it is now the same answer as the catalog's ids, to the last digit, named by the catalog id."""
    plan = ["--gpus", "64", "--tp", "1", "--pp", "1", "--dp", "64", "--seq-len", "8192", "--json"]
    plan += ["--global-batch-tokens", "4Mi"]  # 512 sequences of 8,192 tokens, 8 per DP rank
    lower = runner.invoke(app, ["train", "--model", "llama3.1-8b", "--system", "hgx-h100-ib-ndr", *plan])
    mixed = runner.invoke(app, ["train", "--model", "Llama3.1-8B", "--system", "HGX-H100-IB-NDR", *plan])
    assert lower.exit_code == mixed.exit_code == 0, mixed.stderr
    a, b = json.loads(lower.stdout), json.loads(mixed.stdout)
    assert a["step_time_s"] == b["step_time_s"] > 0
    assert (b["model"], b["system"]) == ("llama3.1-8b", "hgx-h100-ib-ndr")


def test_an_unknown_id_is_still_refused_with_the_nearest_ids():
    r = runner.invoke(app, ["train", "--model", "Llama3.1-406B", "--system", "hgx-h100-ib-ndr", "--gpus", "8"])
    assert r.exit_code == 2
    assert one_line(r.stderr) == (
        "error: --model: unknown model id 'Llama3.1-406B'; nearest: llama3.1-405b, llama3.1-70b, llama3.1-8b"
    )


def test_cluster_reference_design_speed_in_another_case(cat):
    """``cluster simulate --system GB200-NVL72 --reference-system hgx-h100-ib-ndr`` took the upper-case id for a
    file path, found no plan for it and kept every traced duration (1.00x); the ratio is that of the ids,
    2.113x on 72 GPUs (192,014 / 90,897 tokens/s, tests/test_cluster_design_speed.py)."""
    from hnplan.cluster import runtime

    ratio = runtime.design_speed_ratio("GB200-NVL72", "HGX-H100-IB-NDR", 72, catalog=cat)
    assert ratio == pytest.approx(192_013.71 / 90_896.85, rel=1e-3)
