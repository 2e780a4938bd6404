"""The expert all-to-all overlap fraction a stack carries per chip family
(``SoftwareStack.ep_comm_overlap_fraction_by_accelerator``) and across the scale-out network
(``ep_comm_overlap_fraction_scale_out``)."""

from __future__ import annotations

import pytest
import yaml

from hnplan.errors import CatalogError
from hnplan.planning.training import make_job

# Qwen3-30B-A3B as the Megatron-Bridge rows run it (mbridge2608-h100-qwen3-30b-a3b-16-bf16: 4,096 tokens, GBS 1,024)
JOB = ("qwen3-30b-a3b", 16, 4096, 1024, "bf16")


def _job(cat, system, **overrides):
    model, gpus, seq, gbs, dtype = JOB
    return make_job(model, system, gpus, seq, gbs, dtype, cat, stack="megatron-bridge-2511", overrides=overrides)


@pytest.mark.parametrize("system", ["hgx-h100-ib-ndr", "hgx-h800-ib"])
def test_a_hopper_job_takes_the_fraction_measured_on_hopper(cat, system):
    # Megatron-MoE-ModelZoo's pair on 256 H100 (19.7 s -> 17.6 s with the 1F1B overlap): 0.36 of each paired half
    # hidden, the value megatron-core-ep-overlap was fitted to; the Bridge stack carries it for the Hopper family
    job = _job(cat, system, ep_comm=True)
    assert job.choices.ep_comm_overlap_fraction == 0.36
    assert job.choices.ep_comm_overlap_fraction == cat.stack("megatron-core-ep-overlap").ep_comm_overlap_fraction
    assert job.provenance["ep_comm_overlap_fraction"] == (
        f"stack megatron-bridge-2511 (ep_comm_overlap_fraction_by_accelerator.{job.acc.id})"
    )


def test_a_chip_the_mapping_does_not_list_keeps_the_scalar(cat):
    job = _job(cat, "gb200-nvl72", ep_comm=True)  # Blackwell: unmeasured, hnplan's 1.0
    assert job.choices.ep_comm_overlap_fraction == 1.0
    assert job.provenance["ep_comm_overlap_fraction"].startswith("stack megatron-bridge-2511")
    assert "by_accelerator" not in job.provenance["ep_comm_overlap_fraction"]


def test_an_override_of_the_fraction_wins_over_the_chip_family_value(cat):
    job = _job(cat, "hgx-h100-ib-ndr", ep_comm=True, ep_comm_overlap_fraction=0.9)
    assert job.choices.ep_comm_overlap_fraction == 0.9
    assert job.provenance["ep_comm_overlap_fraction"] == "override"


def test_the_hopper_value_hides_less_of_the_all_to_all_than_the_scalar():
    # the Megatron-Bridge 26.08 H100 row (EP 16 over two servers), its fractions forced to the Blackwell
    # scalar: more hidden, a shorter step
    from hnplan.catalog.runs import training_runs
    from hnplan.planning.validation import predict_run

    run = next(r for r in training_runs() if r.id == "mbridge2608-h100-qwen3-30b-a3b-16-bf16")
    one = {"ep_comm_overlap_fraction": 1.0, "ep_comm_overlap_fraction_scale_out": 1.0}
    at_one = run.model_copy(update={"overrides": {**run.overrides, **one}})
    assert float(predict_run(run)["step_time_s"]) > float(predict_run(at_one)["step_time_s"])


def test_a_mistyped_accelerator_in_the_mapping_is_refused(cat, tmp_path):
    from hnplan.catalog import validate_file

    raw = yaml.safe_load((cat.root / "stacks" / "megatron-bridge-2511.yaml").read_text())
    raw["ep_comm_overlap_fraction_by_accelerator"] = {"h100-sxn": 0.44}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(CatalogError, match="field 'ep_comm_overlap_fraction_by_accelerator': unknown accelerator id"):
        validate_file(tmp_path / "s.yaml", kind="stacks")


