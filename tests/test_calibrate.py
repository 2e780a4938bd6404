"""``hnplan calibrate``: a stack's efficiencies fitted to measured runs (hnplan.planning.calibrate).

The round trips generate "measured" runs from a stack whose GEMM efficiency (and TP overlap) are known,
by the same planner, and check that the calibration recovers them within 1 %: the step-time model is
then exact for the data, so any error is the fit's. Small runs (Llama 3.1 8B on 8-32 H100) keep each
calibration to a few seconds.
"""

import json
import math

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from hnplan.catalog import load_catalog
from hnplan.cli import app
from hnplan.comm import collective, place_group
from hnplan.errors import CatalogError, InputError
from hnplan.planning.calibrate import calibrate
from hnplan.planning.calibrate_fit import Parameter, fit, identify
from hnplan.planning.calibrate_write import write_calibration
from hnplan.planning.training import search_plans

runner = CliRunner()
SYSTEM = "hgx-h100-ib-ndr"
BASE = dict(model="llama3.1-8b", system=SYSTEM, seq_len=4096, global_batch_seqs=64, dtype="bf16")
RUNS = [
    dict(id="r8", gpus=8, fixed=dict(tp=1, pp=1)),
    dict(id="r16", gpus=16, fixed=dict(tp=4, pp=1)),
    dict(id="r32", gpus=32, fixed=dict(tp=8, pp=1)),
]
TRUE_MATMUL = 0.62
TRUE_TP_OVERLAP = 0.5


def _truth_stack(tmp_path, stack: str) -> str:
    """The catalog stack with a known H100 bf16 GEMM efficiency (and TP overlap where it overlaps)."""
    st = load_catalog().stack(stack)
    d = st.model_dump(mode="json", exclude_unset=True)
    d["matmul_efficiency"] = {**(d.get("matmul_efficiency") or {}), "h100-sxm": {"bf16": TRUE_MATMUL}}
    d.setdefault("field_sources", {})["matmul_efficiency"] = "synthetic truth of a test"
    if st.tp_comm:
        d["tp_comm_overlap_fraction"] = TRUE_TP_OVERLAP
    path = tmp_path / f"{stack}-truth.yaml"
    path.write_text(yaml.safe_dump(d))
    return str(path)


def _measured_runs(tmp_path, stack: str, runs=RUNS, metric="step_time_s") -> str:
    """A runs file whose published values are the planner's with the truth stack."""
    truth = _truth_stack(tmp_path, stack)
    out = []
    for r in runs:
        run = {**BASE, **r}
        best = search_plans(
            run["model"],
            SYSTEM,
            run["gpus"],
            run["seq_len"],
            run["global_batch_seqs"],
            "bf16",
            run["fixed"],
            stack=truth,
        ).iloc[0]
        value = best["tokens_per_s"] / run["gpus"] if metric == "tokens_per_s_per_gpu" else best[metric]
        out.append({**run, "metric": metric, "published": float(value)})
    path = tmp_path / f"{stack}-runs-{len(runs)}.yaml"
    path.write_text(yaml.safe_dump(out))
    return str(path)


@pytest.fixture(scope="module")
def core3(tmp_path_factory):
    """Three runs of the default stack (no TP overlap): one parameter, the GEMM efficiency."""
    tmp = tmp_path_factory.mktemp("core3")
    return calibrate(_measured_runs(tmp, "megatron-core", metric="tokens_per_s_per_gpu"), "megatron-core"), tmp


@pytest.fixture(scope="module")
def overlap3(tmp_path_factory):
    """Three runs of a stack with TP overlap at TP 1, 4 and 8: GEMM efficiency and TP overlap fraction."""
    tmp = tmp_path_factory.mktemp("overlap3")
    return calibrate(_measured_runs(tmp, "nemo-mlperf-v50"), "nemo-mlperf-v50"), tmp


def _param(cal, name):
    return next(p for p in cal.parameters if p.name == name)


def test_round_trip_recovers_gemm_efficiency(core3):
    cal, _ = core3
    p = _param(cal, "matmul_efficiency.h100-sxm.bf16")
    assert p.fitted and p.initial != pytest.approx(TRUE_MATMUL, rel=0.05)
    assert p.value == pytest.approx(TRUE_MATMUL, rel=0.01)
    # the catalog efficiency (0.737) predicts the measured runs too fast; the fitted one reproduces them
    assert (cal.runs["error_before_pct"] > 5).all()
    assert np.abs(cal.runs["error_after_pct"]).max() < 0.5
    assert [p.name for p in cal.parameters] == ["matmul_efficiency.h100-sxm.bf16"]  # no TP overlap in this stack


def test_round_trip_recovers_gemm_efficiency_and_tp_overlap(overlap3):
    cal, _ = overlap3
    mm, tp = _param(cal, "matmul_efficiency.h100-sxm.bf16"), _param(cal, "tp_comm_overlap_fraction")
    assert mm.fitted and tp.fitted
    assert mm.value == pytest.approx(TRUE_MATMUL, rel=0.01)
    assert tp.value == pytest.approx(TRUE_TP_OVERLAP, rel=0.01)
    assert tp.initial == 0.75  # the stack's own value, which the runs move
    slow = _param(cal, "overlap_gemm_slowdown")  # only (1 - slowdown) x fraction enters a step time
    assert not slow.fitted and slow.value == slow.initial and "cannot separate" in slow.note
    assert np.abs(cal.runs["error_after_pct"]).max() < 0.5


def test_leave_one_out_on_three_runs(overlap3):
    cal, _ = overlap3
    assert list(cal.runs["id"]) == ["r8", "r16", "r32"]
    # exact synthetic data: each run is predicted from the other two within 1 %
    assert np.abs(cal.runs["loo_error_pct"]).max() < 1.0
    # with r8 (TP 1, no TP communication) left out, TP 4 and TP 8 still separate the two parameters
    r8 = cal.runs.set_index("id").loc["r8"]
    assert "matmul_efficiency.h100-sxm.bf16" in r8["loo_note"] and "tp_comm_overlap_fraction" in r8["loo_note"]
    assert cal.rms_pct("loo_error_pct") < 1.0


