"""Tidy tables and figures of the memory model: one row per system or grid cell, plots read them."""

import pytest

from hnplan.planning.memory import (
    STATUSES,
    breakdown_table,
    fit_grid,
    memory_summary,
    memory_verdict,
    tiers_frame,
)
from hnplan.plots import fit_map, memory_breakdown_bars

SYSTEMS = ["gb200-nvl72", "hgx-h100-ib-ndr"]


@pytest.fixture(scope="module")
def table():
    return breakdown_table("llama3.1-70b", SYSTEMS, "train", seq_len=8192, tp=8, pp=1, dp=8, recompute="selective")


def test_breakdown_table(table):
    assert list(table["system"]) == SYSTEMS and table.attrs["unit"] == "GiB"
    # the same plan needs the same memory on both; only the HBM line and the status differ
    assert table["total_gib"].nunique() == 1
    assert list(table["status"]) == ["fits", "spills"]
    assert table.loc[1, "hbm_gib"] == pytest.approx(79.11)
    assert table.loc[0, "hbm_gib"] == pytest.approx(185.03)  # GB200's visible capacity (nvidia-smi 189,471 MiB)


def test_verdict_reads_the_table(table):
    text = memory_verdict(table)
    assert f"{table.loc[0, 'total_gib']:,.1f} GiB" in text
    assert "fits" in text and "spills" in text and "s per step" in text


def test_fit_grid_train_divides_gpus():
    g = fit_grid(
        "llama3.1-70b", "hgx-h100-ib-ndr", "train", gpus=32, tps=(1, 8), pps=(1, 2, 64), seq_len=8192, tp=99
    )  # the grid's own tp is ignored
    assert set(zip(g["tp"], g["pp"])) == {(1, 1), (1, 2), (8, 1), (8, 2)}
    assert (g["tp"] * g["pp"] * g["dp"] == 32).all()
    assert set(g["status"]) <= set(STATUSES)
    row = g[(g.tp == 8) & (g.pp == 2)].iloc[0]
    assert row.total_gib == pytest.approx(memory_summary("llama3.1-70b", "train", 8192, tp=8, pp=2, dp=2)["total_gib"])


def test_fit_grid_inference_monotone():
    g = fit_grid("llama3.1-8b", "hgx-h100-ib-ndr", "inference", batches=(1, 64), contexts=(4096, 131072))
    assert len(g) == 4
    big = g[(g.batch == 64) & (g.context == 131072)].iloc[0]
    assert big.status == "spills"  # 8M tokens x 128 KiB = 1 TiB of KV cache: host and NVMe
    assert g.sort_values("total_gib")["total_gib"].is_monotonic_increasing


def test_tiers_frame():
    df = tiers_frame(SYSTEMS)
    assert list(df.columns) == ["system", "tier", "capacity_gib", "bw_GBps", "link"]
    assert df[(df.system == "gb200-nvl72") & (df.tier == "host")]["bw_GBps"].item() == 225


def test_figures_plot_the_tables(table):
    fig = memory_breakdown_bars(table)
    bars = [t for t in fig.data if t.type == "bar"]
    assert {b.name for b in bars} == {"params", "grads", "optimizer", "activations", "overhead"}
    hbm = [t for t in fig.data if t.type == "scatter"]
    assert [t.y[0] for t in hbm] == pytest.approx(list(table["hbm_gib"]))
    assert fig.layout.yaxis.title.text == "memory per GPU [GiB]"
    g = fit_grid("llama3.1-8b", "hgx-h100-ib-ndr", "inference", batches=(1, 64), contexts=(4096, 131072))
    hm = fit_map(g, "context", "batch").data[0]
    assert hm.z.shape == (2, 2)
    assert "spills" in hm.text[1][1] and "GiB" in hm.text[1][1]
