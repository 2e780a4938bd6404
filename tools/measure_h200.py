"""Time the kernels and the whole training step hnplan models, on one CUDA GPU, in one short run.

Run on a machine with one NVIDIA GPU, PyTorch and (for the whole step) Hugging Face transformers:

    OUT=/some/dir python3 tools/measure_h200.py [--budget-s 330] [--quick]

Writes CSV files under $OUT (see `data/reference/README.md`, "Kernels and a training step measured on one H200
SXM (2026-12-04)", for what each column means and how the committed copies were taken):

- `env.txt`: GPU, driver, clocks and power before and after, library versions.
- `step.csv`: a Hugging Face `LlamaForCausalLM` with the configuration of Llama 3.2 1B (random weights), trained
  in plain PyTorch: fp32 parameters, `torch.autocast` bf16, SDPA attention, the fp32 loss, AdamW (fused and
  foreach), at 4,096 tokens a sequence and micro-batches 1-8, with and without activation checkpointing; step time
  and peak memory.
- `step_kernels.csv`: the CUDA kernel time of one step (micro-batch 2) by category, from the PyTorch profiler.
- `step_3b.csv` (section `step3b`): the same step with Llama 3.2 3B's configuration (head dimension 128).
- `probe.csv`, `kernels.csv`, `host_floor.csv` (section `probe`): memory by phase of the step, the step with SDPA held
  to FlashAttention-2, the step's kernels one by one, the host's eager launch floor; `gemm_graph.csv` (section
  `gemm_graph`): the GEMM shapes replayed from CUDA graphs; `host_device.csv`, `trace_mbs2.json.gz` (section `trace`):
  host issue time against device time per phase and a Chrome trace of one step.
- `gemm.csv`: the projection shapes of `data/reference/h200_gemm_bf16.csv` again in bf16 (`F.linear`) and in FP8
  e4m3 through `torch._scaled_mm` with per-tensor (cuBLASLt) and per-row (CUTLASS) scales.
- `attention.csv`: causal SDPA forward and forward+backward at head dimension 64 (gpt-oss, Llama 3.2 1B) and 128
  (Llama 3.1 8B), with the FlashAttention and the cuDNN backends named.
- `grouped.csv`: gpt-oss's expert GEMMs (hidden 2,880, FC1 5,760 wide, FC2 2,880) through `torch._grouped_mm`
  and `torch.bmm`, forward and data-gradient shapes, 32-8,192 tokens per expert.

Every timing is the mean over back-to-back calls that run at least `MIN_TIMED_S`, after three warm-up calls, with
CUDA events (the method of `data/reference/h200_kernels.csv`). Sections run in order of value and each stops
when the budget is spent; an error in one shape is recorded in its row and the run goes on.

Not part of the package or of CI (which has no GPU); it imports torch, which hnplan never does.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

import torch
import torch.nn.functional as F

MIN_TIMED_S = 0.02
WARMUP_CALLS = 3
START = time.monotonic()
OUT = Path(os.environ.get("OUT", "out"))
DEV = "cuda" if torch.cuda.is_available() else "cpu"
REPO = Path(__file__).resolve().parents[1]


def elapsed() -> float:
    return time.monotonic() - START


def log(msg: str) -> None:
    print(f"[{elapsed():6.1f}s] {msg}", flush=True)


def sync() -> None:
    if DEV == "cuda":
        torch.cuda.synchronize()


def time_call(fn, min_s: float = MIN_TIMED_S, max_calls: int = 10_000) -> tuple[float, int]:
    """Mean seconds per call of `fn` over back-to-back calls lasting at least `min_s`; returns (mean, calls)."""
    for _ in range(WARMUP_CALLS):
        fn()
    sync()
    # one timed call sizes the loop
    t0 = time.perf_counter()
    fn()
    sync()
    one = max(time.perf_counter() - t0, 1e-6)
    calls = int(min(max_calls, max(3, min_s / one)))
    if DEV == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / calls, calls
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls, calls


class Table:
    """Rows appended to one CSV under $OUT, written through after every row (a killed run keeps what it timed)."""

    def __init__(self, name: str, fields: list[str]):
        self.path = OUT / name
        self.fields = fields
        with self.path.open("w", newline="") as f:
            csv.writer(f).writerow(fields)

    def add(self, **row) -> None:
        with self.path.open("a", newline="") as f:
            csv.writer(f).writerow([_fmt(row.get(k, "")) for k in self.fields])


def _fmt(v):
    if isinstance(v, float):
        return f"{v:.5e}" if (v != 0 and (abs(v) < 1e-2 or abs(v) >= 1e5)) else f"{v:.4f}"
    return v


def nvsmi() -> str:
    try:
        return subprocess.run(
            [
                "nvidia-smi",
                "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu,memory.total",
                "--format=csv",
            ],
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout.strip()
    except Exception as e:  # noqa: BLE001 - a missing nvidia-smi is recorded, not fatal
        return f"nvidia-smi failed: {e}"


def env_section(quick: bool) -> None:
    lines = [f"date_utc: {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}", f"python: {sys.version.split()[0]}"]
    lines.append(f"torch: {torch.__version__} cuda {torch.version.cuda}")
    if DEV == "cuda":
        p = torch.cuda.get_device_properties(0)
        lines.append(f"device: {p.name}, {p.multi_processor_count} SMs, {p.total_memory / 2**30:.1f} GiB")
        lines.append(f"cudnn: {torch.backends.cudnn.version()}")
    try:
        import transformers

        lines.append(f"transformers: {transformers.__version__}")
    except ImportError:
        lines.append("transformers: missing")
    lines.append("nvidia-smi before:\n" + nvsmi())
    # the two ceilings: a large device-to-device copy and a large bf16 GEMM
    n = (1 << 28) if not quick else (1 << 20)
    a = torch.empty(n, dtype=torch.float32, device=DEV).uniform_()
    b = torch.empty_like(a)
    t, _ = time_call(lambda: b.copy_(a))
    lines.append(f"d2d_copy {2 * 4 * n / 1e9:.2f} GB moved: {t * 1e3:.3f} ms, {2 * 4 * n / t / 1e9:.0f} GB/s")
    m = 8192 if not quick else 256
    x = torch.randn(m, m, dtype=torch.bfloat16, device=DEV)
    y = torch.randn(m, m, dtype=torch.bfloat16, device=DEV)
    t, _ = time_call(lambda: x @ y)
    lines.append(f"bf16 gemm {m}^3: {t * 1e3:.3f} ms, {2 * m**3 / t / 1e12:.1f} TFLOP/s")
    (OUT / "env.txt").write_text("\n".join(lines) + "\n")
    log("env: " + " | ".join(lines[-2:]))


LLAMA32_1B = dict(
    hidden_size=2048,
    intermediate_size=8192,
    num_hidden_layers=16,
    num_attention_heads=32,
    num_key_value_heads=8,
    head_dim=64,
    vocab_size=128256,
    max_position_embeddings=131072,
    rope_theta=500000.0,
    tie_word_embeddings=True,
    rms_norm_eps=1e-5,
    attention_dropout=0.0,
    use_cache=False,
)


LLAMA32_3B = dict(
    LLAMA32_1B,
    hidden_size=3072,
    intermediate_size=8192,
    num_hidden_layers=28,
    num_attention_heads=24,
    num_key_value_heads=8,
    head_dim=128,
)
STEP_MODELS = {"llama3.2-1b": LLAMA32_1B, "llama3.2-3b": LLAMA32_3B}


def build_llama(quick: bool, model_id: str = "llama3.2-1b", seq_len: int = 4096):
    """A Hugging Face Llama of ``model_id``'s configuration (:data:`STEP_MODELS`; ``quick``: a tiny one), fp32
    parameters as torch.autocast mixed precision keeps them, SDPA attention, initialised on the device (a 3B model
    takes a minute on the host), in training mode; with its config and sequence length."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg_kw = dict(STEP_MODELS[model_id])
    seq = seq_len
    if quick:
        cfg_kw.update(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4)
        cfg_kw.update(num_key_value_heads=2, head_dim=16, vocab_size=512)
        seq = 64
    cfg = LlamaConfig(**cfg_kw)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    with torch.device(DEV):
        model = LlamaForCausalLM(cfg)
    model.train()
    return model, cfg, seq


