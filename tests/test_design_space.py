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
    # M = max(2, min(4 // 2, round(sqrt 4))) = 2, c = 1 / 2, F(0.95; 1, 2) = 18.513: c (F - 1) / (c F + 1)
    assert np.allclose(sobol["noise_floor"], 0.5 * 17.513 / (0.5 * 18.513 + 1), atol=1e-4)
    text = ds.summary_text(
        ds.design_summary(df), ds.design_pareto(ds.design_summary(df)), sobol, ds.deadline_table(df, 10.0), 10.0, 0.9
    )
    assert "at 4 draws per design" in text and "at 1 draws" not in text


def test_noise_floor_by_hand_and_by_simulation():
    """The band shown was two standard deviations of the index of an input that does not matter (0.47 at 6
    draws), drawn as error bars as if a confidence interval; the floor is that null's 95th percentile."""
    # n = 6: M = max(2, min(3, round(sqrt 6))) = 2, c = (M - 1) / (n - M) = 1/4, F(0.95; 1, 4) = 7.7086
    # (F tables): floor = c (F - 1) / (c F + 1) = 1.67715 / 2.92715
    assert ds.first_order_noise_floor(6) == pytest.approx(1.67715 / 2.92715, abs=1e-4)  # 0.573
    # n = 50: M = 7, c = 6/43, F(0.95; 6, 43) = 2.3185
    assert ds.first_order_noise_floor(50) == pytest.approx((6 / 43) * 1.3185 / ((6 / 43) * 2.3185 + 1), abs=1e-4)
    # an output that ignores the input: 5 % of its indices exceed the floor (3,000 samples: 0.05 +- 0.012)
    rng = np.random.default_rng(3)
    for n in (6, 50):
        floor = ds.first_order_noise_floor(n)
        above = [ds.first_order_index(rng.random(n), rng.normal(size=n)) > floor for _ in range(3000)]
        assert np.mean(above) == pytest.approx(0.05, abs=0.012)
    with pytest.raises(InputError, match="at least 4"):
        ds.first_order_noise_floor(3)


def _one_input_dataset(n: int) -> pd.DataFrame:
    """One design, ``n`` draws of three inputs; time-to-train depends on rate_factor only, TCO on the hardware
    price only."""
    rng = np.random.default_rng(11)
    rate, price, pue = rng.random(n), rng.random(n), rng.random(n)
    return pd.DataFrame(
        dict(
            system="hgx",
            gpus=1024,
            model="m",
            global_batch_seqs=512,
            seq_len=8192,
            stack="megatron-core",
            dtype="bf16",
            tokens=1e12,
            days_to_train=30 * (1 + rate),
            tco_usd=1e8 * (1 + price),
            facility_power_w=1e6,
            mfu=0.5,
            error=None,
            rate_factor=1 + rate,
            hardware_price_factor=1 + price,
            pue=1.1 + 0.3 * pue,
            sample=np.arange(n),
        )
    )


def test_an_output_of_one_input_marks_the_others_as_noise():
    df = ds.with_design(_one_input_dataset(50))
    sobol = ds.sobol_indices(df).set_index(["output", "input"])
    floor = ds.first_order_noise_floor(50)  # 0.139
    assert (sobol["noise_floor"] == floor).all()
    days, tco = sobol.loc["days_to_train"], sobol.loc["tco_usd"]
    # the one input: the output is a function of it, S1 = 1 less the finite-class loss (7 classes of ~7 draws)
    assert days.loc["rate_factor", "S1"] > 0.9 and days.loc["rate_factor", "above_noise"]
    assert tco.loc["hardware_price_factor", "S1"] > 0.9 and tco.loc["hardware_price_factor", "above_noise"]
    # the others: exact index 0, estimated below the floor and marked not distinguishable from zero
    for out, one in (("days_to_train", "rate_factor"), ("tco_usd", "hardware_price_factor")):
        others = sobol.loc[out].drop(index=one)
        assert len(others) == 2 and (others["S1"] < floor).all() and not others["above_noise"].any()
    table = ds.sobol_table(ds.sobol_indices(df), {"days_to_train": "time to train: S1 [-]"})
    assert not table.loc["rate_factor", "time to train: S1 [-]"].endswith("(noise)")
    assert table.loc["pue", "time to train: S1 [-]"].endswith("(noise)")
    assert table.loc["pue", "tco_usd: S1 [-]"].endswith("(noise)")
    text = ds.summary_text(
        ds.design_summary(df),
        ds.design_pareto(ds.design_summary(df)),
        ds.sobol_indices(df),
        ds.deadline_table(df, 60.0),
        60.0,
        0.9,
    )
    (line,) = [x for x in text.splitlines() if "time-to-train is driven most by" in x]
    assert "**failure-rate factor** (first-order Sobol index" in line and ", then" not in line  # the others: noise
    assert (
        f"at 50 draws per design the noise floor is {floor:.2f} (an input that does not matter scores below it 95%"
        in (text)
    )


def test_no_input_above_the_floor_is_said_so():
    # 6 draws: the floor is 0.57; an output with no dependence on any input
    df = _one_input_dataset(6)
    df["days_to_train"] = 30 + np.random.default_rng(5).normal(size=6)
    sobol = ds.sobol_indices(ds.with_design(df))
    days = sobol[sobol["output"] == "days_to_train"]
    assert not days["above_noise"].any()
    text = ds.summary_text(
        ds.design_summary(ds.with_design(df)),
        ds.design_pareto(ds.design_summary(ds.with_design(df))),
        sobol,
        ds.deadline_table(ds.with_design(df), 60.0),
        60.0,
        0.9,
    )
    assert "No sampled input is distinguishable from zero for time-to-train" in text
    assert "at 6 draws per design the noise floor is 0.57" in text


def test_sobol_bars_show_the_noise_floor_not_error_bars():
    from hnplan.plots.sweep import sobol_bars

    df = ds.with_design(_one_input_dataset(50))
    sobol = ds.sobol_indices(df)
    fig = sobol_bars(sobol, "days_to_train", "time-to-train")
    (bar,) = fig.data  # one design
    assert bar.error_y.array is None  # no band around each bar (it was read as a confidence interval)
    shapes = dict(zip(bar.x, bar.marker.pattern.shape, strict=True))
    assert shapes == {"failure-rate factor": "", "hardware price factor": "/", "PUE": "/"}  # hatched: noise
    (band,) = fig.layout.shapes
    assert (band.y0, band.y1) == (0, pytest.approx(ds.first_order_noise_floor(50)))
    assert "noise floor 0.14 at 50 draws per design" in fig.layout.annotations[0].text


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