def test_trial_reads_the_planners_fastest_fitting_row(tmp_path, monkeypatch):
    """A trial evaluates its candidates through the evaluator's columns (no DataFrame): its row is, number
    for number, the fastest fitting row of evaluate_plans for the same trial job (the first of equal step
    times): at the stack's values, with a fitted GEMM efficiency and TP overlap, and with scaled links."""
    import hnplan.planning.calibrate as calibrate_module
    import hnplan.planning.calibrate_runs as runs_module  # where a trial calls the evaluator
    from hnplan.catalog.runs import measured_runs
    from hnplan.planning.training import evaluate_plans

    trials = []
    columns = runs_module.evaluate_columns

    def spy(job, cols, plans, **kw):
        trials.append(job)
        return columns(job, cols, plans, **kw)

    monkeypatch.setattr(runs_module, "evaluate_columns", spy)
    cat = load_catalog()
    st = cat.stack("nemo-mlperf-v50")
    path = tmp_path / "runs.yaml"
    r16 = {**BASE, "id": "r16", "gpus": 16, "fixed": dict(tp=4, pp=1), "metric": "step_time_s", "published": 1.0}
    path.write_text(yaml.safe_dump([r16]))
    (run,) = measured_runs(path, st.id)
    m = calibrate_module._RunModel(run, st, cat)
    fitted = {m.matmul_key: 0.62, "tp_comm_overlap_fraction": 0.5}
    scales = {(SYSTEM, "scaleup"): 0.8, (SYSTEM, "scaleout"): 0.9}
    for values, links in (({}, {}), (fitted, {}), (fitted, scales)):
        row = m.best(values, links)
        df = evaluate_plans(trials[-1], m.candidates)
        want = df.loc[df["step_time_s"].idxmin()]
        assert set(row) == {*df.columns, "tokens_per_s_per_gpu"}
        assert all(row[k] == want[k] for k in df.columns)
        assert row["tokens_per_s_per_gpu"] == want["tokens_per_s"] / 16
    assert len(trials) == 3 and len({r["step_time_s"] for r in m._memo.values()}) == 3


@pytest.mark.parametrize(
    "stack,gpus,fixed",
    [
        ("megatron-core", 16, dict(tp=4, pp=1)),
        ("nemo-mlperf-v50", 32, None),  # ZeRO-1 only: the stack's filter on the candidates
        ("pytorch-eager", 16, dict(recompute="full")),
        ("megatron-lm-2021", 16, None),  # no selective recomputation: the filter on the modes
    ],
)
def test_fitting_plans_are_the_rankings_fitting_rows(stack, gpus, fixed):
    """The pandas-free candidates a calibration evaluates (fitting_plans) are rank_plans' fitting rows, in its
    order, and evaluate to the same numbers; candidate_columns holds candidate_frame's rows."""
    from hnplan.planning.training import PLAN_FIELDS, candidate_frame, make_job, rank_plans
    from hnplan.planning.training.candidates import candidate_columns, candidate_table
    from hnplan.planning.training.evaluate import evaluate_columns
    from hnplan.planning.training.search import fitting_plans

    cat = load_catalog()
    job = make_job("llama3.1-8b", SYSTEM, gpus, 4096, 64, "bf16", cat, stack=stack)
    ranked = rank_plans(job, fixed)
    want = ranked[ranked["fits"]].reset_index(drop=True)
    cols, plans = fitting_plans(job, fixed)
    assert len(plans) == len(want) > 0
    for k in PLAN_FIELDS:
        assert list(cols[k]) == list(want[k]), k
    got = evaluate_columns(job, cols, plans)
    assert np.array_equal(np.broadcast_to(got["step_time_s"], len(want)), want["step_time_s"].to_numpy())
    args = (job.model, job.system, gpus, 4096, 64, fixed)
    assert candidate_table(*candidate_columns(*args)).equals(candidate_frame(*args))


def test_one_run_fits_one_parameter(tmp_path):
    runs = _measured_runs(tmp_path, "nemo-mlperf-v50", runs=RUNS[2:])
    cal = calibrate(runs, "nemo-mlperf-v50")
    mm, tp = _param(cal, "matmul_efficiency.h100-sxm.bf16"), _param(cal, "tp_comm_overlap_fraction")
    assert mm.fitted and not tp.fitted
    assert tp.value == tp.initial == 0.75 and "1 runs identify at most 1 parameter" in tp.note
    # one run, one parameter: reproduced exactly, and no leave-one-out
    assert abs(cal.runs["error_after_pct"].iloc[0]) < 0.1
    assert math.isnan(cal.runs["loo_error_pct"].iloc[0]) and math.isnan(cal.rms_pct("loo_error_pct"))


def test_bounds_respected_and_flagged(tmp_path):
    """A run measured 3.5x faster than the stack's values (2.80 s), faster than the planner can be at full GEMM
    peak (at most 1 / 0.737 of the stack's GEMM time): the fit stops at the bound."""
    runs = [{**BASE, **RUNS[0], "metric": "step_time_s", "published": 0.8}]
    path = tmp_path / "fast.yaml"
    path.write_text(yaml.safe_dump(runs))
    cal = calibrate(path, "megatron-core")
    p = _param(cal, "matmul_efficiency.h100-sxm.bf16")
    assert p.value == pytest.approx(1.0, abs=1e-5) and p.at_bound  # the solver stops within its tolerance
    assert cal.runs["error_after_pct"].iloc[0] > 100  # still far off: the report shows it
    out = write_calibration(cal, tmp_path / "fast-stack.yaml")
    text = load_catalog().stack(out["stack"]).field_sources["matmul_efficiency"]
    assert "AT A BOUND" in text


def test_written_stack_is_used_by_train(core3):
    cal, tmp = core3
    out = write_calibration(cal, tmp / "calibrated.yaml")
    st = load_catalog().stack(out["stack"])
    assert st.id == "megatron-core-calibrated"
    assert st.matmul_efficiency["h100-sxm"]["bf16"] == pytest.approx(TRUE_MATMUL, rel=0.01)
    fs = st.field_sources["matmul_efficiency"]
    assert "least_squares" in fs and cal.date in fs and "r8" in fs and "leave-one-out" in fs
    assert not list(tmp.glob("*.tmp"))  # written whole
    res = runner.invoke(
        app,
        ["train", "--model", "llama3.1-8b", "--system", SYSTEM, "--gpus", "16", "--seq-len", "4096"]
        + ["--global-batch-size", "64", "--tp", "4", "--pp", "1", "--stack", out["stack"], "--json"],
    )
    assert res.exit_code == 0, res.stdout + res.stderr
    ans = json.loads(res.stdout)
    r16 = cal.runs.set_index("id").loc["r16"]
    assert ans["stack"]["id"] == "megatron-core-calibrated"
    assert ans["tokens_per_s"] / 16 == pytest.approx(r16["published"], rel=0.005)


