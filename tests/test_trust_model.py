"""What the published runs of the planned model say of hnplan's plans of it (hnplan.planning.trust_model), in
train and compare."""

import json

import pytest
from typer.testing import CliRunner

from hnplan.catalog.runs import TrainingRun
from hnplan.cli import app
from hnplan.planning import prediction_cache, trust, trust_model

runner = CliRunner()


def _run(rid, model, system):
    return TrainingRun.model_validate(
        dict(
            id=rid,
            name=rid,
            source="test",
            model=model,
            system=system,
            gpus=8,
            seq_len=4096,
            global_batch_seqs=128,
            dtype="bf16",
            metric="tokens_per_s_per_gpu",
            published=1e4,
            tolerance_pct=15,
            expect="gap",
            gap_bound_pct=60,
            gap_reason="test",
        )
    )


@pytest.fixture()
def runs_and_errors(monkeypatch):
    """Replace the validation set by the given runs and hnplan's speed errors on them."""

    def use(errors: dict[str, tuple[str, str, float]]):
        runs = [_run(rid, model, system) for rid, (model, system, _) in errors.items()]
        monkeypatch.setattr(prediction_cache, "cached_training_runs", lambda: runs)
        fake = lambda rs, cat: {r.id: errors[r.id][2] for r in rs}  # noqa: E731
        monkeypatch.setattr(trust_model, "speed_errors", fake)
        monkeypatch.setattr(trust, "speed_errors", fake)  # compare's per-accelerator errors, passed on

    return use


def test_a_model_whose_runs_all_come_out_fast_is_said_to_be_planned_fast(cat, runs_and_errors):
    # three runs of one model at +40, +45 and +50 % (and one of another model, left out): the median +45 %, so a
    # plan of it likely gives 1 / 1.45 of the throughput shown, 31 % less
    runs_and_errors(
        {
            "a": ("gpt-oss-120b", "gb300-nvl72", 0.40),
            "b": ("gpt-oss-120b", "hgx-h100-ib-ndr", 0.45),
            "c": ("gpt-oss-120b", "dgx-b200-ib-ndr", 0.50),
            "d": ("llama3.1-8b", "gb300-nvl72", -0.30),
        }
    )
    said = trust_model.model_runs_sentence("gpt-oss-120b", cat)
    assert said.startswith(
        "The validation set holds 3 published training runs of gpt-oss-120b (on gb300, h100-sxm, b200; stack "
        "megatron-core): hnplan reads them +40 % to +50 %, median +45 % (speed errors, positive = faster than "
        "measured; 3 of 3 reported without a tolerance"
    )
    assert "hnplan leans optimistic for this model" in said
    assert "likely gets about 31 % fewer tokens a second than shown, its steps and days about 1.45 times" in said
    assert "None of those runs" not in said  # the test runs name no stack: the planner's defaults, as the plan
    other = trust_model.model_runs_sentence("gpt-oss-120b", cat, stack="megatron-bridge-2608-mxfp8")
    assert other.endswith(
        "None of those runs is catalogued under this plan's stack (megatron-bridge-2608-mxfp8): they were measured "
        "under the stacks named, with their own recipes' settings."
    )


def test_a_model_planned_slow_and_one_without_a_lean(cat, runs_and_errors):
    # two runs at -20 and -30 %: median -25 %, a plan likely 1 / 0.75 - 1 = 33 % faster than shown
    runs_and_errors({"a": ("llama3.1-8b", "gb300-nvl72", -0.20), "b": ("llama3.1-8b", "gb200-nvl72", -0.30)})
    slow = trust_model.model_runs_sentence("llama3.1-8b", cat)
    assert "hnplan leans pessimistic" in slow and "about 33 % more tokens a second than shown" in slow
    assert "its steps and days about 25 % shorter than shown" in slow
    # -3, +1 and +4 %: scatter, no lean said; one run: "reads it"
    runs_and_errors(
        {
            "a": ("llama3.1-8b", "gb300-nvl72", -0.03),
            "b": ("llama3.1-8b", "gb200-nvl72", 0.01),
            "c": ("llama3.1-8b", "gb200-nvl72", 0.04),
        }
    )
    scatter = trust_model.model_runs_sentence("llama3.1-8b", cat)
    assert "-3 % to +4 %, median +1 %" in scatter and "leans" not in scatter
    runs_and_errors({"a": ("llama3.1-8b", "gb300-nvl72", 0.02)})
    assert "hnplan reads it +2 % (speed errors" in trust_model.model_runs_sentence("llama3.1-8b", cat)


def test_a_model_without_runs_says_it_is_not_validated(cat, runs_and_errors):
    runs_and_errors({"a": ("llama3.1-8b", "gb300-nvl72", 0.02)})
    said = trust_model.model_runs_sentence("mixtral-8x7b", cat)
    assert said.startswith("No published training run of mixtral-8x7b is in the validation set")


def test_train_and_compare_carry_the_sentence(runs_and_errors):
    runs_and_errors({"a": ("llama3.1-8b", "gb300-nvl72", 0.30), "b": ("llama3.1-8b", "gb200-nvl72", 0.20)})
    args = ["--model", "llama3.1-8b", "--gpus", "8", "--seq-len", "4096"]
    r = runner.invoke(app, ["train", *args, "--system", "gb200-nvl72", "--global-batch-size", "64", "--json"])
    assert r.exit_code == 0, r.output
    note = json.loads(r.stdout)["model_evidence_note"]
    assert "median +25 %" in note and "about 20 % fewer tokens a second" in note and "'expect: gap'" in note
    text = runner.invoke(app, ["train", *args, "--system", "gb200-nvl72", "--global-batch-size", "64"])
    assert "about 20 % fewer tokens a second" in " ".join(text.output.split())
    c = runner.invoke(app, ["compare", *args, "--systems", "gb200-nvl72", "--tokens", "1B", "--json"])
    assert c.exit_code == 0, c.output
    assert "about 20 % fewer tokens a second" in c.stdout