def step_section(
    quick: bool, budget_s: float, model_id: str = "llama3.2-1b", configs=None, name="step.csv", seq_len: int = 4096
) -> None:
    model, cfg, seq = build_llama(quick, model_id, seq_len)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"step: model built, {n_params / 1e9:.3f} B parameters, attention {model.config._attn_implementation}")
    table = Table(
        name,
        [
            "config",
            "micro_batch",
            "seq_len",
            "recompute",
            "optimizer",
            "steps",
            "step_s",
            "step_s_min",
            "step_s_max",
            "tokens_per_s",
            "peak_alloc_gib",
            "peak_reserved_gib",
            "params",
            "error",
        ],
    )
    dev_type = "cuda" if DEV == "cuda" else "cpu"

    def make_step(mbs: int, opt):
        ids = torch.randint(0, cfg.vocab_size, (mbs, seq), device=DEV)

        def step():
            with torch.autocast(dev_type, dtype=torch.bfloat16):
                out = model(input_ids=ids, labels=ids)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        return step

    configs = configs or [
        (2, False, "fused"),
        (2, False, "foreach"),
        (1, False, "fused"),
        (4, False, "fused"),
        (8, False, "fused"),
        (4, True, "fused"),
        (8, True, "fused"),
        (16, True, "fused"),
    ]
    if quick:
        configs = configs[:3]
    for mbs, ckpt, opt_kind in configs:
        if elapsed() > budget_s:
            log("step: budget spent, the rest skipped")
            break
        row = dict(
            config=f"{model_id} hf sdpa autocast-bf16 fp32-params",
            micro_batch=mbs,
            seq_len=seq,
            recompute="full" if ckpt else "none",
            optimizer=f"AdamW {opt_kind}",
            params=n_params,
        )
        opt = None
        try:
            if ckpt:
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            else:
                model.gradient_checkpointing_disable()
            kw = {"fused": True} if (opt_kind == "fused" and DEV == "cuda") else {"foreach": True}
            opt = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.1, **kw)
            step = make_step(mbs, opt)
            for _ in range(3):
                step()
            sync()
            if DEV == "cuda":
                torch.cuda.reset_peak_memory_stats()
            times = []
            n = 8 if not quick else 2
            for _ in range(n):
                if DEV == "cuda":
                    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    s.record()
                    step()
                    e.record()
                    e.synchronize()
                    times.append(s.elapsed_time(e) / 1e3)
                else:
                    t0 = time.perf_counter()
                    step()
                    times.append(time.perf_counter() - t0)
            mean = sum(times) / len(times)
            row.update(
                steps=n, step_s=mean, step_s_min=min(times), step_s_max=max(times), tokens_per_s=mbs * seq / mean
            )
            if DEV == "cuda":
                row.update(
                    peak_alloc_gib=torch.cuda.max_memory_allocated() / 2**30,
                    peak_reserved_gib=torch.cuda.max_memory_reserved() / 2**30,
                )
            log(
                f"step: mbs {mbs} ckpt {ckpt} {opt_kind}: {mean * 1e3:.1f} ms, {mbs * seq / mean:.0f} tok/s, peak {row.get('peak_alloc_gib', 0):.1f} GiB"
            )
        except Exception as e:  # noqa: BLE001 - an out-of-memory configuration is a result
            row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
            log(f"step: mbs {mbs} ckpt {ckpt}: {row['error']}")
        table.add(**row)
        del opt
        model.zero_grad(set_to_none=True)
        if DEV == "cuda":
            torch.cuda.empty_cache()
    model.gradient_checkpointing_disable()

    # one profiled step: CUDA kernel time by category (the first model only)
    if elapsed() > budget_s or name != "step.csv":
        return
    try:
        from torch.profiler import ProfilerActivity, profile

        opt = torch.optim.AdamW(
            model.parameters(), lr=1e-5, weight_decay=0.1, **({"fused": True} if DEV == "cuda" else {})
        )
        step = make_step(2 if not quick else 1, opt)
        for _ in range(2):
            step()
        sync()
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if DEV == "cuda" else [])
        with profile(activities=acts) as prof:
            step()
            sync()
        cats: dict[str, list[float]] = {}
        kernels = Table("step_kernels.csv", ["category", "kernels", "device_time_s", "top_kernel"])
        for ev in prof.key_averages():
            dev_us = getattr(ev, "self_device_time_total", 0.0) or getattr(ev, "self_cuda_time_total", 0.0)
            if DEV == "cuda" and (dev_us <= 0 or ev.device_type != torch.autograd.DeviceType.CUDA):
                continue
            cat = kernel_category(ev.key)
            c = cats.setdefault(cat, [0, 0.0, 0.0, ""])
            c[0] += ev.count
            c[1] += dev_us / 1e6
            if dev_us / 1e6 > c[2]:
                c[2], c[3] = dev_us / 1e6, ev.key[:120]
        for cat, (count, total, _, top) in sorted(cats.items(), key=lambda kv: -kv[1][1]):
            kernels.add(category=cat, kernels=count, device_time_s=total, top_kernel=top)
        total = sum(c[1] for c in cats.values())
        log(f"profile: {sum(c[0] for c in cats.values())} kernels, {total * 1e3:.1f} ms device time in one step")
        del opt
    except Exception as e:  # noqa: BLE001
        log(f"profile failed: {type(e).__name__}: {e}")