# -- the network from an nccl-tests sweep ---------------------------------------------------------------
def _nvlink_sweep(tmp_path, true_eff: float) -> str:
    """An nccl-tests CSV of all-gather and reduce-scatter on 8 H100s with NVLink at ``true_eff``."""
    design = load_catalog().design(SYSTEM)
    lines = ["op,gpus,size_bytes,busbw_GBps,algorithm"]
    for op in ("allgather", "reducescatter"):
        g = place_group(design, 8, 1, 8)
        from dataclasses import replace

        g = replace(g, up=replace(g.up, bw_Bps=g.up.bw_Bps * true_eff / design.scaleup_fabric.bw_efficiency))
        for size in (2**20, 2**26, 2**30):
            busbw = float(collective(op, size, g, "ring").busbw_Bps[0]) / 1e9
            lines.append(f"{op},8,{size},{busbw},ring")
    csv = tmp_path / "nccl.csv"
    csv.write_text("\n".join(lines) + "\n")
    return str(csv)


def test_collectives_recover_nvlink_efficiency(tmp_path):
    """busbw 'measured' with NVLink at 0.70 of its line rate (catalog 0.82); the sweep's rows above 16 MiB
    recover it, and the training runs on that system then use it."""
    cat = load_catalog()
    true_eff = 0.70
    csv = _nvlink_sweep(tmp_path, true_eff)
    runs = _measured_runs(tmp_path, "megatron-core", runs=RUNS[:1])
    cal = calibrate(runs, "megatron-core", collectives_path=csv)
    up = _param(cal, f"bw_efficiency.nvlink4@{SYSTEM}")
    out = _param(cal, f"bw_efficiency.ib-ndr-400@{SYSTEM}")
    assert up.fitted and up.value == pytest.approx(true_eff, rel=0.01)
    assert not out.fitted and "do not exercise it" in out.note  # 8 ranks never leave the node
    t = cal.comm.table
    assert list(t["in_fit"]) == [False, True, True] * 2  # 1 MiB is the latency regime: reported, not fitted
    assert np.abs(t.loc[t["in_fit"], "error_after_pct"]).max() < 0.5
    written = write_calibration(cal, tmp_path / "out" / "stack.yaml")
    sys_path = written["systems"][0]
    d = cat.design(sys_path)
    assert d.scaleup_fabric.bw_efficiency == pytest.approx(true_eff, rel=0.01)
    assert d.scaleout_fabric.id == "ib-ndr-400"  # not fitted: the catalog's fabric
    assert d.prices.system is not None  # costed as the catalog system it was calibrated from


def test_second_calibration_keeps_the_first_stacks_network_files(tmp_path, monkeypatch):
    """Two stacks calibrated with a sweep in one folder: each stack file gets its own system and
    interconnect files (a second run used to overwrite the first's ``<system>-calibrated.yaml``); a
    file of the planned name written for another stack file, or by hand, is refused in one line, exit 2.
    The calibrated stack's notes describe the calibration, not the parent stack."""
    from dataclasses import replace

    cal = calibrate(
        _measured_runs(tmp_path, "megatron-core", runs=RUNS[:1]),
        "megatron-core",
        collectives_path=_nvlink_sweep(tmp_path, 0.70),
    )
    other = replace(cal, calibrated=cal.calibrated.model_copy(update={"id": "nemo-mlperf-v50-calibrated"}))
    monkeypatch.chdir(tmp_path)
    first, second = write_calibration(cal), write_calibration(other)
    assert first["systems"] != second["systems"] and first["interconnects"] != second["interconnects"]
    assert first["systems"][0].endswith("hgx-h100-ib-ndr-for-megatron-core-calibrated.yaml")
    assert second["systems"][0].endswith("hgx-h100-ib-ndr-for-nemo-mlperf-v50-calibrated.yaml")
    cat = load_catalog()
    sys_a = cat.system(first["systems"][0])
    assert sys_a.scaleup_fabric == first["interconnects"][0]  # still the first stack's pair
    assert first["stack"] in sys_a.notes and "nccl" in sys_a.notes
    again = write_calibration(cal)  # the same stack file again: its own files, overwritten
    assert again == first
    (tmp_path / "hgx-h100-ib-ndr-for-mine.yaml").write_text("id: mine\n")
    with pytest.raises(InputError, match="by hand"):
        write_calibration(cal, tmp_path / "mine.yaml")
    assert not (tmp_path / "mine.yaml").exists()  # refused before anything was written
    st = cat.stack(first["stack"])
    parent = cat.stack("megatron-core")
    assert st.notes.startswith("megatron-core calibrated on") and "r8" in st.notes and "fitted" in st.notes
    assert parent.notes and parent.notes not in st.notes


# -- the identifiability test and the bounded fit on closed forms --------------------------------------
def test_identify_fixes_what_the_data_cannot_see():
    """Residuals ln(a x_0 ...) of two measurements: x_2 moves nothing, x_1 moves both like x_0."""
    params = [Parameter(f"p{i}", 0.5, 0.1, 1.0) for i in range(3)]

    def res(x):
        return np.log(np.array([x[0] * x[1] / 0.2, 2 * x[0] * x[1] / 0.4]))

    out = identify(res, params)
    assert [p.fitted for p in out] == [True, False, False]
    assert "same proportion" in out[1].note and "do not exercise it" in out[2].note
    fitted, info = fit(res, out)
    assert fitted[0].value == pytest.approx(0.4, rel=1e-6) and info["nfev"] > 0  # 0.4 x 0.5 = 0.2
    assert fitted[1].value == fitted[2].value == 0.5


