"""Serving memory as engines size it: the visible HBM of every accelerator, the engine's memory fraction
and a KV budget; more memory never lowers the batch."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from hnplan import units
from hnplan.cli import app
from hnplan.errors import InfeasiblePlan
from hnplan.memory import hbm_capacity_bytes, kv_capacity
from hnplan.memory.breakdown import HBM_DRIVER_RESERVE_FRACTION
from hnplan.planning.inference import Replica, max_batch, prefill_pass, resolve, steady_state
from hnplan.planning.inference.core import kv_bytes_per_token_per_gpu

FAST = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_visible_hbm_of_every_accelerator(cat):
    # sourced readings (torch.cuda.mem_get_info or nvidia-smi), and the rule for the rest:
    # nominal GiB less the 1.1 % measured on H100 (79.11 of 80 GiB)
    gib = {
        a: units.to_GiB(hbm_capacity_bytes(cat.accelerator(a)))
        for a in ("a100-sxm-80gb", "h100-sxm", "h200-sxm", "b200", "gb200", "mi300x", "h800-sxm", "ascend-910c")
    }
    assert gib["a100-sxm-80gb"] == pytest.approx(79.15)
    assert gib["h200-sxm"] == pytest.approx(139.81)
    assert gib["b200"] == pytest.approx(183359 / 1024, abs=0.01)
    assert gib["h800-sxm"] == pytest.approx(79.11)  # same HBM3 as H100, rule
    assert gib["ascend-910c"] == pytest.approx(128 * 79.11 / 80)
    assert HBM_DRIVER_RESERVE_FRACTION == pytest.approx(0.89 / 80)
    for a, v in gib.items():  # never above the nominal capacity in GiB, never below it by more than 1.5 %
        nominal = cat.accelerator(a).hbm_gb
        assert 0.985 * nominal <= v <= nominal, a


def test_kv_budget_sets_the_cache_directly(cat):
    # Llama 3.1 8B on one H200, bf16 KV: 2 x 32 layers x 8 KV heads x 128 x 2 B = 128 KiB per token;
    # 20 GiB of KV cache = 163,840 tokens = 80 sequences of 2,048 tokens
    s = resolve("llama3.1-8b", "hgx-h200-ib-ndr", Replica(kv_budget_gib=20.0), cat)
    assert max_batch(s, 2048) == 80
    # a budget beyond the device is capped at what it holds: the whole 139.81 GiB less weights etc.
    big = resolve("llama3.1-8b", "hgx-h200-ib-ndr", Replica(kv_budget_gib=1000.0), cat)
    full = resolve("llama3.1-8b", "hgx-h200-ib-ndr", Replica(memory_utilization=1.0), cat)
    assert max_batch(big, 2048) == max_batch(full, 2048)


@FAST
@given(
    u=st.floats(0.5, 0.99),
    du=st.floats(0.0, 0.3),
    ctx=st.integers(256, 32000),
    model=st.sampled_from(["llama3.1-8b", "llama3.1-70b"]),
    tp=st.sampled_from([1, 2, 4, 8]),
)
def test_more_memory_never_lowers_the_batch(cat, u, du, ctx, model, tp):
    def mb(**kw):
        try:
            return max_batch(resolve(model, "hgx-h100-ib-ndr", Replica(tp=tp, **kw), cat), ctx)
        except InfeasiblePlan:
            return 0

    assert mb(memory_utilization=u) <= mb(memory_utilization=min(1.0, u + du))
    assert mb(kv_budget_gib=10 * u) <= mb(kv_budget_gib=10 * u + 40 * du)
    m, acc, o = cat.model(model), cat.accelerator("h100-sxm"), cat.design("hgx-h100-ib-ndr").memory_overheads
    bigger = acc.model_copy(update={"hbm_visible_gib": acc.hbm_visible_gib * (1 + du)})
    assert (
        kv_capacity(m, acc, tp=tp, utilization=u, overheads=o).tokens
        <= kv_capacity(m, bigger, tp=tp, utilization=u, overheads=o).tokens
    )


def test_infer_and_memory_cli_take_the_engine_memory_settings():
    r = CliRunner()
    base = [
        "infer",
        "--model",
        "llama3.1-8b",
        "--system",
        "hgx-h100-ib-ndr",
        "--input-tokens",
        "1000",
        "--output-tokens",
        "1000",
        "--tp",
        "1",
        "--json",
    ]
    d09 = json.loads(r.invoke(app, base).stdout)
    d05 = json.loads(r.invoke(app, [*base, "--gpu-memory-utilization", "0.5"]).stdout)
    assert d05["max_batch"] < d09["max_batch"]
    assert d05["hbm_gib"] == pytest.approx(79.11 * 0.5)
    # 10 GiB / 128 KiB = 81,920 tokens = 40 sequences of 2,000 tokens
    assert json.loads(r.invoke(app, [*base, "--kv-budget-gib", "10"]).stdout)["max_batch"] == 40
    mem = [
        "memory",
        "--model",
        "llama3.1-8b",
        "--mode",
        "inference",
        "--seq-len",
        "2048",
        "--system",
        "hgx-h200-ib-ndr",
        "--json",
    ]
    d = json.loads(r.invoke(app, [*mem, "--kv-budget-gib", "20"]).stdout)
    assert d["kv_capacity"]["max_batch_at_seq_len"] == 80
    bad = r.invoke(app, [*base, "--gpu-memory-utilization", "1.5"])
    assert bad.exit_code == 2


# --- serving engines ---------------------------------------------------------------------------------
def test_engines_are_catalog_entries(cat):
    e = {i: cat.get("engines", i) for i in ("vllm", "sglang", "tensorrt-llm", "cloudmatrix-infer")}
    assert (e["vllm"].max_num_seqs, e["vllm"].max_num_batched_tokens) == (1024, 8192)  # vllm arg_utils.py
    assert e["tensorrt-llm"].memory_rule == "free" and not e["tensorrt-llm"].chunked_prefill
    assert "int8" in e["cloudmatrix-infer"].weight_dtypes  # W8A8, arXiv:2506.12708


def test_engine_host_time_and_ttft_hand_derived(cat):
    # vLLM adds 4 ms of host time per iteration: TPOT = decode + prefill share + 4 ms; the first token is the
    # request's prefill plus, in each of ceil(I / 8192) iterations (chunked prefill), the decode of the other
    # sequences (the step less a lone sequence's: the weights stream once) and the host time
    bare = resolve("llama3.1-8b", "hgx-h100-ib-ndr", Replica(dtype="fp8"), cat)
    vllm = resolve("llama3.1-8b", "hgx-h100-ib-ndr", Replica(dtype="fp8", engine="vllm"), cat)
    p0 = steady_state(bare, 64, 2048, 128)
    p1 = steady_state(vllm, 64, 2048, 128)
    assert p1.decode_s == pytest.approx(p0.decode_s)
    assert p1.tpot_s == pytest.approx(p0.decode_s + p1.breakdown_s["prefill_in_iteration"] + 0.004)
    others = p0.decode_s - steady_state(bare, 1, 2048, 128).decode_s
    assert p1.ttft_s == pytest.approx(p1.prefill_single_s + 1 * (others + 0.004))
    assert p0.ttft_s == pytest.approx(p0.prefill_single_s + others)
    long = steady_state(vllm, 8, 20000, 128)
    others8 = long.decode_s - steady_state(bare, 1, 20000, 128).decode_s
    assert long.ttft_s == pytest.approx(long.prefill_single_s + 3 * (others8 + 0.004))  # 20000 / 8192 -> 3


def test_cuda_graph_padding_hand_derived(cat):
    # TensorRT-LLM's throughput runs capture decode graphs at 1, 2, 4, ..., 256, 384, 512, 1024, 2048, ... with
    # padding (perf-overview llm_options.yml); sizes above min(max_batch_size 2048, max_num_tokens 8192) drop
    from hnplan.planning.inference import decode_step, graph_batch

    trt = resolve("llama3.1-405b", "hgx-h100-ib-ndr", Replica(tp=8, dtype="fp8", engine="tensorrt-llm"), cat)
    assert [graph_batch(trt, b) for b in (1, 3, 212, 256, 300, 600, 1248, 2048, 2049)] == [
        1,
        4,
        256,
        256,
        384,
        1024,
        2048,
        2048,
        2049,
    ]
    vllm = resolve("llama3.1-8b", "hgx-h100-ib-ndr", Replica(dtype="fp8", engine="vllm"), cat)
    assert graph_batch(vllm, 212) == 212  # no graph sizes in the entry: no padding
    # the padded step runs GEMMs and collectives at 256 sequences but reads the KV of the 212 real ones
    real, full = decode_step(trt, 212, 2176), decode_step(trt, 256, 2176)
    padded = decode_step(trt, 212, 2176, padded_to=256)
    assert real["time_s"] < padded["time_s"] < full["time_s"]
    assert padded["tp_allreduce_s"] == pytest.approx(full["tp_allreduce_s"])
    kv_read = 2176 * kv_bytes_per_token_per_gpu(trt)  # one sequence's KV on one GPU, all layers
    assert full["bytes"] - padded["bytes"] == pytest.approx(44 * kv_read, rel=0.02)
    # a decode-only pool replays the padded graph every iteration (208 sequences of 4,224 tokens fit the KV)
    p = steady_state(trt, 208, 128, 4096, context_tokens=2176, max_context_tokens=4224, disaggregated=True)
    assert p.decode_s == pytest.approx(decode_step(trt, 208, 2176, padded_to=256)["time_s"])


def test_engine_caps_the_batch_and_sizes_memory_its_way(cat):
    # Llama 3.1 8B fp8 on H200 at 1,000 + 1,000 tokens: memory holds far more than vLLM's 1,024 sequences
    bare = resolve("llama3.1-8b", "hgx-h200-ib-ndr", Replica(dtype="fp8"), cat)
    vllm = resolve("llama3.1-8b", "hgx-h200-ib-ndr", Replica(dtype="fp8", engine="vllm"), cat)
    assert max_batch(bare, 200) > 1024 and max_batch(vllm, 200) == 1024
    # TensorRT-LLM: the KV cache takes 90 % of what is free after weights, workspace and overheads
    from hnplan.planning.inference import fixed_bytes_per_gpu, kv_budget_bytes

    trt = resolve("llama3.1-8b", "hgx-h200-ib-ndr", Replica(dtype="fp8", engine="tensorrt-llm"), cat)
    free = units.GiB_to_bytes(139.81) - fixed_bytes_per_gpu(trt)
    assert kv_budget_bytes(trt) == pytest.approx(0.9 * free)


def test_int8_w8a8_on_ascend(cat):
    # the 910C's INT8 peak is 2 x its fp16 peak (Da Vinci cube: 8,192 INT8 vs 4,096 FP16 MACs per cycle); bf16
    # runs below fp16 on it: msmodeling's die profile, 353.9 bf16 / 376 fp16 / 752 int8 TFLOP/s per die, x 2 dies
    acc = cat.get("accelerators", "ascend-910c")
    assert acc.dense_tflops["int8"] == 2 * acc.dense_tflops["fp16"] == 1504.0
    assert acc.dense_tflops["bf16"] == pytest.approx(2 * 353.9)
    s = resolve("deepseek-v3", "cloudmatrix-384", Replica(ep=32, dtype="int8", engine="cloudmatrix-infer"), cat)
    b = resolve("deepseek-v3", "cloudmatrix-384", Replica(ep=32, dtype="bf16", engine="cloudmatrix-infer"), cat)
    assert s.replica.kv == "bf16"  # W8A8 keeps a bf16 KV cache unless told otherwise
    from hnplan.planning.inference import weights_bytes_per_gpu

    # 1 vs 2 bytes, except the embedding and the LM head (2 x 129,280 x 7,168), bf16 in both
    vocab = 2 * 129280 * 7168
    assert weights_bytes_per_gpu(s) == pytest.approx((weights_bytes_per_gpu(b) - 2 * vocab) / 2 + 2 * vocab)
    # a compute-bound prefill pass is faster at the INT8 peak: the same FLOPs, the GEMMs at 0.774 x 1,504 = 1,164
    # against 0.70 x 707.8 = 495 TFLOP/s in bf16 (2.35x) while attention stays bf16, so its compute takes between
    # 1/2.35 and all of the bf16 time (0.54 here; 0.61 when both dtypes ran at 0.70 of a 752-based peak)
    ps, pb = prefill_pass(s, 4, 4096), prefill_pass(b, 4, 4096)
    assert ps["flops"] == pb["flops"]
    assert 1 / 2.35 < ps["compute_s"] / pb["compute_s"] < 1
    assert ps["time_s"] < pb["time_s"]
    from hnplan.errors import InputError

    with pytest.raises(InputError, match="no int8 peak"):
        resolve("llama3.1-8b", "hgx-h100-ib-ndr", Replica(dtype="int8"), cat)


def test_per_system_dtype_and_engine(cat):
    from hnplan.planning.inference import Traffic, gpus_vs_rate
    from hnplan.planning.inference.core import per_system

    assert per_system({"cloudmatrix-384": "int8", "default": "fp8"}, "gb200-nvl72") == "fp8"
    assert per_system("bf16", "cloudmatrix-384") == "bf16"
    df = gpus_vs_rate(
        "llama3.1-8b",
        ["hgx-h100-ib-ndr", "cloudmatrix-384"],
        [10.0],
        Traffic(1000, 200),
        1.0,
        0.05,
        dtype={"cloudmatrix-384": "int8", "default": "fp8"},
        engine={"cloudmatrix-384": "cloudmatrix-infer"},
        fixed={"tp": 1},
        catalog=cat,
    )
    assert list(df["dtype"]) == ["fp8", "int8"] and (df["status"] == "ok").all()


def test_engine_dequant_cost_is_honoured(cat):
    # vLLM quantises NVFP4 activations in a separate kernel: 0.27 extra time per pass (vLLM PR #20646 on
    # B200); on one GPU (no collectives) the decode pass takes 1.27 x the bare pass, and FP8 is not charged
    for dtype, f in (("fp4", 1.27), ("fp8", 1.0)):
        bare = resolve("llama3.1-8b", "hgx-b200-ib-xdr", Replica(dtype=dtype), cat)
        vllm = resolve("llama3.1-8b", "hgx-b200-ib-xdr", Replica(dtype=dtype, engine="vllm"), cat)
        assert steady_state(vllm, 64, 1000, 200).decode_s == pytest.approx(
            f * steady_state(bare, 64, 1000, 200).decode_s
        )


def test_engine_dtype_check(cat):
    from hnplan.errors import InputError

    with pytest.raises(InputError, match="weight_dtypes"):
        resolve("llama3.1-8b", "hgx-b200-ib-xdr", Replica(dtype="fp4", engine="cloudmatrix-infer"), cat)


# --- power as a function of load ---------------------------------------------------------------------
def test_power_follows_the_modelled_pass_hand_derived(cat):
    from hnplan.planning.inference import operating_point

    d = operating_point(
        "llama3.1-8b", "hgx-h100-ib-ndr", 1000, 1000, replica=Replica(dtype="fp8"), batch=8, catalog=cat
    )
    acc, fac = cat.accelerator("h100-sxm"), cat.facility
    idle = acc.idle_w if acc.idle_w is not None else fac.accelerator_idle_fraction.value * acc.tdp_w
    u = max(d["compute_busy"], d["memory_busy"])
    assert d["gpu_utilisation"] == pytest.approx(u)
    # linear between idle and TDP: P = idle + (700 W - idle) u
    assert d["gpu_power_w"] == pytest.approx(idle + (700 - idle) * u)
    # the node draws its rated power less the accelerators' headroom: 8 x (rated share - (TDP - P_gpu))
    assert d["node_power_w"] == pytest.approx(8 * (d["it_power_kw"] * 1e3 - (700 - d["gpu_power_w"])))
    assert d["joules_per_token"] == pytest.approx(d["node_power_w"] / 8 / d["tokens_per_s"])
    assert d["joules_per_request"] == pytest.approx(d["joules_per_token"] * 1000)
    assert d["gpu_power_w"] < 700 and d["compute_busy"] < d["memory_busy"]  # decode at batch 8: memory-bound


@FAST
@given(b1=st.integers(1, 400), b2=st.integers(1, 400))
def test_joules_per_token_fall_with_batch_until_compute_bound(cat, b1, b2):
    from hnplan.planning.inference import serving_power

    s = resolve("llama3.1-8b", "hgx-h100-ib-ndr", Replica(dtype="fp8"), cat)
    lo, hi = sorted((b1, b2))
    # a batch that crosses a GEMM tile boundary (128 rows) pays a partly empty tile, so J/token is not
    # monotonic batch by batch (125 -> 129: +0.2 %); at twice the batch the shared weight reads dominate
    hi = min(max(hi, 2 * lo), 500)  # 511 sequences of 2,000 tokens fit the KV cache
    p_lo, p_hi = steady_state(s, lo, 1000, 1000), steady_state(s, hi, 1000, 1000)
    if p_hi.compute_busy < 0.5:  # below the compute bound more sequences share the same weight reads
        assert serving_power(s, p_hi)["joules_per_token"] <= serving_power(s, p_lo)["joules_per_token"] * (1 + 1e-9)


def test_rate_plan_reports_power_at_its_load(cat):
    from hnplan.planning.inference import Traffic, plan_for_rate

    d = plan_for_rate(
        "llama3.1-8b", "hgx-h100-ib-ndr", 20.0, Traffic(1000, 200), 1.0, 0.05, dtype="fp8", fixed={"tp": 1}, catalog=cat
    ).to_dict()
    # the GPUs serve 20 requests/s x 200 tokens: energy per token = their IT power / 4,000 tokens/s
    assert d["joules_per_token"] == pytest.approx(d["node_power_w"] / 8 * d["gpus"] / 4000.0)
    assert d["joules_per_request"] == pytest.approx(d["joules_per_token"] * 200)
    assert d["gpu_power_w"] < 700 and d["gpu_utilisation"] <= d["utilisation"] + 1e-12


def test_engine_without_nccl_nvls_reduces_on_rings(cat):
    # SGLang runs NCCL with NCCL_NVLS_ENABLE=0 (engine nccl_nvls false); TensorRT-LLM leaves NVLS on.
    # Llama 3.1 405B TP8 on 8 x H100, a 256-token pass: S = 256 x 16384 x 2 B = 8 MiB per all-reduce.
    # NVLink4: B_u = 450 GB/s x 0.82 = 369 GB/s.
    from hnplan.comm import best_time
    from hnplan.planning.inference.steady import _comm_time_s

    s = 256 * 16384 * 2
    bu = 450e9 * 0.82
    nvls = 25e-6 + s * 9 / 8 / (bu * 0.85)  # NCCL's NVLS latency + S (q+1)/q / (B_u e): 55.09 us
    # and NCCL's chunk steps: 8 MiB moves in 32 KiB chunks over 16 channels x 8 heads, 1.5 steps per pipeline
    # more than 128 KiB chunks would take, at 5.69 us each (nvlink4 inr_chunk_step_us): 8.53 us, 63.62 us in all
    nvls += s / 128 * (1 / 32768 - 1 / 131072) * 5.69e-6
    # ring on LL128 (NCCL's 14 + 14 x 1.9 us, 120 of 128 bytes per line carry data): 83.04 us (Simple 95.8 us,
    # LL 119 us, tree on LL128 89.9 us)
    ring = 14e-6 + 2 * 7 * 1.9e-6 + 2 * 7 / 8 * s / (bu * 120 / 128)
    setups = {
        e: resolve("llama3.1-405b", "hgx-h100-ib-ndr", Replica(tp=8, dtype="fp8", engine=e), cat)
        for e in ("tensorrt-llm", "sglang")
    }
    t_trt, alg_trt = best_time("allreduce", s, setups["tensorrt-llm"].placements["tp"])
    t_sgl, alg_sgl = best_time("allreduce", s, setups["sglang"].placements["tp"])
    assert (alg_trt, alg_sgl) == ("inr", "ring")
    assert t_trt == pytest.approx(nvls, rel=1e-6) and t_sgl == pytest.approx(ring, rel=1e-6)
    # the pass charges two all-reduces per layer (126 layers)
    assert _comm_time_s(setups["sglang"], 256)["tp_allreduce"] == pytest.approx(2 * 126 * ring, rel=1e-6)