def test_the_mapping_needs_its_own_provenance(cat, tmp_path):
    from hnplan.catalog import validate_file

    raw = yaml.safe_load((cat.root / "stacks" / "megatron-bridge-2511.yaml").read_text())
    for mapping in (raw["field_sources"], raw["assumptions"]):
        for key in [k for k in mapping if k.startswith("ep_comm_overlap_fraction_by_accelerator")]:
            del mapping[key]
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(CatalogError, match="ep_comm_overlap_fraction_by_accelerator"):
        validate_file(tmp_path / "s.yaml", kind="stacks")


def test_a_calibrated_fraction_is_not_shadowed_by_the_chip_family_values(cat):
    # fitting the fraction to one's own runs (hnplan calibrate) writes the scalar: the per-chip-family values, which
    # would replace it on their chips, leave the calibrated stack with their provenance
    from hnplan.planning.calibrate import calibrated_stack
    from hnplan.planning.calibrate_fit import Parameter

    st = cat.stack("megatron-bridge-2511").model_copy(update={"ep_comm": True})
    fitted = Parameter("ep_comm_overlap_fraction", 0.44, 0.0, 1.0, value=0.6, fitted=True)
    row = dict(id="r", metric="tokens_per_s_per_gpu", published=1.0, error_before_pct=5.0, error_after_pct=0.0)
    out = calibrated_stack(st, [fitted], [{**row, "loo_error_pct": float("nan")}], "runs.yaml", "2026-12-01")
    assert out.ep_comm_overlap_fraction == 0.6 and out.ep_comm_overlap_fraction_by_accelerator is None
    # nor a share across the scale-out network (a user's stack may carry one): the fitted share holds everywhere
    with_out = st.model_copy(update={"ep_comm_overlap_fraction_scale_out": 0.5})
    out = calibrated_stack(with_out, [fitted], [{**row, "loo_error_pct": float("nan")}], "runs.yaml", "2026-12-01")
    assert out.ep_comm_overlap_fraction == 0.6 and out.ep_comm_overlap_fraction_scale_out is None
    assert not [k for k in (*out.field_sources, *out.assumptions) if k.startswith("ep_comm_overlap_fraction_by")]
    assert "was 0.44" in out.field_sources["ep_comm_overlap_fraction"]


# --- the share across the scale-out network (ep_comm_overlap_fraction_scale_out) and the flex dispatcher's rate ---


def _ep_plans(eps):
    import pandas as pd

    n = len(eps)
    return pd.DataFrame(
        dict(tp=[1] * n, etp=[1] * n, cp=[1] * n, ep=eps, dp=[64] * n, pp=[1] * n, microbatch_size=[1] * n)
    )


def test_a_stack_may_give_an_ep_group_across_servers_its_own_share(cat):
    from hnplan.planning.training import moe

    # 64 B200 in 8-GPU servers on the 26.08 MXFP8 stack (Blackwell: 1.0), a user's share of 0.5 across servers:
    # EP 8 fills one server (one domain), EP 16 and 32 span two and four
    model, _, seq, gbs, dtype = JOB
    over = {"ep_comm": True, "ep_comm_overlap_fraction_scale_out": 0.5}
    job = make_job(
        model, "dgx-b200-ib-ndr", 64, seq, gbs, dtype, cat, stack="megatron-bridge-2608-mxfp8", overrides=over
    )
    assert moe.ep_overlap_fraction(job, _ep_plans([8, 16, 32, 4])).tolist() == [1.0, 0.5, 0.5, 1.0]
    # GB200 NVL72: EP 32 and 64 stay inside the 72-GPU NVLink domain
    job = make_job(model, "gb200-nvl72", 64, seq, gbs, dtype, cat, stack="megatron-bridge-2608-mxfp8", overrides=over)
    assert moe.ep_overlap_fraction(job, _ep_plans([8, 32, 64])).tolist() == [1.0, 1.0, 1.0]


def test_without_a_scale_out_share_the_stack_fraction_holds_everywhere(cat):
    from hnplan.planning.training import moe

    model, _, seq, gbs, dtype = JOB
    # no catalog stack gives one (the runs support a share per chip family): one scalar wherever the group sits
    for sid in cat.ids("stacks"):
        assert cat.stack(sid).ep_comm_overlap_fraction_scale_out is None
    job = make_job(model, "dgx-b200-ib-ndr", 64, seq, gbs, dtype, cat, stack="megatron-bridge-2608-mxfp8")
    assert moe.ep_overlap_fraction(job, _ep_plans([8, 32])) == 1.0