def test_fit_from_a_start_reaches_the_same_minimum_sooner():
    """A leave-one-out fit starts from the fit to all runs: the closed-form minimum of
    ln(x_0 x_1 / 0.2)^2 + ln(x_0 / 0.45)^2 is x_0 = 0.45, x_1 = 0.2 / 0.45 = 0.444...; from a start near
    it the solver needs fewer trials, and ``initial`` stays the catalog value."""
    params = [Parameter("a", 0.9, 0.1, 1.0, fitted=True), Parameter("b", 0.9, 0.1, 1.0, fitted=True)]
    calls = []

    def res(x):
        calls.append(tuple(x))
        return np.log(np.array([x[0] * x[1] / 0.2, x[0] / 0.45]))

    cold, info_cold = fit(res, params)
    n_cold = len(calls)
    calls.clear()
    warm, info_warm = fit(res, params, start={"a": 0.46, "b": 0.43})
    assert [p.value for p in cold] == pytest.approx([0.45, 0.2 / 0.45], rel=1e-5)
    assert [p.value for p in warm] == pytest.approx([0.45, 0.2 / 0.45], rel=1e-5)
    assert calls[0] == (0.46, 0.43) and len(calls) < n_cold and info_warm["nfev"] < info_cold["nfev"]
    assert [p.initial for p in warm] == [0.9, 0.9]
    (clipped,), _ = fit(lambda x: np.log(np.array([x[0] / 0.5])), params[:1], start={"a": 7.0})  # to the bound
    assert clipped.value == pytest.approx(0.5, rel=1e-5)


def test_leave_one_out_fits_start_from_the_full_fit(monkeypatch):
    """The README's example: each leave-one-out fit starts where the fit to both runs ended, so its first
    trials are ones that fit already evaluated; the printed values are those of a cold start (a fit to the
    one other run: +0.6 % and -0.6 %)."""
    import hnplan.planning.calibrate as cal_mod

    starts = []
    real = cal_mod.fit

    def spy(residuals, params, start=None):
        starts.append(start)
        return real(residuals, params, start)

    monkeypatch.setattr(cal_mod, "fit", spy)
    cal = calibrate(cal_mod.EXAMPLE_RUNS, "megatron-core")
    full = cal.parameters[0].value
    assert f"{full:.4f}" == "0.8026"
    assert starts == [None, {cal.parameters[0].name: full}, {cal.parameters[0].name: full}]
    assert [f"{r['loo_error_pct']:+.1f}" for r in cal.run_rows] == ["+0.6", "-0.6"]
    assert [f"{r['error_after_pct']:+.1f}" for r in cal.run_rows] == ["+0.3", "-0.3"]


def test_fit_stays_within_bounds():
    params = identify(lambda x: np.log(np.array([x[0] / 3.0])), [Parameter("e", 0.5, 0.2, 1.0)])
    (p,), _ = fit(lambda x: np.log(np.array([x[0] / 3.0])), params)
    assert p.value == pytest.approx(1.0) and p.at_bound


# -- bad input: one line naming the file, run and field; exit 2 ------------------------------------------
GOOD = {**BASE, **RUNS[0], "metric": "step_time_s", "published": 3.0}


@pytest.mark.parametrize(
    "runs,needle",
    [
        ([{k: v for k, v in GOOD.items() if k != "published"}], "run r8: field published: required"),
        (
            [{**GOOD, "model": "llama3.1-8c"}],
            "run r8: field model: unknown model id 'llama3.1-8c'; nearest: llama3.1-8b",
        ),
        ([{**GOOD, "gpus": -8}], "run r8: field gpus"),
        ([{**GOOD, "metric": "speed"}], "run r8: field metric"),
        ([{**GOOD, "stack": "megatron-lm-2021"}], "run r8: field stack: 'megatron-lm-2021' differs"),
        ([GOOD, GOOD], "run r8: field id: given twice"),
        ({"id": "r8"}, "expected a non-empty YAML list of runs"),
        ([{**GOOD, "fixed": {"tp": 1, "pipeline": 2}}], "run r8: unknown plan fields ['pipeline']"),
        (
            [{**{k: v for k, v in GOOD.items() if k != "gpus"}, "gpu": 8}],
            "run r8: field gpu: unknown (did you mean gpus?); field gpus: required",
        ),
        ([{**GOOD, "seqlen": 4096}], "run r8: field seqlen: unknown (did you mean seq_len?)"),
    ],
)
@pytest.mark.parametrize("json_", [False, True])
def test_bad_runs_file_exits_2(tmp_path, runs, needle, json_):
    path = tmp_path / "runs.yaml"
    path.write_text(yaml.safe_dump(runs))
    argv = ["calibrate", "--runs", str(path), "--stack", "megatron-core", "--out", str(tmp_path / "o.yaml")]
    res = runner.invoke(app, argv + (["--json"] if json_ else []))
    assert res.exit_code == 2 and "Traceback" not in res.stdout + res.stderr
    msg = " ".join(res.stderr.split())
    assert needle in msg and str(path) in msg
    assert len(res.stderr.strip().splitlines()) == 1
    if json_:
        assert needle in " ".join(json.loads(res.stdout)["error"]["message"].split())
    assert not (tmp_path / "o.yaml").exists()


@pytest.mark.parametrize(
    "csv,needle",
    [
        ("op,gpus,busbw_GBps\nallgather,8,300\n", "column size_bytes missing"),
        ("op,gpus,size_byte,busbw_GBps\nallgather,8,1e9,300\n", "the file has size_byte (did you mean size_bytes?)"),
        (
            "op,gpus,size_bytes,busbw_GBs\nallgather,8,1e9,300\n",
            "column busbw_GBps or time_us missing (columns: op, gpus, size_bytes, busbw_GBps or time_us); "
            "the file has busbw_GBs (did you mean busbw_GBps?)",
        ),
        (
            "op,gpus,size_bytes,busbw_GBps\nallgather,8,1e9,fast\n",
            "line 2: column busbw_GBps: expected a positive number",
        ),
        ("op,gpus,size_bytes,busbw_GBps,time_us\nallgather,8,1e9,300,10\n", "line 2: give exactly one of"),
        ("op,gpus,size_bytes,busbw_GBps\nallsum,8,1e9,300\n", "line 2: column op: 'allsum' is not one of"),
        ("op,gpus,size_bytes,busbw_GBps,algorithm\nallgather,8,1e9,300,tree\n", "line 2: column algorithm"),
    ],
)
def test_bad_collectives_file_exits_2(tmp_path, csv, needle):
    runs, sweep = tmp_path / "runs.yaml", tmp_path / "sweep.csv"
    runs.write_text(yaml.safe_dump([GOOD]))
    sweep.write_text(csv)
    argv = ["calibrate", "--runs", str(runs), "--stack", "megatron-core", "--collectives", str(sweep)]
    res = runner.invoke(app, [*argv, "--out", str(tmp_path / "o.yaml")])
    assert res.exit_code == 2 and "Traceback" not in res.stdout + res.stderr
    assert needle in " ".join(res.stderr.split())


