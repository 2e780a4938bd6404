"""Reading a sweep's dataset over two workloads: designs are compared within the model they train."""

import numpy as np
import pandas as pd
import pytest

from hnplan.errors import InputError
from hnplan.planning import design_space as ds


def _dataset() -> pd.DataFrame:
    """Two designs x two models x 4 draws. Per design and model (days, TCO [USD], facility power [W]):
    small cluster 8B (2, 40e6, 1e6), 70B (20, 40e6, 1e6); large cluster 8B (1, 80e6, 2e6), 70B (9, 80e6, 2e6):
    TCO and power belong to the cluster bought, the days to what it trains. The draws add -0.5..+0.5 days."""
    rows = []
    for system, gpus, tco, power, days in (
        ("small", 512, 40e6, 1e6, {"8b": 2, "70b": 20}),
        ("large", 1024, 80e6, 2e6, {"8b": 1, "70b": 9}),
    ):
        for model, d in days.items():
            for i, jitter in enumerate((-0.5, -0.2, 0.2, 0.5)):
                rows.append(
                    dict(
                        system=system,
                        gpus=gpus,
                        model=model,
                        global_batch_seqs=512,
                        seq_len=8192,
                        stack="megatron-core",
                        dtype="bf16",
                        tokens=1e12,
                        days_to_train=d + jitter,
                        tco_usd=tco * (1 + jitter / 10),
                        facility_power_w=power,
                        mfu=0.5,
                        error=None,
                        rate_factor=1 + jitter,
                        hardware_price_factor=1 + jitter / 10,
                        sample=i,
                    )
                )
    return pd.DataFrame(rows)


def test_pareto_front_and_cheapest_design_are_per_workload():
    df = ds.with_design(_dataset())
    summary = ds.design_summary(df)
    front = ds.design_pareto(summary)
    # across models the 8B designs dominated both 70B ones (same TCO and power, fewer days): within each
    # model, the small cluster is cheaper and lower-power and the large one faster: both on each front
    assert sorted(zip(front["workload"], front["gpus"])) == [("70b", 512), ("70b", 1024), ("8b", 512), ("8b", 1024)]
    table = ds.deadline_table(df, 10.0)
    with pytest.raises(InputError, match="2 workloads"):
        ds.cheapest_meeting(table, 0.9)
    # 8B: both meet 10 days in every draw, the small one is cheaper; 70B: only the large one (8.5-9.5 days)
    assert ds.cheapest_meeting(table, 0.9, "8b")["gpus"] == 512
    assert ds.cheapest_meeting(table, 0.9, "70b")["gpus"] == 1024
    text = ds.summary_text(summary, front, ds.sobol_indices(df), table, 10.0, 0.9)
    assert (
        "For **70b**: the cheapest design that trains within 10 days with probability at least 90% is "
        "**1,024 x large model=70b**" in text
    )
    assert (
        "For **8b**: the cheapest design that trains within 10 days with probability at least 90% is "
        "**512 x small model=8b**" in text
    )
    assert "2 of 2 designs are on the Pareto front" in text and "4 of 4" not in text


def test_sobol_text_counts_the_draws_per_design():
    # the text said "at 1 draws per design" (the rows per design of one output divided by the inputs)
    df = ds.with_design(_dataset())
    sobol = ds.sobol_indices(df)
    assert (sobol["draws"] == 4).all()
    assert np.allclose(sobol["noise_sd"], np.sqrt(2 * (2 - 1)) / 4)  # M = max(2, min(4 // 2, round(sqrt 4)))
    text = ds.summary_text(
        ds.design_summary(df), ds.design_pareto(ds.design_summary(df)), sobol, ds.deadline_table(df, 10.0), 10.0, 0.9
    )
    assert "at 4 draws per design" in text and "at 1 draws" not in text


def test_sobol_bars_carry_the_noise_band():
    from hnplan.plots.sweep import sobol_bars

    sobol = ds.sobol_indices(ds.with_design(_dataset()))
    fig = sobol_bars(sobol, "days_to_train", "time-to-train")
    assert len(fig.data) == 4  # one bar group per design
    for bar in fig.data:
        assert np.allclose(bar.error_y.array, 2 * np.sqrt(2) / 4) and bar.error_y.visible


def test_rows_of_spec_leave_out_earlier_seeds(tmp_path):
    # the dataset folder kept the seed-7 rows when the spec was re-run with seed 8: the notebook pooled both
    # (12 "draws" per design, two Latin hypercubes side by side); only the spec's current points are read
    import yaml

    from hnplan.planning.sweep import sweep_points

    spec = {
        "id": "two-seeds",
        "name": "two seeds",
        "sampling": "latin-hypercube",
        "samples": 3,
        "seed": 7,
        "fixed": {"model": "llama3.1-8b", "gpus": 64, "tokens": 1e11, "seq_len": 4096, "global_batch_seqs": 128},
        "axes": {"system": ["hgx-h100-ib-ndr"], "rate_factor": {"distribution": "uniform", "low": 0.5, "high": 2.5}},
    }
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(spec))
    old = sweep_points(path)
    path.write_text(yaml.safe_dump({**spec, "seed": 8}))
    new = sweep_points(path)
    assert not set(old["point_id"]) & set(new["point_id"])
    dataset = pd.concat([old, new.iloc[:2]], ignore_index=True)  # seed 8 stopped after two points
    rows, left_out, missing = ds.rows_of_spec(dataset, new)
    assert (len(rows), left_out, missing) == (2, 3, 1)
    assert set(rows["point_id"]) == set(new["point_id"].iloc[:2])


def test_a_dataset_without_the_specs_points_says_so():
    points = pd.DataFrame({"point_id": ["new1", "new2"]})
    with pytest.raises(InputError, match=r"holds none of the spec's 2 points \(1 rows of other specs"):
        ds.rows_of_spec(pd.DataFrame({"point_id": ["old1"]}), points)


def test_rows_of_another_catalog_are_counted():
    from hnplan.catalog import load_catalog

    now = load_catalog().content_hash()
    assert ds.other_catalog_rows(pd.DataFrame({"catalog_hash": [now, "0123456789ab", now]})) == 1
    from hnplan.planning.prediction_cache import source_fingerprint

    code = source_fingerprint()  # a row written before the column (None) is not known to be this code's
    assert ds.other_code_rows(pd.DataFrame({"code_fingerprint": [code, "fedcba9876543210", None]})) == 2