def test_the_b200_ep32_run_across_servers_reads_as_documented():
    # Megatron-Bridge 26.04.01, DeepSeek-V3 on 256 B200, EP 32 over four servers, DeepEP, the 1F1B overlap:
    # 3,328 tokens/s per GPU published. +8.0 % at Blackwell's whole share, -18.7 % at Hopper's 0.36
    # (docs/training.md, "Expert parallelism across the scale-out network")
    from hnplan.catalog.runs import training_runs
    from hnplan.planning.validation import predicted

    run = next(r for r in training_runs() if r.id == "mbridge2604-b200-deepseek-v3-256-fp8-ep32")
    assert run.published == 3328
    assert 100 * (predicted(run) / 3328 - 1) == pytest.approx(8.0, abs=0.3)
    hopper = run.model_copy(update={"overrides": {**run.overrides, "ep_comm_overlap_fraction_scale_out": 0.36}})
    assert 100 * (predicted(hopper) / 3328 - 1) == pytest.approx(-18.7, abs=0.3)


def test_hybridep_internode_rate_on_the_wire_by_hand(cat):
    # HybridEP through its PyTorch API on H100 with ConnectX-7 (deepseek-ai/DeepEP hybrid-ep
    # docs/README_Hybrid-EP.md, BF16, 16 SMs), bandwidth counted with the sender's own node: EP 32 (4 nodes,
    # 3/4 off the node) dispatch / combine 47.36 / 52.53 GB/s, EP 64 (8 nodes, 7/8) 41.24 / 46.57, of 50 GB/s
    wire = ((47.36 + 52.53) / 2 * 3 / 4 / 50, (41.24 + 46.57) / 2 * 7 / 8 / 50)
    assert wire == pytest.approx((0.7492, 0.7683), abs=1e-4)
    fabric = cat.interconnect("ib-ndr-400")
    assert fabric.flex_alltoall_efficiency == 0.76 and wire[0] <= fabric.flex_alltoall_efficiency <= wire[1]
    assert fabric.alltoall_efficiency is None  # NCCL's all-to-all: the ring's 0.94 (nccl-tests issue 267)
    assert cat.interconnect("ib-xdr-800").flex_alltoall_efficiency == 0.76  # carried, an assumption
    assert "flex_alltoall_efficiency" in cat.interconnect("ib-xdr-800").assumptions


def test_the_flex_dispatcher_crosses_servers_at_its_rate_and_nccl_at_the_ring_rate(cat):
    # DeepSeek-V3, EP 32 over four H100 servers: the flex path's cross-server time grows by 0.94 / 0.76 against
    # a fabric without the flex rate; the NCCL all-to-all dispatcher's time does not move
    import dataclasses

    import pandas as pd

    from hnplan.planning.training import moe

    plans = pd.DataFrame(
        dict(tp=[1], etp=[1], cp=[1], ep=[32], dp=[32], pp=[8], microbatch_size=[1], recompute=["none"])
    )
    times = {}
    for disp in ("flex", "alltoall"):
        for rate in (0.76, None):
            job = make_job(
                "deepseek-v3", "hgx-h100-ib-ndr", 256, 4096, 1024, "bf16", cat, overrides={"ep_dispatcher": disp}
            )
            if rate is None:
                job = dataclasses.replace(
                    job,
                    links=dataclasses.replace(
                        job.links, scaleout=dataclasses.replace(job.links.scaleout, flex_alltoall_bw_Bps=None)
                    ),
                )
                job.memo.clear()
                job._groups.clear()
            times[disp, rate] = float(moe.ep_comm_per_microbatch(job, plans, 58)[0])
    assert times["alltoall", 0.76] == pytest.approx(times["alltoall", None], rel=1e-12)
    ratio = times["flex", 0.76] / times["flex", None]
    assert 1.15 < ratio <= 0.94 / 0.76 + 1e-9  # the bandwidth term by 1.237, the latency not