NCCL_TESTS_PRINTOUT = """# nThread 1 nGpus 1 minBytes 134217728 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20
#
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
   134217728      33554432     float     sum      -1   1012.3  132.59  248.61      0   1010.1  132.88  249.14      0
  1073741824     268435456     float     sum      -1   7020.1  152.95  286.79      0   7018.4  152.99  286.86      0
# Avg bus bandwidth    : 267.3
"""


def test_comment_lines_above_the_header_are_skipped_and_lines_keep_their_numbers(tmp_path):
    """Lines starting with # are comments wherever they stand: above the header one was read as the header
    (every column then 'missing'). The line numbers in messages stay the file's."""
    from hnplan.catalog.runs import collective_measurements

    path = tmp_path / "sweep.csv"
    path.write_text("# my cluster, 2026-11-30\n\nop,gpus,size_bytes,busbw_GBps\nall_reduce,16,1073741824,376\n")
    (row,) = collective_measurements(path)
    assert (row["line"], row["op"], row["gpus"], row["size_bytes"], row["busbw_GBps"]) == (
        4,
        "allreduce",
        16,
        2**30,
        376,
    )
    path.write_text("# my cluster\nop,gpus,size_bytes,busbw_GBps\nall_reduce,16,1073741824,fast\n")
    with pytest.raises(InputError, match="sweep.csv: line 3: column busbw_GBps: expected a positive number"):
        collective_measurements(path)


def test_an_nccl_tests_printout_is_named_with_the_csv_to_write(tmp_path):
    """all_reduce_perf's own output is not the CSV: said so, with the columns to write, exit 2."""
    runs, sweep = tmp_path / "runs.yaml", tmp_path / "all_reduce.log"
    runs.write_text(yaml.safe_dump([GOOD]))
    sweep.write_text(NCCL_TESTS_PRINTOUT)
    argv = ["calibrate", "--runs", str(runs), "--stack", "megatron-core", "--collectives", str(sweep)]
    res = runner.invoke(app, [*argv, "--out", str(tmp_path / "o.yaml")])
    assert res.exit_code == 2 and "Traceback" not in res.stdout + res.stderr
    said = " ".join(res.stderr.split())
    assert "all_reduce.log: the printout of an nccl-tests binary" in said
    assert "not a CSV: write one line per size as op,gpus,size_bytes,busbw_GBps" in said


def test_run_that_breaks_a_plan_rule_exits_3(tmp_path):
    path = tmp_path / "runs.yaml"
    path.write_text(yaml.safe_dump([{**GOOD, "fixed": {"tp": 3}}]))
    res = runner.invoke(
        app, ["calibrate", "--runs", str(path), "--stack", "megatron-core", "--out", str(tmp_path / "o.yaml")]
    )
    assert res.exit_code == 3 and "Traceback" not in res.stdout + res.stderr
    assert f"{path}: run r8:" in " ".join(res.stderr.split())


def test_unknown_accelerator_and_no_runs_on_it(tmp_path):
    path = tmp_path / "runs.yaml"
    path.write_text(yaml.safe_dump([GOOD]))
    with pytest.raises(CatalogError, match="unknown accelerator id 'h100-sxn'"):
        calibrate(path, "megatron-core", accelerator="h100-sxn")
    with pytest.raises(InputError, match="no run is on accelerator b200"):
        calibrate(path, "megatron-core", accelerator="b200")


def test_cli_json_keys(tmp_path):
    runs = _measured_runs(tmp_path, "megatron-core", runs=RUNS[:2])
    out = tmp_path / "st.yaml"
    res = runner.invoke(app, ["calibrate", "--runs", runs, "--stack", "megatron-core", "--out", str(out), "--json"])
    assert res.exit_code == 0, res.stdout + res.stderr
    ans = json.loads(res.stdout)
    assert {"stack", "calibrated_stack", "runs", "parameters", "written", "method", "date"} <= set(ans)
    assert {"rms_error_before_pct", "rms_error_after_pct", "rms_loo_error_pct", "excluded", "collectives"} <= set(ans)
    assert set(ans["runs"][0]) >= {"id", "published", "before", "after", "loo", "loo_error_pct", "error_after_pct"}
    assert set(ans["parameters"][0]) >= {"name", "initial", "value", "lower", "upper", "fitted", "at_bound", "note"}
    assert ans["written"]["stack"] == str(out) and out.exists()
    assert ans["parameters"][0]["value"] == pytest.approx(TRUE_MATMUL, rel=0.01)
    table = runner.invoke(app, ["calibrate", "--runs", runs, "--stack", "megatron-core", "--out", str(out)])
    assert table.exit_code == 0 and "LOO error" in table.stdout and "leave-one-out" in table.stdout


def test_accelerator_option_fits_only_its_runs(tmp_path):
    a100 = {**GOOD, "id": "a100-run", "system": "dgx-a100-hdr", "published": 6.0}
    path = tmp_path / "mixed.yaml"
    path.write_text(yaml.safe_dump([GOOD, a100]))
    cal = calibrate(path, "megatron-core", accelerator="h100-sxm")
    assert list(cal.runs["id"]) == ["r8"]
    assert cal.excluded == ["a100-run: on a100-sxm-80gb, not h100-sxm"]
    assert [p.name for p in cal.parameters] == ["matmul_efficiency.h100-sxm.bf16"]