def kernel_category(name: str) -> str:
    n = name.lower()
    if "flash" in n or "fmha" in n or "attention" in n or "cudnn" in n and "sdpa" in n:
        return "attention"
    if any(s in n for s in ("gemm", "xmma", "nvjet", "cutlass", "sm90_", "cublas", "matmul")):
        return "gemm"
    if "adam" in n or "multi_tensor" in n or "foreach" in n:
        return "optimizer"
    if "cross_entropy" in n or "log_softmax" in n or "nll_loss" in n or "softmax" in n:
        return "loss"
    if "embedding" in n or "index" in n or "gather" in n or "scatter" in n:
        return "embedding"
    if "reduce" in n or "norm" in n:
        return "reduction"
    if "copy" in n or "cast" in n or "memcpy" in n or "memset" in n or "fill" in n:
        return "copy_cast"
    if "elementwise" in n or "vectorized" in n or "unrolled" in n:
        return "elementwise"
    return "other"


def gemm_section(quick: bool, budget_s: float) -> None:
    shapes = []
    with (REPO / "data/reference/h200_gemm_bf16.csv").open() as f:
        for r in csv.DictReader(f):
            shapes.append((r["model"], r["tp"], r["op"], int(r["m_tokens"]), int(r["n"]), int(r["k"])))
    if quick:
        shapes = [(a, b, c, min(m, 64), min(n, 256), min(k, 256)) for a, b, c, m, n, k in shapes[:6]]
    table = Table(
        "gemm.csv", ["model", "tp", "op", "m_tokens", "n", "k", "dtype", "kernel", "time_s", "tflops", "calls", "error"]
    )
    fp8 = getattr(torch, "float8_e4m3fn", None)
    for model, tp, op, m, n, k in shapes:
        if elapsed() > budget_s:
            log("gemm: budget spent, the rest skipped")
            break
        x = torch.randn(m, k, dtype=torch.bfloat16, device=DEV)
        w = torch.randn(n, k, dtype=torch.bfloat16, device=DEV)
        base = dict(model=model, tp=tp, op=op, m_tokens=m, n=n, k=k)
        variants = [("bf16", "F.linear", lambda x=x, w=w: F.linear(x, w))]
        if DEV == "cuda" and fp8 is not None:
            x8 = (x * 0.5).to(fp8)
            w8 = (w * 0.5).to(fp8)
            one = torch.ones((), dtype=torch.float32, device=DEV)
            row_a = torch.ones(m, 1, dtype=torch.float32, device=DEV)
            row_b = torch.ones(1, n, dtype=torch.float32, device=DEV)
            variants.append(
                (
                    "fp8_e4m3",
                    "_scaled_mm tensorwise",
                    lambda x8=x8, w8=w8, one=one: torch._scaled_mm(
                        x8, w8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16
                    ),
                )
            )
            variants.append(
                (
                    "fp8_e4m3",
                    "_scaled_mm rowwise",
                    lambda x8=x8, w8=w8, ra=row_a, rb=row_b: torch._scaled_mm(
                        x8, w8.t(), scale_a=ra, scale_b=rb, out_dtype=torch.bfloat16
                    ),
                )
            )
        for dtype, kernel, fn in variants:
            row = dict(base, dtype=dtype, kernel=kernel)
            try:
                t, calls = time_call(fn)
                row.update(time_s=t, tflops=2 * m * n * k / t / 1e12, calls=calls)
            except Exception as e:  # noqa: BLE001 - a shape a kernel refuses is a result
                row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
            table.add(**row)
    log(f"gemm: {len(shapes)} shapes done")