def test_a_plan_with_experts_across_servers_says_so_with_the_runs_that_had_it(cat):
    from hnplan.planning.trust import ep_span_sentence

    # EP 32 on 8-GPU B300 servers (ETP 1): ranks 0-31, four servers; EP 8 fills one; on GB300 NVL72 EP 64 stays
    # in the 72-GPU domain and EP 128 spans two. The evidence: the runs with the plan's dispatch
    overlapped = (True, "flex")
    said = ep_span_sentence(
        [{"system": "dgx-b300", "ep": 32, "etp": 1}], cat, overlapped, cat.stack("megatron-bridge-2608-mxfp8")
    )
    hopper = ep_span_sentence(
        [{"system": "hgx-h100-ib-ndr", "ep": 64, "etp": 1}], cat, overlapped, cat.stack("megatron-bridge-2511")
    )
    assert "the 1F1B overlap hides 0.36 on h100-sxm (the stack's value for the chip, fitted to a pair" in hopper
    assert said.startswith("dgx-b300's EP 32 spans 4 servers, so its expert dispatch and combine cross the scale-out")
    assert "and the flex dispatcher, all-to-all overlapped read 1 run on b200 (+8 %); 3 runs on h100-sxm (" in said
    # the overlap's share on the plan's chip, read from the stack: the 26.08 stack lists no Blackwell value, so its
    # scalar 1.0, unmeasured across servers; the 25.11 stack's Hopper value 0.36 on an H100 plan
    assert "the 1F1B overlap hides 1.00 on b300 (the stack's share; unmeasured for traffic across servers" in said
    exposed = ep_span_sentence([{"system": "dgx-b300", "ep": 32, "etp": 1}], cat, (False, "flex"))
    assert "all-to-all exposed read 3 runs on h100-sxm" in exposed and "1F1B" not in exposed
    # the same dispatcher's runs with the all-to-all the other way are said apart: the B200 run (+8 %) is the one
    # Blackwell run with EP across servers, so a plan with the exposed all-to-all still hears of it
    assert "; with it overlapped instead they read 1 run on b200 (+8 %); 3 runs on h100-sxm" in exposed
    assert "; with it exposed instead they read 3 runs on h100-sxm (-3 % to +2 %)" in said
    assert ep_span_sentence([{"system": "dgx-b300", "ep": 8, "etp": 1}], cat, overlapped) == ""
    assert ep_span_sentence([{"system": "gb300-nvl72", "ep": 64, "etp": 1}], cat, overlapped) == ""
    two = ep_span_sentence(
        [{"system": "gb300-nvl72", "ep": 128, "tp": 1}, {"system": "dgx-b300", "ep": 16}], cat, overlapped
    )
    assert two.startswith(
        "gb300-nvl72's EP 128 spans 2 scale-up domains and dgx-b300's EP 16 spans 2 servers, so their"
    )
    # ETP spaces the EP ranks: EP 8 at ETP 2 covers 16 consecutive ranks, two servers
    assert "EP 8 spans 2 servers" in ep_span_sentence([{"system": "dgx-b300", "ep": 8, "etp": 2}], cat)


def test_the_placement_line_gives_the_all_to_all_rate_the_step_uses(cat):
    from hnplan.planning.training.components import placement_summary

    # DeepSeek-V3 on 256 B300 (800G ConnectX-8, 100 GB/s a GPU): EP 32 across four servers with the flex
    # dispatcher at 0.76 of the line rate, the DP ring at 0.94
    job = make_job("deepseek-v3", "dgx-b300", 256, 4096, 4096, "fp8", cat, stack="megatron-bridge-2608-mxfp8")
    p = placement_summary(job, tp=1, pp=1, dp=256, cp=1, ep=32, etp=1)
    assert p["ep"]["bw_GBps"] == pytest.approx(76.0) and p["dp"]["bw_GBps"] == pytest.approx(94.0)
    nccl = make_job("deepseek-v3", "dgx-b300", 256, 4096, 4096, "fp8", cat, overrides={"ep_dispatcher": "alltoall"})
    assert placement_summary(nccl, tp=1, pp=1, dp=256, cp=1, ep=32, etp=1)["ep"]["bw_GBps"] == pytest.approx(94.0)