def test_sweep_in_nccl_tests_time_and_its_system():
    """A row given as nccl-tests' time: busbw = S / t x (p - 1) / p for all-gather (nccl-tests
    PERFORMANCE.md): 2^30 B in 2,900 us on 8 ranks = 324.0 GB/s. A row without a system needs the runs'
    one system."""
    from hnplan.planning.calibrate_comm import fit_collectives

    cat = load_catalog()
    row = dict(line=2, op="allgather", gpus=8, size_bytes=2.0**30, busbw_GBps=None, time_us=2900.0, system=None)
    res = fit_collectives([row], SYSTEM, cat, "sweep.csv")
    assert res.table["measured_busbw_GBps"].iloc[0] == pytest.approx(2**30 / 2.9e-3 * 7 / 8 / 1e9, rel=1e-9)
    assert res.table["measured_busbw_GBps"].iloc[0] == pytest.approx(324.0, abs=0.05)
    with pytest.raises(InputError, match="sweep.csv: line 2: column system: empty"):
        fit_collectives([row], None, cat, "sweep.csv")
    with pytest.raises(InputError, match="line 2: column gpus: a collective needs at least 2 ranks"):
        fit_collectives([{**row, "gpus": 1}], SYSTEM, cat, "sweep.csv")


def test_mfu_given_as_a_percentage_is_refused(tmp_path):
    # MFU and HFU are fractions of the peak; 43 (per cent) must not be fitted as 43x the peak
    from pathlib import Path

    import yaml as _yaml

    from hnplan.catalog.runs import measured_runs
    from hnplan.errors import CatalogError

    examples = Path(__file__).resolve().parents[1] / "docs" / "examples"
    src = _yaml.safe_load((examples / "calibration_runs.yaml").read_text())
    run = src[0] if isinstance(src, list) else src["runs"][0]
    run = {**run, "metric": "mfu", "published": 43}
    path = tmp_path / "mfu.yaml"
    path.write_text(_yaml.safe_dump([run]))
    with pytest.raises(CatalogError, match=r"a percentage\? write 0.43"):
        measured_runs(path, "megatron-core")


def test_mxfp8_needs_blackwell():
    from hnplan.catalog import load_catalog
    from hnplan.errors import InputError
    from hnplan.planning.training import make_job

    cat = load_catalog()
    with pytest.raises(InputError, match="mxfp8 needs Blackwell"):
        make_job("llama3.1-8b", "hgx-h100-ib-ndr", 8, 4096, 64, "fp8", cat, stack="megatron-bridge-2511-mxfp8")
    job = make_job("llama3.1-8b", "dgx-b200-ib-ndr", 8, 4096, 64, "fp8", cat, stack="megatron-bridge-2511-mxfp8")
    assert job.choices.fp8_recipe == "mxfp8"


def test_alltoall_rows_are_reported_not_fitted():
    # the all-to-all runs at the expert-parallel library's efficiency (alltoall_efficiency): a slow all-to-all
    # row must not drag the fabrics' bandwidth efficiency (and with it every all-reduce) down
    from hnplan.catalog import load_catalog
    from hnplan.planning.calibrate_comm import fit_collectives

    cat = load_catalog()
    rows = [
        dict(
            line=2,
            op="allreduce",
            gpus=8,
            size_bytes=2**30,
            busbw_GBps=370.0,
            time_us=None,
            system=None,
            algorithm=None,
        ),
        dict(
            line=3, op="alltoall", gpus=16, size_bytes=2**30, busbw_GBps=10.0, time_us=None, system=None, algorithm=None
        ),
    ]
    with_a2a = fit_collectives(rows, "hgx-h100-ib-ndr", cat)
    alone = fit_collectives(rows[:1], "hgx-h100-ib-ndr", cat)
    assert list(with_a2a.table["in_fit"]) == [True, False]
    assert [p.value for p in with_a2a.parameters] == pytest.approx([p.value for p in alone.parameters])


@pytest.mark.parametrize("module", ["hnplan.planning.calibrate_write", "hnplan.reports"])
def test_atomic_write_errors_name_the_file_asked_for(tmp_path, module):
    # `--out` naming a folder said "/path/.o.yaml.x1y2.tmp: Is a directory": the temporary file, not the output
    import importlib

    write = importlib.import_module(module)._atomic_write
    folder = tmp_path / "o.yaml"
    folder.mkdir()
    with pytest.raises(IsADirectoryError) as exc:
        write(folder, "x: 1\n")
    assert exc.value.filename == str(folder)
    assert list(tmp_path.rglob("*.tmp")) == []  # nothing left behind


@pytest.mark.parametrize(
    "extra,start",
    [
        (["--stack", "megatron-cor"], "--stack: unknown stack id 'megatron-cor'"),
        (["--stack", "missing-stack.yaml"], "--stack: missing-stack.yaml: file not found"),
        (["--accelerator", "h100-sxn"], "--accelerator: unknown accelerator id 'h100-sxn'"),
        (["--accelerator", "b200"], "--accelerator: RUNS: no run is on accelerator b200"),
        (["--runs", "missing-runs.yaml"], "--runs: missing-runs.yaml: file not found"),
        (["--collectives", "missing.csv"], "--collectives: missing.csv: file not found"),
        (["--collectives", "README.md"], "--collectives: README.md: column op missing"),  # not a CSV of a sweep
    ],
)
@pytest.mark.parametrize("json_", [False, True])
def test_errors_name_the_flag_first(tmp_path, extra, start, json_):
    """As every other command does (``--model: unknown model id ...``), each calibrate error starts with the
    flag whose value it refuses: one line, exit 2."""
    runs = tmp_path / "runs.yaml"
    runs.write_text(yaml.safe_dump([GOOD]))
    opts = {"--runs": str(runs), "--stack": "megatron-core", "--out": str(tmp_path / "o.yaml")}
    opts.update(dict(zip(extra[::2], extra[1::2], strict=True)))
    res = runner.invoke(app, ["calibrate", *(x for kv in opts.items() for x in kv), *(["--json"] if json_ else [])])
    assert res.exit_code == 2 and "Traceback" not in res.stdout + res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    msg = " ".join(res.stderr.split())
    assert msg.startswith("error: " + start.replace("RUNS", str(runs))), msg
    if json_:
        assert json.loads(res.stdout)["error"]["message"].startswith(start.replace("RUNS", str(runs)))
    assert not (tmp_path / "o.yaml").exists()


