"""The compute slowdown beside an overlapped collective from the SMs its kernels hold: ``S / (S - C) - 1``
for C resident communication CTAs on an accelerator of S SMs (hnplan.compute.sm_share), by hand."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hnplan.catalog.loader import load_catalog
from hnplan.compute.sm_share import sm_share_slowdown
from hnplan.errors import InputError
from hnplan.planning.training import ParallelPlan, estimate_plan, make_job
from hnplan.planning.training.components import overlap_slowdown

# MLPerf v5.1 Llama 3.1 8B on 32 B200 (University of Florida's layout): TP 1, DP 32, micro-batch 2, fp8
JOB = ("llama3.1-8b", "dgx-b200-ib-ndr", 32, 8192, 64)
PLAN = ParallelPlan(tp=1, pp=1, dp=32, microbatch_size=2, zero_stage=1, recompute="none")


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


@pytest.mark.parametrize(
    ("sms", "ctas", "hand"),
    [
        (132, 16, 132 / 116 - 1),  # 0.1379: Transformer Engine userbuffers' 16 SMs on an H100 (the stacks' 0.14)
        (132, 20, 132 / 112 - 1),  # 0.1786: DeepEP's 20 SMs on an H800 (DeepSeek-V3 Sec. 3.2.2: 0.18)
        (148, 32, 148 / 116 - 1),  # 0.2759: NCCL_MAX_CTAS=32 channels on a B200
        (148, 16, 148 / 132 - 1),  # 0.1212: the 16-channel DP ring across B200 servers
        (152, 32, 152 / 120 - 1),  # 0.2667: 32 channels on a GB200
        (132, 8, 132 / 124 - 1),  # 0.0645: Cisco's DP communicator capped at 8 CTAs on an H100
        (148, 0, 0.0),
    ],
)
def test_slowdown_by_hand(sms, ctas, hand):
    assert sm_share_slowdown(sms, ctas) == pytest.approx(hand, rel=1e-12)


def test_slowdown_values():
    assert round(sm_share_slowdown(148, 32), 4) == 0.2759
    assert round(sm_share_slowdown(132, 16), 4) == 0.1379


@pytest.mark.parametrize("ctas", [-1, 148, 200])
def test_no_sm_left_is_refused(ctas):
    with pytest.raises(ValueError, match="below the 148 SMs"):
        sm_share_slowdown(148, ctas)


@given(st.integers(100, 400), st.integers(0, 98))
def test_more_ctas_slow_more_and_more_sms_dilute(sms, ctas):
    s = sm_share_slowdown(sms, ctas)
    assert s >= 0.0
    assert sm_share_slowdown(sms, ctas + 1) > s
    assert sm_share_slowdown(sms + 1, ctas) <= s


def test_job_slowdown_per_class(cat):
    """A class listed in overlap_comm_ctas takes the SM share of the job's accelerator (B200: 148 SMs); the
    others keep the stack's flat overlap_gemm_slowdown (the default stack's 0.14)."""
    job = make_job(*JOB, "fp8", cat, overrides=dict(overlap_comm_ctas={"dp": 32}))
    assert overlap_slowdown(job, "dp") == pytest.approx(148 / 116 - 1)
    assert overlap_slowdown(job, "tp") == overlap_slowdown(job, "ep") == 0.14
    h100 = make_job(
        "llama3.1-8b", "hgx-h100-ib-ndr", 64, 8192, 64, "fp8", cat, overrides=dict(overlap_comm_ctas={"dp": 8})
    )
    assert overlap_slowdown(h100, "dp") == pytest.approx(132 / 124 - 1)
    assert overlap_slowdown(make_job(*JOB, "fp8", cat), "dp") == 0.14


def test_dp_charge_is_the_slowdown_times_the_hidden_time(cat):
    """The exposed DP time is linear in the slowdown: exposed(0) + slowdown x hidden. The hidden time is
    read from the flat 0.14 against 0: the 32-CTA charge then adds (0.2759 - 0.14) x hidden."""

    def dp(**ov):
        return estimate_plan(make_job(*JOB, "fp8", cat, overrides=ov), PLAN).breakdown_s["dp_comm_exposed"]

    bare, flat = dp(overlap_gemm_slowdown=0.0), dp(overlap_gemm_slowdown=0.14)
    hidden = (flat - bare) / 0.14
    assert hidden > 0.01  # tens of ms of DP traffic hidden behind the backward and forward
    assert dp(overlap_comm_ctas={"dp": 32}) == pytest.approx(bare + (148 / 116 - 1) * hidden, rel=1e-9)
    assert dp(overlap_comm_ctas={"dp": 32}, overlap_gemm_slowdown=0.0) == pytest.approx(
        bare + (148 / 116 - 1) * hidden, rel=1e-9
    )  # the flat value no longer enters the DP charge


def test_ctas_at_the_sm_count_are_refused(cat):
    with pytest.raises(InputError, match="overlap_comm_ctas.dp: 148 CTAs leave none of accelerator b200's 148 SMs"):
        make_job(*JOB, "fp8", cat, overrides=dict(overlap_comm_ctas={"dp": 148}))


def test_unknown_class_is_refused(cat):
    with pytest.raises(InputError, match="overlap_comm_ctas"):
        make_job(*JOB, "fp8", cat, overrides=dict(overlap_comm_ctas={"sp": 8}))
