"""``hnplan memory``: help, JSON keys and the numbers it prints."""

import json

import pytest
from typer.testing import CliRunner

from hnplan.cli import app
from hnplan.units import GiB_to_bytes

from clitext import one_line

runner = CliRunner()
BREAKDOWN = {"params_gib", "grads_gib", "optimizer_gib", "activations_gib", "kv_cache_gib", "overhead_gib", "total_gib"}


def _json(args):
    r = runner.invoke(app, ["memory", *args, "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_help():
    r = runner.invoke(app, ["memory", "--help"])
    assert r.exit_code == 0 and "--recompute" in r.stdout and "GiB" in r.stdout


def test_train_json_keys_and_values():
    d = _json(
        [
            "--model",
            "llama3.1-8b",
            "--tp",
            "2",
            "--pp",
            "2",
            "--dp",
            "4",
            "--seq-len",
            "8192",
            "--microbatch-size",
            "1",
            "--zero",
            "1",
            "--recompute",
            "selective",
            "--no-dropout",
        ]
    )
    assert BREAKDOWN <= set(d) and {"stage", "parallel", "accounting"} <= set(d)
    assert d["total_gib"] == pytest.approx(sum(d[k] for k in BREAKDOWN - {"total_gib"}))
    assert "fits" not in d  # only with --system


def test_train_with_system_spills():
    # 7B-class full fine-tune in fp32 on one H100: does not fit, optimizer states go to host memory
    d = _json(
        [
            "--model",
            "llama2-7b",
            "--accounting",
            "fp32",
            "--zero",
            "0",
            "--seq-len",
            "2048",
            "--recompute",
            "full",
            "--system",
            "hgx-h100-ib-ndr",
        ]
    )
    assert {"fits", "status", "hbm_gib", "tiers", "spill", "system"} <= set(d)
    assert d["fits"] is False and d["status"] == "spills"
    assert d["spill"]["spills"][0]["part"] == "optimizer" and d["spill"]["spills"][0]["tier"] == "host"
    assert d["hbm_gib"] == pytest.approx(79.11)


def test_inference_json():
    d = _json(
        [
            "--model",
            "llama3.1-8b",
            "--mode",
            "inference",
            "--batch",
            "4",
            "--seq-len",
            "4096",
            "--system",
            "hgx-h100-ib-ndr",
        ]
    )
    assert BREAKDOWN <= set(d)
    assert d["kv_cache_gib"] == pytest.approx(2.0)  # 4 x 4096 tokens x 128 KiB
    assert d["params_gib"] == pytest.approx(14.96, abs=0.005)
    assert d["fits"] is True
    assert d["kv_capacity"]["max_tokens"] == pytest.approx(447_088, rel=0.01)


def test_text_output_names_units():
    r = runner.invoke(
        app, ["memory", "--model", "llama3.1-8b", "--mode", "inference", "--seq-len", "4096", "--system", "gb200-nvl72"]
    )
    assert r.exit_code == 0, r.output
    assert "[GiB]" in r.stdout and "total" in r.stdout
    # the parts in the help's words, not the JSON keys' ("kv cache", "grads")
    text = " ".join(r.stdout.split())
    for label in ("weights [GiB]", "gradients [GiB]", "optimizer states [GiB]", "KV cache [GiB]", "runtime overheads"):
        assert label in text, label
    assert "kv cache" not in text and "grads" not in text
    topo = runner.invoke(app, ["topology", "--system", "gb200-nvl72", "--gpus", "1152"])
    assert "network of 1,152 x gb200-nvl72" in topo.stdout  # counts with separators, as every other title


def test_bad_mode_exits_2():
    r = runner.invoke(app, ["memory", "--model", "llama3.1-8b", "--mode", "serve", "--seq-len", "4096"])
    assert r.exit_code == 2


def test_memory_and_train_offload_agree_on_one_plan():
    """``hnplan memory --system`` and ``hnplan train --offload auto`` are one model for one plan: Llama 3.1 70B
    on one HGX H100, TP 8, ZeRO 0 (167.5 GiB a GPU against 79.1): the same footprint, activations, step
    compute, bytes moved to host memory and exposed transfer."""
    plan = ["--model", "llama3.1-70b", "--tp", "8", "--pp", "1", "--dp", "1", "--seq-len", "4096"]
    plan += ["--zero", "0", "--recompute", "selective", "--microbatch-size", "1"]
    mem = _json([*plan, "--num-microbatches", "8", "--system", "hgx-h100-ib-ndr"])
    r = runner.invoke(
        app,
        ["train", *plan, "--system", "hgx-h100-ib-ndr", "--gpus", "8", "--global-batch-size", "8"]
        + ["--offload", "auto", "--json"],
    )
    assert r.exit_code == 0, r.output
    tr = json.loads(r.stdout)
    for part in ("params_gib", "grads_gib", "optimizer_gib", "activations_gib", "overhead_gib", "total_gib"):
        assert mem[part] == pytest.approx(tr["memory_breakdown_gib"][part], rel=1e-12)
    assert mem["status"] == "spills" and tr["fits"]
    assert mem["spill"]["compute_time_s"] == pytest.approx(tr["breakdown_s"]["compute"], rel=1e-12)
    (moved,) = mem["spill"]["spills"]
    assert (moved["part"], moved["tier"]) == ("optimizer", "host")
    assert moved["gib"] == pytest.approx(tr["memory_breakdown_gib"]["offload_host_gib"], rel=1e-12)
    assert mem["spill"]["exposed_s"] == pytest.approx(tr["breakdown_s"]["offload_exposed"], rel=1e-12)
    assert mem["spill"]["exposed_s"] > 0  # 88.4 GiB each way over PCIe (64 GB/s) outlasts the optimizer window
    # what spills is the overflow, 167.5 - 79.11 GiB (the H100's visible HBM), moved at 64 GB/s: 1.48 s a step,
    # of which the optimizer window hides part
    assert moved["gib"] == pytest.approx(mem["spill"]["total_gib"] - 79.11, rel=1e-9)
    assert moved["seconds_per_step"] == pytest.approx(GiB_to_bytes(moved["gib"]) / 64e9, rel=1e-9)
    assert mem["spill"]["exposed_s"] < mem["spill"]["spill_time_s"] == moved["seconds_per_step"]


def test_fp8_inference_kv_cache_as_infer_sizes_it():
    """`memory --dtype fp8` stores the KV cache as `infer --dtype fp8` does (fp8, 1 byte an element) unless
    --kv-dtype says otherwise. Llama 3.1 8B: 32 layers x 8 KV heads x 128 x (K, V) = 65,536 elements a
    token, 64 KiB in fp8 (128 KiB in bf16); 4 x 4096 tokens -> 1.0 GiB (2.0 GiB in bf16)."""
    args = ["--model", "llama3.1-8b", "--mode", "inference", "--batch", "4", "--seq-len", "4096", "--dtype", "fp8"]
    d = _json(args)
    assert d["kv_dtype"] == "fp8"
    assert d["kv_bytes_per_token"] == 65_536
    assert d["kv_cache_gib"] == pytest.approx(1.0)
    assert _json([*args, "--kv-dtype", "bf16"])["kv_cache_gib"] == pytest.approx(2.0)
    bf16 = _json(["--model", "llama3.1-8b", "--mode", "inference", "--batch", "4", "--seq-len", "4096"])
    assert bf16["kv_dtype"] == "bf16" and bf16["kv_cache_gib"] == pytest.approx(2.0)


def test_inference_memory_says_when_the_batch_is_over_the_engines_kv_cache():
    """Llama 3.1 70B FP8 at TP 2 on H100, 2,500-token sequences: 185 fit the engine's KV cache (0.9 of HBM, as
    hnplan infer sizes it), so batch 200 fits the HBM (73.97 of 79.11 GiB, status fits) but infer refuses it: the
    command says both, and JSON carries within_kv_budget."""
    args = ["memory", "--model", "llama3.1-70b", "--mode", "inference", "--seq-len", "2500", "--tp", "2"]
    args += ["--dtype", "fp8", "--system", "hgx-h100-ib-ndr"]
    over = runner.invoke(app, [*args, "--batch", "200", "--json"])
    d = json.loads(over.stdout)
    assert (d["status"], d["within_kv_budget"], d["kv_capacity"]["max_batch_at_seq_len"]) == ("fits", False, 185)
    text = runner.invoke(app, [*args, "--batch", "200"], env={"COLUMNS": "200"}).stdout
    assert "no (185 of 200 fit)" in text and "hnplan infer refuses it" in " ".join(text.split())
    assert "fits in HBM, not in the engine's KV cache (below)" in text  # the status row does not say a plain "fits"
    assert json.loads(runner.invoke(app, [*args, "--batch", "185", "--json"]).stdout)["within_kv_budget"] is True
    refused = runner.invoke(app, ["infer", "--model", "llama3.1-70b", "--system", "hgx-h100-ib-ndr", "--tp", "2"]
                            + ["--dtype", "fp8", "--input-tokens", "2000", "--output-tokens", "500", "--batch", "200"])  # fmt: skip
    assert refused.exit_code == 3 and "185" in refused.output


def test_spilling_training_plan_says_train_refuses_it_without_offload():
    """A tryout: ``memory`` said "spills" (exit 0) for Llama 3.1 70B at TP 8, ZeRO 0 on one HGX H100 where
    ``train`` with the same plan says it does not fit (exit 3): the spill is what --offload auto moves, said."""
    plan = ["--model", "llama3.1-70b", "--tp", "8", "--pp", "1", "--dp", "1", "--seq-len", "4096"]
    plan += ["--zero", "0", "--recompute", "selective", "--microbatch-size", "1", "--num-microbatches", "8"]
    r = runner.invoke(app, ["memory", *plan, "--system", "hgx-h100-ib-ndr"], env={"COLUMNS": "250"})
    assert r.exit_code == 0, r.output
    assert "runs only with the parts above moved to the slower tiers (hnplan train --offload auto" in one_line(r.stdout)
    assert "without offload hnplan train finds it does not fit (exit 3)" in one_line(r.stdout)
    t = runner.invoke(
        app, ["train", *plan[:-2], "--system", "hgx-h100-ib-ndr", "--gpus", "8", "--global-batch-size", "8"]
    )
    assert t.exit_code == 3 and "--offload auto" in one_line(t.stderr)