@pytest.mark.parametrize(
    "row,column,ratio",
    [
        # 2^30 B all-reduce on 16 H100 (two servers): the model's 454.4 GB/s busbw at the catalog's
        # efficiencies; a measured 350 GB/s typed in Gb/s (2,800) is 2,800 / 454.4 = 6.2x it
        ("all_reduce,16,1073741824,2800,", "busbw_GBps", "6.2x"),
        # the same 5.8 ms typed as 5.8 in the us column: busbw = 2^30 / 5.8e-6 x 2 x 15/16 = 347,115 GB/s,
        # 347,115 / 454.4 = 764x
        ("all_reduce,16,1073741824,,5.8", "time_us", "764x"),
        # 5.8 ms typed in ns (5,800,000 in the us column): 0.347 GB/s, 1 / 1,309 of the model
        ("all_reduce,16,1073741824,,5800000", "time_us", "0.00076x"),
    ],
)
def test_sweep_row_in_another_unit_is_refused(tmp_path, row, column, ratio):
    """A fitted sweep row more than 5x from the model at the catalog's efficiencies (a fitted efficiency
    moves it at most 1 / 0.69 = 1.45x up) is a unit slip, not a measurement: one line naming the file,
    the line and the column, exit 2 (the runs' figures have the same check, tests/test_cli_trial14.py)."""
    runs, sweep = tmp_path / "runs.yaml", tmp_path / "sweep.csv"
    runs.write_text(yaml.safe_dump([GOOD]))
    sweep.write_text(f"op,gpus,size_bytes,busbw_GBps,time_us\n{row}\n")
    argv = ["calibrate", "--runs", str(runs), "--stack", "megatron-core", "--collectives", str(sweep)]
    res = runner.invoke(app, [*argv, "--out", str(tmp_path / "o.yaml")])
    err = " ".join(res.stderr.split())
    assert res.exit_code == 2 and "Traceback" not in res.stdout + res.stderr, err
    assert err.startswith(f"error: --collectives: {sweep}: line 2: column {column}: a busbw of "), err
    assert f"{ratio} hnplan's 454.4 GB/s" in err and len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o.yaml").exists()


def test_sweep_row_rates_as_measured_pass_the_unit_check():
    """Rows at 347 GB/s (0.76x the model) and small latency-bound rows a 5x rule does not judge are fitted
    or reported as before; the check only refuses what no efficiency reaches."""
    from hnplan.planning.calibrate_comm import fit_collectives

    cat = load_catalog()
    base = dict(op="allreduce", gpus=16, busbw_GBps=None, system=None, algorithm=None)
    rows = [
        dict(base, line=2, size_bytes=2.0**30, time_us=5800.0),
        dict(base, line=3, size_bytes=8.0, time_us=3000.0),  # 100x the model's latency: reported only
    ]
    res = fit_collectives(rows, SYSTEM, cat, "sweep.csv")
    assert list(res.table["in_fit"]) == [True, False]


@pytest.mark.parametrize(
    "row,needle",
    [
        ("allreduce,16,1073741824,300,gb200", "line 2: column system: unknown system id 'gb200'; nearest: gb200-nvl72"),
        ("allreduce,100000,1073741824,300,", "line 2: column gpus: 100,000 GPUs of hgx-h100-ib-ndr need"),
    ],
)
def test_sweep_system_and_size_errors_name_the_line(tmp_path, row, needle):
    runs, sweep = tmp_path / "runs.yaml", tmp_path / "sweep.csv"
    runs.write_text(yaml.safe_dump([GOOD]))
    sweep.write_text(f"op,gpus,size_bytes,busbw_GBps,system\n{row}\n")
    argv = ["calibrate", "--runs", str(runs), "--stack", "megatron-core", "--collectives", str(sweep)]
    res = runner.invoke(app, [*argv, "--out", str(tmp_path / "o.yaml")])
    err = " ".join(res.stderr.split())
    assert res.exit_code == 2 and "Traceback" not in res.stdout + res.stderr, err
    assert err.startswith(f"error: --collectives: {sweep}: {needle}"), err


def test_sweep_column_given_twice_is_refused(tmp_path):
    # csv.DictReader kept the second of two busbw_GBps columns (200) and dropped the first (300) unsaid
    runs, sweep = tmp_path / "runs.yaml", tmp_path / "sweep.csv"
    runs.write_text(yaml.safe_dump([GOOD]))
    sweep.write_text("op,gpus,size_bytes,busbw_GBps,busbw_GBps\nallgather,8,1073741824,300,200\n")
    argv = ["calibrate", "--runs", str(runs), "--stack", "megatron-core", "--collectives", str(sweep)]
    res = runner.invoke(app, [*argv, "--out", str(tmp_path / "o.yaml")])
    assert res.exit_code == 2 and "Traceback" not in res.stdout + res.stderr
    assert " ".join(res.stderr.split()) == f"error: --collectives: {sweep}: column busbw_GBps given twice in the header"


def test_sweep_line_longer_than_the_header_is_refused(tmp_path):
    # a size typed with thousands separators, 1,073,741,824, split into four fields: the reader took
    # size_bytes = 1 and busbw_GBps = 073 = 73 GB/s (a latency-bound row, reported without a word) and filed
    # the rest under the key None
    runs, sweep = tmp_path / "runs.yaml", tmp_path / "sweep.csv"
    runs.write_text(yaml.safe_dump([GOOD]))
    sweep.write_text("op,gpus,size_bytes,busbw_GBps\nall_reduce,8,1073741824,360\nall_reduce,8,1,073,741,824,360\n")
    argv = ["calibrate", "--runs", str(runs), "--stack", "megatron-core", "--collectives", str(sweep)]
    res = runner.invoke(app, [*argv, "--out", str(tmp_path / "o.yaml")])
    err = " ".join(res.stderr.split())
    assert res.exit_code == 2 and "Traceback" not in res.stdout + res.stderr, err
    assert err.startswith(f"error: --collectives: {sweep}: line 3: 7 fields, the header names 4: "), err
    assert "without thousands separators (1073741824)" in err
    assert not (tmp_path / "o.yaml").exists()


