"""What a try-out of the plain-PyTorch stack (``pytorch-eager``) on one H200 found: a one-GPU search listing the
same plan under three ZeRO stages, a pinned knob the stack does not implement taken without a word, the
gradients note of ``memory`` missing from ``train``, ``compare --gpus 1 --dp 2`` buying a server to hold the
pin, GEMM shapes refused in the counts the other flags take, and "1 GPUs"."""

import json

from typer.testing import CliRunner

from hnplan.cli import app
from hnplan.planning.training import make_job, search_best, unimplemented_pins

from clitext import one_line

try:  # click before 8.2 mixes stderr into the output unless told not to
    runner = CliRunner(mix_stderr=False)
except TypeError:
    runner = CliRunner()

ONE_H200 = ["--system", "hgx-h200-ib-ndr", "--gpus", "1", "--stack", "pytorch-eager", "--seq-len", "4096"]


def test_one_gpu_search_keeps_one_zero_stage():
    """ZeRO shards over dp x cp ranks; at one rank stages 0, 2 and 3 (pytorch-eager's) are one plan with other
    buffers, and the search listed each micro-batch three times (24 candidates). Now only the lowest stage: 1, 2, 4
    and 8 sequences a micro-batch, 8 candidates with recompute none and full."""
    job = make_job("llama3.2-1b", "hgx-h200-ib-ndr", 1, 4096, 16, stack="pytorch-eager")
    ests, searched, feasible = search_best(job, top=8)
    assert searched == 8 and feasible == 7  # micro-batch 8 of 4,096 tokens without recompute does not fit
    assert {e.plan.zero_stage for e in ests} == {0}
    plans = [(e.plan.microbatch_size, e.plan.recompute) for e in ests]
    assert len(set(plans)) == len(plans)
    # a pinned stage is still planned as asked, and at dp > 1 every stage the stack has is searched
    (pinned,), _, _ = search_best(job, fixed={"zero_stage": 3})
    assert pinned.plan.zero_stage == 3
    job8 = make_job("llama3.2-1b", "hgx-h200-ib-ndr", 8, 4096, 64, stack="pytorch-eager")
    ests8, _, _ = search_best(job8, top=200)
    assert {e.plan.zero_stage for e in ests8 if e.plan.dp > 1} == {0, 2, 3}


def test_pinned_knob_the_stack_lacks_is_said():
    """``--recompute selective`` on pytorch-eager (it implements none and full) was planned without a word."""
    res = runner.invoke(app, ["train", "--model", "llama3.2-1b", *ONE_H200, "--recompute", "selective", "--zero", "1"])
    assert res.exit_code == 0, res.output
    assert (
        "pytorch-eager does not implement ZeRO 1 (it implements 0, 2, 3) or recompute selective (it implements "
        "none, full): planned as asked, as if it did"
    ) in one_line(res.stdout)
    assert unimplemented_pins(make_job("llama3.2-1b", "hgx-h200-ib-ndr", 1, 4096, 4).stack, {"recompute": "full"}) == ""


def test_train_says_where_the_gradients_went_as_memory_does():
    """``memory`` explains that a plain-PyTorch step's gradients are allocated in its backward; ``train`` (text and
    --json) said nothing of it. Llama 3.2 1B: 1.236 G parameters x 4 bytes (fp32 gradients of fp32 parameters) =
    4.60 GiB."""
    args = ["train", "--model", "llama3.2-1b", *ONE_H200, "--global-batch-tokens", "16384", "--json"]
    d = json.loads(runner.invoke(app, args).stdout)
    assert d["gradients_note"].startswith("the step's 4.60 GiB of gradients are allocated during its backward")
    p = d["parallel"]
    mem = runner.invoke(
        app,
        ["memory", "--model", "llama3.2-1b", "--stack", "pytorch-eager", "--seq-len", "4096", "--json"]
        + ["--microbatch-size", str(p["microbatch_size"]), "--num-microbatches", str(p["num_microbatches"])]
        + ["--zero", "0", "--recompute", p["recompute"]],
    )
    assert json.loads(mem.stdout)["gradients_note"] == d["gradients_note"]
    # a tuned stack keeps its gradient buffer: no note
    tuned = ["train", "--model", "llama3.2-1b", *ONE_H200[:-4], "--seq-len", "4096", "--json"]
    assert "gradients_note" not in json.loads(runner.invoke(app, tuned).stdout)


def test_compare_refuses_pins_past_the_gpus_asked():
    """``compare --gpus 1 --dp 2`` bought an 8-GPU server on every design to hold the pin (said only in the status
    column); now one line, exit 3, as ``train`` refuses it."""
    base = ["compare", "--model", "llama3.2-1b", "--systems", "hgx-h200-ib-ndr", "--tokens", "1e9"]
    base += ["--seq-len", "4096", "--global-batch-tokens", "65536"]
    res = runner.invoke(app, [*base, "--gpus", "4", "--dp", "2", "--tp", "4"])
    assert res.exit_code == 3
    assert one_line(res.stderr) == (
        "infeasible: tp 4 x dp 2 = 8 needs 8 GPUs, more than --gpus 4: give --gpus 8 or more, or pin fewer ranks"
    )
    ok = runner.invoke(app, [*base, "--gpus", "1", "--no-trust"], env={"COLUMNS": "250"})
    assert ok.exit_code == 0, ok.output
    assert "llama3.2-1b on 1 GPU per design" in ok.stdout and "1 GPUs" not in ok.stdout


def test_gemm_shape_takes_counts():
    res = runner.invoke(app, ["gemm", "--accelerator", "h200-sxm", "--shape", "4Kix4Kix4Ki", "--json"])
    assert res.exit_code == 0, res.output
    (r,) = json.loads(res.stdout)["results"]
    assert (r["m"], r["n"], r["k"]) == (4096, 4096, 4096)


def test_memory_names_autocast_weight_copies():
    """The breakdown's "weights" of a plain-PyTorch plan are torch.autocast's bf16 copies of the fp32 parameters
    (Llama 3.2 1B: 1,235,814,400 x 2 bytes = 2.30 GiB; with full recomputation only the tied LM head's,
    128,256 x 2,048 x 2 bytes = 0.49 GiB), the fp32 parameters being the optimizer's master weights: said."""
    base = ["memory", "--model", "llama3.2-1b", "--stack", "pytorch-eager", "--seq-len", "4096", "--json"]
    d = json.loads(runner.invoke(app, base).stdout)
    assert d["params_gib"] * 2**30 == 1_235_814_400 * 2
    assert d["weights_note"].startswith("the 2.30 GiB of weights are torch.autocast's bf16 copies of the fp32 param")
    assert "counted with the optimizer states (as the fp32 master weights" in d["weights_note"]
    full = json.loads(runner.invoke(app, [*base, "--recompute", "full"]).stdout)
    assert full["params_gib"] * 2**30 == 128_256 * 2048 * 2
    assert "the 0.49 GiB of weights" in full["weights_note"] and "only the LM head's" in full["weights_note"]
    tuned = json.loads(runner.invoke(app, [*base[:4], "megatron-core", *base[5:]]).stdout)
    assert "weights_note" not in tuned