def attention_section(quick: bool, budget_s: float) -> None:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    table = Table(
        "attention.csv",
        [
            "model",
            "pass",
            "backend",
            "batch",
            "seq",
            "heads",
            "kv_heads",
            "head_dim",
            "time_s",
            "tflops",
            "calls",
            "error",
        ],
    )
    cases = [
        ("gpt-oss tp1", 64, 8, 64),
        ("llama3.2-1b tp1", 32, 8, 64),
        ("llama3.1-8b tp1", 32, 8, 128),
        ("gpt-oss tp8", 8, 1, 64),
    ]
    seqs = [(4, 2048), (2, 4096), (1, 8192), (1, 16384), (1, 32768)]
    if quick:
        cases, seqs = cases[:2], [(1, 64)]
    backends = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION), ("default", None)]
    if DEV != "cuda":
        backends = [("math", SDPBackend.MATH)]
    for name, h, kvh, d in cases:
        for b, s in seqs:
            if elapsed() > budget_s:
                log("attention: budget spent, the rest skipped")
                return
            q = torch.randn(b, h, s, d, dtype=torch.bfloat16, device=DEV, requires_grad=True)
            kk = torch.randn(b, kvh, s, d, dtype=torch.bfloat16, device=DEV, requires_grad=True)
            v = torch.randn(b, kvh, s, d, dtype=torch.bfloat16, device=DEV, requires_grad=True)
            dout = torch.randn(b, h, s, d, dtype=torch.bfloat16, device=DEV)
            fwd_flops = 4 * b * h * s * s * d / 2
            for bname, backend in backends:

                def fwd(q=q, kk=kk, v=v):
                    return F.scaled_dot_product_attention(q, kk, v, is_causal=True, enable_gqa=True)

                def fwd_bwd(q=q, kk=kk, v=v, dout=dout):
                    o = F.scaled_dot_product_attention(q, kk, v, is_causal=True, enable_gqa=True)
                    torch.autograd.backward(o, dout, inputs=[q, kk, v])

                for pname, fn, flops in (("fwd", fwd, fwd_flops), ("fwd_bwd", fwd_bwd, 3.5 * fwd_flops)):
                    row = dict(
                        model=name, batch=b, seq=s, heads=h, kv_heads=kvh, head_dim=d, backend=bname, **{"pass": pname}
                    )
                    try:
                        if backend is None:
                            t, calls = time_call(fn)
                        else:
                            with sdpa_kernel([backend]):
                                t, calls = time_call(fn)
                        row.update(time_s=t, tflops=flops / t / 1e12, calls=calls)
                    except Exception as e:  # noqa: BLE001 - a backend that refuses a shape is a result
                        row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
                        if backend is not None and kvh != h:  # time it again with K and V copied to every query head
                            table.add(**row)
                            row = dict(row, backend=f"{bname} kv-expanded", error="")
                            try:
                                ke = kk.detach().repeat_interleave(h // kvh, dim=1).requires_grad_()
                                ve = v.detach().repeat_interleave(h // kvh, dim=1).requires_grad_()

                                def fwd_e(q=q, ke=ke, ve=ve, bwd=pname == "fwd_bwd", dout=dout):
                                    o = F.scaled_dot_product_attention(q, ke, ve, is_causal=True)
                                    if bwd:
                                        torch.autograd.backward(o, dout, inputs=[q, ke, ve])

                                with sdpa_kernel([backend]):
                                    t, calls = time_call(fwd_e)
                                row.update(time_s=t, tflops=flops / t / 1e12, calls=calls)
                            except Exception as e2:  # noqa: BLE001
                                row["error"] = f"{type(e2).__name__}: {str(e2).splitlines()[0][:160]}"
                    table.add(**row)
                    q.grad = kk.grad = v.grad = None
    log("attention: done")


def grouped_section(quick: bool, budget_s: float) -> None:
    table = Table(
        "grouped.csv",
        ["model", "experts", "tokens_per_expert", "op", "n", "k", "kernel", "time_s", "tflops", "calls", "error"],
    )
    hidden, ffn = 2880, 2880
    cases = [  # (name, local experts): gpt-oss-120b at EP 8 (16 of 128) and gpt-oss-20b at EP 1 (32)
        ("gpt-oss-120b ep8", 16),
        ("gpt-oss-20b ep1", 32),
    ]
    tpe_list = [32, 128, 512, 1024, 2048, 4096, 8192]
    ops = [("fc1", 2 * ffn, hidden), ("fc2", hidden, ffn), ("fc1_dgrad", hidden, 2 * ffn), ("fc2_dgrad", ffn, hidden)]
    if quick:
        hidden = ffn = 64
        ops = [("fc1", 128, 64), ("fc2", 64, 64)]
        tpe_list = [32]
        cases = cases[:1]
    for name, e in cases:
        for tpe in tpe_list:
            if e * tpe > 131072:
                continue
            for op, n, k in ops:
                if elapsed() > budget_s:
                    log("grouped: budget spent, the rest skipped")
                    return
                x = torch.randn(e * tpe, k, dtype=torch.bfloat16, device=DEV)
                w = torch.randn(
                    e, n, k, dtype=torch.bfloat16, device=DEV
                )  # (experts, out, in), as nn.Linear keeps them
                offs = torch.arange(tpe, e * tpe + 1, tpe, dtype=torch.int32, device=DEV)
                xb = x.view(e, tpe, k)
                flops = 2 * e * tpe * n * k
                variants = [
                    ("torch.bmm", lambda xb=xb, w=w: torch.bmm(xb, w.transpose(1, 2))),
                    (
                        "torch._grouped_mm",
                        lambda x=x, w=w, offs=offs: torch._grouped_mm(x, w.transpose(1, 2), offs=offs),
                    ),
                ]
                for kernel, fn in variants:
                    row = dict(model=name, experts=e, tokens_per_expert=tpe, op=op, n=n, k=k, kernel=kernel)
                    try:
                        t, calls = time_call(fn)
                        row.update(time_s=t, tflops=flops / t / 1e12, calls=calls)
                    except Exception as ex:  # noqa: BLE001
                        row["error"] = f"{type(ex).__name__}: {str(ex).splitlines()[0][:160]}"
                    table.add(**row)
    log("grouped: done")


def probe_section(quick: bool, budget_s: float) -> None:
    """Memory by phase of the plain-PyTorch step (states, after the forward, whole step) and the step with SDPA
    held to its FlashAttention backend; the host's launch floor."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    model, cfg, seq = build_llama(quick)
    dev_type = "cuda" if DEV == "cuda" else "cpu"
    gib = 2**30
    table = Table(
        "probe.csv",
        [
            "what",
            "micro_batch",
            "seq_len",
            "attention",
            "states_gib",
            "after_forward_gib",
            "forward_peak_gib",
            "step_peak_gib",
            "step_s",
            "error",
        ],
    )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.1, **({"fused": True} if DEV == "cuda" else {}))
    for mbs, backend in ((1, "default"), (2, "default"), (4, "default"), (2, "flash"), (4, "flash")):
        if elapsed() > budget_s:
            log("probe: budget spent, the rest skipped")
            break
        row = dict(what="llama3.2-1b memory by phase", micro_batch=mbs, seq_len=seq, attention=backend)
        ids = torch.randint(0, cfg.vocab_size, (mbs, seq), device=DEV)
        ctx = (lambda: sdpa_kernel([SDPBackend.FLASH_ATTENTION])) if backend == "flash" else contextlib.nullcontext

        def step(ids=ids, ctx=ctx):
            with ctx(), torch.autocast(dev_type, dtype=torch.bfloat16):
                out = model(input_ids=ids, labels=ids)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        try:
            for _ in range(2):  # optimizer states exist after the first step
                step()
            sync()
            if DEV == "cuda":
                row["states_gib"] = torch.cuda.memory_allocated() / gib
                torch.cuda.reset_peak_memory_stats()
            with ctx(), torch.autocast(dev_type, dtype=torch.bfloat16):
                out = model(input_ids=ids, labels=ids)
            sync()
            if DEV == "cuda":
                row["after_forward_gib"] = torch.cuda.memory_allocated() / gib
                row["forward_peak_gib"] = torch.cuda.max_memory_allocated() / gib
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            del out
            sync()
            if DEV == "cuda":
                row["step_peak_gib"] = torch.cuda.max_memory_allocated() / gib
            times = []
            for _ in range(5 if not quick else 1):
                t0 = time.perf_counter()
                step()
                sync()
                times.append(time.perf_counter() - t0)
            row["step_s"] = sum(times) / len(times)
            log(f"probe: mbs {mbs} {backend}: {row}")
        except Exception as e:  # noqa: BLE001
            row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
            log(f"probe: mbs {mbs} {backend}: {row['error']}")
        table.add(**row)
        if DEV == "cuda":
            torch.cuda.empty_cache()

    # kernel by kernel: one profiled step at micro-batch 2, user annotations left out
    try:
        from torch.profiler import ProfilerActivity, profile

        ids = torch.randint(0, cfg.vocab_size, (2 if not quick else 1, seq), device=DEV)

        def step2():
            with torch.autocast(dev_type, dtype=torch.bfloat16):
                out = model(input_ids=ids, labels=ids)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        for _ in range(2):
            step2()
        sync()
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if DEV == "cuda" else [])
        with profile(activities=acts) as prof:
            step2()
            sync()
        agg: dict[str, list[float]] = {}
        for ev in prof.events():
            if DEV == "cuda" and ev.device_type != torch.autograd.DeviceType.CUDA:
                continue
            if getattr(ev, "is_user_annotation", False) or "#" in ev.name or ev.name.startswith("ProfilerStep"):
                continue
            dt = (ev.time_range.end - ev.time_range.start) / 1e6
            a = agg.setdefault(ev.name, [0, 0.0])
            a[0] += 1
            a[1] += dt
        kt = Table("kernels.csv", ["kernel", "category", "calls", "device_time_s"])
        for name, (calls, total) in sorted(agg.items(), key=lambda kv: -kv[1][1])[:80]:
            kt.add(kernel=name[:200], category=kernel_category(name), calls=calls, device_time_s=total)
        cats: dict[str, float] = {}
        for name, (_calls, total) in agg.items():
            cats[kernel_category(name)] = cats.get(kernel_category(name), 0.0) + total
        log(
            "kernels by category (ms): "
            + ", ".join(f"{k} {v * 1e3:.1f}" for k, v in sorted(cats.items(), key=lambda kv: -kv[1]))
        )
        log(f"kernels: {sum(a[0] for a in agg.values())} launches, {sum(cats.values()) * 1e3:.1f} ms")
    except Exception as e:  # noqa: BLE001
        log(f"kernel profile failed: {type(e).__name__}: {e}")

    # the host's launch floor: back-to-back eager calls of tiny kernels
    try:
        x = torch.randn(1, device=DEV)
        w = torch.randn(128, 128, device=DEV, dtype=torch.bfloat16)
        xb = torch.randn(1, 128, device=DEV, dtype=torch.bfloat16)
        t_add, _ = time_call(lambda: x.add_(1.0))
        t_lin, _ = time_call(lambda: F.linear(xb, w))
        Table("host_floor.csv", ["op", "time_s"]).add(op="x.add_(1.0) one element", time_s=t_add)
        with (OUT / "host_floor.csv").open("a", newline="") as f:
            csv.writer(f).writerow(["F.linear 1x128x128 bf16", _fmt(t_lin)])
        log(f"host floor: add {t_add * 1e6:.1f} us, linear {t_lin * 1e6:.1f} us")
    except Exception as e:  # noqa: BLE001
        log(f"host floor failed: {type(e).__name__}: {e}")


def gemm_graph_section(quick: bool, budget_s: float) -> None:
    """The GEMM shapes of :func:`gemm_section` in bf16 and FP8 (per-tensor scales) replayed from a CUDA graph of
    `GRAPH_CALLS` calls: the kernels' device time, no host launch floor."""
    if DEV != "cuda":
        return
    graph_calls = 20
    shapes = []
    with (REPO / "data/reference/h200_gemm_bf16.csv").open() as f:
        for r in csv.DictReader(f):
            shapes.append((r["model"], r["tp"], r["op"], int(r["m_tokens"]), int(r["n"]), int(r["k"])))
    table = Table(
        "gemm_graph.csv",
        ["model", "tp", "op", "m_tokens", "n", "k", "dtype", "kernel", "time_s", "tflops", "replays", "error"],
    )
    fp8 = torch.float8_e4m3fn
    one = torch.ones((), dtype=torch.float32, device=DEV)
    for model, tp, op, m, n, k in shapes:
        if elapsed() > budget_s:
            log("gemm_graph: budget spent, the rest skipped")
            break
        x = torch.randn(m, k, dtype=torch.bfloat16, device=DEV)
        w = torch.randn(n, k, dtype=torch.bfloat16, device=DEV)
        x8, w8 = (x * 0.5).to(fp8), (w * 0.5).to(fp8)
        for dtype, kernel, fn in (
            ("bf16", "F.linear graph", lambda x=x, w=w: F.linear(x, w)),
            (
                "fp8_e4m3",
                "_scaled_mm tensorwise graph",
                lambda x8=x8, w8=w8: torch._scaled_mm(x8, w8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16),
            ),
        ):
            row = dict(model=model, tp=tp, op=op, m_tokens=m, n=n, k=k, dtype=dtype, kernel=kernel)
            try:
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    for _ in range(3):
                        fn()
                torch.cuda.current_stream().wait_stream(s)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    for _ in range(graph_calls):
                        fn()
                t, replays = time_call(g.replay, min_s=0.01, max_calls=2000)
                t /= graph_calls
                row.update(time_s=t, tflops=2 * m * n * k / t / 1e12, replays=replays)
            except Exception as e:  # noqa: BLE001
                row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
            table.add(**row)
    log("gemm_graph: done")


def trace_section(quick: bool, budget_s: float) -> None:
    """Host against device in the plain-PyTorch step: the host time to issue the forward, the backward and the
    optimizer step (no synchronisation) beside the device time of each (CUDA events), and a Chrome trace of one
    step at micro-batch 2 (`trace_mbs2.json.gz`) to read the device's idle gaps from."""
    import gzip

    model, cfg, seq = build_llama(quick)
    dev_type = "cuda" if DEV == "cuda" else "cpu"
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.1, **({"fused": True} if DEV == "cuda" else {}))
    table = Table("host_device.csv", ["micro_batch", "phase", "host_issue_s", "device_s", "step_s"])
    for mbs in (1, 2, 4):
        if elapsed() > budget_s:
            break
        ids = torch.randint(0, cfg.vocab_size, (mbs, seq), device=DEV)
        res: dict[str, list[float]] = {}
        for it in range(6):
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)] if DEV == "cuda" else None
            sync()
            t0 = time.perf_counter()
            if ev:
                ev[0].record()
            with torch.autocast(dev_type, dtype=torch.bfloat16):
                out = model(input_ids=ids, labels=ids)
            t1 = time.perf_counter()
            if ev:
                ev[1].record()
            out.loss.backward()
            t2 = time.perf_counter()
            if ev:
                ev[2].record()
            opt.step()
            opt.zero_grad(set_to_none=True)
            t3 = time.perf_counter()
            if ev:
                ev[3].record()
            sync()
            t4 = time.perf_counter()
            if it < 2:
                continue
            dev = [ev[i].elapsed_time(ev[i + 1]) / 1e3 for i in range(3)] if ev else [0.0] * 3
            for ph, h, d in zip(("forward", "backward", "optimizer"), (t1 - t0, t2 - t1, t3 - t2), dev):
                res.setdefault(ph, []).extend([h, d])
            res.setdefault("step", []).append(t4 - t0)
        step_s = sum(res["step"]) / len(res["step"])
        for ph in ("forward", "backward", "optimizer"):
            v = res[ph]
            table.add(
                micro_batch=mbs,
                phase=ph,
                host_issue_s=sum(v[0::2]) / len(v[0::2]),
                device_s=sum(v[1::2]) / len(v[1::2]),
                step_s=step_s,
            )
        log(
            f"host/device mbs {mbs}: step {step_s * 1e3:.1f} ms; "
            + ", ".join(
                f"{ph} host {sum(res[ph][0::2]) / 4 * 1e3:.1f} / device {sum(res[ph][1::2]) / 4 * 1e3:.1f} ms"
                for ph in ("forward", "backward", "optimizer")
            )
        )
    try:
        from torch.profiler import ProfilerActivity, profile

        ids = torch.randint(0, cfg.vocab_size, (2 if not quick else 1, seq), device=DEV)
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if DEV == "cuda" else [])
        with profile(activities=acts) as prof:
            with torch.autocast(dev_type, dtype=torch.bfloat16):
                out = model(input_ids=ids, labels=ids)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            sync()
        raw = OUT / "trace_mbs2.json"
        prof.export_chrome_trace(str(raw))
        with raw.open("rb") as f, gzip.open(OUT / "trace_mbs2.json.gz", "wb", compresslevel=6) as g:
            g.write(f.read())
        raw.unlink()
        log(f"trace: {(OUT / 'trace_mbs2.json.gz').stat().st_size / 1e6:.1f} MB")
    except Exception as e:  # noqa: BLE001
        log(f"trace failed: {type(e).__name__}: {e}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--budget-s", type=float, default=330.0, help="stop starting new measurements after this many seconds"
    )
    ap.add_argument("--quick", action="store_true", help="tiny shapes (a dry run of the script, on CPU too)")
    ap.add_argument("--sections", default="env,step,gemm,attention,grouped", help="comma-separated, in this order")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    b = args.budget_s
    # order of value: the whole step, FP8 GEMMs, attention at head dimension 64, gpt-oss expert GEMMs
    sections = [
        ("env", lambda: env_section(args.quick)),
        ("step", lambda: step_section(args.quick, 0.40 * b)),
        ("gemm", lambda: gemm_section(args.quick, 0.62 * b)),
        ("attention", lambda: attention_section(args.quick, 0.85 * b)),
        ("grouped", lambda: grouped_section(args.quick, b)),
        ("probe", lambda: probe_section(args.quick, 0.5 * b)),
        ("gemm_graph", lambda: gemm_graph_section(args.quick, b)),
        ("trace", lambda: trace_section(args.quick, b)),
        (
            "step3b",
            lambda: step_section(
                args.quick,
                b,
                "llama3.2-3b",
                [(1, False, "fused"), (2, False, "fused"), (3, False, "fused"), (4, True, "fused"), (8, True, "fused")],
                "step_3b.csv",
            ),
        ),
        (
            "step8k",
            lambda: [
                step_section(args.quick, b, m, c, f"step8k_{m}.csv", seq_len=8192)
                for m, c in (
                    ("llama3.2-1b", [(1, False, "fused"), (2, False, "fused")]),
                    ("llama3.2-3b", [(1, False, "fused")]),
                )
            ],
        ),
    ]
    wanted = args.sections.split(",")
    sections = sorted((s for s in sections if s[0] in wanted), key=lambda s: wanted.index(s[0]))
    for name, fn in sections:
        try:
            fn()
        except Exception:  # noqa: BLE001 - one broken section must not lose the others
            log(f"{name} failed:\n{traceback.format_exc()}")
        if DEV == "cuda":
            torch.cuda.empty_cache()
    with (OUT / "env.txt").open("a") as f:
        f.write("nvidia-smi after:\n" + nvsmi() + f"\nwall_s: {elapsed():.1f}\n")
    log("all done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