def test_sweep_reads_nccl_algo_names_of_in_network_reduction(tmp_path):
    # NCCL_ALGO=NVLS (or NVLSTree, CollNet) forced in nccl-tests was refused as 'not one of ring, tree, rhd,
    # hierarchical, inr'; for an all-reduce they are hnplan's inr (NVLink SHARP, IB SHARP, NVLS + tree)
    from hnplan.catalog.runs import collective_measurements

    sweep = tmp_path / "sweep.csv"
    rows = ["all_reduce,8,1073741824,470,NVLS", "all_reduce,16,1073741824,370,NVLS_TREE"]
    rows += ["all_reduce,16,1073741824,370,CollNetDirect", "all_reduce,16,1073741824,370,Ring"]
    rows += ["all_gather,8,1073741824,370,NVLS"]  # hnplan has no in-network all-gather: left as written
    sweep.write_text("op,gpus,size_bytes,busbw_GBps,algorithm\n" + "\n".join(rows) + "\n")
    assert [r["algorithm"] for r in collective_measurements(sweep)] == ["inr", "inr", "inr", "ring", "nvls"]


def test_sweep_line_numbers_are_the_files_and_comments_are_skipped(tmp_path):
    # blank lines shifted every later line number down (the reader skips them), and a '#' line, as nccl-tests
    # prints its headers, was read as a row with empty gpus
    from hnplan.catalog.runs import collective_measurements

    sweep = tmp_path / "sweep.csv"
    sweep.write_text(
        "op,gpus,size_bytes,busbw_GBps\n\nall_gather,8,1073741824,300\n\n# nccl-tests comment\nall_gather,8,1e9,fast\n"
    )
    with pytest.raises(CatalogError, match=r"sweep.csv: line 6: column busbw_GBps: expected a positive number"):
        collective_measurements(sweep)
    sweep.write_text("op,gpus,size_bytes,busbw_GBps\n#  size  count\n\nall_gather,8,1073741824,300\n")
    (row,) = collective_measurements(sweep)
    assert row["line"] == 4 and row["op"] == "allgather" and row["busbw_GBps"] == 300.0


def test_fitted_sweep_rows_still_far_off_after_the_fit_are_marked(tmp_path):
    """Four all-gather / reduce-scatter rows at NVLink 0.70 and one all-gather row at 0.7 x that busbw: the
    log-time least squares puts the scale at about 0.7**(1/5) = 0.931 of the truth (bandwidth regime), so
    the four read about 0.931 - 1 = -6.9 % after the fit (within 10 %) and the odd one 0.931 / 0.7 - 1 =
    +33 %: it was listed "fitted" like the others; now it is marked OFF, with a note under the table."""
    from pathlib import Path

    from hnplan.planning.calibrate_comm import OFF_AFTER_FIT_PCT

    csv = _nvlink_sweep(tmp_path, 0.70)
    lines = [ln for ln in Path(csv).read_text().splitlines() if ln.split(",")[2] != str(2**20)]  # drop 1 MiB rows
    op, gpus, size, busbw, algo = lines[2].split(",")  # all-gather 1 GiB, measured again at 0.7 x its busbw
    assert (op, size) == ("allgather", str(2**30))
    lines.append(f"{op},{gpus},{size},{float(busbw) * 0.7},{algo}")
    odd = tmp_path / "odd.csv"
    odd.write_text("\n".join(lines) + "\n")
    runs = _measured_runs(tmp_path, "megatron-core", runs=RUNS[:1])
    cal = calibrate(runs, "megatron-core", collectives_path=str(odd))
    t = cal.comm.table
    assert OFF_AFTER_FIT_PCT == 10.0 and t["in_fit"].all()
    assert list(t["off_after_fit"]) == [False] * 4 + [True]
    assert t["error_after_pct"].iloc[-1] == pytest.approx(100 * (0.7**-0.8 - 1), abs=2.0)  # +33 %
    assert np.abs(t["error_after_pct"].iloc[:4]).max() == pytest.approx(100 * (1 - 0.7**0.2), abs=1.0)  # 6.9 %
    res = runner.invoke(
        app,
        ["calibrate", "--runs", runs, "--stack", "megatron-core", "--collectives", str(odd)]
        + ["--out", str(tmp_path / "st.yaml")],
    )
    assert res.exit_code == 0, res.stdout + res.stderr
    out = " ".join(res.stdout.split())
    assert out.count("yes, OFF") == 1 and "OFF: 1 fitted row(s) still more than 10 % from the measured busbw" in out


def test_a_sweep_of_all_to_alls_alone_says_why_nothing_is_fitted():
    """All-to-all rows are reported and not fitted (their rate is the fabric's alltoall_efficiency or the expert
    dispatcher's flex_alltoall_efficiency); a sweep of only those used to say "no row at or above 16 MiB" though
    its rows were 1 GiB."""
    from hnplan.planning.calibrate_comm import fit_collectives

    cat = load_catalog()
    row = dict(line=2, op="alltoall", gpus=16, size_bytes=2.0**30, busbw_GBps=40.0, time_us=None, system=None)
    res = fit_collectives([row], "dgx-b300", cat, "sweep.csv")
    notes = {p.note for p in res.parameters}
    assert len(notes) == 1
    (note,) = notes
    assert note.startswith("fixed: the rows at or above 16 MiB (the bandwidth regime) are all-to-alls, reported")


def test_a_gemm_ceiling_fitted_far_from_the_measured_one_is_flagged():
    """Two runs that differ only in expert parallelism across servers fitted a B300 fp8 GEMM ceiling 44 % below the
    catalog's (a new user's try-out): the fit put a communication cost into every GEMM of the chip. A fitted
    ``matmul_efficiency`` more than 25 % from its initial value now carries a warning; other moves do not."""
    from hnplan.planning.calibrate import _far_from_measured
    from hnplan.planning.calibrate_fit import Parameter

    far = _far_from_measured(Parameter("matmul_efficiency.b300.fp8", 0.65, 0.1, 1.0, value=0.3612, fitted=True))
    assert far.note.startswith("WARNING: -44% from the catalog's GEMM ceiling")
    near = Parameter("matmul_efficiency.b300.fp8", 0.65, 0.1, 1.0, value=0.60, fitted=True)
    assert _far_from_measured(near) == near
    other = Parameter("tp_comm_overlap_fraction", 0.75, 0.0, 1.0, value=0.2, fitted=True)
    assert _far_from_measured(other) == other
