"""The expert all-to-all overlap fraction a stack carries per chip family
(``SoftwareStack.ep_comm_overlap_fraction_by_accelerator``)."""

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
    # Megatron-MoE-ModelZoo's pair on 256 H100 (19.7 s -> 17.6 s with the 1F1B overlap): 0.44 of each paired half
    # hidden, the value megatron-core-ep-overlap was fitted to; the Bridge stack carries it for the Hopper family
    job = _job(cat, system, ep_comm=True)
    assert job.choices.ep_comm_overlap_fraction == 0.44
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
    # the Megatron-Bridge 26.08 H100 row, its fraction forced to the Blackwell scalar: more hidden, a shorter step
    from hnplan.catalog.runs import training_runs
    from hnplan.planning.validation import predict_run

    run = next(r for r in training_runs() if r.id == "mbridge2608-h100-qwen3-30b-a3b-16-bf16")
    at_one = run.model_copy(update={"overrides": {**run.overrides, "ep_comm_overlap_fraction": 1.0}})
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
    assert not [k for k in (*out.field_sources, *out.assumptions) if k.startswith("ep_comm_overlap_fraction_by")]
    assert "was 0.44" in out.field_sources["ep_comm_overlap_fraction"]
